// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The meeting of ranks that share one CUDA context before they launch (src/device/launch_meet.h),
// on the host alone: nobody launches before every member is in the call, nobody leaves before
// every member has launched, different calls are refused by every member, a member that never
// comes is named at the timeout (and warned about before it), an abort wakes the waiters, and a
// member that gave up stops the later ones from launching.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "device/launch_meet.h"
#include "tests/test_ranks.h"

namespace {

using clb::LaunchMeet;
using clb::OpDesc;

// Runs body(rank, comm) on n rank threads with real communicators (shared memory).
void withRanks(int n, int64_t timeoutMs, const std::function<void(int, clbComm*)>& body) {
  auto errors = clbtest::runThreadRanks(
      n, [&](int, clbConfig_t* cfg) { cfg->timeoutMs = timeoutMs; }, [&](int r, clbComm_t c) { body(r, c); });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

OpDesc call(uint64_t seq, uint64_t count = 1000) {
  OpDesc d{};
  d.seq = seq;
  d.coll = clb::kAllReduce;
  d.dtype = clbFloat32;
  d.op = clbSum;
  d.count = count;
  return d;
}

std::vector<int> ranks(int n) {
  std::vector<int> v;
  for (int r = 0; r < n; r++) v.push_back(r);
  return v;
}

TEST(LaunchMeet, NobodyLaunchesBeforeAllArriveNorLeavesBeforeAllLaunched) {
  const int n = 4, rounds = 300;
  LaunchMeet meet(ranks(n));
  std::vector<std::atomic<int>> arrived(n), launched(n);
  std::atomic<int> violations{0};
  withRanks(n, 10000, [&](int r, clbComm* comm) {
    for (int k = 1; k <= rounds; k++) {
      if (k % 7 == r) std::this_thread::sleep_for(std::chrono::microseconds(200));  // someone is late
      arrived[r].store(k);
      if (meet.arrive(comm, call(k), 0) != clbSuccess) violations++;
      for (int p = 0; p < n; p++)
        if (arrived[p].load() < k) violations++;  // launching while p is still outside the call
      if (k % 5 == r) std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow launch
      launched[r].store(k);
      if (meet.launched(comm) != clbSuccess) violations++;
      for (int p = 0; p < n; p++)
        if (launched[p].load() < k) violations++;  // returning while p has not launched
    }
  });
  EXPECT_EQ(violations.load(), 0);
}

TEST(LaunchMeet, DifferentCallsAreRefusedByEveryMemberNamingBoth) {
  LaunchMeet meet(ranks(2));
  withRanks(2, 5000, [&](int r, clbComm* comm) {
    clbResult_t rc = meet.arrive(comm, call(1, r ? 999 : 1000), 0);
    const std::string msg = clbGetLastError();
    EXPECT_EQ(rc, clbInvalidUsage) << msg;
    EXPECT_NE(msg.find("count 1000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count 999"), std::string::npos) << msg;
    // Nobody launched, and the next (matching) call still meets.
    rc = meet.arrive(comm, call(2), 0);
    if (rc == clbSuccess) rc = meet.launched(comm);
    EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
  });
}

// A graph replay through clbGraphLaunch (device/graph_launch.cc) on one rank thread while another
// makes an eager call: both refused, the message naming the replay and the call.
TEST(LaunchMeet, AGraphReplayAgainstACallIsRefusedNamingBoth) {
  LaunchMeet meet(ranks(2));
  withRanks(2, 5000, [&](int r, clbComm* comm) {
    OpDesc replay{};
    replay.seq = 1;
    replay.coll = clb::kCallGraphLaunch;
    replay.root = -1;
    const clbResult_t rc = meet.arrive(comm, r ? replay : call(1), 0);
    const std::string msg = clbGetLastError();
    EXPECT_EQ(rc, clbInvalidUsage) << msg;
    EXPECT_NE(msg.find("a CUDA graph replay through clbGraphLaunch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allReduce #1"), std::string::npos) << msg;
  });
}

TEST(LaunchMeet, MemberThatNeverComesIsNamedAtTheTimeoutAndWarnedAboutBefore) {
  LaunchMeet meet(ranks(3));
  std::atomic<int> gaveUp{0}, finished{0};
  // The first of the two waiting members' starts: the one that learns of the other's timeout may
  // have started later (its thread did), so its own wait can be shorter than the timeout.
  std::atomic<int64_t> firstStart{INT64_MAX};
  testing::internal::CaptureStderr();
  withRanks(3, 600, [&](int r, clbComm* comm) {
    if (r == 2) {  // comes only after the others gave up: refused, nothing launched
      while (gaveUp.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(meet.arrive(comm, call(1), 0), clbRemoteError);
      EXPECT_NE(std::string(clbGetLastError()).find("stopped waiting"), std::string::npos) << clbGetLastError();
      finished++;
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    const int64_t t0ns = t0.time_since_epoch().count();
    for (int64_t first = firstStart.load(); t0ns < first && !firstStart.compare_exchange_weak(first, t0ns);) {
    }
    clbResult_t rc = meet.arrive(comm, call(1), 200);
    const std::string msg = clbGetLastError();
    const auto end = std::chrono::steady_clock::now();
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(end - t0).count();
    auto sinceFirst = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end.time_since_epoch() - std::chrono::steady_clock::duration(firstStart.load()))
                          .count();
    gaveUp++;
    // Its own timeout, or (a moment later) the other waiting member's, which it learns at once: at
    // least the timeout after its own start, or after the other's (the earlier).
    EXPECT_TRUE(rc == clbTimeout || rc == clbRemoteError) << rc << ": " << msg;
    EXPECT_NE(msg.find("for rank(s) 2"), std::string::npos) << msg;
    EXPECT_GE(rc == clbTimeout ? took : sinceFirst, 600)
        << "took " << took << " ms, " << sinceFirst << " ms since the first member's start";
    EXPECT_LT(took, 1600);
    finished++;
    while (finished.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // nobody closes early
  });
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("has waited"), std::string::npos) << log;
  EXPECT_NE(log.find("rank(s) 2,"), std::string::npos) << log;
}

// Whether a meeting completes is decided once: a member whose timeout falls just as the last one
// arrives either withdrew first (every member fails, nothing launched) or goes on with the others.
// Mixed outcomes would put one member's kernels on the GPU waiting for another's that never come.
TEST(LaunchMeet, ATimeoutAsTheLastArrivesIsOneOutcomeForAll) {
  const int trials = 300;
  std::vector<std::unique_ptr<LaunchMeet>> meets;
  for (int t = 0; t < trials; t++) meets.push_back(std::make_unique<LaunchMeet>(ranks(2)));
  std::vector<std::array<clbResult_t, 2>> outcome(trials);
  std::vector<std::array<std::string, 2>> why(trials);
  std::atomic<int> at{0};
  withRanks(2, 5000, [&](int r, clbComm* comm) {
    comm->cfg.timeoutMs = 2;  // the meetings' timeout (init had more)
    std::mt19937 random(12345 + r);
    for (int t = 0; t < trials; t++) {
      at.fetch_add(1);
      while (at.load() < 2 * (t + 1)) std::this_thread::yield();  // both start the trial together
      if (r == 1) std::this_thread::sleep_for(std::chrono::microseconds(random() % 5000));  // about the timeout
      // The outcome is arrive's: once it succeeded the member launches. launched() only waits for
      // the others to launch too; with a 2 ms timeout a busy host can make that wait time out on
      // one member while the other went on, which is no mixed outcome (both launched).
      clbResult_t rc = meets[t]->arrive(comm, call(t + 1), 0);
      outcome[t][r] = rc;
      if (rc != clbSuccess) why[t][r] = clbGetLastError();
      if (rc == clbSuccess) {
        const clbResult_t l = meets[t]->launched(comm);
        EXPECT_TRUE(l == clbSuccess || l == clbTimeout) << "trial " << t << ": " << l;
      }
    }
    comm->cfg.timeoutMs = 5000;
  });
  int completed = 0, refused = 0;
  for (int t = 0; t < trials; t++) {
    const bool a = outcome[t][0] == clbSuccess, b = outcome[t][1] == clbSuccess;
    EXPECT_EQ(a, b) << "trial " << t << ": " << outcome[t][0] << " / " << outcome[t][1] << ": " << why[t][0] << " / "
                    << why[t][1];
    (a && b ? completed : refused)++;
  }
  printf("%d meetings completed, %d refused on both members\n", completed, refused);
}

// A rank that is not a member closing its communicator normally (its last call done) is not a
// failure of the members still meeting.
TEST(LaunchMeet, ANonMemberClosingIsNoFailure) {
  LaunchMeet meet(ranks(2));  // ranks 0 and 1 share the GPU; rank 2 does not
  withRanks(3, 5000, [&](int r, clbComm* comm) {
    if (r == 2) return;  // closes at once
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    clbResult_t rc = meet.arrive(comm, call(1), 0);
    if (rc == clbSuccess) rc = meet.launched(comm);
    EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
  });
}

TEST(LaunchMeet, AbortOfAPeerWakesAMemberThatWaits) {
  LaunchMeet meet(ranks(2));
  withRanks(2, 20000, [&](int r, clbComm* comm) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      clbCommAbort(comm);
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(meet.arrive(comm, call(1), 0), clbAborted) << clbGetLastError();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  });
}

TEST(LaunchMeet, OneMeetingPerKeyWhileAMemberHoldsIt) {
  auto a = LaunchMeet::join("k1", {0, 1});
  auto b = LaunchMeet::join("k1", {0, 1});
  auto other = LaunchMeet::join("k2", {0, 1});
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), other.get());
  a.reset();
  b.reset();
  EXPECT_EQ(LaunchMeet::join("k1", {0, 1})->size(), 2);
}

}  // namespace
