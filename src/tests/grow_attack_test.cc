// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Attacks on clbCommGetUniqueId and clbCommGrow over every transport, each bounded by short
// timeouts: an abort of the parent ends a grow in progress; revoked, aborted and failed
// communicators and a second call during a grow are refused; an id used twice, an id of another
// communicator of the same size, a corrupted copy, new ranks that disagree (another size, the same
// rank twice, a forged old size to claim an existing rank) and sizes and ranks at their limits are
// refused on every rank before the timeout, the parent usable; the roots of unused ids stop at
// clbUniqueIdRelease or when their communicator is destroyed; a grow after a shrink; a new rank
// whose default configuration names another transport.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;
using Clock = std::chrono::steady_clock;

bool has(const std::string& s, const std::string& w) { return s.find(w) != std::string::npos; }
std::vector<int> upTo(int n) {
  std::vector<int> v;
  for (int p = 0; p < n; p++) v.push_back(p);
  return v;
}
double secsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

clbConfig_t newRankCfg(Net net, int64_t timeoutMs) {
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = clbtest::netTransport(net);
  cfg.timeoutMs = timeoutMs;
  return cfg;
}
clb::IdData idData(const clbUniqueId& u) {
  clb::IdData d;
  memcpy(&d, &u, sizeof d);
  return d;
}
// Whether the id's root stopped within a second (a release or a destroy signals it; it ends soon after).
bool rootStops(const clbUniqueId& u) {
  for (int i = 0; i < 100 && clb::rootRuns(idData(u)); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !clb::rootRuns(idData(u));
}
clbUniqueId fromData(const clb::IdData& d) {
  clbUniqueId u;
  memcpy(&u, &d, sizeof d);
  return u;
}
std::string checkGrown(clbComm_t g, int rank, int n, int salt) {
  if (!g) return "no communicator";
  int r = -1, c = -1;
  clbCommRank(g, &r);
  clbCommCount(g, &c);
  if (r != rank || c != n) return "rank " + std::to_string(r) + " of " + std::to_string(c);
  return clbtest::sumOver(g, rank, upTo(n), salt);
}
// A new rank 2 of 3 joining with `id`, its all-reduce checked, its communicator destroyed: "" or
// what went wrong.
std::string joinAsRank2(Net net, const clbUniqueId& id, int salt) {
  clbConfig_t cfg = newRankCfg(net, 2000);
  clbComm_t g = nullptr;
  if (clbCommGrow(nullptr, 3, &id, 2, &cfg, &g) != clbSuccess) return std::string("join: ") + clbGetLastError();
  std::string e = checkGrown(g, 2, 3, salt);
  clbCommDestroy(g);
  return e;
}

}  // namespace

class GrowAttack : public ::testing::TestWithParam<Net> {};

// clbCommAbort(comm) on another thread while clbCommGrow(comm) waits for a new rank that never
// comes: the grow should return (clbAborted) at once, as every other call does.
TEST_P(GrowAttack, AbortOfTheParentEndsAGrowInProgress) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 2;
  std::promise<clbUniqueId> made;
  auto ready = made.get_future().share();
  auto errors = clbtest::runOver(GetParam(), n, 8000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(comm, made, &id), clbSuccess) << clbGetLastError();
    } else {
      id = ready.get();
    }
    std::thread aborter([comm] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      clbCommAbort(comm);
    });
    clbComm_t g = nullptr;
    const auto t0 = Clock::now();
    const clbResult_t rc = clbCommGrow(comm, 3, r == 0 ? &id : nullptr, -1, nullptr, &g);  // rank 2 never comes
    const double took = secsSince(t0);
    aborter.join();
    EXPECT_NE(rc, clbSuccess);
    EXPECT_LT(took, 3.0) << "rank " << r << ": clbCommGrow returned " << took << " s after start (abort at 0.5 s), rc "
                         << rc << ": " << clbGetLastError();
    EXPECT_EQ(g, nullptr);
    if (r == 0) clbUniqueIdRelease(&id);
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// Revoked, aborted, failed and suspended communicators: no id, no grow, refused at once.
TEST_P(GrowAttack, RevokedAbortedFailedCommunicatorsAreRefused) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int kind = 0; kind < 3; kind++) {
    auto errors = clbtest::runOver(GetParam(), 2, 2000, {}, [&](int r, clbComm_t comm) {
      if (kind == 0) clbCommRevoke(comm);
      if (kind == 1) clbCommAbort(comm);
      if (kind == 2 && r == 0) clbCommFail(comm, "attack");
      if (kind == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      clbUniqueId id;
      if (kind != 2 || r == 0) {
        EXPECT_NE(clbCommGetUniqueId(comm, &id), clbSuccess) << "kind " << kind;
      }
      clbUniqueId other;
      ASSERT_EQ(clbGetUniqueId(&other), clbSuccess);
      clbComm_t g = nullptr;
      const auto t0 = Clock::now();
      EXPECT_NE(clbCommGrow(comm, 3, r == 0 ? &other : nullptr, -1, nullptr, &g), clbSuccess);
      EXPECT_LT(secsSince(t0), 4.0) << "kind " << kind << " rank " << r << ": " << clbGetLastError();
      EXPECT_EQ(g, nullptr);
      clbUniqueIdRelease(&other);
    });
    for (auto& e : errors) EXPECT_EQ(e, "");
  }
}

