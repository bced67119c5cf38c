// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Attacks on "a call refused on one rank tells its peers at once" (refusal_test.cc): a peer still
// in the call before the refused one, a second thread's bad call while the first one's runs, rings
// that forward the reason, huge and binary reasons, refusals after a close, groups over two
// communicators, count 0, and refusals of other codes than INVALID_ARGUMENT.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
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
void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

constexpr int64_t kTimeoutMs = 30000;
constexpr int64_t kToldWithinMs = 8000;

class RefusalAttack : public ::testing::TestWithParam<Net> {};

// Rank r's part of a call that completes on rank 0 before rank 0 refuses its next one: "" where it
// completed with the right data, else what went wrong (rank 0 asserts its own success).
using PreviousCall = std::function<std::string(int r, clbComm_t comm)>;

// Rank 0's refusal of its next call: a bad reduction op, refused by Colibri.
void refuseABadOp(clbComm_t comm) {
  int32_t one = 1, out = 0;
  EXPECT_EQ(clbAllReduce(&one, &out, 1, clbInt32, (clbRedOp_t)77, comm, nullptr), clbInvalidArgument);
}

// The driver of the cases below, `iterations` times: rank 0 makes `call`, which completes on it,
// then refuses its next call (`refuse`). Rank 1, still in `call` (it starts `peerDelayMs` later),
// must complete it with its data; only its next call may fail. `prepare` sets the buffers up
// before each iteration.
void expectThePeerCompletesThePreviousCall(Net net, int iterations, const char* what, int peerDelayMs,
                                           const std::function<void(int, clbConfig_t*)>& configure,
                                           const std::function<void()>& prepare, const PreviousCall& call,
                                           const std::function<void(clbComm_t)>& refuse) {
  int failures = 0;
  std::string firstFailure;
  for (int iter = 0; iter < iterations; iter++) {
    prepare();
    std::string peerError = "rank 1 did not finish";
    auto errors = clbtest::runOver(net, 2, kTimeoutMs, configure, [&](int r, clbComm_t comm) {
      if (r == 0) {
        ASSERT_EQ(call(0, comm), "");
        refuse(comm);
        return;
      }
      sleepMs(peerDelayMs);
      peerError = call(1, comm);
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
    if (!peerError.empty()) {
      failures++;
      if (firstFailure.empty()) firstFailure = peerError;
    }
  }
  EXPECT_EQ(failures, 0) << "rank 1's " << what << " (completed on rank 0 before rank 0 refused its NEXT call) failed "
                         << failures << " of " << iterations << " times; first: " << firstFailure;
}

// "" or the error of a call that failed, or `wrong` where it returned success with wrong data.
std::string outcome(clbResult_t rc, bool right, const char* wrong) {
  if (rc != clbSuccess) return clbGetLastError();
  return right ? "" : wrong;
}

// A rank completes a broadcast, then refuses its next call at once. The refusal is announced with
// the number of the last collective the refusing rank completed, which the transports read as
// "it failed in this collective" unless the refused call takes its own number (tellRefusal).
TEST_P(RefusalAttack, APeerStillFinishingTheCallBeforeTheRefusedOneCompletesIt) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  constexpr size_t kCount = 8u << 20;  // 32 MB of int32: more than the kernel and the slots hold
  std::vector<std::vector<int32_t>> bufs(2);
  expectThePeerCompletesThePreviousCall(
      GetParam(), 4, "broadcast", 100, nullptr,
      [&] {
        bufs.assign(2, std::vector<int32_t>(kCount));
        for (size_t i = 0; i < kCount; i++) bufs[0][i] = (int32_t)(i * 7 + 1);
      },
      [&](int r, clbComm_t comm) {
        auto& b = bufs[r];
        const clbResult_t rc = clbBroadcast(b.data(), b.data(), kCount, clbInt32, 0, comm, nullptr);
        bool same = true;
        for (size_t i = 0; i < kCount && same && rc == clbSuccess; i++) same = b[i] == (int32_t)(i * 7 + 1);
        return outcome(rc, same, "broadcast returned success with wrong data");
      },
      refuseABadOp);
}

// The same for point-to-point: a send that completed on rank 0, then a refused call; rank 1's
// matching receive must get the data.
TEST_P(RefusalAttack, AReceiveOfASendThatCompletedBeforeTheRefusalGetsItsData) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  constexpr size_t kCount = 8u << 20;
  std::vector<int32_t> src(kCount), dst;
  for (size_t i = 0; i < kCount; i++) src[i] = (int32_t)(i ^ 0x5a5a);
  expectThePeerCompletesThePreviousCall(
      GetParam(), 4, "receive", 100, nullptr, [&] { dst.assign(kCount, -1); },
      [&](int r, clbComm_t comm) {
        if (r == 0) return outcome(clbSend(src.data(), kCount, clbInt32, 1, comm, nullptr), true, "");
        const clbResult_t rc = clbRecv(dst.data(), kCount, clbInt32, 0, comm, nullptr);
        return outcome(rc, rc == clbSuccess && memcmp(src.data(), dst.data(), kCount * 4) == 0,
                       "recv returned success with wrong data");
      },
      refuseABadOp);
}

