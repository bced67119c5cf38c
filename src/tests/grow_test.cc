// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommGetUniqueId and clbCommGrow over every transport, ranks as threads: new ranks join a
// communicator's ranks, which keep their numbers, and every all-reduce of the grown communicator
// (and of one grown again from it) is checked element by element against the sum over all its
// ranks, while the parent stays usable; bad arguments on one existing rank (size, rank, no id, an
// id of another communicator, ids that differ) are refused on every existing rank at once, saying
// what, and leave the parent usable; a new rank's own mistakes are refused before it connects; a
// new rank that never comes is named when the others' timeout ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "base/clock.h"
#include "core/comm.h"
#include "tests/test_bootstrap.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

// ASan and TSan keep freed memory (quarantine, shadow), so resident memory says nothing there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CLB_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CLB_TEST_SANITIZED 1
#endif
#endif
#ifndef CLB_TEST_SANITIZED
#define CLB_TEST_SANITIZED 0
#endif

namespace {

using clbtest::Net;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::vector<int> upTo(int n) {
  std::vector<int> v;
  for (int p = 0; p < n; p++) v.push_back(p);
  return v;
}

// The grown communicator's place (rank `rank` of `n`) and a sum over all its ranks.
std::string checkGrown(clbComm_t grown, int rank, int n, int salt) {
  if (!grown) return "no communicator made";
  int r = -1, count = -1;
  clbCommRank(grown, &r);
  clbCommCount(grown, &count);
  if (r != rank || count != n)
    return "rank " + std::to_string(r) + " of " + std::to_string(count) + ", want " + std::to_string(rank) + " of " +
           std::to_string(n);
  return clbtest::sumOver(grown, rank, upTo(n), salt);
}

// Every collective on the grown communicator, element by element against sums computed here: an
// all-reduce, an all-gather, a reduce-scatter, a broadcast from a new rank and a reduce to an
// existing one. "" or what differed.
std::string everyCollective(clbComm_t c, int rank, int n) {
  const size_t count = 257;
  auto val = [](int r, size_t i) { return (int64_t)(r + 1) * 1000 + (int64_t)i; };
  if (std::string e = clbtest::sumOver(c, rank, upTo(n), 3, count); !e.empty()) return "allReduce: " + e;
  std::vector<int64_t> mine(count), all(count * n, -1);
  for (size_t i = 0; i < count; i++) mine[i] = val(rank, i);
  if (clbAllGather(mine.data(), all.data(), count, clbInt64, c, nullptr) != clbSuccess)
    return std::string("allGather: ") + clbGetLastError();
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++)
      if (all[p * count + i] != val(p, i))
        return "allGather: block " + std::to_string(p) + " element " + std::to_string(i);
  std::vector<int64_t> in(count * n), out(count, -1);
  for (size_t j = 0; j < in.size(); j++) in[j] = val(rank, j);
  if (clbReduceScatter(in.data(), out.data(), count, clbInt64, clbSum, c, nullptr) != clbSuccess)
    return std::string("reduceScatter: ") + clbGetLastError();
  for (size_t i = 0; i < count; i++) {
    int64_t want = 0;
    for (int p = 0; p < n; p++) want += val(p, rank * count + i);
    if (out[i] != want) return "reduceScatter: element " + std::to_string(i);
  }
  const int bcastRoot = n - 1, reduceRoot = 1;
  std::vector<int64_t> b(count);
  for (size_t i = 0; i < count; i++) b[i] = rank == bcastRoot ? val(bcastRoot, i) * 7 : -1;
  if (clbBroadcast(b.data(), b.data(), count, clbInt64, bcastRoot, c, nullptr) != clbSuccess)
    return std::string("broadcast: ") + clbGetLastError();
  for (size_t i = 0; i < count; i++)
    if (b[i] != val(bcastRoot, i) * 7) return "broadcast: element " + std::to_string(i);
  std::vector<int64_t> red(count, -1);
  if (clbReduce(mine.data(), red.data(), count, clbInt64, clbMax, reduceRoot, c, nullptr) != clbSuccess)
    return std::string("reduce: ") + clbGetLastError();
  for (size_t i = 0; i < count && rank == reduceRoot; i++)
    if (red[i] != val(n - 1, i)) return "reduce: element " + std::to_string(i);
  return "";
}