// A second call on comm while a grow waits in it: refused at once; destroy refused too.
TEST_P(GrowAttack, ASecondCallDuringAGrowIsRefused) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 1, 2000, {}, [&](int, clbComm_t comm) {
    clbUniqueId id;
    ASSERT_EQ(clbCommGetUniqueId(comm, &id), clbSuccess) << clbGetLastError();
    std::atomic<bool> in{false};
    std::thread grower([&] {
      clbComm_t g = nullptr;
      in = true;
      EXPECT_NE(clbCommGrow(comm, 2, &id, -1, nullptr, &g), clbSuccess);
      EXPECT_EQ(g, nullptr);
    });
    while (!in) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    clbComm_t g2 = nullptr;
    EXPECT_EQ(clbCommGrow(comm, 2, &id, -1, nullptr, &g2), clbInvalidUsage) << clbGetLastError();
    EXPECT_EQ(clbCommDestroy(comm), clbInvalidUsage);
    uint64_t x = 1, y = 0;
    EXPECT_EQ(clbAllReduce(&x, &y, 1, clbUint64, clbSum, comm, nullptr), clbInvalidUsage);
    grower.join();
    clbUniqueIdRelease(&id);
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// One grow completes; the same id again (existing and a new rank): must fail, and by the timeout.
TEST_P(GrowAttack, TheSameIdTwice) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 2;
  std::promise<clbUniqueId> made;
  auto ready = made.get_future().share();
  std::thread joiner([&] {
    const clbUniqueId id = ready.get();
    EXPECT_EQ(joinAsRank2(GetParam(), id, 1), "");
    clbConfig_t cfg = newRankCfg(GetParam(), 2000);
    clbComm_t g = nullptr;
    const auto t0 = Clock::now();
    EXPECT_NE(clbCommGrow(nullptr, 3, &id, 2, &cfg, &g), clbSuccess);
    EXPECT_LT(secsSince(t0), 5.0) << clbGetLastError();
    EXPECT_EQ(g, nullptr);
  });
  auto errors = clbtest::runOver(GetParam(), n, 2000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(comm, made, &id), clbSuccess) << clbGetLastError();
    }
    clbComm_t g = nullptr;
    ASSERT_EQ(clbCommGrow(comm, 3, r == 0 ? &id : nullptr, -1, nullptr, &g), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkGrown(g, r, 3, 1), "");
    clbCommDestroy(g);
    g = nullptr;
    const auto t0 = Clock::now();
    EXPECT_NE(clbCommGrow(comm, 3, r == 0 ? &id : nullptr, -1, nullptr, &g), clbSuccess);
    printf("rank %d, the same id again: %.1f s: %s\n", r, secsSince(t0), clbGetLastError());
    EXPECT_LT(secsSince(t0), 5.0) << clbGetLastError();
    EXPECT_EQ(g, nullptr);
    EXPECT_EQ(clbtest::sumOver(comm, r, upTo(n), 3), "");
  });
  joiner.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// Split into two halves of 2: an id of half A passed to half B's grow is refused.
