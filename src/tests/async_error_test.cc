// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommGetAsyncError on the host path: healthy communicators say so; an abort (here or on a
// peer, over shared memory and over sockets), a peer's failure, this rank's own failure and a
// peer process killed with SIGKILL are reported without making a call, each with a message
// naming the rank. (The device side, a device wait that timed out, is in cuda_robustness_test.)
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "core/comm.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"
#include "transport/shm/shm.h"

namespace {

using Clock = std::chrono::steady_clock;

// Asks until the answer is not clbSuccess or `limitMs` pass.
clbResult_t pollAsync(clbComm_t comm, int limitMs, std::string* msg) {
  const auto t0 = Clock::now();
  clbResult_t async = clbSuccess;
  while (Clock::now() - t0 < std::chrono::milliseconds(limitMs)) {
    if (clbCommGetAsyncError(comm, &async) != clbSuccess) {
      *msg = clbGetLastError();
      return clbInternalError;
    }
    if (async != clbSuccess) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *msg = async == clbSuccess ? "" : clbGetLastError();
  return async;
}

void twoRanks(int transport, int64_t timeoutMs, const std::function<void(int, clbComm_t)>& body) {
  auto errors = clbtest::runThreadRanks(
      2,
      [&](int, clbConfig_t* cfg) {
        cfg->transport = transport;
        cfg->timeoutMs = timeoutMs;
      },
      body);
  for (int r = 0; r < 2; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A host barrier of the two rank threads.
struct Meet {
  std::atomic<int> n{0};
  void at(int round) {
    n.fetch_add(1);
    while (n.load() < 2 * round) std::this_thread::yield();
  }
};

TEST(AsyncError, HealthyCommunicatorsSaySoAndBadArgumentsAreRefused) {
  clbResult_t async = clbInternalError;
  EXPECT_EQ(clbCommGetAsyncError(nullptr, &async), clbInvalidArgument);
  twoRanks(clbTransportAuto, 10000, [](int r, clbComm_t comm) {
    EXPECT_EQ(clbCommGetAsyncError(comm, nullptr), clbInvalidArgument);
    std::vector<float> v(1000, (float)r);
    ASSERT_EQ(clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, comm, nullptr), clbSuccess)
        << clbGetLastError();
    clbResult_t a = clbInternalError;
    ASSERT_EQ(clbCommGetAsyncError(comm, &a), clbSuccess);
    EXPECT_EQ(a, clbSuccess) << clbGetLastError();
  });
}

using clbtest::Net;

class AsyncErrorTransports : public ::testing::TestWithParam<Net> {};

TEST_P(AsyncErrorTransports, PeerAbortIsReportedWithoutACall) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  Meet meet;
  twoRanks(clbtest::netTransport(GetParam()), 10000, [&](int r, clbComm_t comm) {
    std::vector<float> v(64, 1.0f);
    ASSERT_EQ(clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, comm, nullptr), clbSuccess)
        << clbGetLastError();
    meet.at(1);
    if (r == 1) {
      ASSERT_EQ(clbCommAbort(comm), clbSuccess);
      clbResult_t a = clbSuccess;
      ASSERT_EQ(clbCommGetAsyncError(comm, &a), clbSuccess);
      EXPECT_EQ(a, clbAborted) << "the aborting rank itself";
    } else {
      std::string msg;
      EXPECT_EQ(pollAsync(comm, 3000, &msg), clbAborted) << msg;
      EXPECT_NE(msg.find("rank 1 aborted"), std::string::npos) << msg;
    }
    meet.at(2);
  });
}

TEST_P(AsyncErrorTransports, FailedCollectiveIsReportedOnThisRankAndItsPeer) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  Meet meet;
  twoRanks(clbtest::netTransport(GetParam()), 300, [&](int r, clbComm_t comm) {
    std::vector<float> v(64, 1.0f);
    if (r == 1) {  // alone in a collective: times out, and the communicator is failed
      EXPECT_EQ(clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, comm, nullptr), clbTimeout);
      std::string msg;
      EXPECT_EQ(pollAsync(comm, 1000, &msg), clbTimeout) << msg;
      EXPECT_NE(msg.find("waited 300 ms"), std::string::npos) << msg;
    } else {
      std::string msg;
      EXPECT_EQ(pollAsync(comm, 3000, &msg), clbRemoteError) << msg;
      EXPECT_NE(msg.find("rank 1 failed"), std::string::npos) << msg;
    }
    meet.at(1);
  });
}
INSTANTIATE_TRANSPORTS(AsyncErrorTransports);

// The body of the rank process that AsyncError.PeerProcessKilled kills.
TEST(AsyncErrorChild, RankThatWaitsToBeKilled) {
  const char* id = getenv("CLB_ASYNC_CHILD_ID");
  if (!id) GTEST_SKIP() << "runs only as a child of AsyncError.PeerProcessKilled";
  clbUniqueId uid = clbtest::unhex(id);
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = atoi(getenv("CLB_ASYNC_CHILD_TRANSPORT"));
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &uid, 1, 2, &cfg), clbSuccess) << clbGetLastError();
  std::vector<float> v(1 << 16, 1.0f);  // one call with rank 0: its shared segment exists
  ASSERT_EQ(clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, comm, nullptr), clbSuccess);
  if (getenv("CLB_ASYNC_CHILD_CLOSES")) {  // a rank that is done: it closes and exits
    ASSERT_EQ(clbCommDestroy(comm), clbSuccess);
    _exit(0);
  }
  pause();  // until SIGKILL
}