// New ranks first..n-1 as threads: each joins with `id` and runs `body` on its communicator.
std::vector<std::thread> newRanks(Net net, int first, int n, int64_t timeoutMs, const clbUniqueId& id,
                                  const std::function<void(int, clbComm_t)>& body) {
  std::vector<std::thread> ts;
  for (int r = first; r < n; r++)
    ts.emplace_back([=] {  // the id by value: the caller's may go before the thread ends
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      cfg.transport = clbtest::netTransport(net);
      cfg.timeoutMs = timeoutMs;
      clbComm_t grown = nullptr;
      const clbResult_t rc = clbCommGrow(nullptr, n, &id, r, &cfg, &grown);
      EXPECT_EQ(rc, clbSuccess) << "new rank " << r << ": " << clbGetLastError();
      body(r, grown);
      if (grown) clbCommDestroy(grown);
    });
  return ts;
}

}  // namespace

class GrowOver : public ::testing::TestWithParam<Net> {};

TEST_P(GrowOver, NewRanksJoinAndTheExistingKeepTheirNumbers) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 3, grownSize = 5, again = 6;
  // Rank 1 coordinates (not rank 0); rank 2 passes the same id too, rank 0 NULL.
  std::promise<clbUniqueId> idMade;
  std::shared_future<clbUniqueId> idReady = idMade.get_future().share();
  std::promise<clbUniqueId> againMade;
  std::shared_future<clbUniqueId> againReady = againMade.get_future().share();
  std::vector<std::thread> joiners;
  std::thread starter([&] {
    const clbUniqueId id = idReady.get();
    joiners = newRanks(GetParam(), n, grownSize, 20000, id, [&](int r, clbComm_t grown) {
      EXPECT_EQ(checkGrown(grown, r, grownSize, 1), "") << "new rank " << r;
      // Grown again from the grown communicator: one more rank.
      clbComm_t bigger = nullptr;
      ASSERT_EQ(clbCommGrow(grown, again, nullptr, -1, nullptr, &bigger), clbSuccess) << clbGetLastError();
      EXPECT_EQ(checkGrown(bigger, r, again, 2), "") << "new rank " << r << ", grown again";
      clbCommDestroy(bigger);
    });
  });
  std::thread lastOne;
  auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 1) {
      ASSERT_EQ(clbtest::makeGrowId(comm, idMade, &id), clbSuccess) << clbGetLastError();
    }
    const clbUniqueId* mine = nullptr;
    if (r >= 1) {
      id = idReady.get();
      mine = &id;
    }
    clbComm_t grown = nullptr;
    ASSERT_EQ(clbCommGrow(comm, grownSize, mine, -1, nullptr, &grown), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkGrown(grown, r, grownSize, 1), "") << "rank " << r;
    // The parent is unchanged and usable.
    EXPECT_EQ(clbtest::sumOver(comm, r, upTo(n), 9), "") << "rank " << r << ", the parent";
    clbComm_t bigger = nullptr;
    const clbUniqueId* againPassed = nullptr;
    clbUniqueId againId;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(grown, againMade, &againId), clbSuccess) << clbGetLastError();
      againPassed = &againId;
      lastOne = std::thread([&] {
        const clbUniqueId id2 = againReady.get();
        for (std::thread& t : newRanks(GetParam(), grownSize, again, 20000, id2, [&](int r6, clbComm_t c6) {
               EXPECT_EQ(checkGrown(c6, r6, again, 2), "") << "the newest rank";
             }))
          t.join();
      });
    }
    ASSERT_EQ(clbCommGrow(grown, again, againPassed, -1, nullptr, &bigger), clbSuccess) << clbGetLastError();
    EXPECT_EQ(checkGrown(bigger, r, again, 2), "") << "rank " << r << ", grown again";
    clbCommDestroy(bigger);
    clbCommDestroy(grown);
  });
  starter.join();
  for (std::thread& t : joiners) t.join();
  if (lastOne.joinable()) lastOne.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// Each mistake on one existing rank fails every existing rank at once, naming that rank and what