TEST_P(GrowAttack, AnIdOfAnotherCommunicatorOfTheSameSize) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::promise<clbUniqueId> made;
  auto ready = made.get_future().share();
  auto errors = clbtest::runOver(GetParam(), 4, 2000, {}, [&](int r, clbComm_t comm) {
    clbComm_t half = nullptr;
    ASSERT_EQ(clbCommSplit(comm, r % 2, r, nullptr, &half), clbSuccess) << clbGetLastError();
    int hr = -1;
    clbCommRank(half, &hr);
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(half, made, &id), clbSuccess) << clbGetLastError();
    }
    if (r % 2 == 1) {
      const clbUniqueId a = ready.get();
      clbComm_t g = nullptr;
      const auto t0 = Clock::now();
      EXPECT_EQ(clbCommGrow(half, 3, hr == 0 ? &a : nullptr, -1, nullptr, &g), clbInvalidArgument);
      EXPECT_TRUE(has(clbGetLastError(), "not made by clbCommGetUniqueId on this")) << clbGetLastError();
      EXPECT_LT(secsSince(t0), 2.0);
      EXPECT_EQ(clbtest::sumOver(half, hr, upTo(2), 5), "");
    }
    clbBarrier(comm, nullptr);
    if (r == 0) clbUniqueIdRelease(&id);
    clbCommDestroy(half);
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// Ids made on rank 0 and rank 1; the grow uses rank 1's. The unused one's root: released by
// clbUniqueIdRelease; and the used one's root after the communicator is destroyed without a grow.
TEST_P(GrowAttack, UnusedIdsAndTheirRoots) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::promise<clbUniqueId> made;
  auto ready = made.get_future().share();
  std::thread joiner([&] { EXPECT_EQ(joinAsRank2(GetParam(), ready.get(), 7), ""); });
  clbUniqueId unused, orphan;
  auto errors = clbtest::runOver(GetParam(), 2, 2000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbCommGetUniqueId(comm, &unused), clbSuccess);
      ASSERT_EQ(clbCommGetUniqueId(comm, &orphan), clbSuccess);
      // A root waits while its communicator lives, until released.
      EXPECT_TRUE(clb::rootRuns(idData(unused)));
      clbUniqueIdRelease(&unused);
      EXPECT_TRUE(rootStops(unused));
      EXPECT_TRUE(clb::rootRuns(idData(orphan)));
    }
    if (r == 1) {
      ASSERT_EQ(clbtest::makeGrowId(comm, made, &id), clbSuccess) << clbGetLastError();
    }
    clbComm_t g = nullptr;
    ASSERT_EQ(clbCommGrow(comm, 3, r == 1 ? &id : nullptr, -1, nullptr, &g), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkGrown(g, r, 3, 7), "");
    clbCommDestroy(g);
  });
  joiner.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
  // The communicator is gone: so is its unused grow id's root (it held a secret derived from it).
  EXPECT_TRUE(rootStops(orphan)) << "the root of a grow id outlives its communicator";
  clbUniqueIdRelease(&orphan);
}

