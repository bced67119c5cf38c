// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The meeting of ranks sharing one CUDA context before a batch of device point-to-point
// operations (src/device/peer_meet.h), on the host alone: a batch's component (its peers, their
// peers, ...) arrives before any of it launches and launches before any of it leaves; ranks
// outside the component are not waited for; a peer still in an earlier call is waited for;
// batches that name each other but do not pair up are refused on both sides, nothing launched;
// a peer that never comes is named at the timeout; an abort wakes the waiter.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "device/peer_meet.h"
#include "tests/test_ranks.h"

namespace {

using clb::PeerMeet;
using Clock = std::chrono::steady_clock;

void withRanks(int n, int64_t timeoutMs, const std::function<void(int, clbComm*)>& body) {
  auto errors = clbtest::runThreadRanks(
      n, [&](int, clbConfig_t* cfg) { cfg->timeoutMs = timeoutMs; }, [&](int r, clbComm_t c) { body(r, c); });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

PeerMeet::Edge edge(int peer, std::vector<uint64_t> sends, std::vector<uint64_t> recvs) {
  PeerMeet::Edge e;
  e.peer = peer;
  e.sends = std::move(sends);
  e.recvs = std::move(recvs);
  return e;
}

// A send and a receive of `bytes` with each peer (a ring exchange's batch, or a pair's).
std::vector<PeerMeet::Edge> exchange(std::vector<int> peers, uint64_t bytes = 64) {
  std::vector<PeerMeet::Edge> v;
  for (int p : peers) v.push_back(edge(p, {bytes}, {bytes}));
  return v;
}

int64_t msSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Two pairs, (0, 1) and (2, 3), each in its own rounds at its own pace; and a ring over all four.
// Whoever launches finds every rank of its component in the call; whoever leaves finds every one
// launched. The pairs never wait for each other (rank 3 is slow, rank 0 is not held up by it).
TEST(PeerMeet, ComponentsArriveBeforeLaunchingAndLaunchBeforeLeaving) {
  const int n = 4, rounds = 200;
  auto meet = PeerMeet::join(0x5eed);
  std::vector<std::atomic<int>> arrived(n), launched(n);
  std::atomic<int> violations{0};
  std::atomic<int64_t> pairZeroDoneMs{-1}, pairTwoDoneMs{-1};
  const Clock::time_point t0 = Clock::now();
  withRanks(n, 20000, [&](int r, clbComm* comm) {
    const int partner = r ^ 1;
    for (int k = 1; k <= rounds; k++) {
      if (r == 3) std::this_thread::sleep_for(std::chrono::microseconds(1500));  // the slow pair
      arrived[r].store(k);
      if (meet->arrive(comm, exchange({partner}), 0) != clbSuccess) violations++;
      if (arrived[partner].load() < k) violations++;
      launched[r].store(k);
      if (meet->launched(comm) != clbSuccess) violations++;
      if (launched[partner].load() < k) violations++;
    }
    (r < 2 ? pairZeroDoneMs : pairTwoDoneMs).store(msSince(t0));
    // A ring: every rank's component is all four (0 - 1 - 2 - 3 - 0).
    for (int k = rounds + 1; k <= rounds + 50; k++) {
      if (k % 4 == r) std::this_thread::sleep_for(std::chrono::microseconds(300));
      arrived[r].store(k);
      if (meet->arrive(comm, exchange({(r + 1) % n, (r + n - 1) % n}), 0) != clbSuccess) violations++;
      for (int p = 0; p < n; p++)
        if (arrived[p].load() < k) violations++;  // p is a peer's peer: it must be in the call too
      launched[r].store(k);
      if (meet->launched(comm) != clbSuccess) violations++;
      for (int p = 0; p < n; p++)
        if (launched[p].load() < k) violations++;
    }
  });
  EXPECT_EQ(violations.load(), 0);
  // 200 rounds of 1.5 ms: the slow pair took 300 ms or more; the other did not wait for it.
  EXPECT_GE(pairTwoDoneMs.load(), 300);
  EXPECT_LT(pairZeroDoneMs.load(), pairTwoDoneMs.load());
}

// 0 - 1 - 2 - 3 as a pipeline whose middle ranks talk to both neighbours in one batch: rank 0
// launches only once rank 3, its peer's peer's peer, is in the call.
TEST(PeerMeet, AChainWaitsForItsFarEnd) {
  auto meet = PeerMeet::join(0xc4a1);
  std::atomic<int64_t> threeArrivedMs{-1}, zeroWentMs{-1};
  const Clock::time_point t0 = Clock::now();
  withRanks(4, 20000, [&](int r, clbComm* comm) {
    std::vector<PeerMeet::Edge> e;
    if (r > 0) e.push_back(edge(r - 1, {}, {4096}));
    if (r < 3) e.push_back(edge(r + 1, {4096}, {}));
    if (r == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      threeArrivedMs.store(msSince(t0));
    }
    clbResult_t rc = meet->arrive(comm, e, 0);
    if (r == 0) zeroWentMs.store(msSince(t0));
    EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
    if (rc == clbSuccess) EXPECT_EQ(meet->launched(comm), clbSuccess) << clbGetLastError();
  });
  EXPECT_GE(zeroWentMs.load(), threeArrivedMs.load());
}

// Rank 1 first exchanges with rank 2, then with rank 0; rank 0 arrives for rank 1 at once and
// waits while rank 1 is in its earlier call.
TEST(PeerMeet, APeerStillInAnEarlierCallIsWaitedFor) {
  auto meet = PeerMeet::join(0xea41);
  withRanks(3, 20000, [&](int r, clbComm* comm) {
    std::vector<std::vector<int>> calls = r == 0   ? std::vector<std::vector<int>>{{1}}
                                          : r == 1 ? std::vector<std::vector<int>>{{2}, {0}}
                                                   : std::vector<std::vector<int>>{{1}};
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (const auto& peers : calls) {
      clbResult_t rc = meet->arrive(comm, exchange(peers), 0);
      EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
      if (rc == clbSuccess) EXPECT_EQ(meet->launched(comm), clbSuccess) << clbGetLastError();
    }
  });
}

// Rank 0 sends two messages to rank 1 in one batch, rank 1 receives one: refused on both with
// what each posted; then sizes that differ; then a batch that pairs up still goes.
TEST(PeerMeet, BatchesThatDoNotPairUpAreRefusedOnBothSidesNamingWhatDiffers) {
  auto meet = PeerMeet::join(0xbad0);
  withRanks(3, 20000, [&](int r, clbComm* comm) {
    if (r == 2) return;
    const int peer = 1 - r;
    clbResult_t rc = meet->arrive(comm, {r == 0 ? edge(peer, {1024, 1024}, {}) : edge(peer, {}, {1024})}, 0);
    std::string msg = clbGetLastError();
    EXPECT_EQ(rc, clbInvalidUsage) << msg;
    EXPECT_NE(msg.find("2 sends (1024, 1024 bytes) to rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1 receive (1024 bytes) from rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("pair up call for call"), std::string::npos) << msg;
    rc = meet->arrive(comm, {r == 0 ? edge(peer, {}, {800}) : edge(peer, {400}, {})}, 0);
    msg = clbGetLastError();
    EXPECT_EQ(rc, clbInvalidUsage) << msg;
    EXPECT_NE(msg.find("receive (800 bytes)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("send (400 bytes)"), std::string::npos) << msg;
    rc = meet->arrive(comm, exchange({peer}, 512), 0);
    EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
    if (rc == clbSuccess) EXPECT_EQ(meet->launched(comm), clbSuccess) << clbGetLastError();
  });
}

// A mismatch between two ranks fails the ranks already there with them: rank 2, which pairs up
// with rank 1 and arrived first, is refused too rather than left waiting for rank 1's kernel.
TEST(PeerMeet, AMismatchFailsTheWholeComponent) {
  auto meet = PeerMeet::join(0xbad1);
  withRanks(3, 20000, [&](int r, clbComm* comm) {
    std::vector<PeerMeet::Edge> e;
    if (r == 0) e = {edge(1, {64}, {})};
    if (r == 1) e = {edge(0, {}, {128}), edge(2, {64}, {})};
    if (r == 2) e = {edge(1, {}, {64})};
    std::this_thread::sleep_for(std::chrono::milliseconds(50 * (2 - r)));  // 2, then 1, then 0
    clbResult_t rc = meet->arrive(comm, e, 0);
    const std::string msg = clbGetLastError();
    EXPECT_EQ(rc, clbInvalidUsage) << "rank " << r << ": " << msg;
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  });
}

// Rank 1 refuses its call (an error of its own, before arriving): rank 0, already waiting for it,
// and rank 2, arriving later with the call that pairs with it, fail at once with its reason
// rather than at the timeout; rank 1's next call meets as usual.
TEST(PeerMeet, ARefusalFailsThePeersWaitingAndArrivingForIt) {
  auto meet = PeerMeet::join(0x4ef0);
  std::atomic<int> refused{0};
  withRanks(3, 20000, [&](int r, clbComm* comm) {
    const Clock::time_point t0 = Clock::now();
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 waits by then
      meet->refuse(comm, exchange({0, 2}), "its own reason");
      refused.store(1);
    } else {
      if (r == 2)
        while (!refused.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      clbResult_t rc = meet->arrive(comm, exchange({1}), 0);
      const std::string msg = clbGetLastError();
      EXPECT_EQ(rc, clbInvalidUsage) << "rank " << r << ": " << msg;
      EXPECT_NE(msg.find("rank 1 refused"), std::string::npos) << msg;
      EXPECT_NE(msg.find("its own reason"), std::string::npos) << msg;
      EXPECT_LT(msSince(t0), 5000);
    }
    // Everyone past the refusal: the next calls meet (rank 1's arrival replaces its refusal).
    static std::atomic<int> past{0};
    past++;
    while (past.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    clbResult_t rc = meet->arrive(comm, exchange(r == 1 ? std::vector<int>{0, 2} : std::vector<int>{1}), 0);
    EXPECT_EQ(rc, clbSuccess) << "rank " << r << ": " << clbGetLastError();
    if (rc == clbSuccess) EXPECT_EQ(meet->launched(comm), clbSuccess) << clbGetLastError();
  });
}

TEST(PeerMeet, APeerThatNeverComesIsNamedAtTheTimeoutAndWarnedAboutBefore) {
  auto meet = PeerMeet::join(0x71e0);
  testing::internal::CaptureStderr();
  withRanks(3, 600, [&](int r, clbComm* comm) {
    if (r != 0) return;  // rank 2 never makes its call; rank 1 neither
    const Clock::time_point t0 = Clock::now();
    clbResult_t rc = meet->arrive(comm, exchange({2}), 200);
    const std::string msg = clbGetLastError();
    EXPECT_EQ(rc, clbTimeout) << msg;
    EXPECT_NE(msg.find("for rank(s) 2,"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nothing was launched"), std::string::npos) << msg;
    EXPECT_GE(msSince(t0), 600);
    EXPECT_LT(msSince(t0), 3000);
  });
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("has waited"), std::string::npos) << log;
}

TEST(PeerMeet, AbortWakesARankThatWaits) {
  auto meet = PeerMeet::join(0xab07);
  withRanks(2, 20000, [&](int r, clbComm* comm) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      clbCommAbort(comm);
      return;
    }
    const Clock::time_point t0 = Clock::now();
    EXPECT_EQ(meet->arrive(comm, exchange({1}), 0), clbAborted) << clbGetLastError();
    EXPECT_LT(msSince(t0), 5000);
  });
}

TEST(PeerMeet, OneMeetingPerSessionWhileARankHoldsIt) {
  auto a = PeerMeet::join(11), b = PeerMeet::join(11), other = PeerMeet::join(12);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), other.get());
}

}  // namespace