// The other side of the case above: rank 0 sends 1 MiB to each of three peers that are alive but
// receive nothing, then refuses a call. Its destroy tries to deliver what it sent (as above), but
// gives up after a moment: it waited the whole timeout for each such peer (a helper's attack: 5 s
// per peer at a 5 s timeout, 15 s with three).
TEST_P(RefusalAttack, ADestroyAfterARefusalWaitsOnlyAMomentForPeersThatReceiveNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  constexpr int kRanks = 4;
  constexpr int64_t kTimeoutMs = 6000;
  constexpr size_t kCount = (1u << 20) / sizeof(int32_t);
  std::vector<int32_t> src(kCount, 3);
  std::atomic<bool> destroyed{false};
  std::atomic<int64_t> destroyMs{-1};
  auto errors = clbtest::runOver(GetParam(), kRanks, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 0) {
      for (int p = 1; p < kRanks; p++)
        EXPECT_EQ(clbSend(src.data(), kCount, clbInt32, p, comm, nullptr), clbSuccess) << clbGetLastError();
      refuseABadOp(comm);
      const int64_t t0 = clb::nowMs();
      EXPECT_EQ(clbCommDestroy(comm), clbSuccess) << clbGetLastError();  // the runner's destroy then finds it gone
      destroyMs = clb::nowMs() - t0;
      destroyed = true;
      return;
    }
    const int64_t t0 = clb::nowMs();  // alive, receiving nothing, until rank 0's destroy returned
    while (!destroyed && clb::nowMs() - t0 < 4 * kTimeoutMs) sleepMs(10);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  ASSERT_TRUE(destroyed.load()) << "rank 0's destroy did not return within " << 4 * kTimeoutMs << " ms";
  EXPECT_LT(destroyMs.load(), kTimeoutMs / 2) << "rank 0's destroy waited for its idle peers";
  std::cerr << "[ info ] rank 0's destroy took " << destroyMs.load() << " ms\n";
}

// As above with ring all-reduces, refused by Colibri (a bad op) and by a binding above it
// (clbCommRefuse, as the Java API and the NCCL drop-in refuse the arguments they check): rank 0
// completes all-reduce k, then refuses its next call; rank 1's all-reduce k must not fail.
TEST_P(RefusalAttack, APeerStillFinishingAnAllReduceCompletesIt) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  constexpr size_t kCount = 4u << 20;
  std::vector<std::vector<int32_t>> bufs(2);
  const PreviousCall allReduce = [&](int r, clbComm_t comm) {
    auto& b = bufs[r];
    const clbResult_t rc = clbAllReduce(b.data(), b.data(), kCount, clbInt32, clbSum, comm, nullptr);
    bool same = true;
    for (size_t i = 0; i < kCount && same && rc == clbSuccess; i++) same = b[i] == 2;
    return outcome(rc, same, "allReduce returned success with wrong data");
  };
  const auto ring = [](int, clbConfig_t* cfg) { cfg->algorithm = clbAlgoRing; };
  const auto prepare = [&] { bufs.assign(2, std::vector<int32_t>(kCount, 1)); };
  expectThePeerCompletesThePreviousCall(GetParam(), 6, "allReduce", 0, ring, prepare, allReduce, refuseABadOp);
  expectThePeerCompletesThePreviousCall(GetParam(), 6, "allReduce", 0, ring, prepare, allReduce, [](clbComm_t comm) {
    EXPECT_EQ(clbCommRefuse(comm, "allReduce", 1, "a heap buffer"), clbInvalidArgument) << clbGetLastError();
  });
}

