// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbBarrier on host (stream NULL): no rank leaves a barrier before every rank entered it
// (checked with a counter each rank bumps before it enters, ranks arriving at different times),
// over every transport (shm, socket, socket with TLS, the verbs stand-in), for 1 to 8 ranks; a barrier on one rank
// against an all-reduce on another is an error naming the barrier, not a silent match; a NULL communicator is named.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;

class BarrierOrder : public ::testing::TestWithParam<std::tuple<int, Net>> {};  // (ranks, transport)

TEST_P(BarrierOrder, NoRankLeavesBeforeEveryRankEntered) {
  const auto [n, net] = GetParam();
  CLB_TRANSPORT_SCOPE(scope, net);
  const int rounds = 20;
  std::vector<std::atomic<int>> entered(rounds);
  for (auto& e : entered) e = 0;
  auto errors = clbtest::runOver(net, n, 20000, nullptr, [&, n = n](int r, clbComm_t comm) {
    for (int round = 0; round < rounds; round++) {
      // A different rank is late each round.
      if (r == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      entered[round]++;
      ASSERT_EQ(clbBarrier(comm, nullptr), clbSuccess) << clbGetLastError();
      ASSERT_EQ(entered[round].load(), n) << "rank " << r << " left barrier " << round << " early";
    }
    int algo = -2;
    clbCommLastAlgorithm(comm, &algo);
    EXPECT_NE(algo, -2);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, BarrierOrder,
                         ::testing::Combine(::testing::Values(1, 2, 3, 8), ::testing::ValuesIn(clbtest::allNets())),
                         [](const ::testing::TestParamInfo<std::tuple<int, Net>>& i) {
                           return std::to_string(std::get<0>(i.param)) + "ranks_" +
                                  clbtest::netName(std::get<1>(i.param));
                         });

// Rank 0 in a barrier, rank 1 in an all-reduce of one int32 sum (what the barrier is underneath):
// at least one rank fails naming the barrier, and no rank's all-reduce succeeds as if matched.
// Over every transport.
class Barrier : public ::testing::TestWithParam<Net> {};

TEST_P(Barrier, AgainstAnAllReduceIsAMismatchNamingTheBarrier) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int algorithm : {(int)clbAlgoRing, (int)clbAlgoAuto}) {
    std::vector<std::string> msgs(2);
    std::vector<clbResult_t> rcs(2, clbSuccess);
    auto errors = clbtest::runOver(
        GetParam(), 2, 3000, [algorithm](int, clbConfig_t* cfg) { cfg->algorithm = algorithm; },
        [&](int r, clbComm_t comm) {
          int32_t x = 5, y = 0;
          rcs[r] = r == 0 ? clbBarrier(comm, nullptr) : clbAllReduce(&x, &y, 1, clbInt32, clbSum, comm, nullptr);
          msgs[r] = clbGetLastError();
        });
    for (auto& e : errors) ASSERT_EQ(e, "");
    EXPECT_NE(rcs[1], clbSuccess) << "the all-reduce matched the barrier (algorithm " << algorithm << ")";
    EXPECT_TRUE(msgs[0].find("barrier #1") != std::string::npos || msgs[1].find("barrier #1") != std::string::npos)
        << "algorithm " << algorithm << ":\nrank 0: " << msgs[0] << "\nrank 1: " << msgs[1];
  }
}

INSTANTIATE_TRANSPORTS(Barrier);

// No communicator, so no transport: it runs once.
TEST(BarrierWithoutACommunicator, NullCommunicatorIsNamed) {
  EXPECT_EQ(clbBarrier(nullptr, nullptr), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("communicator is NULL"), std::string::npos) << clbGetLastError();
}

}  // namespace
