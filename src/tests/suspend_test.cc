// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommSuspend / clbCommResume (NCCL's ncclCommSuspend / ncclCommResume) over every transport:
// a suspended communicator refuses its calls with clbInvalidUsage and stays usable, gives its
// host staging back, is resumed once on every rank, and its calls after the resume are correct,
// cycle after cycle. The device memory's part needs a GPU (scripts/gpu-*.sh).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class SuspendOver : public ::testing::TestWithParam<Net> {};

// Ranks all-reduce, suspend, are refused, resume, and all-reduce again, three cycles; the calls
// between suspend and resume change nothing (no failure, no notice to the peers).
TEST_P(SuspendOver, CallsBetweenSuspendAndResumeAreRefusedAndTheCommunicatorGoesOn) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int n = 3;
  constexpr size_t kCount = 1 << 16;  // 256 KiB: past the small-message paths, so staging is used
  auto errors = clbtest::runOver(GetParam(), n, 30000, nullptr, [&](int r, clbComm_t comm) {
    std::vector<int32_t> a(kCount), b(kCount);
    for (int cycle = 0; cycle < 3; cycle++) {
      for (size_t i = 0; i < kCount; i++) a[i] = (int32_t)(i * (r + 1) + cycle);
      ASSERT_EQ(clbAllReduce(a.data(), b.data(), kCount, clbInt32, clbSum, comm, nullptr), clbSuccess)
          << clbGetLastError();
      for (size_t i = 0; i < kCount; i++) ASSERT_EQ(b[i], (int32_t)(i * 6 + 3 * cycle)) << "element " << i;
      clbMemStats_t before{}, after{};
      ASSERT_EQ(clbCommMemStats(comm, &before), clbSuccess);
      ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
      ASSERT_EQ(clbCommMemStats(comm, &after), clbSuccess);
      EXPECT_LE(after.hostBytes, before.hostBytes);
      EXPECT_EQ(after.deviceBytes, 0);
      int suspended = 0;
      ASSERT_EQ(clbCommSuspended(comm, &suspended), clbSuccess);
      EXPECT_EQ(suspended, 1);
      // Refused, changing nothing, whatever the call.
      EXPECT_EQ(clbAllReduce(a.data(), b.data(), kCount, clbInt32, clbSum, comm, nullptr), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "suspended")) << clbGetLastError();
      EXPECT_TRUE(contains(clbGetLastError(), "clbCommResume")) << clbGetLastError();
      EXPECT_EQ(clbSend(a.data(), 1, clbInt32, (r + 1) % n, comm, nullptr), clbInvalidUsage);
      clbComm_t child = nullptr;
      EXPECT_EQ(clbCommSplit(comm, 0, r, nullptr, &child), clbInvalidUsage);
      EXPECT_EQ(clbCommSuspend(comm), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "suspended already")) << clbGetLastError();
      clbResult_t async = clbInternalError;
      ASSERT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
      EXPECT_EQ(async, clbSuccess) << "a refused call while suspended failed the communicator";
      ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
      ASSERT_EQ(clbCommSuspended(comm, &suspended), clbSuccess);
      EXPECT_EQ(suspended, 0);
      EXPECT_EQ(clbCommResume(comm), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "not suspended")) << clbGetLastError();
    }
    // After the last resume: point-to-point round the ring, and a split.
    int32_t mine = 100 + r, got = -1;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbSend(&mine, 1, clbInt32, (r + 1) % n, comm, nullptr), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbRecv(&got, 1, clbInt32, (r + n - 1) % n, comm, nullptr), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
    EXPECT_EQ(got, 100 + (r + n - 1) % n);
    clbComm_t child = nullptr;
    ASSERT_EQ(clbCommSplit(comm, 0, r, nullptr, &child), clbSuccess) << clbGetLastError();
    EXPECT_EQ(clbCommDestroy(child), clbSuccess);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A communicator destroyed while suspended frees what is left; one of one rank suspends alone.
TEST_P(SuspendOver, ASuspendedCommunicatorIsDestroyedAndOneOfOneRankSuspendsAlone) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int n : {1, 2}) {
    auto errors = clbtest::runOver(GetParam(), n, 30000, nullptr, [&](int, clbComm_t comm) {
      int32_t a = 1, b = 0;
      ASSERT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
      ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
      EXPECT_EQ(clbCommTrim(comm), clbSuccess) << clbGetLastError();
    });  // destroyed suspended
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << n << " ranks, rank " << r;
  }
}

TEST(Suspend, NullAndDeadCommunicatorsAreRefused) {
  EXPECT_EQ(clbCommSuspend(nullptr), clbInvalidArgument);
  EXPECT_EQ(clbCommResume(nullptr), clbInvalidArgument);
  int s = 0;
  EXPECT_EQ(clbCommSuspended(nullptr, &s), clbInvalidArgument);
  auto errors = clbtest::runOver(Net::kShm, 1, 30000, nullptr, [&](int, clbComm_t comm) {
    EXPECT_EQ(clbCommSuspended(comm, nullptr), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "suspended (output) is NULL")) << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TRANSPORTS(SuspendOver);

}  // namespace