// A rank that passes a stream with host buffers on a host without a CUDA driver is refused before
// anything moves with clbSystemError ("no CUDA driver"; clbUnsupported on a build without CUDA),
// after the call took its number: the peers are told at once all the same, within that number.
TEST_P(RefusalAttack, AnUnsupportedRefusalOfOneRankTellsThePeers) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(cuda);
    GTEST_SKIP() << "needs a host without a CUDA driver (the refusal is its clbSystemError, or clbUnsupported)";
  }
  auto errors = clbtest::runOver(GetParam(), 2, 12000, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
    if (r == 1) {
      sleepMs(50);
      const clbResult_t rc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, reinterpret_cast<void*>(0x1234));
      EXPECT_NE(rc, clbSuccess);
      std::cerr << "[ info ] rank 1: " << rc << " " << clbGetLastError() << "\n";
      sleepMs(5000);  // alive: only a notice can end rank 0's wait early
      return;
    }
    const int64_t t0 = clb::nowMs();
    const clbResult_t rc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
    std::cerr << "[ info ] rank 0: " << rc << " after " << clb::nowMs() - t0 << " ms: " << clbGetLastError() << "\n";
    const int64_t took = clb::nowMs() - t0;
    EXPECT_EQ(rc, clbRemoteError) << clbGetLastError();
    EXPECT_LT(took, 3000) << "rank 0 waited " << took << " ms for a call rank 1 refused: " << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Every rank in the call, a ring of 6: the ranks that share no connection with the refusing one