// New ranks' mistakes at the root: another nranks, the same rank twice, a forged growFrom to
// claim an existing rank. Every rank must fail, before its timeout ends, and nothing else.
TEST_P(GrowAttack, NewRanksThatDisagreeFailEveryoneAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int kind = 0; kind < 3; kind++) {
    std::promise<clbUniqueId> made;
    auto ready = made.get_future().share();
    std::vector<std::thread> joiners;
    const int grown = 4;
    for (int j = 0; j < 2; j++)
      joiners.emplace_back([&, j] {
        clbUniqueId id = ready.get();
        int rank = 2 + j, nr = grown;
        if (kind == 0 && j == 1) nr = 5;  // another nranks
        if (kind == 1) rank = 2;          // both claim 2
        if (kind == 2 && j == 1) {        // forged: claims existing rank 1
          clb::IdData d = idData(id);
          d.growFrom = 1;
          id = fromData(d);
          rank = 1;
        }
        clbConfig_t cfg = newRankCfg(GetParam(), 6000);
        clbComm_t g = nullptr;
        const auto t0 = Clock::now();
        const clbResult_t rc = clbCommGrow(nullptr, nr, &id, rank, &cfg, &g);
        EXPECT_NE(rc, clbSuccess) << "kind " << kind << " new " << j;
        EXPECT_LT(secsSince(t0), 4.0) << "kind " << kind << " new " << j << ": " << clbGetLastError();
        if (g) clbCommDestroy(g);
      });
    auto errors = clbtest::runOver(GetParam(), 2, 6000, {}, [&](int r, clbComm_t comm) {
      clbUniqueId id;
      if (r == 0) {
        ASSERT_EQ(clbtest::makeGrowId(comm, made, &id), clbSuccess) << clbGetLastError();
      }
      clbComm_t g = nullptr;
      const auto t0 = Clock::now();
      const clbResult_t rc = clbCommGrow(comm, grown, r == 0 ? &id : nullptr, -1, nullptr, &g);
      EXPECT_NE(rc, clbSuccess) << "kind " << kind;
      EXPECT_LT(secsSince(t0), 4.0) << "kind " << kind << " rank " << r << ": " << clbGetLastError();
      if (g) clbCommDestroy(g);
      EXPECT_EQ(clbtest::sumOver(comm, r, upTo(2), 2), "");
      if (r == 0) clbUniqueIdRelease(&id);
    });
    for (auto& t : joiners) t.join();
    for (auto& e : errors) EXPECT_EQ(e, "") << kind;
  }
}

// One existing rank passes the id, another a copy with one byte changed (host, port, nonce,
// growFrom, pad): refused on every rank at once.
TEST_P(GrowAttack, ACorruptedCopyIsRefusedEverywhere) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const size_t offsets[] = {offsetof(clb::IdData, host),      offsetof(clb::IdData, port),
                            offsetof(clb::IdData, growNonce), offsetof(clb::IdData, growFrom),
                            offsetof(clb::IdData, pad),       offsetof(clb::IdData, flags)};
  for (size_t off : offsets) {
    std::promise<clbUniqueId> made;
    auto ready = made.get_future().share();
    auto errors = clbtest::runOver(GetParam(), 3, 2000, {}, [&](int r, clbComm_t comm) {
      clbUniqueId id;
      if (r == 0) {
        ASSERT_EQ(clbtest::makeGrowId(comm, made, &id), clbSuccess) << clbGetLastError();
      } else {
        id = ready.get();
      }
      if (r == 2) id.internal[off] ^= 1;
      clbComm_t g = nullptr;
      const auto t0 = Clock::now();
      EXPECT_EQ(clbCommGrow(comm, 4, r == 1 ? nullptr : &id, -1, nullptr, &g), clbInvalidArgument)
          << "offset " << off << " rank " << r;
      EXPECT_LT(secsSince(t0), 1.5) << "offset " << off << ": " << clbGetLastError();
      EXPECT_EQ(g, nullptr);
      EXPECT_EQ(clbtest::sumOver(comm, r, upTo(3), 1), "");
      if (r == 0) clbUniqueIdRelease(&id);
    });
    for (auto& e : errors) EXPECT_EQ(e, "") << off;
  }
}

