// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommShrink after rank processes die: 8 rank processes run a stream of all-reduces (each
// result checked), 1 or 3 of them are killed with SIGKILL in the middle of it, and the survivors,
// once a call fails, shrink with CLB_SHRINK_ABORT and check an all-reduce of the new communicator
// element by element against the sum over the survivors. Over every transport. The time from the
// kill to the last survivor's first correct all-reduce is recorded as the test's property
// "kill_to_correct_ms" (in the XML report; performance goals live in benchmarks).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;

constexpr int kRanks = 8;

int64_t monotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<int> parseList(const char* s) {
  std::vector<int> v;
  std::stringstream in(s ? s : "");
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::stoi(item));
  return v;
}

}  // namespace

// A rank process: init, say it is ready (a file), all-reduces until one fails (the killed ranks
// never get there), shrink, one checked all-reduce, and the time it ended (a file).
TEST(ShrinkKillChild, Rank) {
  const char* spec = getenv("CLB_SHRINK_KILL_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as a child of ShrinkAfterKill";
  int rank = 0, transport = 0;
  char idHex[2 * CLB_UNIQUE_ID_BYTES + 1] = {0};
  ASSERT_EQ(sscanf(spec, "%d:%d:%256s", &rank, &transport, idHex), 3);
  const std::string dir = getenv("CLB_SHRINK_KILL_DIR");
  const std::vector<int> killed = parseList(getenv("CLB_SHRINK_KILL_LIST"));
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = transport;
  cfg.timeoutMs = 20000 * clbtest::slowdown();  // a build 10 x slower (emulation) waits 10 x longer
  clbComm_t comm = nullptr;
  const clbUniqueId id = clbtest::unhex(idHex);
  ASSERT_EQ(clbCommInitRank(&comm, &id, rank, kRanks, &cfg), clbSuccess) << clbGetLastError();
  std::ofstream(dir + "/ready-" + std::to_string(rank)) << "1";
  std::vector<int> all, survivors;
  for (int p = 0; p < kRanks; p++) {
    all.push_back(p);
    if (std::find(killed.begin(), killed.end(), p) == killed.end()) survivors.push_back(p);
  }
  std::string last;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30 * clbtest::slowdown());
  for (int salt = 0; last.empty() && std::chrono::steady_clock::now() < until; salt++)
    last = clbtest::sumOver(comm, rank, all, salt, 4099);
  ASSERT_EQ(last.rfind("failed", 0), 0u) << "rank " << rank
                                         << ": a call before the kill was wrong, or none failed after it";
  clbComm_t smaller = nullptr;
  ASSERT_EQ(clbCommShrink(comm, killed.data(), (int)killed.size(), nullptr, &smaller, CLB_SHRINK_ABORT), clbSuccess)
      << "rank " << rank << ": " << clbGetLastError();
  int newRank = -1, newCount = -1;
  clbCommRank(smaller, &newRank);
  clbCommCount(smaller, &newCount);
  EXPECT_EQ(newCount, (int)survivors.size());
  EXPECT_EQ(newRank, (int)(std::find(survivors.begin(), survivors.end(), rank) - survivors.begin()));
  ASSERT_EQ(clbtest::sumOver(smaller, rank, survivors, 77), "") << "rank " << rank;
  std::ofstream(dir + "/done-" + std::to_string(rank)) << monotonicNs();
  EXPECT_EQ(clbCommDestroy(smaller), clbSuccess);
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess);
}

class ShrinkAfterKill : public ::testing::TestWithParam<std::tuple<Net, std::string>> {};

TEST_P(ShrinkAfterKill, SurvivorsOfSigkilledRanksGoOn) {
  const Net net = std::get<0>(GetParam());
  CLB_TRANSPORT_SCOPE(scope, net);
  const std::vector<int> killed = parseList(std::get<1>(GetParam()).c_str());
  char tmpl[] = "/tmp/clb-shrink-kill-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; r++) {
    const pid_t pid = clbtest::spawnSelf(
        "ShrinkKillChild.Rank", {"CLB_SHRINK_KILL_CHILD=" + std::to_string(r) + ":" +
                                     std::to_string(clbtest::netTransport(net)) + ":" + clbtest::hex(id),
                                 "CLB_SHRINK_KILL_DIR=" + dir, "CLB_SHRINK_KILL_LIST=" + std::get<1>(GetParam())});
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  // Every rank is in its stream of calls before the kill.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30 * clbtest::slowdown());
  for (int r = 0; r < kRanks; r++)
    while (access((dir + "/ready-" + std::to_string(r)).c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t killedAt = monotonicNs();
  for (int k : killed) kill(pids[k], SIGKILL);
  std::vector<pid_t> survivors;
  for (int r = 0; r < kRanks; r++)
    if (std::find(killed.begin(), killed.end(), r) == killed.end()) survivors.push_back(pids[r]);
  for (int k : killed) waitpid(pids[k], nullptr, 0);
  clbtest::expectRanksEnd(survivors, std::chrono::steady_clock::now() + std::chrono::seconds(60 * clbtest::slowdown()));
  int64_t last = 0;
  for (int r = 0; r < kRanks; r++) {
    if (std::find(killed.begin(), killed.end(), r) != killed.end()) continue;
    int64_t t = 0;
    std::ifstream(dir + "/done-" + std::to_string(r)) >> t;
    EXPECT_GT(t, 0) << "rank " << r << " did not finish";
    last = std::max(last, t);
  }
  RecordProperty("kill_to_correct_ms", std::to_string((last - killedAt) / 1000000.0));
  for (int r = 0; r < kRanks; r++) {
    unlink((dir + "/ready-" + std::to_string(r)).c_str());
    unlink((dir + "/done-" + std::to_string(r)).c_str());
  }
  rmdir(dir.c_str());
}

INSTANTIATE_TEST_SUITE_P(Transports, ShrinkAfterKill,
                         ::testing::Combine(::testing::ValuesIn(clbtest::allNets()), ::testing::Values("5", "0,3,6")),
                         [](const ::testing::TestParamInfo<std::tuple<Net, std::string>>& i) {
                           std::string list = std::get<1>(i.param);
                           for (char& ch : list)
                             if (ch == ',') ch = '_';
                           return std::string(clbtest::netName(std::get<0>(i.param))) + "_killed_" + list;
                         });