// hear of it through the forwarding, with its reason.
TEST_P(RefusalAttack, ASixRankRingForwardsTheReason) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 6, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
    if (r == 1) {
      sleepMs(100);
      EXPECT_EQ(clbAllReduce(x, y, 4, clbInt32, (clbRedOp_t)2000000091, comm, nullptr), clbInvalidArgument);
      return;
    }
    const int64_t t0 = clb::nowMs();
    const clbResult_t rc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
    const std::string e = clbGetLastError();
    EXPECT_EQ(rc, clbRemoteError) << "rank " << r << ": " << e;
    EXPECT_LT(clb::nowMs() - t0, kToldWithinMs) << "rank " << r << ": " << e;
    EXPECT_TRUE(contains(e, "rank 1 refused")) << "rank " << r << ": " << e;
    EXPECT_TRUE(contains(e, "unknown reduction op 2000000091")) << "rank " << r << ": " << e;
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A send refused on rank 1 to rank 3, which waits in the matching receive; ranks 0 and 2 (rank
// 3's only ring neighbours, over socket) take no part and make no call for a while. Rank 3 must
// be told at once.
TEST_P(RefusalAttack, APointToPointRefusalReachesAPeerThatIsNoRingNeighbour) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 4, 20000, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
    if (r == 1) {
      sleepMs(100);
      EXPECT_EQ(clbSend(x, 4, (clbDataType_t)42, 3, comm, nullptr), clbInvalidArgument);
      sleepMs(12000);  // alive, busy elsewhere: its destroy's closed connections say nothing yet
      return;
    }
    if (r == 3) {
      const int64_t t0 = clb::nowMs();
      const clbResult_t rc = clbRecv(y, 4, clbInt32, 1, comm, nullptr);
      const int64_t took = clb::nowMs() - t0;
      EXPECT_EQ(rc, clbRemoteError) << clbGetLastError();
      EXPECT_LT(took, kToldWithinMs) << "rank 3 waited " << took << " ms: " << clbGetLastError();
      EXPECT_TRUE(contains(clbGetLastError(), "rank 1 refused")) << clbGetLastError();
      return;
    }
    sleepMs(12000);  // ranks 0 and 2: busy elsewhere
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Two ranks refuse the same call at once: both announce; the third is told, nobody hangs.
TEST_P(RefusalAttack, TwoRanksRefusingAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::atomic<int> ready{0};
  auto errors = clbtest::runOver(GetParam(), 3, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
    ready++;
    while (ready.load() < 3) std::this_thread::yield();
    if (r != 0) {
      EXPECT_EQ(clbAllReduce(x, y, 4, clbInt32, (clbRedOp_t)(60 + r), comm, nullptr), clbInvalidArgument);
      clbResult_t async = clbSuccess;
      EXPECT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
      EXPECT_NE(async, clbSuccess);
      return;
    }
    const int64_t t0 = clb::nowMs();
    const clbResult_t rc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
    const std::string e = clbGetLastError();
    EXPECT_EQ(rc, clbRemoteError) << e;
    EXPECT_LT(clb::nowMs() - t0, kToldWithinMs) << e;
    EXPECT_TRUE((contains(e, "rank 1 refused") && contains(e, "op 61")) ||
                (contains(e, "rank 2 refused") && contains(e, "op 62")))
        << e;
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// clbCommFail with a reason far longer than any buffer, full of control characters and bytes
// that are no UTF-8: the peer's message is cut safely and still names the rank.
TEST_P(RefusalAttack, CommFailWithAHugeBinaryReason) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::string reason = "HEAD-";
  for (int i = 0; i < 100000; i++) reason.push_back((char)(1 + (i * 37) % 255));  // no NUL inside
  auto errors = clbtest::runOver(GetParam(), 3, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 2) {
      sleepMs(100);
      ASSERT_EQ(clbCommFail(comm, reason.c_str()), clbSuccess) << clbGetLastError();
      // Once more: the first failure wins, nothing changes.
      EXPECT_EQ(clbCommFail(comm, "second"), clbSuccess) << clbGetLastError();
      int32_t a = 1, b = 0;
      EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbInvalidUsage);
      const std::string e = clbGetLastError();
      EXPECT_TRUE(contains(e, "HEAD-")) << e.size();
      EXPECT_FALSE(contains(e, "second"));
      EXPECT_LT(e.size(), 4096u);
      return;
    }
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbRemoteError);
    const std::string e = clbGetLastError();
    EXPECT_TRUE(contains(e, "rank 2")) << e;
    EXPECT_TRUE(contains(e, "HEAD-")) << e;
    EXPECT_LT(e.size(), 4096u);
    clbResult_t async = clbSuccess;
    EXPECT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
    EXPECT_EQ(async, clbRemoteError);
    EXPECT_TRUE(contains(clbGetLastError(), "HEAD-")) << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// clbCommFail on NULL and on a destroyed communicator: refused, nothing read.
TEST_P(RefusalAttack, CommFailOnNullAndDestroyed) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  EXPECT_EQ(clbCommFail(nullptr, "x"), clbInvalidArgument);
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    clbComm_t child = nullptr;
    ASSERT_EQ(clbCommSplit(comm, 0, r, nullptr, &child), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbCommDestroy(child), clbSuccess) << clbGetLastError();
    EXPECT_EQ(clbCommFail(child, "after destroy"), clbInvalidArgument);
    EXPECT_EQ(clbCommFail(comm, ""), clbInvalidArgument);
    EXPECT_EQ(clbCommRefuse(nullptr, "allReduce", 1, "x"), clbInvalidArgument);
    EXPECT_EQ(clbCommRefuse(child, "allReduce", 1, "after destroy"), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "not alive")) << clbGetLastError();
    // The parent goes on.
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 2);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A refusal on one communicator; another one over the same ranks goes on and closes normally
// (its 'C' notices are no failure).
TEST_P(RefusalAttack, ANormalCloseOfAnotherCommunicatorAfterARefusal) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 3, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    clbComm_t other = nullptr;
    ASSERT_EQ(clbCommSplit(comm, 0, r, nullptr, &other), clbSuccess) << clbGetLastError();
    int32_t a = 1, b = 0;
    if (r == 1)
      EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, (clbRedOp_t)70, comm, nullptr), clbInvalidArgument);
    else
      EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbRemoteError);
    for (int i = 0; i < 3; i++) {
      b = 0;
      EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, other, nullptr), clbSuccess) << clbGetLastError();
      EXPECT_EQ(b, 3);
    }
    if (r == 0) sleepMs(200);  // destroys last: hears the others' closes
    clbResult_t async = clbSuccess;
    EXPECT_EQ(clbCommGetAsyncError(other, &async), clbSuccess);
    EXPECT_EQ(async, clbSuccess) << clbGetLastError();
    EXPECT_EQ(clbCommDestroy(other), clbSuccess) << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A group over two communicators, one thread per rank: rank 1's collective on the second one has a