// Sizes and ranks at the limits.
TEST_P(GrowAttack, LimitsOfNranksAndRank) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, 2000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) ASSERT_EQ(clbCommGetUniqueId(comm, &id), clbSuccess);
    for (int nr : {INT_MAX, CLB_MAX_RANKS + 1, -1, INT_MIN, 0, 2}) {
      clbComm_t g = nullptr;
      EXPECT_EQ(clbCommGrow(comm, nr, r == 0 ? &id : nullptr, -1, nullptr, &g), clbInvalidArgument) << nr;
      EXPECT_EQ(g, nullptr);
    }
    if (r == 0) {
      for (auto nr_rank : std::vector<std::pair<int, int>>{
               {INT_MAX, 2}, {-1, 2}, {3, INT_MIN}, {3, INT_MAX}, {CLB_MAX_RANKS + 1, 2}, {3, -1}, {3, 3}}) {
        clbComm_t g = nullptr;
        EXPECT_EQ(clbCommGrow(nullptr, nr_rank.first, &id, nr_rank.second, nullptr, &g), clbInvalidArgument)
            << nr_rank.first << "," << nr_rank.second;
      }
      // Forged growFrom: huge, with rank INT_MIN.
      clb::IdData d = idData(id);
      d.growFrom = 0x80000000u;
      clbUniqueId f = fromData(d);
      clbComm_t g = nullptr;
      EXPECT_EQ(clbCommGrow(nullptr, 3, &f, INT_MIN, nullptr, &g), clbInvalidArgument);
      EXPECT_EQ(clbCommGrow(nullptr, INT_MIN + 1, &f, INT_MIN, nullptr, &g), clbInvalidArgument);
      d.growFrom = 0;
      f = fromData(d);
      EXPECT_EQ(clbCommGrow(nullptr, 3, &f, -1, nullptr, &g), clbInvalidArgument) << clbGetLastError();
      clbUniqueIdRelease(&id);
    }
    EXPECT_EQ(clbtest::sumOver(comm, r, upTo(2), 1), "");
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// The use case: after a shrink, a replacement rank joins the survivors.
TEST_P(GrowAttack, GrowAfterShrink) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::promise<clbUniqueId> made;
  auto ready = made.get_future().share();
  std::thread joiner;
  auto errors = clbtest::runOver(GetParam(), 3, 4000, {}, [&](int r, clbComm_t comm) {
    if (r == 2) {
      clbCommAbort(comm);
      return;
    }
    clbComm_t small = nullptr;
    const int ex[] = {2};
    ASSERT_EQ(clbCommShrink(comm, ex, 1, nullptr, &small, CLB_SHRINK_ABORT), clbSuccess) << clbGetLastError();
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(small, made, &id), clbSuccess) << clbGetLastError();
      joiner = std::thread([&] {
        const clbUniqueId given = ready.get();
        clbConfig_t cfg = newRankCfg(GetParam(), 4000);
        clbComm_t g = nullptr;
        ASSERT_EQ(clbCommGrow(nullptr, 3, &given, 2, &cfg, &g), clbSuccess) << clbGetLastError();
        EXPECT_EQ(checkGrown(g, 2, 3, 11), "");
        clbCommDestroy(g);
      });
    }
    clbComm_t g = nullptr;
    ASSERT_EQ(clbCommGrow(small, 3, r == 0 ? &id : nullptr, -1, nullptr, &g), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkGrown(g, r, 3, 11), "");
    clbCommDestroy(g);
    clbCommDestroy(small);
  });
  if (joiner.joinable()) joiner.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// A new rank's config that differs (transport default): is the failure prompt, and said?
TEST_P(GrowAttack, ANewRankWithDefaultConfig) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::promise<clbUniqueId> made;
  auto ready = made.get_future().share();
  std::string newRankResult;
  std::thread joiner([&] {
    const clbUniqueId id = ready.get();
    clbComm_t g = nullptr;
    const clbResult_t rc = clbCommGrow(nullptr, 3, &id, 2, nullptr, &g);
    newRankResult = rc == clbSuccess ? checkGrown(g, 2, 3, 4) : std::string("failed: ") + clbGetLastError();
    if (g) clbCommDestroy(g);
  });
  auto errors = clbtest::runOver(GetParam(), 2, 3000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(comm, made, &id), clbSuccess) << clbGetLastError();
    }
    clbComm_t g = nullptr;
    const auto t0 = Clock::now();
    const clbResult_t rc = clbCommGrow(comm, 3, r == 0 ? &id : nullptr, -1, nullptr, &g);
    // Over shm the defaults (auto: shm on one host) agree; over the others every rank is told the
    // transports differ.
    if (GetParam() == Net::kShm) {
      EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
      if (rc == clbSuccess) EXPECT_EQ(checkGrown(g, r, 3, 4), "");
    } else {
      EXPECT_NE(rc, clbSuccess);
      EXPECT_TRUE(has(clbGetLastError(), "differs across ranks")) << "rank " << r << ": " << clbGetLastError();
    }
    EXPECT_LT(secsSince(t0), 5.0);
    if (g) clbCommDestroy(g);
  });
  joiner.join();
  if (GetParam() == Net::kShm)
    EXPECT_EQ(newRankResult, "");
  else
    EXPECT_TRUE(has(newRankResult, "differs across ranks")) << newRankResult;
  for (auto& e : errors) EXPECT_EQ(e, "");
}

INSTANTIATE_TRANSPORTS(GrowAttack);
