// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommShrink over every transport, ranks as threads: survivors of live excluded ranks, of the
// lowest rank, and of a rank that aborted in the middle of a stream of calls (CLB_SHRINK_ABORT)
// go on in a smaller communicator, their ranks renumbered in order, every all-reduce checked
// element by element against the sum over the survivors; shrinks of shrunk communicators; an
// excluded rank that calls anyway, bad lists and lists that differ between survivors refused
// with what was wrong; survivors that wait for one that never comes end at the timeout, saying
// which. Rank processes killed with SIGKILL: shrink_kill_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::vector<int> survivorsOf(int n, const std::vector<int>& excluded) {
  std::vector<int> s;
  for (int p = 0; p < n; p++)
    if (std::find(excluded.begin(), excluded.end(), p) == excluded.end()) s.push_back(p);
  return s;
}

// The shrunk communicator's place: rank and size as expected (survivors in order), and a sum.
std::string checkChild(clbComm_t child, int parentRank, const std::vector<int>& members, int salt) {
  if (!child) return "no communicator made";
  int rank = -1, count = -1;
  clbCommRank(child, &rank);
  clbCommCount(child, &count);
  const int want = (int)(std::find(members.begin(), members.end(), parentRank) - members.begin());
  if (rank != want || count != (int)members.size())
    return "rank " + std::to_string(rank) + " of " + std::to_string(count) + ", want " + std::to_string(want) + " of " +
           std::to_string(members.size());
  return clbtest::sumOver(child, parentRank, members, salt);
}

}  // namespace

class ShrinkOver : public ::testing::TestWithParam<Net> {};

TEST_P(ShrinkOver, SurvivorsOfLiveExcludedRanksGoOnInOrder) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 6;
  // Ranks 1 and 4 excluded (listed in any order, with a repeat), then rank 0 too: the lowest
  // survivor, which the others meet at, changes.
  for (const std::vector<int>& excluded : {std::vector<int>{4, 1, 4}, std::vector<int>{0, 4}}) {
    const std::vector<int> members = survivorsOf(n, {excluded.begin(), excluded.end()});
    auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
      ASSERT_EQ(clbtest::sumOver(comm, r, survivorsOf(n, {}), 0), "");
      if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) return;  // takes no part
      clbComm_t child = nullptr;
      ASSERT_EQ(clbCommShrink(comm, excluded.data(), (int)excluded.size(), nullptr, &child, CLB_SHRINK_DEFAULT),
                clbSuccess)
          << clbGetLastError();
      EXPECT_EQ(checkChild(child, r, members, 7), "");
      // The shrunk communicator shrinks again: its rank 0 (the lowest survivor) left out.
      const int first = 0;
      int rank = -1;
      clbCommRank(child, &rank);
      if (rank != 0) {
        clbComm_t grandchild = nullptr;
        ASSERT_EQ(clbCommShrink(child, &first, 1, nullptr, &grandchild, CLB_SHRINK_DEFAULT), clbSuccess)
            << clbGetLastError();
        EXPECT_EQ(checkChild(grandchild, r, std::vector<int>(members.begin() + 1, members.end()), 11), "");
        clbCommDestroy(grandchild);
      }
      clbCommDestroy(child);
    });
    for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