// bad op. The peers (whose groups run both) must end quickly, on both communicators.
TEST_P(RefusalAttack, AGroupOverTwoCommunicators) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 3, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    clbComm_t other = nullptr;
    ASSERT_EQ(clbCommSplit(comm, 0, r, nullptr, &other), clbSuccess) << clbGetLastError();
    int32_t a[2] = {1, 1}, b[2] = {}, c[2] = {};
    if (r == 1) sleepMs(100);
    const int64_t t0 = clb::nowMs();
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    clbAllReduce(a, b, 2, clbInt32, clbSum, comm, nullptr);
    clbAllReduce(a, c, 2, clbInt32, r == 1 ? (clbRedOp_t)99 : clbSum, other, nullptr);
    const clbResult_t rc = clbGroupEnd();
    const std::string e = clbGetLastError();
    if (r == 1) {
      EXPECT_EQ(rc, clbInvalidArgument) << e;
    } else {
      EXPECT_EQ(rc, clbRemoteError) << e;
      EXPECT_LT(clb::nowMs() - t0, kToldWithinMs) << e;
      EXPECT_TRUE(contains(e, "rank 1 refused")) << e;
    }
    for (clbComm_t x : {comm, other}) {
      clbResult_t async = clbSuccess;
      EXPECT_EQ(clbCommGetAsyncError(x, &async), clbSuccess);
      EXPECT_NE(async, clbSuccess) << "rank " << r;
    }
    clbCommDestroy(other);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Count 0 with a bad op: refused (and the communicator failed) on rank 1; the peers' count-0 calls
// need nothing; their next call is told.
TEST_P(RefusalAttack, ACountZeroRefusal) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t a = 1, b = 0;
    if (r == 1) {
      EXPECT_EQ(clbAllReduce(nullptr, nullptr, 0, clbInt32, (clbRedOp_t)80, comm, nullptr), clbInvalidArgument);
      return;
    }
    EXPECT_EQ(clbAllReduce(nullptr, nullptr, 0, clbInt32, clbSum, comm, nullptr), clbSuccess);
    const int64_t t0 = clb::nowMs();
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbRemoteError) << clbGetLastError();
    EXPECT_LT(clb::nowMs() - t0, kToldWithinMs);
    EXPECT_TRUE(contains(clbGetLastError(), "op 80")) << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A refusal on a communicator whose peer destroyed it already: no crash, no hang.
TEST_P(RefusalAttack, ARefusalAfterThePeerClosed) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 0) return;  // destroys at once
    sleepMs(500);
    int32_t a = 1, b = 0;
    const int64_t t0 = clb::nowMs();
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, (clbRedOp_t)81, comm, nullptr), clbInvalidArgument);
    EXPECT_EQ(clbCommFail(comm, "again"), clbSuccess);
    EXPECT_LT(clb::nowMs() - t0, 2000);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Thread A of rank 0 is in an allReduce (rank 1 comes late); thread B of rank 0 calls allReduce