// Rank 0 here, rank 1 in a child process that waits to be killed, both over `net` (the child
// inherits the environment: COLIBRI_TLS and its files); its pid, or -1.
pid_t withChildRank(Net net, clbComm_t* comm, int64_t timeoutMs, bool childCloses = false) {
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) return -1;
  std::vector<std::string> env{"CLB_ASYNC_CHILD_ID=" + clbtest::hex(id),
                               "CLB_ASYNC_CHILD_TRANSPORT=" + std::to_string(clbtest::netTransport(net))};
  if (childCloses) env.push_back("CLB_ASYNC_CHILD_CLOSES=1");
  pid_t pid = clbtest::spawnSelf("AsyncErrorChild.RankThatWaitsToBeKilled", env);
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.timeoutMs = timeoutMs;
  cfg.transport = clbtest::netTransport(net);
  if (pid > 0 && clbCommInitRank(comm, &id, 0, 2, &cfg) != clbSuccess) return -1;
  std::vector<float> v(1 << 16, 1.0f);
  if (clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, *comm, nullptr) != clbSuccess) return -1;
  return pid;
}

// The names in /dev/shm of the segments that rank `rank` of communicator `session` made.
std::vector<std::string> segmentsOf(uint64_t session, int rank) {
  std::vector<std::string> v;
  const std::string prefix = clb::sessionSegmentPrefix(session) + "r" + std::to_string(rank) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (struct dirent* e = readdir(d))
      if (!strncmp(e->d_name, prefix.c_str(), prefix.size())) v.push_back(e->d_name);
    closedir(d);
  }
  return v;
}

// Rank processes over every transport: a peer killed between calls is reported without a call
// (over socket and verbs it once never was: only the shared-memory transport looked), a peer that
// closed and exited is no error, and a rank blocked in a collective learns of a killed peer at once.
class AsyncErrorProcesses : public ::testing::TestWithParam<Net> {};

TEST_P(AsyncErrorProcesses, PeerProcessKilledIsReportedWithoutACall) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  clbComm_t comm = nullptr;
  pid_t pid = withChildRank(GetParam(), &comm, 10000);
  ASSERT_GT(pid, 0) << clbGetLastError();
  clbResult_t a = clbInternalError;
  ASSERT_EQ(clbCommGetAsyncError(comm, &a), clbSuccess);
  EXPECT_EQ(a, clbSuccess) << clbGetLastError();
  // Not reaped until the end: a zombie still has its pid (a check by pid would miss it), and a
  // launcher that is itself a rank, blocked in a collective, cannot reap its children.
  kill(pid, SIGKILL);
  const auto t0 = Clock::now();
  std::string msg;
  EXPECT_EQ(pollAsync(comm, 2000, &msg), clbRemoteError) << msg;
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(100) * clbtest::slowdown());
  EXPECT_NE(msg.find("rank 1 (pid " + std::to_string(pid) + ") exited or was killed"), std::string::npos) << msg;
  clbCommDestroy(comm);
  int status = 0;
  waitpid(pid, &status, 0);
}

// A peer that closed its communicator and exited is no error for the rank still holding its own:
// every call they shared completed. (Its process is a zombie here, not yet reaped.)
TEST_P(AsyncErrorProcesses, PeerThatClosedAndExitedIsNoError) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  clbComm_t comm = nullptr;
  pid_t pid = withChildRank(GetParam(), &comm, 10000, true);
  ASSERT_GT(pid, 0) << clbGetLastError();
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);  // exited, left unreaped
  EXPECT_EQ(info.si_code, CLD_EXITED);
  EXPECT_EQ(info.si_status, 0);
  std::string msg;
  EXPECT_EQ(pollAsync(comm, 200, &msg), clbSuccess) << msg;
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess) << clbGetLastError();
  int status = 0;
  waitpid(pid, &status, 0);
}

// The same for a rank blocked in a collective: it fails within 100 ms of its peer's SIGKILL (the
// peer not reaped), not at its timeout.
TEST_P(AsyncErrorProcesses, RankInACollectiveLearnsOfAKilledPeerWithin100Ms) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  clbComm_t comm = nullptr;
  pid_t pid = withChildRank(GetParam(), &comm, 10000);
  ASSERT_GT(pid, 0) << clbGetLastError();
  Clock::time_point killedAt;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    killedAt = Clock::now();
    kill(pid, SIGKILL);
  });
  std::vector<float> v(1024, 1.0f);
  clbResult_t rc = clbAllReduce(v.data(), v.data(), v.size(), clbFloat32, clbSum, comm, nullptr);
  const auto returnedAt = Clock::now();
  const std::string msg = clbGetLastError();
  killer.join();
  EXPECT_EQ(rc, clbRemoteError) << msg;
  EXPECT_NE(msg.find("exited or was killed"), std::string::npos) << msg;
  EXPECT_LT(returnedAt - killedAt, std::chrono::milliseconds(100));
  // Only the shared-memory transport names segments of its ranks.
  const uint64_t session = comm->boot.sessionNonce();
  if (GetParam() == Net::kShm)
    EXPECT_FALSE(segmentsOf(session, 1).empty()) << "the dead rank's staging segment is still named";
  clbCommDestroy(comm);
  EXPECT_EQ(segmentsOf(session, 1), std::vector<std::string>()) << "the survivor removes the dead rank's segments";
  int status = 0;
  waitpid(pid, &status, 0);
}

INSTANTIATE_TRANSPORTS(AsyncErrorProcesses);

}  // namespace
