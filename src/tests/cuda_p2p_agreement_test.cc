// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point calls on device memory whose two sides disagree, on the GPU path (ranks on one
// GPU): a receive of the same size as its send but another type, a send larger than its receive
// (into a buffer with a guard after it), one rank's all-to-all against its peer's group of a send
// and a receive, and ranks that disagree on the root of a gather or a scatter. Between rank
// threads eagerly (their host meeting compares sizes only), inside a CUDA graph and with
// COLIBRI_DEVICE_MEET=off (no meeting at all), and between rank processes. Every such receive must
// fail (REMOTE_ERROR from clbCommGetAsyncError, or a refusal of the call), long before the
// timeout, with not a byte written into its buffer or past it; the peer never waits past the
// timeout; and the receiving communicator refuses its next call.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"

namespace {

constexpr int64_t kTimeoutMs = 8000;  // the communicator's
constexpr int64_t kAtOnceMs = 3000;   // what "long before the timeout" means here
constexpr int64_t kPoison = 0x5A5A5A5A5A5A5A5ALL;
constexpr size_t kGuard = 1 << 17;  // elements after each receive buffer, poisoned and checked

// (mode, case, count): mode "threads", "graph", "meetoff" or "processes"; count the send's.
using Param = std::tuple<std::string, std::string, size_t>;

// What one rank of two does in case `c`: its call, on `in` (sent) and `out` (received; poisoned).
clbResult_t call(const std::string& c, int r, size_t count, CUdeviceptr in, CUdeviceptr out, clbComm_t comm,
                 CUstream s) {
  void* src = reinterpret_cast<void*>(in);
  void* dst = reinterpret_cast<void*>(out);
  const int peer = 1 - r;
  if (c == "type")  // the same bytes, another type
    return r == 0 ? clbSend(src, count, clbInt64, peer, comm, s) : clbRecv(dst, count, clbFloat64, peer, comm, s);
  if (c == "size")  // the receive is 32 times smaller than the send
    return r == 0 ? clbSend(src, count, clbInt64, peer, comm, s) : clbRecv(dst, count / 32, clbInt64, peer, comm, s);
  if (c == "alltoall") {  // rank 0's all-to-all meets rank 1's group of the same messages
    if (r == 0) return clbAllToAll(src, dst, count, clbInt64, comm, s);
    if (clbResult_t rc = clbGroupStart()) return rc;
    clbSend(reinterpret_cast<char*>(src) + peer * count * 8, count, clbInt64, peer, comm, s);
    clbRecv(reinterpret_cast<char*>(dst) + peer * count * 8, count, clbInt64, peer, comm, s);
    clbSend(reinterpret_cast<char*>(src) + r * count * 8, count, clbInt64, r, comm, s);
    clbRecv(reinterpret_cast<char*>(dst) + r * count * 8, count, clbInt64, r, comm, s);
    return clbGroupEnd();
  }
  if (c == "gatherroot")  // each rank believes it is the root
    return clbGather(src, dst, count, clbInt64, r, comm, s);
  if (c == "scatterroot") return clbScatter(src, dst, count, clbInt64, r, comm, s);
  return clbInvalidArgument;
}

// Elements of `out` the case's call may write on this rank by its own view (a root's own block of
// a gather or scatter, a rank's block to itself in an all-to-all): [from, to).
std::pair<size_t, size_t> ownBlock(const std::string& c, int r, size_t count) {
  if (c == "alltoall" || c == "gatherroot") return {r * count, (r + 1) * count};
  if (c == "scatterroot") return {0, count};
  return {0, 0};
}

std::string rankBody(const clbUniqueId& id, int r, const std::string& mode, const std::string& c, size_t count) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, 2, &d, &stream, &comm, kTimeoutMs); !e.empty()) return e;
  const size_t elems = 2 * count + kGuard;
  CUdeviceptr in = 0, out = 0;
  CU_OK(d->cuMemAlloc(&in, elems * 8));
  CU_OK(d->cuMemAlloc(&out, elems * 8));
  std::vector<int64_t> src(elems), poison(elems, kPoison);
  for (size_t i = 0; i < elems; i++) src[i] = (int64_t)(r + 1) * 1000003LL + (int64_t)i;
  CU_OK(upload(d, in, src.data(), elems * 8));
  std::string err;
  // A matching exchange first: it sets the pair up (a capture needs that) and must go through.
  const int peer = 1 - r;
  if (clbGroupStart() != clbSuccess || clbSend(reinterpret_cast<void*>(in), 64, clbInt64, peer, comm, stream) ||
      clbRecv(reinterpret_cast<void*>(out), 64, clbInt64, peer, comm, stream) || clbGroupEnd() != clbSuccess)
    err = std::string("the matching exchange: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  CU_OK(upload(d, out, poison.data(), elems * 8));
  // The case's call: eager, or captured and replayed.
  const auto t0 = std::chrono::steady_clock::now();
  clbResult_t rc = clbSuccess;
  std::string msg;
  CUgraph g = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty() && mode == "graph") {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    rc = call(c, r, count, in, out, comm, stream);
    msg = clbGetLastError();
    CU_OK(d->cuStreamEndCapture(stream, &g));
    if (rc == clbSuccess) {
      CU_OK(d->cuGraphInstantiateWithFlags(&exec, g, 0));
      CU_OK(d->cuGraphUpload(exec, stream));
      CU_OK(d->cuStreamSynchronize(stream));
      if (clbBarrier(comm, nullptr) != clbSuccess) err = std::string("barrier before the replay: ") + clbGetLastError();
      if (err.empty() && d->cuGraphLaunch(exec, stream) != CUDA_SUCCESS) err = "cuGraphLaunch failed";
    }
  } else if (err.empty()) {
    rc = call(c, r, count, in, out, comm, stream);
    msg = clbGetLastError();
  }
  if (d->cuStreamSynchronize(stream) != CUDA_SUCCESS && err.empty()) err = "the stream failed";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  clbResult_t async = clbSuccess;
  clbCommGetAsyncError(comm, &async);
  const std::string why = clbGetLastError();
  // Who must see it: every receiving side (rank 1 of type and size; both of the others).
  const bool receiver = r == 1 || (c != "type" && c != "size");
  const bool failed = rc != clbSuccess || async != clbSuccess;
  const std::string outcome = "call " + std::to_string(rc) + " (" + msg + "), async " + std::to_string(async) + " (" +
                              why + ") after " + std::to_string(ms) + " ms";
  if (err.empty() && receiver && !failed) err = "the disagreeing call succeeded: " + outcome;
  if (err.empty() && receiver && ms > kAtOnceMs) err = "seen only at the timeout: " + outcome;
  if (err.empty() && rc == clbSuccess && async != clbSuccess && async != clbRemoteError && async != clbTimeout)
    err = "expected REMOTE_ERROR (or, on a sender, TIMEOUT): " + outcome;
  if (err.empty() && rc == clbSuccess && async == clbRemoteError &&
      why.find("met its peer's of another call, count or type") == std::string::npos)
    err = "the error does not say what happened: " + why;
  if (err.empty() && ms > kTimeoutMs + 2000) err = "waited past the timeout: " + outcome;
  // Not a byte written into the receive or past it (but a rank's own block, by its own view).
  if (err.empty()) {
    std::vector<int64_t> got(elems);
    CU_OK(d->cuMemcpyDtoH(got.data(), out, elems * 8));
    const auto [from, to] = ownBlock(c, r, count);
    for (size_t i = 0; i < elems && err.empty(); i++)
      if ((i < from || i >= to) && got[i] != kPoison)
        err = "element " + std::to_string(i) + " of the receive buffer (" + std::to_string(elems) +
              " with the guard) was written: " + outcome;
  }
  // The failed communicator refuses what comes next.
  if (err.empty() && receiver && rc == clbSuccess &&
      clbSend(reinterpret_cast<void*>(in), 8, clbInt64, peer, comm, stream) == clbSuccess)
    err = "the call after the disagreement was accepted";
  if (exec) d->cuGraphExecDestroy(exec);
  if (g) d->cuGraphDestroy(g);
  clbCommDestroy(comm);
  d->cuMemFree(in);
  d->cuMemFree(out);
  d->cuStreamDestroy(stream);
  return err;
}

