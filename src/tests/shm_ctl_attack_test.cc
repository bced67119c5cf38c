// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Attacks on the process-wide table of shm control blocks (shm.cc: each block mapped once per
// process, counted, the last user unmapping it): communicators of rank threads at once with their
// ranks destroyed in a staggered order, inits stopped at random points, a rank that never joins,
// and ranks split between this process and a child. Results are checked, and no mapping of a
// control block is left afterwards (/proc/self/maps).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "core/comm.h"
#include "tests/test_ranks.h"

namespace {

// Mappings of this process whose path holds `what`.
int mappingsWith(const std::string& what) {
  std::ifstream f("/proc/self/maps");
  std::string l;
  int n = 0;
  while (std::getline(f, l))
    if (l.find(what) != std::string::npos) n++;
  return n;
}

std::string hexOf(clbComm_t c) {
  char b[24];
  snprintf(b, sizeof b, "%016llx", (unsigned long long)c->boot.sessionNonce());
  return b;
}

// A config of the shm transport with `timeoutMs`.
clbConfig_t shmConfig(int64_t timeoutMs) {
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = clbTransportShm;
  cfg.timeoutMs = timeoutMs;
  return cfg;
}

bool allReduceOk(clbComm_t comm, int nranks) {
  std::vector<float> v(4096, 1.0f);
  if (clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, comm, nullptr) != clbSuccess) return false;
  for (float x : v)
    if (x != (float)nranks) return false;
  return true;
}

// Several shm communicators of rank threads at once; ranks destroyed in a staggered order (rank 0
// first, while the others still look at its block); no control-block mapping left after.
TEST(ShmCtlAttack, ConcurrentCommsStaggeredDestroyLeaveNoMappings) {
  const int kComms = 3, kRanks = 4;
  std::mutex m;
  std::vector<std::string> sessions, problems;
  std::vector<std::thread> ts;
  for (int c = 0; c < kComms; c++)
    ts.emplace_back([&, c] {
      auto errs = clbtest::runThreadRanks(
          kRanks,
          [](int, clbConfig_t* cfg) {
            cfg->transport = clbTransportShm;
            cfg->timeoutMs = 20000;
          },
          [&](int r, clbComm_t comm) {
            {
              std::lock_guard<std::mutex> g(m);
              if (r == 0) sessions.push_back(hexOf(comm));
            }
            for (int i = 0; i < 5; i++)
              if (!allReduceOk(comm, kRanks)) {
                std::lock_guard<std::mutex> g(m);
                problems.push_back("comm " + std::to_string(c) + " rank " + std::to_string(r) + ": " +
                                   clbGetLastError());
                return;
              }
            std::this_thread::sleep_for(std::chrono::milliseconds(20 * r));
            clbResult_t async = clbSuccess;
            (void)clbCommGetAsyncError(comm, &async);
          });
      std::lock_guard<std::mutex> g(m);
      for (auto& e : errs)
        if (!e.empty()) problems.push_back("init: " + e);
    });
  for (auto& t : ts) t.join();
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]);
  for (auto& s : sessions) EXPECT_EQ(mappingsWith(s), 0) << "control blocks of session " << s << " still mapped";
}

// Inits stopped at random points (abort flag): whatever stage each rank reached, no mapping of a
// control block is left behind, and nothing crashes.
TEST(ShmCtlAttack, AbortedInitsLeaveNoMappings) {
  const int before = mappingsWith("clb-j");
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 30; iter++) {
    clbUniqueId id;
    ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
    const int kRanks = 4;
    int flag = 0;
    const int delayUs = (int)(rng() % 30000);
    std::vector<std::thread> ts;
    for (int r = 0; r < kRanks; r++)
      ts.emplace_back([&, r] {
        clbConfig_t cfg = shmConfig(5000);
        clbComm_t comm = nullptr;
        if (clbCommInitRankAbortable(&comm, &id, r, kRanks, &cfg, &flag) == clbSuccess) clbCommDestroy(comm);
      });
    std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
    __atomic_store_n(&flag, 1, __ATOMIC_SEQ_CST);
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(mappingsWith("clb-j"), before) << "control blocks left mapped after stopped inits";
}

// A rank that never joins (the others time out) and a 2+2 split between this process and a child
// process follow; here only the thread part: ranks 0..2 of 4 come, rank 3 never does.
TEST(ShmCtlAttack, RankThatNeverJoinsLeavesNoMappings) {
  const int before = mappingsWith("clb-j");
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg = shmConfig(1500);
      clbComm_t comm = nullptr;
      if (clbCommInitRank(&comm, &id, r, 4, &cfg) == clbSuccess) clbCommDestroy(comm);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(mappingsWith("clb-j"), before);
}

// Ranks `first` and `first` + 1 of 4 as threads of this process: init, five checked allReduces,
// destroy (rank 0 a little after the others); how many of them failed.
int twoRankThreads(const clbUniqueId& id, int first) {
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int r = first; r < first + 2; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg = shmConfig(20000);
      clbComm_t comm = nullptr;
      if (clbCommInitRank(&comm, &id, r, 4, &cfg) != clbSuccess) {
        bad++;
        return;
      }
      for (int i = 0; i < 5; i++)
        if (!allReduceOk(comm, 4)) bad++;
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      clbCommDestroy(comm);
    });
  for (auto& t : ts) t.join();
  return bad.load();
}

// Ranks 0, 1 here as threads, ranks 2, 3 as threads of a child process: each block is mapped once
// here for the ranks of this process and separately for the others'; collectives right; nothing
// left mapped after.
TEST(ShmCtlAttackChild, TwoRanks) {
  const char* idHex = getenv("CLB_CTL_ATTACK_ID");
  if (!idHex) GTEST_SKIP() << "child only";
  EXPECT_EQ(twoRankThreads(clbtest::unhex(idHex), 2), 0);
  EXPECT_EQ(mappingsWith("clb-j"), 0);
}

TEST(ShmCtlAttack, RanksSplitBetweenProcessesAndThreads) {
  if (getenv("CLB_CTL_ATTACK_ID")) GTEST_SKIP();
  const int before = mappingsWith("clb-j");
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  pid_t child = clbtest::spawnSelf("ShmCtlAttackChild.TwoRanks", {"CLB_CTL_ATTACK_ID=" + clbtest::hex(id)});
  ASSERT_GT(child, 0);
  const int bad = twoRankThreads(id, 0);
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_EQ(bad, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(mappingsWith("clb-j"), before);
}

}  // namespace
