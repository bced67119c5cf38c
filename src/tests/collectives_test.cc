// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Threads as ranks through the C ABI: every collective on every transport (shm, socket, socket with
// TLS, the verbs stand-in: tests/test_transports.h) and both algorithms,
// checked element by element (int64: exact reference; float32: reference with a bound).
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

struct World {
  std::vector<clbComm_t> comms;
};

// Creates nranks communicators (one per thread) and runs body(rank, comm) on every rank.
void runRanks(int nranks, int transport, int algorithm, const std::function<void(int, clbComm_t)>& body,
              int64_t chunkBytes = 4096) {
  std::vector<std::string> errors = clbtest::runThreadRanks(
      nranks,
      [&](int, clbConfig_t* cfg) {
        cfg->transport = transport;
        cfg->algorithm = algorithm;
        cfg->chunkBytes = chunkBytes;
        cfg->timeoutMs = 20000;
      },
      body);
  for (int r = 0; r < nranks; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

int64_t input(int rank, size_t i) { return (int64_t)((rank + 1) * 1000003ull + i * 7919ull) % 2001 - 1000; }

struct Case {
  int transport, algorithm;
};

using clbtest::Net;

class Collectives : public ::testing::TestWithParam<std::tuple<int, Net, int, size_t>> {};

TEST_P(Collectives, AllFourMatchReference) {
  auto [nranks, net, algorithm, count] = GetParam();
  CLB_TRANSPORT_SCOPE(scope, net);
  const int transport = clbtest::netTransport(net);
  if (transport != clbTransportShm && algorithm == clbAlgoDirect && nranks > 1)
    GTEST_SKIP() << "direct needs shared memory (refusal tested in Bootstrap tests)";
  runRanks(nranks, transport, algorithm, [&, nranks = nranks, count = count](int r, clbComm_t comm) {
    // allReduce sum, in place and out of place
    std::vector<int64_t> in(count), out(count, -7);
    for (size_t i = 0; i < count; i++) in[i] = input(r, i);
    ASSERT_EQ(clbAllReduce(in.data(), out.data(), count, clbInt64, clbSum, comm, nullptr), clbSuccess)
        << clbGetLastError();
    for (size_t i = 0; i < count; i++) {
      int64_t want = 0;
      for (int p = 0; p < nranks; p++) want += input(p, i);
      ASSERT_EQ(out[i], want) << "allReduce rank " << r << " element " << i;
    }
    ASSERT_EQ(clbAllReduce(in.data(), in.data(), count, clbInt64, clbMax, comm, nullptr), clbSuccess)
        << clbGetLastError();
    for (size_t i = 0; i < count; i++) {
      int64_t want = input(0, i);
      for (int p = 1; p < nranks; p++) want = std::max(want, input(p, i));
      ASSERT_EQ(in[i], want) << "allReduce max in place, rank " << r << " element " << i;
    }
    // allGather
    std::vector<int64_t> g(count * nranks, -7);
    for (size_t i = 0; i < count; i++) in[i] = input(r, i);
    ASSERT_EQ(clbAllGather(in.data(), g.data(), count, clbInt64, comm, nullptr), clbSuccess) << clbGetLastError();
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < count; i++) ASSERT_EQ(g[p * count + i], input(p, i)) << "allGather";
    // reduceScatter: input n*count
    std::vector<int64_t> big(count * nranks), rs(count, -7);
    for (size_t i = 0; i < big.size(); i++) big[i] = input(r, i);
    ASSERT_EQ(clbReduceScatter(big.data(), rs.data(), count, clbInt64, clbSum, comm, nullptr), clbSuccess)
        << clbGetLastError();
    for (size_t i = 0; i < count; i++) {
      int64_t want = 0;
      for (int p = 0; p < nranks; p++) want += input(p, r * count + i);
      ASSERT_EQ(rs[i], want) << "reduceScatter rank " << r << " element " << i;
    }
    // broadcast from the last rank
    int root = nranks - 1;
    std::vector<int64_t> b(count, -7);
    ASSERT_EQ(clbBroadcast(r == root ? in.data() : nullptr, b.data(), count, clbInt64, root, comm, nullptr), clbSuccess)
        << clbGetLastError();
    for (size_t i = 0; i < count; i++) ASSERT_EQ(b[i], input(root, i)) << "broadcast";
    int algo = -1;
    clbCommLastAlgorithm(comm, &algo);
    if (count > 0 && nranks > 1) {
      EXPECT_EQ(algo, algorithm == clbAlgoAuto ? algo : algorithm);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Host, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5, 16), ::testing::ValuesIn(clbtest::allNets()),
                                            ::testing::Values(clbAlgoRing, clbAlgoDirect, clbAlgoAuto),
                                            ::testing::Values(size_t(0), size_t(1), size_t(7), size_t(10007))),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  clbtest::netName(std::get<1>(info.param)) + "_" +
                                  clbAlgorithmName(std::get<2>(info.param)) + "_c" +
                                  std::to_string(std::get<3>(info.param));
                         });

// Buffers that overlap without being the in-place layout are refused on every rank that passes
// them, naming both ranges, before anything moves (they used to give silent garbage); the in-place
// layouts still work, and the communicator stays usable.
TEST(Collectives, OverlappingBuffersAreRefusedNamingBothRanges) {
  const size_t count = 100000;
  // Each refusal fails its communicator (its peers are told: refusal_test.cc), so each on its own.
  const std::function<clbResult_t(int64_t*, int, clbComm_t)> calls[] = {
      [](int64_t* b, int, clbComm_t c) { return clbAllReduce(b, b + 1, count, clbInt64, clbSum, c, nullptr); },
      [](int64_t* b, int r, clbComm_t c) { return clbBroadcast(b, b + count / 2, count, clbInt64, r, c, nullptr); },
      [](int64_t* b, int, clbComm_t c) { return clbAllGather(b, b + 1, count, clbInt64, c, nullptr); },
      [](int64_t* b, int, clbComm_t c) { return clbReduceScatter(b, b + 1, count, clbInt64, clbSum, c, nullptr); },
  };
  const char* what[] = {"allReduce recv = send + 1", "broadcast from the rank itself",
                        "allGather send not at recv + rank x count", "reduceScatter recv inside send"};
  for (int k = 0; k < 4; k++)
    runRanks(2, clbTransportAuto, clbAlgoAuto, [&](int r, clbComm_t comm) {
      std::vector<int64_t> buf(3 * count, 1);
      int64_t* b = buf.data();
      const clbResult_t rc = calls[k](b, r, comm);
      const std::string msg = clbGetLastError();
      EXPECT_EQ(rc, clbInvalidArgument) << what[k] << ": " << msg;
      EXPECT_NE(msg.find("overlap"), std::string::npos) << what[k] << ": " << msg;
      char sendAt[32];
      snprintf(sendAt, sizeof sendAt, "[%p", (void*)b);
      EXPECT_NE(msg.find(sendAt), std::string::npos) << what[k] << " names the send range: " << msg;
    });
  // The in-place layouts.
  runRanks(2, clbTransportAuto, clbAlgoAuto, [](int r, clbComm_t comm) {
    std::vector<int64_t> buf(3 * count, 1);
    int64_t* b = buf.data();
    for (size_t i = 0; i < 2 * count; i++) b[i] = r + 1;
    ASSERT_EQ(clbAllGather(b + r * count, b, count, clbInt64, comm, nullptr), clbSuccess) << clbGetLastError();
    for (size_t i = 0; i < 2 * count; i++) ASSERT_EQ(b[i], (int64_t)(i / count) + 1) << "allGather element " << i;
    ASSERT_EQ(clbReduceScatter(b, b + r * count, count, clbInt64, clbSum, comm, nullptr), clbSuccess)
        << clbGetLastError();
    for (size_t i = 0; i < count; i++) ASSERT_EQ(b[r * count + i], 2 * (int64_t)(r + 1)) << "reduceScatter " << i;
    ASSERT_EQ(clbAllReduce(b, b, count, clbInt64, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
  });
}

}  // namespace