// was wrong, and the parent goes on: no new rank is started, as none would be needed.
TEST_P(GrowOver, ABadArgumentOnOneRankIsRefusedOnEveryRank) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 3;
  enum Kind { kSize, kRank, kSmaller, kNoId, kPlainId, kOtherId };
  struct Case {
    Kind kind;
    const char* name;
    int badRank;       // the rank whose arguments are wrong (-1: every rank passes NULL)
    const char* what;  // in every rank's message
  };
  const Case cases[] = {
      {kSize, "a size that differs", 2, "every rank passes the grown size"},
      {kRank, "a rank that is not -1", 1, "rank=1: a rank of comm passes -1"},
      {kSmaller, "no larger size", 2, "nranks=3: a grown communicator has more than comm's 3 ranks"},
      {kNoId, "no id anywhere", -1, "no rank of comm passed clbCommGrow an id"},
      {kPlainId, "an id of clbGetUniqueId", 2, "was not made by clbCommGetUniqueId on this communicator"},
      {kOtherId, "ids that differ", 2, "passed clbCommGrow different ids"},
  };
  for (const Case& k : cases) {
    auto errors = clbtest::runOver(GetParam(), n, 20000, {}, [&](int r, clbComm_t comm) {
      const bool bad = r == k.badRank;
      clbUniqueId id, other;
      const clbUniqueId* passed = nullptr;
      int size = 5, rank = -1;
      if (k.badRank >= 0 && r == 0) {
        ASSERT_EQ(clbCommGetUniqueId(comm, &id), clbSuccess) << clbGetLastError();
        passed = &id;
      }
      if (bad) {
        if (k.kind == kSize) size = 6;
        if (k.kind == kRank) rank = 1;
        if (k.kind == kSmaller) size = 3;
        if (k.kind == kPlainId) {
          ASSERT_EQ(clbGetUniqueId(&other), clbSuccess);
          passed = &other;
        }
        if (k.kind == kOtherId) {
          ASSERT_EQ(clbCommGetUniqueId(comm, &other), clbSuccess) << clbGetLastError();
          passed = &other;
        }
      }
      clbComm_t grown = reinterpret_cast<clbComm_t>(&size);  // must come back NULL
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(clbCommGrow(comm, size, passed, rank, nullptr, &grown), clbInvalidArgument) << k.name;
      const std::string msg = clbGetLastError();
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << k.name;
      EXPECT_EQ(grown, nullptr) << k.name;
      EXPECT_TRUE(contains(msg, k.what)) << k.name << ", rank " << r << ": " << msg;
      if (k.badRank >= 0 && !bad && k.kind != kSize && k.kind != kOtherId) {
        EXPECT_TRUE(contains(msg, "refused on rank " + std::to_string(k.badRank))) << k.name << ": " << msg;
      }
      EXPECT_EQ(clbtest::sumOver(comm, r, upTo(n), 4), "") << k.name << ", rank " << r << ": the parent after";
      if (passed == &id) clbUniqueIdRelease(&id);
      if (passed == &other) clbUniqueIdRelease(&other);
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "") << k.name;
  }
}