TEST_P(ShrinkOver, SurvivorsOfARankThatAbortedMidStreamGoOnWithShrinkAbort) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 4, gone = 2;
  const std::vector<int> members = survivorsOf(n, {gone});
  auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
    if (r == gone) {
      ASSERT_EQ(clbtest::sumOver(comm, r, survivorsOf(n, {}), 0), "");
      clbCommAbort(comm);  // gone in the middle of the stream: its peers' next calls fail
      return;
    }
    // Calls until one fails (the aborted rank takes part in the first only).
    std::string failed;
    for (int i = 0; i < 50 && failed.empty(); i++) failed = clbtest::sumOver(comm, r, survivorsOf(n, {}), 0);
    EXPECT_NE(failed, "") << "rank " << r << ": every call succeeded without rank " << gone;
    const auto t0 = std::chrono::steady_clock::now();
    clbComm_t child = nullptr;
    ASSERT_EQ(clbCommShrink(comm, &gone, 1, nullptr, &child, CLB_SHRINK_ABORT), clbSuccess) << clbGetLastError();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    EXPECT_EQ(checkChild(child, r, members, 3), "");
    clbCommDestroy(child);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(ShrinkOver, BadArgumentsAreRefusedSayingWhat) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 3;
  auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
    clbComm_t child = reinterpret_cast<clbComm_t>(1);
    const int self = r, outside = n, minus = -1;
    // Each refused on this rank alone, at once, touching nothing.
    EXPECT_EQ(clbCommShrink(comm, &self, 1, nullptr, &child, 0), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "is in the exclusion list")) << clbGetLastError();
    EXPECT_EQ(child, nullptr);
    EXPECT_EQ(clbCommShrink(comm, &outside, 1, nullptr, &child, 0), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "is not a rank of this communicator")) << clbGetLastError();
    EXPECT_EQ(clbCommShrink(comm, &minus, 1, nullptr, &child, 0), clbInvalidArgument);
    EXPECT_EQ(clbCommShrink(comm, nullptr, 2, nullptr, &child, 0), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "nexcluded=2")) << clbGetLastError();
    EXPECT_EQ(clbCommShrink(comm, nullptr, 0, nullptr, &child, 4), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "flags=4")) << clbGetLastError();
    EXPECT_EQ(clbCommShrink(nullptr, nullptr, 0, nullptr, &child, 0), clbInvalidArgument);
    // The communicator is untouched by all of that.
    EXPECT_EQ(clbtest::sumOver(comm, r, survivorsOf(n, {}), 5), "");
    // A NULL newcomm on one survivor fails every survivor at once, naming it.
    const int last = n - 1;
    if (r == last) return;
    const clbResult_t rc = clbCommShrink(comm, &last, 1, nullptr, r == 1 ? nullptr : &child, 0);
    EXPECT_EQ(rc, clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), r == 1 ? "newcomm (output) is NULL" : "refused on rank 1"))
        << clbGetLastError();
    EXPECT_EQ(child, nullptr);
    // Then a good one goes through.
    ASSERT_EQ(clbCommShrink(comm, &last, 1, nullptr, &child, 0), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkChild(child, r, survivorsOf(n, {last}), 9), "");
    clbCommDestroy(child);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(ShrinkOver, SurvivorsWithDifferentListsAreAllRefused) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 4;
  auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
    // Ranks 0, 1 and 2 all take part, but rank 2 leaves out rank 1 as well as rank 3.
    if (r == 3) return;
    const std::vector<int> excluded = r == 2 ? std::vector<int>{1, 3} : std::vector<int>{3};
    clbComm_t child = nullptr;
    EXPECT_NE(clbCommShrink(comm, excluded.data(), (int)excluded.size(), nullptr, &child, 0), clbSuccess);
    const std::string msg = clbGetLastError();
    EXPECT_TRUE(contains(msg, "another exclusion list") || contains(msg, "different lists"))
        << "rank " << r << ": " << msg;
    EXPECT_EQ(child, nullptr);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(ShrinkOver, ASurvivorThatNeverComesIsNamedAtTheTimeout) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 3;
  auto errors = clbtest::runOver(GetParam(), n, 1500, {}, [&](int r, clbComm_t comm) {
    if (r == 2) return;  // not excluded, but never calls
    clbComm_t child = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(clbCommShrink(comm, nullptr, 0, nullptr, &child, 0), clbTimeout);
    const std::string msg = clbGetLastError();
    EXPECT_TRUE(contains(msg, "rank(s) 2 did not take part")) << "rank " << r << ": " << msg;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(6));
    EXPECT_EQ(child, nullptr);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A shrink refused on one survivor (bad flags: refused on every survivor at once; a call in
// progress on another thread: refused there alone, the others at the timeout) is retried by all,
// and goes through: the survivors still agree on the shrinks' numbers.
TEST_P(ShrinkOver, ARefusedShrinkIsRetriedAndGoesThrough) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 3, last = 2;
  auto errors = clbtest::runOver(GetParam(), n, 1500, {}, [&](int r, clbComm_t comm) {
    clbComm_t child = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(clbCommShrink(comm, &last, 1, nullptr, &child, r == 1 ? 4 : 0), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), r == 1      ? "flags=4"
                                            : r == last ? "is in the exclusion list"
                                                        : "refused on rank 1"))
        << clbGetLastError();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1200)) << "rank " << r << " waited";
    if (r == last) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // alive until the others are done
      return;
    }
    ASSERT_EQ(clbCommShrink(comm, &last, 1, nullptr, &child, 0), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkChild(child, r, survivorsOf(n, {last}), 1), "");
    clbCommDestroy(child);
    // Rank 1 is in a call on another thread (a receive from rank 0, which never sends): its shrink
    // is refused as busy, rank 0's ends at the timeout; both retry after rank 1's revoke.
    std::thread blocked;
    if (r == 1) {
      blocked = std::thread([&] {
        int64_t x = 0;
        EXPECT_NE(clbRecv(&x, 1, clbInt64, 0, comm, nullptr), clbSuccess);
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_NE(clbCommShrink(comm, &last, 1, nullptr, &child, 0), clbSuccess) << "rank " << r;
    EXPECT_EQ(child, nullptr);
    if (r == 1) {
      EXPECT_EQ(clbCommRevoke(comm), clbSuccess);
      blocked.join();
    }
    ASSERT_EQ(clbCommShrink(comm, &last, 1, nullptr, &child, 0), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkChild(child, r, survivorsOf(n, {last}), 2), "");
    clbCommDestroy(child);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A rank that stalls (alive, never calling): the others block in an all-reduce until another
// thread of each revokes; the blocked calls return within a second, later calls are refused
// saying so, and the survivors shrink without the stalled rank.
TEST_P(ShrinkOver, RevokeEndsBlockedCallsAndTheSurvivorsShrink) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 4, stalled = 3;
  auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
    if (r == stalled) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // alive, making no call
      return;
    }
    std::chrono::steady_clock::time_point revokedAt;
    std::thread revoker([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      revokedAt = std::chrono::steady_clock::now();
      EXPECT_EQ(clbCommRevoke(comm), clbSuccess) << clbGetLastError();
    });
    int64_t x = r, y = 0;
    EXPECT_NE(clbAllReduce(&x, &y, 1, clbInt64, clbSum, comm, nullptr), clbSuccess) << "rank " << r;
    const auto returned = std::chrono::steady_clock::now();
    revoker.join();
    EXPECT_LT(returned - revokedAt, std::chrono::seconds(1))
        << "rank " << r << ": the blocked call outlived the revoke";
    EXPECT_EQ(clbAllReduce(&x, &y, 1, clbInt64, clbSum, comm, nullptr), clbInvalidUsage);
    EXPECT_TRUE(contains(clbGetLastError(), "revoked")) << clbGetLastError();
    EXPECT_EQ(clbCommRevoke(comm), clbInvalidUsage) << "a second revoke";
    EXPECT_EQ(clbCommTrim(comm), clbInvalidUsage);
    EXPECT_EQ(clbCommSuspend(comm), clbInvalidUsage);
    EXPECT_TRUE(contains(clbGetLastError(), "revoked")) << clbGetLastError();
    EXPECT_EQ(clbCommResume(comm), clbInvalidUsage);
    clbComm_t child = nullptr;
    ASSERT_EQ(clbCommShrink(comm, &stalled, 1, nullptr, &child, CLB_SHRINK_DEFAULT), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkChild(child, r, survivorsOf(n, {stalled}), 21), "");
    clbCommDestroy(child);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TRANSPORTS(ShrinkOver);
