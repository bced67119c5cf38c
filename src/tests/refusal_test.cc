// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A call refused on one rank for its arguments is a call its peers make: they are told at once
// (their calls fail with clbRemoteError naming the rank and its reason) instead of waiting for it
// until their timeout, over every transport; and the refusing rank's communicator fails with it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/net.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The timeout of every case: the peers must hear of the refusal long before it.
constexpr int64_t kTimeoutMs = 60000;
// What "at once" allows a peer here: a fraction of the timeout that no machine under load misses.
constexpr int64_t kToldWithinMs = 15000;
constexpr int kRefuser = 1;

// One case: what every rank calls (`call`, given whether this rank is the one that gets it wrong),
// which ranks take part in it (the others poll clbCommGetAsyncError instead), and what the
// refusal's message says.
struct Case {
  const char* name;
  std::function<clbResult_t(clbComm_t, int rank, bool wrong)> call;
  std::function<bool(int rank)> takesPart;
  const char* says;
};

std::vector<Case> cases() {
  // Each rank thread its own buffers.
  thread_local int32_t src[64], dst[64 * 3];
  auto everyone = [](int) { return true; };
  void* const wraps = reinterpret_cast<void*>(UINTPTR_MAX - 15);
  return {
      {"allReduce with an unknown op",
       [](clbComm_t c, int, bool wrong) {
         return clbAllReduce(src, dst, 8, clbInt32, wrong ? (clbRedOp_t)2000000077 : clbSum, c, nullptr);
       },
       everyone, "unknown reduction op 2000000077"},
      {"broadcast with a root out of range",
       [](clbComm_t c, int, bool wrong) { return clbBroadcast(src, dst, 8, clbInt32, wrong ? 7 : 0, c, nullptr); },
       everyone, "root=7 is out of range"},
      {"allGather with a NULL recv",
       [](clbComm_t c, int, bool wrong) { return clbAllGather(src, wrong ? nullptr : dst, 4, clbInt32, c, nullptr); },
       everyone, "recv buffer is NULL"},
      {"reduceScatter whose recv wraps the address space",
       [wraps](clbComm_t c, int, bool wrong) {
         return clbReduceScatter(src, wrong ? wraps : dst, 4, clbInt32, clbSum, c, nullptr);
       },
       everyone, "runs past the end of the address space"},
      {"allToAllv with NULL counts",
       [](clbComm_t c, int, bool wrong) {
         static const size_t counts[3] = {1, 1, 1}, displs[3] = {0, 1, 2};
         return clbAllToAllv(src, wrong ? nullptr : counts, displs, dst, counts, displs, clbInt32, c, nullptr);
       },
       everyone, "sendcounts is NULL"},
      {"gather with a root out of range",
       [](clbComm_t c, int, bool wrong) { return clbGather(src, dst, 2, clbInt32, wrong ? -3 : 0, c, nullptr); },
       everyone, "root=-3 is out of range"},
      {"send of an unknown type (rank 0 receives, rank 2 only hears of it)",
       [](clbComm_t c, int r, bool wrong) {
         return r == 0 ? clbRecv(dst, 4, clbInt32, kRefuser, c, nullptr)
                       : clbSend(src, 4, wrong ? (clbDataType_t)42 : clbInt32, 0, c, nullptr);
       },
       [](int r) { return r != 2; }, "unknown data type 42"},
      {"a group whose collective has an unknown op",
       [](clbComm_t c, int r, bool wrong) {
         if (clbGroupStart() != clbSuccess) return clbInternalError;
         if (r == 0) clbRecv(dst, 2, clbInt32, kRefuser, c, nullptr);
         if (r == kRefuser) clbSend(src, 2, clbInt32, 0, c, nullptr);
         clbAllReduce(src, dst + 8, 2, clbInt32, wrong ? (clbRedOp_t)2000000055 : clbMax, c, nullptr);
         return clbGroupEnd();
       },
       everyone, "unknown reduction op 2000000055"},
  };
}

class RefusedCalls : public ::testing::TestWithParam<Net> {};