// A new rank's own mistakes are its alone, refused before it connects anywhere.
TEST_P(GrowOver, ANewRanksMistakesAreRefusedBeforeItConnects) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, 20000, {}, [&](int r, clbComm_t comm) {
    if (r != 0) return;
    clbUniqueId grow, plain;
    ASSERT_EQ(clbCommGetUniqueId(comm, &grow), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbGetUniqueId(&plain), clbSuccess);
    struct Case {
      const clbUniqueId* id;
      int nranks, rank;
      const char* what;
    };
    const Case cases[] = {
        {nullptr, 4, 2, "needs the id from clbCommGetUniqueId: got NULL"},
        {&plain, 4, 2, "this one is from clbGetUniqueId"},
        {&grow, 4, 1, "a new rank takes one of ranks 2..3 (ranks 0..1 are the existing ones), not 1"},
        {&grow, 4, 4, "not 4"},
        {&grow, 2, 2, "nranks=2: the grown communicator has more ranks than the 2"},
    };
    for (const Case& k : cases) {
      clbComm_t c = nullptr;
      EXPECT_EQ(clbCommGrow(nullptr, k.nranks, k.id, k.rank, nullptr, &c), clbInvalidArgument) << k.what;
      EXPECT_TRUE(contains(clbGetLastError(), k.what)) << clbGetLastError();
      EXPECT_EQ(c, nullptr);
    }
    EXPECT_EQ(clbCommGrow(nullptr, 4, &grow, 2, nullptr, nullptr), clbInvalidArgument);
    clbUniqueId none;
    EXPECT_EQ(clbCommGetUniqueId(comm, nullptr), clbInvalidArgument);
    EXPECT_EQ(clbCommGetUniqueId(nullptr, &none), clbInvalidArgument);
    clbUniqueIdRelease(&grow);
    clbUniqueIdRelease(&plain);
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// A new rank that never comes: the existing ranks and the other new rank fail at their timeout,
// told which rank is missing; the parent goes on.
TEST_P(GrowOver, ANewRankThatNeverComesIsNamedAtTheTimeout) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 2, grownSize = 4;
  std::promise<clbUniqueId> idMade;
  std::shared_future<clbUniqueId> idReady = idMade.get_future().share();
  std::thread joiner;
  auto errors = clbtest::runOver(GetParam(), n, 2000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(comm, idMade, &id), clbSuccess) << clbGetLastError();
      // Rank 2 comes, rank 3 never does.
      joiner = std::thread([&] {
        const clbUniqueId given = idReady.get();
        clbConfig_t cfg;
        clbConfigInit(&cfg);
        cfg.transport = clbtest::netTransport(GetParam());
        cfg.timeoutMs = 2000;
        clbComm_t c = nullptr;
        EXPECT_NE(clbCommGrow(nullptr, grownSize, &given, 2, &cfg, &c), clbSuccess);
        EXPECT_TRUE(contains(clbGetLastError(), "3")) << clbGetLastError();
        EXPECT_EQ(c, nullptr);
      });
    }
    clbComm_t grown = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_NE(clbCommGrow(comm, grownSize, r == 0 ? &id : nullptr, -1, nullptr, &grown), clbSuccess);
    const std::string msg = clbGetLastError();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    EXPECT_TRUE(contains(msg, "rank(s) 3")) << "rank " << r << ": " << msg;
    EXPECT_EQ(grown, nullptr);
    EXPECT_EQ(clbtest::sumOver(comm, r, upTo(n), 8), "") << "rank " << r << ": the parent after";
  });
  if (joiner.joinable()) joiner.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// `n` ranks grown to `grownSize`; every collective checked on all of them, the old and the new.
void growAndCheckEveryCollective(Net net, int n, int grownSize) {
  std::promise<clbUniqueId> idMade;
  std::shared_future<clbUniqueId> idReady = idMade.get_future().share();
  std::vector<std::thread> joiners;
  std::thread starter([&] {
    const clbUniqueId id = idReady.get();
    joiners = newRanks(net, n, grownSize, 20000, id, [&](int r, clbComm_t grown) {
      EXPECT_EQ(grown ? everyCollective(grown, r, grownSize) : "no communicator", "") << "new rank " << r;
    });
  });
  auto errors = clbtest::runOver(net, n, 20000, {}, [&](int r, clbComm_t comm) {
    clbUniqueId id;
    if (r == 0) {
      ASSERT_EQ(clbtest::makeGrowId(comm, idMade, &id), clbSuccess) << clbGetLastError();
    }
    clbComm_t grown = nullptr;
    ASSERT_EQ(clbCommGrow(comm, grownSize, r == 0 ? &id : nullptr, -1, nullptr, &grown), clbSuccess)
        << clbGetLastError();
    EXPECT_EQ(everyCollective(grown, r, grownSize), "") << "rank " << r;
    clbCommDestroy(grown);
  });
  starter.join();
  for (std::thread& t : joiners) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// Grown by one: 3 ranks and a new one (the replacement of a dead rank), every collective checked
// on all four; the broadcast's root is the new rank.
TEST_P(GrowOver, GrownByOneEveryCollectiveIsRight) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  growAndCheckEveryCollective(GetParam(), 3, 4);
}

// Grown by four at once: 2 ranks and 4 new ones, every collective checked on all six.
TEST_P(GrowOver, GrownByFourEveryCollectiveIsRight) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  growAndCheckEveryCollective(GetParam(), 2, 6);
}

