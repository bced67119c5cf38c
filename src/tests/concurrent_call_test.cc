// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A communicator takes one call at a time. A second thread that calls while one is inside a
// collective is refused at once with clbInvalidUsage naming the call in progress; the call in
// progress completes with the right result, and the communicator works afterwards. Abort and the
// status queries stay callable from another thread meanwhile.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_fd_io.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using Clock = std::chrono::steady_clock;

// Exact in float32: small integers.
float input(int rank, size_t i) { return (float)(rank + 1) * 1000.0f + (float)(i % 997); }

// What a refused call returned, and its message (read on the thread that made it).
struct Refusal {
  clbResult_t rc = clbSuccess;
  std::string msg;
};

template <class Call>
Refusal attempt(Call call) {
  Refusal r;
  r.rc = call();
  r.msg = clbGetLastError();
  return r;
}

class ConcurrentCalls : public ::testing::TestWithParam<clbtest::Net> {};

TEST_P(ConcurrentCalls, SecondThreadIsRefusedNamingTheCallInProgress) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  const int transport = clbtest::netTransport(GetParam());
  const size_t count = 16u << 20;  // 64 MiB of float32: the call that is in progress
  const size_t small = 16;
  std::atomic<bool> entering{false}, probed{false};
  std::vector<Refusal> refused;
  clbResult_t asyncMeanwhile = clbInternalError, asyncCallRc = clbInternalError, algoRc = clbInternalError;
  clbResult_t memRc = clbInternalError;
  std::string asyncMsg;
  std::vector<clbResult_t> bigRc(2, clbInternalError), afterRc(2, clbInternalError);
  std::vector<std::string> bigMsg(2), afterMsg(2);
  std::vector<size_t> wrong(2, 0), afterWrong(2, 0);
  std::vector<clbResult_t> healthy(2, clbInternalError);

  auto errors = clbtest::runThreadRanks(
      2,
      [&](int, clbConfig_t* cfg) {
        cfg->transport = transport;
        cfg->timeoutMs = 20000;
      },
      [&](int r, clbComm_t comm) {
        // A first collective, so that the one in progress is #2 (the message names its number).
        float one = 1.0f;
        ASSERT_EQ(clbAllReduce(&one, &one, 1, clbFloat32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
        std::vector<float> in(count), out(count, -1.0f);
        for (size_t i = 0; i < count; i++) in[i] = input(r, i);
        std::thread second;
        if (r == 0) {
          // Rank 0's second thread calls while rank 0's own thread is inside allReduce #2, which
          // cannot finish before rank 1 joins it, and rank 1 joins only once this thread tried.
          second = std::thread([&] {
            while (!entering.load()) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            std::vector<float> s(small, 1.0f), t(2 * small, 0.0f);
            int algo = 0;
            clbMemStats_t st;
            // Status queries answer while the call runs, and see a healthy communicator.
            asyncCallRc = clbCommGetAsyncError(comm, &asyncMeanwhile);
            asyncMsg = clbGetLastError();
            algoRc = clbCommLastAlgorithm(comm, &algo);
            memRc = clbCommMemStats(comm, &st);
            float* a = s.data();
            float* b = t.data();
            const size_t n = small;
            refused.push_back(attempt([&] { return clbAllReduce(a, a, n, clbFloat32, clbSum, comm, nullptr); }));
            refused.push_back(attempt([&] { return clbAllGather(a, b, n, clbFloat32, comm, nullptr); }));
            refused.push_back(attempt([&] { return clbReduceScatter(b, a, n, clbFloat32, clbSum, comm, nullptr); }));
            refused.push_back(attempt([&] { return clbBroadcast(a, a, n, clbFloat32, 0, comm, nullptr); }));
            refused.push_back(attempt([&] { return clbCommTrim(comm); }));
            void* handle = nullptr;
            refused.push_back(attempt([&] { return clbCommRegister(comm, a, sizeof(float) * n, &handle); }));
            refused.push_back(attempt([&] { return clbCommDeregister(comm, &handle); }));
            refused.push_back(attempt([&] { return clbCommDestroy(comm); }));
            probed.store(true);
          });
          entering.store(true);
        } else {
          const auto t0 = Clock::now();
          while (!probed.load() && Clock::now() - t0 < std::chrono::seconds(10))
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        bigRc[r] = clbAllReduce(in.data(), out.data(), count, clbFloat32, clbSum, comm, nullptr);
        bigMsg[r] = clbGetLastError();
        if (second.joinable()) second.join();
        for (size_t i = 0; i < count; i++)
          if (out[i] != input(0, i) + input(1, i)) wrong[r]++;
        // Still usable: nothing marked it failed.
        clbResult_t a = clbInternalError;
        if (clbCommGetAsyncError(comm, &a) == clbSuccess) healthy[r] = a;
        std::vector<float> v(small, (float)(r + 1));
        afterRc[r] = clbAllReduce(v.data(), v.data(), small, clbFloat32, clbSum, comm, nullptr);
        afterMsg[r] = clbGetLastError();
        for (size_t i = 0; i < small; i++)
          if (v[i] != 3.0f) afterWrong[r]++;
      });
  for (int r = 0; r < 2; r++) ASSERT_EQ(errors[r], "") << "rank " << r;

  EXPECT_EQ(asyncCallRc, clbSuccess) << asyncMsg;
  EXPECT_EQ(asyncMeanwhile, clbSuccess) << "clbCommGetAsyncError during the call: " << asyncMsg;
  EXPECT_EQ(algoRc, clbSuccess);
  EXPECT_EQ(memRc, clbSuccess);
  const char* names[] = {"allReduce",   "allGather",       "reduceScatter",     "broadcast",
                         "clbCommTrim", "clbCommRegister", "clbCommDeregister", "clbCommDestroy"};
  ASSERT_EQ(refused.size(), sizeof names / sizeof names[0]);
  for (size_t k = 0; k < refused.size(); k++) {
    const Refusal& f = refused[k];
    EXPECT_EQ(f.rc, clbInvalidUsage) << names[k] << ": " << f.msg;
    const std::string named =
        "rank 0: " + std::string(names[k]) + " was called while another thread is in allReduce #2";
    EXPECT_NE(f.msg.find(named), std::string::npos) << names[k] << ": " << f.msg;
    // Destroy says how to make the call return; the others how to avoid the clash.
    const char* advice = k == 7 ? "clbCommAbort makes it return" : "one call at a time";
    EXPECT_NE(f.msg.find(advice), std::string::npos) << names[k] << ": " << f.msg;
  }
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(bigRc[r], clbSuccess) << "rank " << r << "'s allReduce in progress: " << bigMsg[r];
    EXPECT_EQ(wrong[r], 0u) << "rank " << r << ": elements of the allReduce in progress that are wrong";
    EXPECT_EQ(healthy[r], clbSuccess) << "rank " << r << ": a refused call must not mark the communicator failed";
    EXPECT_EQ(afterRc[r], clbSuccess) << "rank " << r << " afterwards: " << afterMsg[r];
    EXPECT_EQ(afterWrong[r], 0u) << "rank " << r << " afterwards";
  }
}

INSTANTIATE_TRANSPORTS(ConcurrentCalls);

// Calls one after another from different threads are fine: the communicator is given back at the
// end of every call, also of one that failed or was refused.
TEST(ConcurrentCalls, CallsInTurnFromDifferentThreadsWork) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  for (int k = 0; k < 4; k++) {
    std::thread([&] {
      float v[4] = {1, 2, 3, 4};
      EXPECT_EQ(clbAllReduce(v, v, 4, clbFloat32, (clbRedOp_t)99, comm, nullptr), clbInvalidArgument);
      EXPECT_EQ(clbAllReduce(v, v, 4, clbFloat32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
      EXPECT_EQ(clbCommTrim(comm), clbSuccess) << clbGetLastError();
    }).join();
  }
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess) << clbGetLastError();
}

// Issue 38, 6c: a second clbCommDestroy of a handle, and every call on a destroyed one, returns
// clbInvalidArgument saying that the communicator is not alive, reads nothing of it, never hangs
// or crashes; a communicator split from it before lives on. In a child process: before this was
// refused, the second destroy ran on freed memory (hang or crash).
TEST(DestroyedCommunicatorChild, Calls) {
  if (!getenv("CLB_DESTROYED_CHILD")) GTEST_SKIP() << "runs only as a child of DestroyedCommunicator.*";
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  clbComm_t comm = nullptr, child = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbCommSplit(comm, 0, 0, nullptr, &child), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbCommDestroy(comm), clbSuccess) << clbGetLastError();
  auto refused = [](clbResult_t rc, const char* what, const char* says) {
    EXPECT_EQ(rc, clbInvalidArgument) << what;
    const std::string e = clbGetLastError();
    EXPECT_NE(e.find(says), std::string::npos) << what << ": " << e;
    EXPECT_NE(e.find("is not alive in this process: it was destroyed already (clbCommDestroy)"), std::string::npos)
        << what << ": " << e;
  };
  refused(clbCommDestroy(comm), "a second destroy", "clbCommDestroy: communicator 0x");
  float x = 1;
  int r = -1;
  clbResult_t async = clbSuccess;
  clbComm_t grandchild = nullptr;
  char info[64];
  refused(clbAllReduce(&x, &x, 1, clbFloat32, clbSum, comm, nullptr), "allReduce", "communicator 0x");
  refused(clbSend(&x, 1, clbFloat32, 0, comm, nullptr), "send", "communicator 0x");
  refused(clbCommRank(comm, &r), "rank", "communicator 0x");
  refused(clbCommAbort(comm), "abort", "communicator 0x");
  refused(clbCommGetAsyncError(comm, &async), "asyncError", "communicator 0x");
  refused(clbCommTrim(comm), "trim", "communicator 0x");
  refused(clbCommInfo(comm, info, sizeof info), "info", "communicator 0x");
  refused(clbCommSplit(comm, 0, 0, nullptr, &grandchild), "split", "communicator 0x");
  EXPECT_EQ(grandchild, nullptr);
  // The communicator split from it before is its own.
  float y = 0;
  EXPECT_EQ(clbAllReduce(&x, &y, 1, clbFloat32, clbSum, child, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(y, 1.f);
  EXPECT_EQ(clbCommDestroy(child), clbSuccess) << clbGetLastError();
  refused(clbCommDestroy(child), "a second destroy of the split's", "clbCommDestroy: communicator 0x");
  EXPECT_EQ(clbCommDestroy(nullptr), clbSuccess);  // NULL stays a no-op
}

// One rank (a communicator of one rank opens no transport), so it runs once, not per transport.
TEST(DestroyedCommunicator, ASecondDestroyAndAnyLaterCallAreRefusedNotRunOneRankNoTransport) {
  const pid_t pid = clb::test::spawnSelf("DestroyedCommunicatorChild.Calls", {"CLB_DESTROYED_CHILD=1"});
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_TRUE(clb::test::waitOrKill(pid, 30000, &status)) << "the child hung (killed after 30 s)";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child failed (its output is above), status " << status;
}

}  // namespace