// Rank 1 gets the call wrong; ranks 0 and 2 make it right (or, where they take no part, look at
// their communicator's status). Each case on communicators of its own, as each fails.
TEST_P(RefusedCalls, ThePeersAreToldAtOnceNamingTheRankAndTheReason) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    std::atomic<int> entered{0};
    auto errors = clbtest::runOver(GetParam(), 3, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
      const bool wrong = r == kRefuser;
      if (!wrong) {
        // The peers first, so that they are waiting when rank 1 refuses (the usual case; a peer
        // that comes later finds the notice as it starts to wait).
        entered++;
      } else {
        while (entered.load() < 2) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      const int64_t t0 = clb::nowMs();
      if (wrong) {
        const clbResult_t rc = k.call(comm, r, true);
        const std::string e = clbGetLastError();
        EXPECT_EQ(rc, clbInvalidArgument) << e;
        EXPECT_TRUE(contains(e, k.says)) << e;
        EXPECT_TRUE(contains(e, "its peers told at once")) << e;
        // The communicator failed with it: the next call, well formed, fails at once and says why.
        int32_t one = 1, out = 0;
        EXPECT_EQ(clbAllReduce(&one, &out, 1, clbInt32, clbSum, comm, nullptr), clbInvalidUsage);
        EXPECT_TRUE(contains(clbGetLastError(), k.says)) << clbGetLastError();
        return;
      }
      std::string e;
      clbResult_t rc = clbSuccess;
      if (k.takesPart(r)) {
        rc = k.call(comm, r, false);
        e = clbGetLastError();
      }
      // A rank whose own part completes by its arguments alone may return success before it hears
      // (a broadcast's rank that reads the root's post, a gather's sender): then its status says so.
      if (rc == clbSuccess) {
        while (clbCommGetAsyncError(comm, &rc) == clbSuccess && rc == clbSuccess && clb::nowMs() - t0 < kTimeoutMs)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        e = clbGetLastError();
      }
      const int64_t took = clb::nowMs() - t0;
      EXPECT_EQ(rc, clbRemoteError) << "rank " << r << ": " << e;
      EXPECT_LT(took, kToldWithinMs) << "rank " << r << " waited " << took << " ms: " << e;
      EXPECT_TRUE(contains(e, "rank 1 refused")) << "rank " << r << ": " << e;
      EXPECT_TRUE(contains(e, k.says)) << "rank " << r << ": " << e;
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

// A refusal of usage changes nothing: a second thread's call while the first one's runs is
// refused on that rank only, and the communicator goes on (no peer is told anything).
TEST_P(RefusedCalls, AUsageRefusalTellsNobodyAndTheCommunicatorGoesOn) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {r, r, r, r}, y[4] = {};
    // A send to this rank itself outside a group is refused with clbInvalidUsage.
    EXPECT_EQ(clbSend(x, 4, clbInt32, r, comm, nullptr), clbInvalidUsage);
    ASSERT_EQ(clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    for (int i = 0; i < 4; i++) EXPECT_EQ(y[i], 1) << i;
    clbResult_t async = clbSuccess;
    EXPECT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
    EXPECT_EQ(async, clbSuccess) << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// clbCommFail: a rank that cannot go on (a refusal of its own, a binding's check) tells its peers
// with its reason; a blocked peer's call ends at once.
TEST_P(RefusedCalls, CommFailTellsThePeersTheReason) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_EQ(clbCommFail(comm, nullptr), clbInvalidArgument);
      EXPECT_TRUE(contains(clbGetLastError(), "reason is NULL")) << clbGetLastError();
      ASSERT_EQ(clbCommFail(comm, "rank 1 refused its allReduce: the buffer is a heap buffer"), clbSuccess);
      int32_t a = 1, b = 0;
      EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "heap buffer")) << clbGetLastError();
      return;
    }
    const int64_t t0 = clb::nowMs();
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbRemoteError);
    const std::string e = clbGetLastError();
    EXPECT_LT(clb::nowMs() - t0, kToldWithinMs) << e;
    EXPECT_TRUE(contains(e, "rank 1 refused its allReduce: the buffer is a heap buffer")) << e;
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// clbCommRefuse: a call a binding refuses above the library (its own check of the arguments) fails
// the communicator and tells the peers as Colibri's own refusals do; the refusing rank's message
// says so; a second thread's refusal while a call runs changes nothing.
TEST_P(RefusedCalls, CommRefuseTellsThePeersAndChangesNothingWhileAnotherThreadIsInACall) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 1) {
      // While rank 1's other thread is in an all-reduce (which rank 0 joins later), the refusal is
      // that usage refusal and the all-reduce completes.
      int32_t a = 3, b = 0;
      std::thread inCall([&] {
        EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(clbCommRefuse(comm, "allReduce", 1, "a heap buffer"), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "allReduce")) << clbGetLastError();
      inCall.join();
      EXPECT_EQ(b, 5);
      ASSERT_EQ(clbCommRefuse(comm, "allReduce", 1, "the send buffer is a heap buffer"), clbInvalidArgument);
      const std::string own = clbGetLastError();
      EXPECT_TRUE(contains(own, "allReduce: the send buffer is a heap buffer. The communicator fails")) << own;
      EXPECT_TRUE(contains(own, "its peers told at once")) << own;
      EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "heap buffer")) << clbGetLastError();
      return;
    }
    int32_t a = 2, b = 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    ASSERT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 5);
    const int64_t t0 = clb::nowMs();
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbRemoteError);
    const std::string e = clbGetLastError();
    EXPECT_LT(clb::nowMs() - t0, kToldWithinMs) << e;
    EXPECT_TRUE(contains(e, "rank 1 refused its allReduce: the send buffer is a heap buffer")) << e;
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A communicator of one rank has no peers: a binding's refusal changes nothing, and its message is
// the call and the reason.
TEST_P(RefusedCalls, CommRefuseOnOneRankChangesNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 1, kTimeoutMs, nullptr, [&](int, clbComm_t comm) {
    EXPECT_EQ(clbCommRefuse(comm, "send", 0, "peer 3 is out of range"), clbInvalidArgument);
    EXPECT_EQ(std::string(clbGetLastError()), "send: peer 3 is out of range");
    // No name, no reason: still a refusal, said as such.
    EXPECT_EQ(clbCommRefuse(comm, nullptr, 0, ""), clbInvalidArgument);
    EXPECT_EQ(std::string(clbGetLastError()), "call: (no reason given)");
    int32_t a = 4, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 4);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TRANSPORTS(RefusedCalls);

}  // namespace
