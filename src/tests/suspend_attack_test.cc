// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Attacks on clbCommSuspend / clbCommResume, clbCommRefuse, clbCommSplitRefuse and the group
// refusals (refuseGroup): suspends that only some ranks make or that one rank refuses locally,
// suspends next to other threads' calls, pending sends across a suspend, calls from many threads on
// a suspended communicator, refusals with odd reasons (NULL, empty, huge, binary, the library's
// own last error), on aborted, destroyed, suspended and one-rank communicators, from two threads at
// once, split refusals on every rank / while another split runs / with an empty reason, and groups
// with a refusal over two communicators. Every case bounds its waits with a short timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
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
int64_t now() { return clb::nowMs(); }
// Spins until `flag` (at most 30 s, so that a failed assertion on the other rank cannot hang a case).
void waitFor(const std::atomic<bool>& flag) {
  for (int i = 0; i < 1500 && !flag; i++) sleepMs(20);
}
// Sets `flag` on every way out of a scope (an ASSERT's return too).
struct SetOnExit {
  std::atomic<bool>& flag;
  ~SetOnExit() { flag = true; }
};

// Short: a wait that runs to the timeout costs this much, and "at once" is well under half of it.
constexpr int64_t kTimeoutMs = 6000;
constexpr int64_t kAtOnceMs = 2500;

class SuspendAttack : public ::testing::TestWithParam<Net> {};

// ---- suspend ----