// with a bad op meanwhile. "A refusal of usage (another thread's call in progress) changes
// nothing" — but the op is checked before the call is taken. Whatever B gets, nobody may hang:
// A's call and rank 1's call must end long before the timeout.
TEST_P(RefusalAttack, ASecondThreadsBadOpWhileTheFirstIsInACall) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::string bSays, aSays, peerSays;
  clbResult_t bRc = clbSuccess, aRc = clbSuccess, peerRc = clbSuccess;
  int64_t aTook = 0;
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {1, 1, 1, 1}, y[4] = {};
    if (r == 1) {
      sleepMs(1500);
      peerRc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
      peerSays = clbGetLastError();
      return;
    }
    std::thread b([&] {
      sleepMs(300);
      int32_t p[4] = {}, q[4] = {};
      bRc = clbAllReduce(p, q, 4, clbInt32, (clbRedOp_t)77, comm, nullptr);
      bSays = clbGetLastError();
    });
    const int64_t t0 = clb::nowMs();
    aRc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
    aSays = clbGetLastError();
    aTook = clb::nowMs() - t0;
    b.join();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_LT(aTook, kToldWithinMs) << aSays;
  std::cerr << "[ info ] B: " << bRc << " " << bSays << "\n[ info ] A: " << aRc << " (" << aTook << " ms) " << aSays
            << "\n[ info ] peer: " << peerRc << " " << peerSays << "\n";
  // The doc: a call made while another thread's call is in progress is a usage refusal that
  // changes nothing; then A's call and the peer's complete.
  EXPECT_EQ(aRc == clbSuccess, peerRc == clbSuccess) << "the two ranks disagree on how the same allReduce ended";
  EXPECT_EQ(bRc, clbInvalidUsage) << bSays;
  EXPECT_EQ(aRc, clbSuccess) << aSays;
}

// The same with a point-to-point refusal on thread B (a send of an unknown type) while thread A
// is in an all-reduce.
TEST_P(RefusalAttack, ASecondThreadsBadSendWhileTheFirstIsInACall) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::string bSays, aSays, peerSays;
  clbResult_t bRc = clbSuccess, aRc = clbSuccess, peerRc = clbSuccess;
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t x[4] = {1, 1, 1, 1}, y[4] = {};
    if (r == 1) {
      sleepMs(1500);
      peerRc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
      peerSays = clbGetLastError();
      return;
    }
    std::thread b([&] {
      sleepMs(300);
      int32_t p[4] = {};
      bRc = clbSend(p, 4, (clbDataType_t)42, 1, comm, nullptr);
      bSays = clbGetLastError();
    });
    aRc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
    aSays = clbGetLastError();
    b.join();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  // Whatever B gets, the two ranks must agree on how the all-reduce ended.
  EXPECT_EQ(aRc == clbSuccess, peerRc == clbSuccess)
      << "rank 0's allReduce: " << aRc << " " << aSays << "\nrank 1's allReduce: " << peerRc << " " << peerSays
      << "\nthread B: " << bRc << " " << bSays;
  EXPECT_EQ(bRc, clbInvalidUsage) << bSays;
}

// No refusal at all: rank 1 destroys its communicator without a call while rank 0 waits in an
// all-reduce (the fallback a refusing rank's destroy relies on where no notice is heard).
TEST_P(RefusalAttack, APeerThatClosesWhileTheOtherWaits) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, 10000, nullptr, [&](int r, clbComm_t comm) {
    if (r == 1) {
      sleepMs(500);  // rank 0 is waiting by now
      return;
    }
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
    const int64_t t0 = clb::nowMs();
    EXPECT_EQ(clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr), clbRemoteError) << clbGetLastError();
    EXPECT_LT(clb::nowMs() - t0, 3000) << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Transports, RefusalAttack,
                         ::testing::Values(Net::kShm, Net::kSocket, Net::kSocketTls, Net::kVerbs),
                         ::clbtest::netParamName);

}  // namespace