// A hundred cycles of a grow by one rank and a shrink back, then every communicator destroyed:
// the process holds the file descriptors, threads and shared-memory mappings it held after the
// first cycle and about its memory (outside the sanitizers, whose allocators keep freed memory),
// and the parent no more than the last grow ids.
TEST_P(GrowOver, AHundredGrowAndShrinkCyclesLeakNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::atomic<int> liveMaps{0};  // the most segment mappings seen while the communicators live
  auto cycles = [&](int count) {
    auto errors = clbtest::runOver(GetParam(), 2, 20000, {}, [&](int r, clbComm_t comm) {
      for (int k = 0; k < count; k++) {
        std::promise<clbUniqueId> idMade;
        clbUniqueId id;
        std::thread newcomer;
        if (r == 0) {
          ASSERT_EQ(clbtest::makeGrowId(comm, idMade, &id), clbSuccess) << clbGetLastError();
          newcomer = std::thread([&] {
            for (std::thread& t : newRanks(GetParam(), 2, 3, 20000, id, [&](int r3, clbComm_t c3) {
                   EXPECT_EQ(c3 ? clbtest::sumOver(c3, r3, upTo(3), k) : "no communicator", "");
                 }))
              t.join();
          });
        }
        clbComm_t grown = nullptr;
        ASSERT_EQ(clbCommGrow(comm, 3, r == 0 ? &id : nullptr, -1, nullptr, &grown), clbSuccess)
            << "cycle " << k << ": " << clbGetLastError();
        EXPECT_EQ(clbtest::sumOver(grown, r, upTo(3), k), "") << "cycle " << k;
        liveMaps = std::max(liveMaps.load(), clbtest::shmMappings());
        if (newcomer.joinable()) newcomer.join();  // the new rank destroyed its communicator
        const int gone = 2;
        clbComm_t back = nullptr;
        ASSERT_EQ(clbCommShrink(grown, &gone, 1, nullptr, &back, CLB_SHRINK_DEFAULT), clbSuccess)
            << "cycle " << k << ": " << clbGetLastError();
        EXPECT_EQ(clbtest::sumOver(back, r, upTo(2), k), "") << "cycle " << k;
        clbCommDestroy(back);
        clbCommDestroy(grown);
      }
      // The grow ids whose root ended are forgotten at the next one (the last root, or one that
      // still ends, may remain), not kept until the parent is destroyed.
      std::lock_guard<std::mutex> g(comm->growIdsMutex);
      EXPECT_LE(comm->growIds.size(), 2u) << "grow ids the parent keeps after " << count << " grows";
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
  };
  cycles(1);
  // The mappings are seen where they exist: over shm the live communicators map segments.
  if (GetParam() == Net::kShm) {
    EXPECT_GT(liveMaps.load(), 0) << "no /dev/shm mapping seen while communicators lived";
  }
  const int fds0 = clbtest::openFds(), threads0 = clbtest::threads(), maps0 = clbtest::shmMappings();
  const long rss0 = clbtest::residentKiB();
  cycles(100);
  // Threads that end with a communicator leave the task list a little after they are joined.
  const int64_t by = clb::nowMs() + 2000;
  while ((clbtest::openFds() > fds0 || clbtest::threads() > threads0) && clb::nowMs() < by)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_LE(clbtest::openFds(), fds0) << "file descriptors after 100 cycles";
  EXPECT_LE(clbtest::threads(), threads0) << "threads after 100 cycles";
  EXPECT_LE(clbtest::shmMappings(), maps0) << "shared-memory mappings after 100 cycles";
#if !CLB_TEST_SANITIZED
  // Each cycle makes two communicators of 2-3 ranks (tables, rings, staging): a leak of one of
  // them per cycle would be megabytes; the allocator's own growth stays well under this.
  const long rss = clbtest::residentKiB();
  EXPECT_LE(rss, rss0 + 16 * 1024) << "resident memory after 100 cycles, KiB (after the first: " << rss0 << ")";
  printf("LEAKCHECK rss_after_1_KiB=%ld rss_after_101_KiB=%ld shm_mappings=%d/%d\n", rss0, rss, clbtest::shmMappings(),
         maps0);
#endif
}

INSTANTIATE_TRANSPORTS(GrowOver);