// The body of one rank process (started by DeviceP2pAgreement); skipped when run on its own.
TEST(DeviceP2pAgreementChild, Rank) {
  const char* spec = getenv("CLB_P2P_AGREE_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as a child of DeviceP2pAgreement";
  int rank = 0;
  unsigned long long count = 0;
  char c[32] = {0}, idHex[2 * CLB_UNIQUE_ID_BYTES + 1] = {0};
  ASSERT_EQ(sscanf(spec, "%d:%llu:%31[^:]:%256s", &rank, &count, c, idHex), 4);
  EXPECT_EQ(rankBody(unhex(idHex), rank, "processes", c, count), "") << "rank " << rank;
}

class DeviceP2pAgreement : public ::testing::TestWithParam<Param> {};

TEST_P(DeviceP2pAgreement, EveryReceiveThatMeetsAnotherCallFailsAtOnceAndWritesNothing) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  const auto& [mode, c, count] = GetParam();
  if (mode == "meetoff") setenv("COLIBRI_DEVICE_MEET", "off", 1);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  if (mode == "processes") {
    std::vector<pid_t> pids;
    for (int r = 0; r < 2; r++) {
      const std::string spec = std::to_string(r) + ":" + std::to_string(count) + ":" + c + ":" + hex(id);
      pid_t pid = spawnGpuRank("DeviceP2pAgreementChild.Rank", {"CLB_P2P_AGREE_CHILD=" + spec});
      ASSERT_GT(pid, 0);
      pids.push_back(pid);
    }
    expectRanksEnd(pids, std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs + 30000));
  } else {
    std::vector<std::string> errs(2);
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; r++) ts.emplace_back([&, r] { errs[r] = rankBody(id, r, mode, c, count); });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
  }
  unsetenv("COLIBRI_DEVICE_MEET");
  clbUniqueIdRelease(&id);
}

// Counts: 1000 elements move in lines, 131072 (1 MiB) in place between threads (between
// processes, unregistered, in lines too).
std::vector<Param> params() {
  std::vector<Param> v;
  for (const char* mode : {"threads", "graph", "meetoff", "processes"}) {
    for (const char* c : {"type", "size", "alltoall", "gatherroot", "scatterroot"}) v.emplace_back(mode, c, 1000);
    for (const char* c : {"type", "size", "alltoall"}) v.emplace_back(mode, c, 131072);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Pairs, DeviceP2pAgreement, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_c" + std::to_string(std::get<2>(info.param));
});

}  // namespace