// A send that returned (its message in the pair's staging, not yet received) is not lost by a
// suspend, which trims the staging: the receive after the resume gets the data.
TEST_P(SuspendAttack, ASendPendingAcrossSuspendAndResumeIsReceivedIntact) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  constexpr size_t kCount = 256;
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    std::vector<int32_t> out(kCount), in(kCount, -1);
    for (size_t i = 0; i < kCount; i++) out[i] = (int32_t)(i * 31 + r * 1000 + 7);
    // Each rank sends first (returns at once while the staging has room), nobody receives yet.
    ASSERT_EQ(clbSend(out.data(), kCount, clbInt32, 1 - r, comm, nullptr), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbRecv(in.data(), kCount, clbInt32, 1 - r, comm, nullptr), clbSuccess) << clbGetLastError();
    for (size_t i = 0; i < kCount; i++)
      ASSERT_EQ(in[i], (int32_t)(i * 31 + (1 - r) * 1000 + 7)) << "rank " << r << " element " << i;
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Rank 1 forgot its resume; both then suspend. Rank 1's suspend is refused at once ("suspended
// already", a local usage refusal); rank 0 is in the suspend's exchange. Is rank 0 told, or does it
// wait to its timeout (and no later)?
// A suspend refused on one rank for usage (suspended already) changes nothing there, as every usage
// refusal: the peer's suspend waits for it as for a call a rank does not make, and ends at its
// timeout (not later), failing, never succeeding (docs/semantics.md, "Suspend and resume").
TEST_P(SuspendAttack, OneRankRefusesItsSuspendLocallyThePeerEndsByItsTimeout) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::atomic<bool> rank0Done{false};
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 0) {
      SetOnExit guard{rank0Done};
      ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
      ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
      const int64_t t0 = now();
      const clbResult_t rc = clbCommSuspend(comm);
      const int64_t took = now() - t0;
      const std::string e = clbGetLastError();
      rank0Done = true;
      EXPECT_NE(rc, clbSuccess);
      EXPECT_LT(took, kTimeoutMs + 3000) << "waited past its timeout";
      return;
    }
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    sleepMs(100);
    EXPECT_EQ(clbCommSuspend(comm), clbInvalidUsage);
    EXPECT_TRUE(contains(clbGetLastError(), "suspended already")) << clbGetLastError();
    waitFor(rank0Done);  // alive and not destroyed: only a notice could end rank 0's wait
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A peer that failed its communicator (clbCommFail tells the peers at once) and then suspends is
// refused locally; the other rank, which made no call since, suspends: its exchange waits for a
// rank that will never come. Is it told of the failure, or does it wait to the timeout?
// `how`: 0 clbCommFail, 1 clbCommAbort; `split`: rank 0 splits instead of suspending (compare).
void peerGoneThenCollectiveOfTheBootstrap(Net net, int how, bool split) {
  std::atomic<bool> rank0Done{false}, warm{false};
  auto errors = clbtest::runOver(net, 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t a = 1, b = 0;
    std::unique_ptr<SetOnExit> guard(r == 0 ? new SetOnExit{rank0Done} : nullptr);
    const clbResult_t warmRc = clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr);
    if (r == 0) warm = true;
    ASSERT_EQ(warmRc, clbSuccess) << clbGetLastError();
    if (r == 1) {
      waitFor(warm);
      if (how == 0)
        ASSERT_EQ(clbCommFail(comm, "rank 1 gave up on purpose"), clbSuccess);
      else
        ASSERT_EQ(clbCommAbort(comm), clbSuccess);
      clbComm_t child = nullptr;
      const clbResult_t rc = split ? clbCommSplit(comm, 0, 1, nullptr, &child) : clbCommSuspend(comm);
      EXPECT_NE(rc, clbSuccess);
      waitFor(rank0Done);  // alive, not destroyed
      return;
    }
    sleepMs(300);  // rank 1's notice has arrived by now
    const int64_t t0 = now();
    clbComm_t child = nullptr;
    const clbResult_t rc = split ? clbCommSplit(comm, 0, 0, nullptr, &child) : clbCommSuspend(comm);
    const int64_t took = now() - t0;
    const std::string e = clbGetLastError();
    rank0Done = true;
    EXPECT_NE(rc, clbSuccess);
    EXPECT_LT(took, kTimeoutMs + 3000) << "waited past its timeout";
    EXPECT_LT(took, kAtOnceMs) << "rank 0 waited " << took << " ms although rank 1 had "
                               << (how == 0 ? "failed" : "aborted") << " before: " << e;
    if (how == 0) {
      EXPECT_TRUE(contains(e, "gave up on purpose")) << e;
    }
    int suspended = -1;
    ASSERT_EQ(clbCommSuspended(comm, &suspended), clbSuccess);
    EXPECT_EQ(suspended, 0);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(SuspendAttack, SuspendAfterThePeerFailedIsToldAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  peerGoneThenCollectiveOfTheBootstrap(GetParam(), 0, false);
}

TEST_P(SuspendAttack, SuspendAfterThePeerAbortedIsToldAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  peerGoneThenCollectiveOfTheBootstrap(GetParam(), 1, false);
}

// The same with a split (not new in this change: to tell whether the suspend's behaviour is its own).
TEST_P(SuspendAttack, CompareSplitAfterThePeerFailedIsToldAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  peerGoneThenCollectiveOfTheBootstrap(GetParam(), 0, true);
}

// Rank 0 suspends while rank 1 all-reduces (a mismatch): both return, not later than the timeout
// and a margin, neither with success; rank 1 never sees success with made-up data.
TEST_P(SuspendAttack, SuspendOnOneRankAgainstAnAllReduceOnTheOtherEndsBothByTheTimeout) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    const int64_t t0 = now();
    clbResult_t rc;
    int32_t x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = i, y[i] = -7;
    if (r == 0)
      rc = clbCommSuspend(comm);
    else
      rc = clbAllReduce(x, y, 64, clbInt32, clbSum, comm, nullptr);
    const int64_t took = now() - t0;
    EXPECT_NE(rc, clbSuccess) << "rank " << r;
    EXPECT_LT(took, kTimeoutMs + 4000) << "rank " << r << " waited past its timeout";
    if (r == 1 && rc == clbSuccess) {
      for (int i = 0; i < 64; i++) EXPECT_EQ(y[i], 2 * i) << "element " << i;
    }
    int s = -1;
    ASSERT_EQ(clbCommSuspended(comm, &s), clbSuccess);
    EXPECT_EQ(s, 0) << "rank " << r << " is suspended although the suspend failed";
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A second thread's suspend while the first is in a receive (waiting for its send) is a usage
// refusal that changes nothing: no suspend, no failure, the receive completes with the data, and
// a collective suspend after it works.
TEST_P(SuspendAttack, SuspendWhileAnotherThreadIsInAReceiveChangesNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs * 2, nullptr, [&](int r, clbComm_t comm) {
    int32_t v = 0;
    if (r == 0) {
      std::atomic<bool> received{false};
      clbResult_t recvRc = clbInternalError;
      std::thread t([&] {
        recvRc = clbRecv(&v, 1, clbInt32, 1, comm, nullptr);
        received = true;
      });
      sleepMs(300);
      ASSERT_FALSE(received.load());
      EXPECT_EQ(clbCommSuspend(comm), clbInvalidUsage);
      EXPECT_TRUE(contains(clbGetLastError(), "send/recv") || contains(clbGetLastError(), "clbRecv"))
          << clbGetLastError();
      EXPECT_EQ(clbCommResume(comm), clbInvalidUsage);
      int s = -1;
      EXPECT_EQ(clbCommSuspended(comm, &s), clbSuccess);
      EXPECT_EQ(s, 0);
      t.join();
      EXPECT_EQ(recvRc, clbSuccess) << clbGetLastError();
      EXPECT_EQ(v, 4242);
    } else {
      sleepMs(800);
      v = 4242;
      ASSERT_EQ(clbSend(&v, 1, clbInt32, 0, comm, nullptr), clbSuccess) << clbGetLastError();
    }
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    int32_t a = r + 1, b = 0;
    ASSERT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 3);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Eight threads per rank hammer a suspended communicator with every kind of call: each is refused
// with clbInvalidUsage (suspended, or another thread in a call), nothing fails, nothing is told,
// and after the resume the communicator is correct.
TEST_P(SuspendAttack, ManyThreadsCallingASuspendedCommunicatorChangeNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    std::atomic<int> wrong{0}, successes{0};
    std::string firstWrong;
    std::mutex m;
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; t++)
      ts.emplace_back([&, t] {
        int32_t x[16] = {}, y[16] = {};
        for (int i = 0; i < 200; i++) {
          clbResult_t rc;
          clbComm_t child = nullptr;
          switch ((t + i) % 7) {
            case 0: rc = clbAllReduce(x, y, 16, clbInt32, clbSum, comm, nullptr); break;
            case 1: rc = clbSend(x, 1, clbInt32, 1 - r, comm, nullptr); break;
            case 2: rc = clbRecv(y, 1, clbInt32, 1 - r, comm, nullptr); break;
            case 3: rc = clbCommSplit(comm, 0, r, nullptr, &child); break;
            case 4: rc = clbBroadcast(x, y, 16, clbInt32, 0, comm, nullptr); break;
            case 5: rc = clbCommSuspend(comm); break;
            default: rc = clbBarrier(comm, nullptr); break;
          }
          if (rc == clbSuccess) successes++;
          if (rc != clbInvalidUsage) {
            std::lock_guard<std::mutex> g(m);
            if (wrong++ == 0) firstWrong = std::to_string(rc) + ": " + clbGetLastError();
          }
          if (child) clbCommDestroy(child);
        }
      });
    // Meanwhile the queries and a trim from this thread.
    for (int i = 0; i < 200; i++) {
      clbResult_t async = clbInternalError;
      EXPECT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
      EXPECT_EQ(async, clbSuccess) << clbGetLastError();
      int s = 0;
      EXPECT_EQ(clbCommSuspended(comm, &s), clbSuccess);
      EXPECT_EQ(s, 1);
      const clbResult_t trim = clbCommTrim(comm);
      EXPECT_TRUE(trim == clbSuccess || trim == clbInvalidUsage) << trim << ": " << clbGetLastError();
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(wrong.load(), 0) << "first: " << firstWrong;
    EXPECT_EQ(successes.load(), 0);
    clbResult_t async = clbInternalError;
    ASSERT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
    EXPECT_EQ(async, clbSuccess);
    ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    int32_t a[4] = {r, r, r, r}, b[4] = {};
    ASSERT_EQ(clbAllReduce(a, b, 4, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    for (int i = 0; i < 4; i++) EXPECT_EQ(b[i], 1);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// The doc: "Until clbCommResume every call on it but the queries, clbCommTrim, clbCommDestroy and
// clbCommAbort is refused with clbInvalidUsage, changing nothing". A call with a bad argument too:
// a bad reduction op (checked before the suspended state?) must not fail the communicator on every
// rank.
TEST_P(SuspendAttack, ABadArgumentOnASuspendedCommunicatorChangesNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
    if (r == 0) {
      const clbResult_t rc = clbAllReduce(x, y, 4, clbInt32, (clbRedOp_t)77, comm, nullptr);
      const std::string e = clbGetLastError();
      EXPECT_EQ(rc, clbInvalidUsage) << e;
      EXPECT_TRUE(contains(e, "suspended")) << e;
      EXPECT_FALSE(contains(e, "fails with it on every rank")) << e;
      // And a bad type (checked after the suspended state, for comparison).
      EXPECT_EQ(clbAllReduce(x, y, 4, (clbDataType_t)42, clbSum, comm, nullptr), clbInvalidUsage) << clbGetLastError();
    }
    sleepMs(300);
    clbResult_t async = clbInternalError;
    ASSERT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
    EXPECT_EQ(async, clbSuccess) << "rank " << r
                                 << ": a refused call while suspended failed the communicator: " << clbGetLastError();
    ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    const clbResult_t rc = clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr);
    EXPECT_EQ(rc, clbSuccess) << "rank " << r << ": " << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Resume without a suspend, on a live, a failed and an aborted communicator; suspend of a
// communicator failed or aborted on every rank returns at once, without hanging.
TEST_P(SuspendAttack, ResumeWithoutSuspendAndSuspendOfDeadCommunicators) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int variant = 0; variant < 3; variant++) {
    auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
      if (variant == 1) ASSERT_EQ(clbCommFail(comm, "dead on purpose"), clbSuccess);
      if (variant == 2) ASSERT_EQ(clbCommAbort(comm), clbSuccess);
      sleepMs(200);
      EXPECT_EQ(clbCommResume(comm), clbInvalidUsage) << "variant " << variant;
      EXPECT_TRUE(contains(clbGetLastError(), "not suspended")) << clbGetLastError();
      const int64_t t0 = now();
      const clbResult_t rc = clbCommSuspend(comm);
      const int64_t took = now() - t0;
      if (variant == 0) {
        EXPECT_EQ(rc, clbSuccess) << clbGetLastError();
        EXPECT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
      } else {
        EXPECT_NE(rc, clbSuccess) << "variant " << variant;
        EXPECT_LT(took, kAtOnceMs) << "variant " << variant << ": " << clbGetLastError();
        int s = -1;
        EXPECT_EQ(clbCommSuspended(comm, &s), clbSuccess);
        EXPECT_EQ(s, 0);
      }
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "variant " << variant << " rank " << r;
  }
}

// A suspend inside a group whose send/receive were recorded before it: the group's end runs
// nothing on the suspended communicator (usage refusal), the receive buffer is untouched, and the
// communicator goes on after the resume.
TEST_P(SuspendAttack, ARecordedGroupIsNotRunOnASuspendedCommunicator) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    int32_t out = 100 + r, in = -1;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbSend(&out, 1, clbInt32, 1 - r, comm, nullptr), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbRecv(&in, 1, clbInt32, 1 - r, comm, nullptr), clbSuccess) << clbGetLastError();
    const clbResult_t s = clbCommSuspend(comm);  // collective, made now (not recorded)
    const clbResult_t end = clbGroupEnd();
    const std::string e = clbGetLastError();
    if (s == clbSuccess) {
      EXPECT_EQ(end, clbInvalidUsage) << "a group ran on a suspended communicator: " << e;
      EXPECT_EQ(in, -1) << "data moved on a suspended communicator";
      ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    }
    sleepMs(200);
    clbResult_t async = clbInternalError;
    ASSERT_EQ(clbCommGetAsyncError(comm, &async), clbSuccess);
    EXPECT_EQ(async, clbSuccess) << clbGetLastError();
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 2);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// ---- clbCommRefuse ----

// Two threads of rank 0 refuse at once: no crash, each gets the refusal or the usage refusal,
// at least one refusal, and rank 1 is told at once with one of the reasons.
TEST_P(SuspendAttack, TwoThreadsRefuseAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int iter = 0; iter < 3; iter++) {
    std::atomic<bool> go{false};
    auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs * 2, nullptr, [&](int r, clbComm_t comm) {
      if (r == 0) {
        clbResult_t rcs[2];
        std::string msgs[2];
        std::vector<std::thread> ts;
        for (int t = 0; t < 2; t++)
          ts.emplace_back([&, t] {
            while (!go) {
            }
            rcs[t] = clbCommRefuse(comm, t ? "send" : "allReduce", t == 0, t ? "reason B" : "reason A");
            msgs[t] = clbGetLastError();
          });
        go = true;
        for (auto& t : ts) t.join();
        int refusals = 0;
        for (int t = 0; t < 2; t++) {
          EXPECT_TRUE(rcs[t] == clbInvalidArgument || rcs[t] == clbInvalidUsage) << rcs[t] << ": " << msgs[t];
          refusals += rcs[t] == clbInvalidArgument;
        }
        EXPECT_GE(refusals, 1) << msgs[0] << " | " << msgs[1];
        return;
      }
      const int64_t t0 = now();
      int32_t x = 1, y = 0;
      const clbResult_t rc = clbAllReduce(&x, &y, 1, clbInt32, clbSum, comm, nullptr);
      const std::string e = clbGetLastError();
      EXPECT_EQ(rc, clbRemoteError) << e;
      EXPECT_LT(now() - t0, kAtOnceMs * 2) << e;
      EXPECT_TRUE(contains(e, "reason A") || contains(e, "reason B")) << e;
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

// Huge and binary reasons and call names with printf directives: bounded messages, the peer told
// with the reason's start, no directive interpreted.
TEST_P(SuspendAttack, HugeBinaryAndFormatReasonsAreBoundedAndLiteral) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::string reason = "%s%n%s%p ";
  for (int i = 0; i < (1 << 20); i++) reason += (char)(1 + (i * 37) % 255);
  std::string call(70000, 'C');
  call = "%n%s" + call;
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 0) {
      const clbResult_t rc = clbCommRefuse(comm, call.c_str(), 1, reason.c_str());
      const std::string e = clbGetLastError();
      EXPECT_EQ(rc, clbInvalidArgument) << e.substr(0, 300);
      EXPECT_LT(e.size(), 4096u);
      EXPECT_TRUE(contains(e, "%s%n%s%p")) << e.substr(0, 300);
      EXPECT_TRUE(contains(e, "fails with it on every rank")) << "the message lost its tail: " << e.size() << " bytes";
      return;
    }
    int32_t x = 1, y = 0;
    const int64_t t0 = now();
    const clbResult_t rc = clbAllReduce(&x, &y, 1, clbInt32, clbSum, comm, nullptr);
    const std::string e = clbGetLastError();
    EXPECT_EQ(rc, clbRemoteError) << e.substr(0, 300);
    EXPECT_LT(now() - t0, kAtOnceMs) << e.substr(0, 300);
    EXPECT_LT(e.size(), 4096u);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A binding that refuses with the library's own last error as its reason (clbGetLastError() after
// a failed call, the natural thing to pass on): the reason must reach the peers, not be wiped by
// the call's own clearError into "reason is NULL or empty".
TEST(SuspendAttackOne, RefuseWithTheLibrarysLastErrorAsTheReason) {
  auto errors = clbtest::runOver(Net::kShm, 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 0) {
      int32_t x = 0;
      // Any failed call leaves its message in the thread's last error.
      EXPECT_EQ(clbCommCount(comm, nullptr), clbInvalidArgument);
      const std::string before = clbGetLastError();
      ASSERT_FALSE(before.empty());
      const clbResult_t rc = clbCommRefuse(comm, "allReduce", 1, clbGetLastError());
      const std::string e = clbGetLastError();
      EXPECT_EQ(rc, clbInvalidArgument) << e;
      EXPECT_TRUE(contains(e, before)) << "reason lost; got: " << e;
      EXPECT_FALSE(contains(e, "reason is NULL or empty")) << e;
      (void)x;
      sleepMs(500);
      return;
    }
    int32_t x = 1, y = 0;
    const int64_t t0 = now();
    const clbResult_t rc = clbAllReduce(&x, &y, 1, clbInt32, clbSum, comm, nullptr);
    EXPECT_EQ(rc, clbRemoteError) << clbGetLastError();
    EXPECT_LT(now() - t0, kAtOnceMs) << "rank 1 waited to the timeout: rank 0's refusal did not reach it: "
                                     << clbGetLastError();
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// The same for clbCommSplitRefuse.
TEST(SuspendAttackOne, SplitRefuseWithTheLibrarysLastErrorAsTheReason) {
  auto errors = clbtest::runOver(Net::kShm, 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    if (r == 0) {
      EXPECT_EQ(clbCommCount(comm, nullptr), clbInvalidArgument);
      const std::string before = clbGetLastError();
      const clbResult_t rc = clbCommSplitRefuse(comm, clbGetLastError());
      const std::string e = clbGetLastError();
      EXPECT_EQ(rc, clbInvalidArgument) << e;
      EXPECT_TRUE(contains(e, before)) << "reason lost; got: " << e;
      return;
    }
    clbComm_t child = nullptr;
    const int64_t t0 = now();
    const clbResult_t rc = clbCommSplit(comm, 0, 1, nullptr, &child);
    EXPECT_EQ(rc, clbInvalidArgument) << clbGetLastError();
    EXPECT_LT(now() - t0, kAtOnceMs) << clbGetLastError();
    if (child) clbCommDestroy(child);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// NULL/empty call or reason: refused locally. Does the peer, which makes the call, wait to its
// timeout? (A NULL newcomm to clbCommSplit goes to the exchange and tells every rank at once.)
TEST_P(SuspendAttack, RefuseWithANullCallOrEmptyReasonLeavesThePeerWaiting) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int variant = 0; variant < 2; variant++) {
    std::atomic<bool> done{false};
    auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
      std::unique_ptr<SetOnExit> guard(r == 0 ? new SetOnExit{done} : nullptr);
      if (r == 1) {
        const clbResult_t rc =
            variant == 0 ? clbCommRefuse(comm, nullptr, 1, "bad dtype") : clbCommSplitRefuse(comm, "");
        EXPECT_EQ(rc, clbInvalidArgument);
        waitFor(done);
        return;
      }
      const int64_t t0 = now();
      int32_t x = 1, y = 0;
      clbComm_t child = nullptr;
      const clbResult_t rc = variant == 0 ? clbAllReduce(&x, &y, 1, clbInt32, clbSum, comm, nullptr)
                                          : clbCommSplit(comm, 0, 0, nullptr, &child);
      const int64_t took = now() - t0;
      const std::string e = clbGetLastError();
      done = true;
      EXPECT_NE(rc, clbSuccess);
      EXPECT_LT(took, kAtOnceMs) << "variant " << variant << ": rank 0 waited " << took
                                 << " ms for a call rank 1 refused at once: " << e;
      if (child) clbCommDestroy(child);
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

// One rank: the refusal goes on (no peers), the message is the reason, and the communicator keeps
// working; destroyed / NULL communicators are refused without reading them; an aborted one says so.
TEST(SuspendAttackOne, RefuseOnOneRankDestroyedNullAndAbortedCommunicators) {
  auto errors = clbtest::runOver(Net::kShm, 1, kTimeoutMs, nullptr, [&](int, clbComm_t comm) {
    EXPECT_EQ(clbCommRefuse(comm, "allReduce", 1, "a heap buffer"), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "allReduce: a heap buffer")) << clbGetLastError();
    EXPECT_EQ(clbCommRefuse(comm, "send", 0, "x"), clbInvalidArgument);
    int32_t a = 5, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 5);
    EXPECT_EQ(clbCommSplitRefuse(comm, "no"), clbInvalidArgument);
    clbComm_t child = nullptr;
    EXPECT_EQ(clbCommSplit(comm, 0, 0, nullptr, &child), clbSuccess) << clbGetLastError();
    EXPECT_EQ(clbCommDestroy(child), clbSuccess);
    EXPECT_EQ(clbCommRefuse(child, "allReduce", 1, "after destroy"), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "not alive")) << clbGetLastError();
    EXPECT_EQ(clbCommSplitRefuse(child, "after destroy"), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "not alive")) << clbGetLastError();
    EXPECT_EQ(clbCommRefuse(nullptr, "allReduce", 1, "x"), clbInvalidArgument);
    EXPECT_EQ(clbCommSplitRefuse(nullptr, "x"), clbInvalidArgument);
    EXPECT_EQ(clbCommSuspend(child), clbInvalidArgument);
    EXPECT_EQ(clbCommResume(child), clbInvalidArgument);
    EXPECT_EQ(clbCommAbort(comm), clbSuccess);
    const clbResult_t rc = clbCommRefuse(comm, "allReduce", 1, "on an aborted one");
    EXPECT_NE(rc, clbSuccess);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// ---- clbCommSplitRefuse ----

// Every rank refuses at once: each fails at once with its own reason, the parent goes on, and the
// next split (the split counters agree) works.
TEST_P(SuspendAttack, EveryRankRefusesTheSplitAtOnceThenASplitWorks) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 3, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    for (int round = 0; round < 3; round++) {
      const std::string why = "rank-own-reason-" + std::to_string(r) + "-" + std::to_string(round);
      const int64_t t0 = now();
      EXPECT_EQ(clbCommSplitRefuse(comm, why.c_str()), clbInvalidArgument);
      EXPECT_LT(now() - t0, kAtOnceMs);
      EXPECT_TRUE(contains(clbGetLastError(), why)) << clbGetLastError();
    }
    clbComm_t child = nullptr;
    ASSERT_EQ(clbCommSplit(comm, r % 2, r, nullptr, &child), clbSuccess) << clbGetLastError();
    int n = 0;
    ASSERT_EQ(clbCommCount(child, &n), clbSuccess);
    EXPECT_EQ(n, r % 2 == 0 ? 2 : 1);
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, child, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, n);
    EXPECT_EQ(clbCommDestroy(child), clbSuccess);
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 3);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A split refusal from a second thread while the first is in a split: a usage refusal, nothing
// changes, the first split completes.
TEST_P(SuspendAttack, SplitRefuseWhileAnotherThreadSplitsChangesNothing) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs * 2, nullptr, [&](int r, clbComm_t comm) {
    clbComm_t child = nullptr;
    if (r == 0) {
      clbResult_t splitRc = clbInternalError;
      std::thread t([&] { splitRc = clbCommSplit(comm, 0, 0, nullptr, &child); });
      sleepMs(300);
      EXPECT_EQ(clbCommSplitRefuse(comm, "from a second thread"), clbInvalidUsage) << clbGetLastError();
      t.join();
      ASSERT_EQ(splitRc, clbSuccess) << "the first thread's split failed";
    } else {
      sleepMs(1000);
      ASSERT_EQ(clbCommSplit(comm, 0, 1, nullptr, &child), clbSuccess) << clbGetLastError();
    }
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, child, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 2);
    EXPECT_EQ(clbCommDestroy(child), clbSuccess);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Split refused on a suspended communicator (every rank suspended): each is refused at once; then
// split refused, suspend, resume, split works.
TEST_P(SuspendAttack, SplitRefusalsAndSuspendInterleave) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    const int64_t t0 = now();
    EXPECT_EQ(clbCommSplitRefuse(comm, "while suspended"), clbInvalidUsage) << clbGetLastError();
    EXPECT_LT(now() - t0, kAtOnceMs);
    ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    if (r == 1) {
      EXPECT_EQ(clbCommSplitRefuse(comm, "after resume"), clbInvalidArgument);
    } else {
      clbComm_t child = nullptr;
      EXPECT_EQ(clbCommSplit(comm, 0, 0, nullptr, &child), clbInvalidArgument);
      EXPECT_TRUE(contains(clbGetLastError(), "after resume")) << clbGetLastError();
    }
    ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
    clbComm_t child = nullptr;
    ASSERT_EQ(clbCommSplit(comm, 0, r, nullptr, &child), clbSuccess) << clbGetLastError();
    int32_t a = 1, b = 0;
    EXPECT_EQ(clbAllReduce(&a, &b, 1, clbInt32, clbSum, child, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 2);
    EXPECT_EQ(clbCommDestroy(child), clbSuccess);
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// ---- groups ----

// A group over two communicators (the parent and a child of the same ranks) on rank 0 with a
// refused send on the child: nothing runs, both communicators fail, and rank 1, whose group has
// the matching calls on both, is told at once on both.
TEST_P(SuspendAttack, AGroupRefusalOverTwoCommunicatorsTellsThePeerOnBoth) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (int delay : {0, 200}) {
    SCOPED_TRACE("rank 1 delay " + std::to_string(delay));
    auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs * 2, nullptr, [&](int r, clbComm_t comm) {
      clbComm_t child = nullptr;
      ASSERT_EQ(clbCommSplit(comm, 0, r, nullptr, &child), clbSuccess) << clbGetLastError();
      int32_t x[4] = {1, 2, 3, 4}, y[4] = {-1, -1, -1, -1}, z = -1, w = 9;
      ASSERT_EQ(clbGroupStart(), clbSuccess);
      EXPECT_EQ(clbAllReduce(x, y, 4, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
      if (r == 0) {
        EXPECT_EQ(clbSend(&w, 1, (clbDataType_t)42, 1, child, nullptr), clbInvalidArgument);
      } else {
        sleepMs(delay);
        EXPECT_EQ(clbRecv(&z, 1, clbInt32, 0, child, nullptr), clbSuccess) << clbGetLastError();
      }
      const int64_t t0 = now();
      const clbResult_t rc = clbGroupEnd();
      const int64_t took = now() - t0;
      const std::string e = clbGetLastError();
      EXPECT_NE(rc, clbSuccess);
      EXPECT_LT(took, kAtOnceMs * 2) << "rank " << r << ": " << e;
      for (int i = 0; i < 4 && r == 0; i++) EXPECT_EQ(y[i], -1) << "rank 0 ran its part of a refused group";
      EXPECT_EQ(z, -1);
      sleepMs(300);
      for (clbComm_t c : {comm, child}) {
        clbResult_t async = clbSuccess;
        ASSERT_EQ(clbCommGetAsyncError(c, &async), clbSuccess);
        EXPECT_NE(async, clbSuccess) << "rank " << r << ", " << (c == comm ? "parent" : "child") << " did not fail";
      }
      EXPECT_EQ(clbCommDestroy(child), clbSuccess);
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

// A communicator destroyed inside a group after calls on it were recorded: the group's end must
// not read it (refuseGroup reads it.comm->rank before tellRefusal checks that it is alive; the
// end that runs reads it in checkPeerOps and runBatch). `refused`: a refused call on a second
// communicator makes the end run nothing (refuseGroup's path). Expect a refusal, never success.
void groupEndAfterDestroy(bool refused) {
  auto errors = clbtest::runOver(Net::kShm, 1, kTimeoutMs, nullptr, [&](int, clbComm_t comm) {
    clbComm_t doomed = nullptr;
    ASSERT_EQ(clbCommSplit(comm, 0, 0, nullptr, &doomed), clbSuccess) << clbGetLastError();
    int32_t out = 5, in = -1, w = 1;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbSend(&out, 1, clbInt32, 0, doomed, nullptr), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbRecv(&in, 1, clbInt32, 0, doomed, nullptr), clbSuccess) << clbGetLastError();
    if (refused) {
      EXPECT_EQ(clbSend(&w, 1, (clbDataType_t)42, 0, comm, nullptr), clbInvalidArgument);
    }
    const clbResult_t d = clbCommDestroy(doomed);
    if (d != clbSuccess) {
      clbGroupEnd();
      return;  // refused: nothing to attack
    }
    const clbResult_t rc = clbGroupEnd();
    EXPECT_NE(rc, clbSuccess) << "a group ran on a destroyed communicator";
    // What a call on a destroyed communicator says (checkComm), not something read from freed
    // memory (a garbage rank, "another thread is in clbCommDestroy").
    if (!refused) {
      EXPECT_TRUE(contains(clbGetLastError(), "not alive")) << clbGetLastError();
    }
    EXPECT_FALSE(contains(clbGetLastError(), "clbCommDestroy on this communicator")) << clbGetLastError();
    EXPECT_EQ(in, -1) << "data moved through a destroyed communicator";
  });
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(SuspendAttackOne, GroupEndAfterADestroyOfACommunicatorWithRecordedCallsRefused) { groupEndAfterDestroy(true); }
TEST(SuspendAttackOne, GroupEndAfterADestroyOfACommunicatorWithRecordedCallsRuns) { groupEndAfterDestroy(false); }

// Rank 0 refuses a send (clbCommRefuse, as the drop-in's tellPeers does) and destroys its
// communicator at once; rank 1 makes its first receive from rank 0 only afterwards (the peer
// channel is not connected yet). It must be told (the refusal, or that rank 0 closed), not wait to
// its timeout connecting to a rank that is gone.
TEST_P(SuspendAttack, AFirstReceiveFromARankThatRefusedAndClosedIsToldAtOnce) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  for (bool stays : {false, true}) {
    SCOPED_TRACE(stays ? "rank 0 stays (not destroyed)" : "rank 0 destroys at once");
    std::atomic<bool> done{false};
    auto errors = clbtest::runOver(GetParam(), 2, kTimeoutMs, nullptr, [&](int r, clbComm_t comm) {
      if (r == 0) {
        EXPECT_EQ(clbCommRefuse(comm, "send", 0, "a bad datatype"), clbInvalidArgument);
        if (stays) waitFor(done);
        return;  // destroyed now by runOver
      }
      SetOnExit guard{done};
      sleepMs(300);
      int32_t z = -1;
      const int64_t t0 = now();
      const clbResult_t rc = clbRecv(&z, 1, clbInt32, 0, comm, nullptr);
      const int64_t took = now() - t0;
      EXPECT_NE(rc, clbSuccess);
      EXPECT_LT(took, kAtOnceMs) << clbGetLastError();
    });
    for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
}

INSTANTIATE_TRANSPORTS(SuspendAttack);

}  // namespace
