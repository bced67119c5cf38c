// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Suspend and resume on the GPU (clbCommSuspend, the call under ncclCommSuspend): what a server's
// sleep mode relies on. Ranks as threads on GPU 0 and as processes: the application's buffers are
// allocated first, then the communicators; calls of every collective (LL, staged rounds, the
// copies through host memory) are checked element by element against the host reference; the
// suspend must give the GPU's memory back to where it stood before the init (cuMemGetInfo, the
// whole GPU, the driver's cache for streams grown first: see the test) and the communicator's own
// count to 0; calls while suspended are refused; after the
// resume the same calls with new inputs are right again. A communicator whose calls were captured
// in a graph is refused on every rank while the graph exists, and its graph replays on; once the
// graph is destroyed it suspends, resumes and captures again. FOOTPRINT-style lines (SUSPEND ...)
// give the figures for the results file. Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "colibri/colibri.h"
#include "core/comm.h"
#include "device/gpu_runtime.h"
#include "platform/cuda/driver.h"
#include "base/dtype.h"
#include "tests/cuda_test_util.h"

namespace {

using clb::cuda::Driver;

// As in cuda_collectives_test: rank threads of one process replaying graphs need a hardware queue
// per stream. Set before the first CUDA call of the process.
const int kConnections = setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);

// The calls of each round: LL sizes, staged rounds, every collective, in place and not.
std::vector<Call> roundCalls() {
  return {{1, clbFloat32, clbSum, 1003, false},  {1, clbFloat32, clbSum, 1000003, false},
          {1, clbBfloat16, clbAvg, 70001, true}, {2, clbBfloat16, clbSum, 4099, false},
          {3, clbFloat32, clbSum, 30011, false}, {4, clbInt64, clbSum, 200001, true},
          {5, clbFloat32, clbMax, 517, false}};
}

// One rank's buffers for the calls of a round, allocated once (before the communicator, as a
// server allocates its own).
struct Buffers {
  std::vector<CUdeviceptr> send, recv;
};

std::string allocate(const Driver* d, int n, Buffers* b) {
  for (const Call& c : roundCalls()) {
    const size_t esz = clbTypeSize(c.type);
    const size_t in = c.coll == 3 ? c.count * n : c.count, out = c.coll == 2 ? c.count * n : c.count;
    CUdeviceptr s = 0, r = 0;
    CU_OK(d->cuMemAlloc(&s, std::max(in, out) * esz));
    if (!c.inPlace) CU_OK(d->cuMemAlloc(&r, out * esz));
    b->send.push_back(s);
    b->recv.push_back(c.inPlace ? s : r);
  }
  return "";
}

void release(const Driver* d, Buffers* b) {
  const std::vector<Call> calls = roundCalls();
  for (size_t i = 0; i < calls.size(); i++) {
    d->cuMemFree(b->send[i]);
    if (!calls[i].inPlace) d->cuMemFree(b->recv[i]);
  }
  b->send.clear(), b->recv.clear();
}

// The calls of a round with inputs of `salt`, back to back on the rank's stream with a barrier on
// the stream after them, then one synchronize and every element against the host reference.
std::string callRound(const Driver* d, clbComm_t comm, CUstream stream, const Buffers& b, int rank, int n, int salt) {
  const std::vector<Call> calls = roundCalls();
  for (size_t i = 0; i < calls.size(); i++) {
    const Call& c = calls[i];
    const size_t esz = clbTypeSize(c.type);
    const size_t in = c.coll == 3 ? c.count * n : c.count, out = c.coll == 2 ? c.count * n : c.count;
    const std::vector<uint8_t> input = makeInput(rank, in, c.type, salt + (int)i);
    CU_OK(d->cuMemsetD8Async(b.recv[i], 0xa5, out * esz, stream));
    CU_OK(d->cuStreamSynchronize(stream));
    CUdeviceptr inAt = c.inPlace && c.coll == 2 ? b.recv[i] + rank * c.count * esz : b.send[i];
    CU_OK(upload(d, inAt, input.data(), input.size()));
  }
  for (size_t i = 0; i < calls.size(); i++) {
    const Call& c = calls[i];
    const clbResult_t rc = issue(c, b.send[i], b.recv[i], rank, n, comm, stream);
    if (rc != clbSuccess)
      return "call " + std::to_string(i) + " of round " + std::to_string(salt) + ": " + clbGetLastError();
  }
  // A barrier on the stream too: its int32 of device memory is the communicator's, and a suspend
  // gives it back like the rest (the count stayed at 4 bytes before the device runtime freed it).
  if (clbBarrier(comm, stream) != clbSuccess)
    return "the barrier of round " + std::to_string(salt) + ": " + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  for (size_t i = 0; i < calls.size(); i++) {
    const Call& c = calls[i];
    const size_t esz = clbTypeSize(c.type);
    const std::vector<uint8_t> want = expected(c, rank, n, salt + (int)i);
    std::vector<uint8_t> got(want.size());
    CUdeviceptr view = c.inPlace && c.coll == 3 ? b.send[i] + rank * c.count * esz : b.recv[i];
    CU_OK(d->cuMemcpyDtoH(got.data(), view, got.size()));
    for (size_t e = 0; e < want.size() / esz; e++)
      if (!sameBits(&got[e * esz], &want[e * esz], esz))
        return "round " + std::to_string(salt) + ", call " + std::to_string(i) + ", element " + std::to_string(e) +
               " differs from the host reference";
  }
  return "";
}

// A call on a suspended communicator: refused, saying why, and nothing launched.
std::string refusedWhileSuspended(clbComm_t comm, CUdeviceptr buf, CUstream stream) {
  const clbResult_t rc = clbAllReduce((void*)buf, (void*)buf, 1003, clbFloat32, clbSum, comm, stream);
  const std::string msg = clbGetLastError();
  if (rc != clbInvalidUsage || msg.find("suspended") == std::string::npos)
    return "a call while suspended: expected INVALID_USAGE saying suspended, got " + std::to_string(rc) + ": " + msg;
  return "";
}

int64_t ownDeviceBytes(clbComm_t comm) {
  clbMemStats_t st;
  return clbCommMemStats(comm, &st) == clbSuccess ? st.deviceBytes : -1;
}

// Runs body(rank) on a thread per rank, the primary context current on each: every rank's error.
std::vector<std::string> onRanks(int n, CUcontext ctx, const std::function<std::string(int)>& body) {
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      gpu()->cuCtxSetCurrent(ctx);
      errs[r] = body(r);
    });
  for (auto& t : ts) t.join();
  return errs;
}

#define EXPECT_RANKS_OK(errs)                                                         \
  do {                                                                                \
    const std::vector<std::string> e_ = (errs);                                       \
    for (size_t r_ = 0; r_ < e_.size(); r_++) EXPECT_EQ(e_[r_], "") << "rank " << r_; \
    if (HasFailure()) return;                                                         \
  } while (0)

double mib(int64_t bytes) { return (double)bytes / 1048576.0; }

}  // namespace

// The application's part of a test of n rank threads on GPU 0: its primary context current, and a
// rank's buffers and stream each; "" or what failed.
std::string application(const Driver* d, int n, CUcontext* ctx, std::vector<Buffers>* bufs,
                        std::vector<CUstream>* streams) {
  CUdevice dev;
  if (d->cuDeviceGet(&dev, 0) != CUDA_SUCCESS || d->cuDevicePrimaryCtxRetain(ctx, dev) != CUDA_SUCCESS ||
      d->cuCtxSetCurrent(*ctx) != CUDA_SUCCESS)
    return "GPU 0's primary context";
  for (int r = 0; r < n; r++) {
    if (std::string err = allocate(d, n, &(*bufs)[r]); !err.empty()) return err;
    if (d->cuStreamCreate(&(*streams)[r], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return "cuStreamCreate";
  }
  return "";
}

// The communicators of a process share one kernel image per context (GpuRuntime::kernels): an
// image per communicator would grow the driver's code memory with every communicator, for good
// (results/gpu/2026-12-06-h100-kernel-images/). Two rank threads' communicators, and a second
// communicator of each, after calls on each, hold the same image; twice, all of them destroyed in
// between.
TEST(DeviceKernelImage, IsOneForEveryCommunicatorOfAProcessOnAContext) {
  const Driver* d = gpu();
  if (!d) GTEST_SKIP() << "no GPU here: " << why;
  const int n = 2;
  CUcontext ctx;
  std::vector<Buffers> bufs(n);
  std::vector<CUstream> streams(n);
  ASSERT_EQ(application(d, n, &ctx, &bufs, &streams), "");
  auto image = [&](clbComm_t c) -> const void* {
    const clb::cuda::Kernels* k = nullptr;
    clb::DeviceCommContext* dc = c;
    if (!dc->gpu || dc->gpu->kernels(ctx, &k) != clbSuccess) return nullptr;
    return k;
  };
  for (int round = 0; round < 2; round++) {
    std::vector<clbComm_t> a(n), b(n);
    clbUniqueId ida, idb;
    ASSERT_EQ(clbGetUniqueId(&ida), clbSuccess);
    ASSERT_EQ(clbGetUniqueId(&idb), clbSuccess);
    EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
      if (clbCommInitRank(&a[r], &ida, r, n, nullptr) != clbSuccess) return std::string("init: ") + clbGetLastError();
      if (clbCommInitRank(&b[r], &idb, r, n, nullptr) != clbSuccess) return std::string("init: ") + clbGetLastError();
      std::string err = callRound(d, a[r], streams[r], bufs[r], r, n, 7);
      if (err.empty()) err = callRound(d, b[r], streams[r], bufs[r], r, n, 8);
      return err;
    }));
    std::vector<const void*> images;
    for (int r = 0; r < n; r++) images.push_back(image(a[r])), images.push_back(image(b[r]));
    for (const void* k : images) {
      EXPECT_NE(k, nullptr);
      EXPECT_EQ(k, images[0]) << "round " << round << ": the communicators hold different kernel images";
    }
    EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
      if (clbCommDestroy(a[r]) != clbSuccess || clbCommDestroy(b[r]) != clbSuccess)
        return std::string("destroy: ") + clbGetLastError();
      return "";
    }));
  }
  for (int r = 0; r < n; r++) {
    d->cuStreamDestroy(streams[r]);
    release(d, &bufs[r]);
  }
}

// Ranks as threads sharing GPU 0: ranks, and the path ("auto": peer access, LL and staged
// kernels; "viahost": as between GPUs without peer access, LL then the copy engines).
class DeviceSuspend : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(DeviceSuspend, GivesTheGpuBackToItsLevelBeforeTheInitAndTheNextCallsAreRight) {
  const Driver* d = gpu();
  if (!d) GTEST_SKIP() << "no GPU here: " << why;
  const int n = std::get<0>(GetParam());
  const std::string path = std::get<1>(GetParam());
  setenv("COLIBRI_DEVICE_PATH", "auto", 1);
  setenv("COLIBRI_DEVICE_P2P", path == "viahost" ? "off" : "auto", 1);
  CUcontext ctx;  // the application's part first: its buffers and streams
  std::vector<Buffers> bufs(n);
  std::vector<CUstream> streams(n);
  ASSERT_EQ(application(d, n, &ctx, &bufs, &streams), "");
  auto used = [&] {
    size_t free = 0, total = 0;
    d->cuCtxSynchronize();
    d->cuMemGetInfo(&free, &total);
    return (int64_t)(total - free);
  };
  // The driver keeps caches that grow with what a context has had at once and are not given back
  // when that goes: memory for the most streams (on an H100, 2 MiB per 4 beyond a level) and the
  // code memory of the most kernel images loaded (2 MiB steps; cuModuleUnload leaves it;
  // results/gpu/2026-12-06-h100-kernel-images/). A process's first communicators grow them once,
  // whatever they give back later: not memory a communicator holds. The test measures what the
  // communicators hold, so a first cycle of the same work (init, the calls, destroy) grows those
  // caches first, as a server's earlier communicators or its own work have them. The cycle below
  // then holds nothing beyond them: a communicator that kept anything would show here. (That the
  // communicators share one image is DeviceKernelImage's test, below.)
  const int64_t beforeWarm = used();
  {
    clbUniqueId warmId;
    ASSERT_EQ(clbGetUniqueId(&warmId), clbSuccess);
    std::vector<clbComm_t> warm(n);
    EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
      if (clbCommInitRank(&warm[r], &warmId, r, n, nullptr) != clbSuccess)
        return std::string("warm-up init: ") + clbGetLastError();
      std::string err = callRound(d, warm[r], streams[r], bufs[r], r, n, 50);
      if (clbCommDestroy(warm[r]) != clbSuccess && err.empty())
        err = std::string("warm-up destroy: ") + clbGetLastError();
      return err;
    }));
  }
  const int64_t before = used();
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<clbComm_t> comms(n);
  EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
    clbConfig_t cfg;
    clbConfigInit(&cfg);
    cfg.timeoutMs = 30000;
    return clbCommInitRank(&comms[r], &id, r, n, &cfg) == clbSuccess ? "" : std::string("init: ") + clbGetLastError();
  }));
  const int64_t afterInit = used();
  EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) { return callRound(d, comms[r], streams[r], bufs[r], r, n, 100); }));
  const int64_t afterCalls = used();
  int64_t ownAfterCalls = 0;
  for (int r = 0; r < n; r++) ownAfterCalls += ownDeviceBytes(comms[r]);
  EXPECT_GT(ownAfterCalls, 0) << "the calls set up no device memory: the suspend below would prove nothing";

  EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
    if (clbCommSuspend(comms[r]) != clbSuccess) return std::string("suspend: ") + clbGetLastError();
    int suspended = 0;
    if (clbCommSuspended(comms[r], &suspended) != clbSuccess || !suspended) return "not suspended after the suspend";
    if (int64_t own = ownDeviceBytes(comms[r]); own != 0)
      return "suspended, the communicator still counts " + std::to_string(own) + " bytes of device memory";
    return refusedWhileSuspended(comms[r], bufs[r].send[0], streams[r]);
  }));
  const int64_t afterSuspend = used();
  EXPECT_LE(afterSuspend, before) << "suspended, the GPU holds " << mib(afterSuspend - before)
                                  << " MiB more than before the init";

  EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
    if (clbCommResume(comms[r]) != clbSuccess) return std::string("resume: ") + clbGetLastError();
    return callRound(d, comms[r], streams[r], bufs[r], r, n, 200);
  }));
  const int64_t afterResume = used();
  // Suspended again and destroyed while suspended: nothing held, nothing leaked.
  EXPECT_RANKS_OK(onRanks(n, ctx, [&](int r) -> std::string {
    if (clbCommSuspend(comms[r]) != clbSuccess) return std::string("second suspend: ") + clbGetLastError();
    return clbCommDestroy(comms[r]) == clbSuccess ? "" : std::string("destroy: ") + clbGetLastError();
  }));
  const int64_t afterDestroy = used();
  EXPECT_LE(afterDestroy, before) << "destroyed, the GPU holds " << mib(afterDestroy - before) << " MiB more";
  printf(
      "SUSPEND ranks=%d path=%s driver_caches_after_first_cycle_MiB=%.2f MiB_over_before_init: after_init=%.2f "
      "after_calls=%.2f after_suspend=%.2f after_resume_and_calls=%.2f after_destroy=%.2f own_after_calls_MiB=%.2f\n",
      n, path.c_str(), mib(before - beforeWarm), mib(afterInit - before), mib(afterCalls - before),
      mib(afterSuspend - before), mib(afterResume - before), mib(afterDestroy - before), mib(ownAfterCalls));
  for (int r = 0; r < n; r++) {
    release(d, &bufs[r]);
    d->cuStreamDestroy(streams[r]);
  }
}
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceSuspend,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values("auto", "viahost")),
                         [](const ::testing::TestParamInfo<std::tuple<int, std::string>>& p) {
                           return std::to_string(std::get<0>(p.param)) + "threads_" + std::get<1>(p.param);
                         });

// Captured calls: while the graph (or its instantiation) exists the suspend is refused on every
// rank (its replays use the memory the suspend would free), nothing is freed, and the graph
// replays on with new data; once it is destroyed the suspend goes through and gives the
// communicator's device memory back, and after the resume an eager call and a call captured in a
// new graph are right.
TEST(DeviceSuspendCaptured, IsRefusedWhileTheGraphLivesAndGoesThroughOnceItIsDestroyed) {
  const Driver* d = gpu();
  if (!d) GTEST_SKIP() << "no GPU here: " << why;
  setenv("COLIBRI_DEVICE_PATH", "auto", 1);
  setenv("COLIBRI_DEVICE_P2P", "auto", 1);
  const int n = 2;
  const size_t count = 100003;
  runThreads(n, [&](const clbUniqueId& id, int rank, int) -> std::string {
    CUstream stream = nullptr;
    clbComm_t comm = nullptr;
    if (std::string e = setUpRank(d, id, rank, n, &stream, &comm); !e.empty()) return e;
    CUdeviceptr in = 0, out = 0;
    CU_OK(d->cuMemAlloc(&in, count * 4));
    CU_OK(d->cuMemAlloc(&out, count * 4));
    std::string err;
    // Inputs of round `salt`, and the check of `out` against the sum over the ranks.
    auto fill = [&](int salt) {
      std::vector<float> v(count);
      for (size_t e = 0; e < count; e++) v[e] = (float)((rank + 1) * 100 + (int)(e % 911) + salt);
      CU_OK(upload(d, in, v.data(), v.size() * 4));
      CU_OK(d->cuMemsetD8Async(out, 0xa5, count * 4, stream));
      return std::string();
    };
    auto check = [&](int salt, const std::string& what) {
      CU_OK(d->cuStreamSynchronize(stream));
      std::vector<float> got(count);
      CU_OK(d->cuMemcpyDtoH(got.data(), out, got.size() * 4));
      for (size_t e = 0; e < count; e++) {
        float want = 0;
        for (int p = 0; p < n; p++) want += (float)((p + 1) * 100 + (int)(e % 911) + salt);
        if (got[e] != want)
          return what + " element " + std::to_string(e) + ": got " + std::to_string(got[e]) + " want " +
                 std::to_string(want);
      }
      return std::string();
    };
    // Captures one all-reduce into a new graph, instantiated and uploaded.
    auto capture = [&](CUgraph* graph, CUgraphExec* exec) {
      CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      std::string e;
      if (clbAllReduce((void*)in, (void*)out, count, clbFloat32, clbSum, comm, stream) != clbSuccess)
        e = std::string("captured call: ") + clbGetLastError();
      CU_OK(d->cuStreamEndCapture(stream, graph));
      if (e.empty()) CU_OK(d->cuGraphInstantiateWithFlags(exec, *graph, 0));
      if (e.empty()) CU_OK(d->cuGraphUpload(*exec, stream));
      CU_OK(d->cuStreamSynchronize(stream));
      return e;
    };
    // Eager first (a capture needs the staging made), then one all-reduce captured.
    if (clbAllReduce((void*)in, (void*)out, count, clbFloat32, clbSum, comm, stream) != clbSuccess)
      err = std::string("eager call: ") + clbGetLastError();
    CU_OK(d->cuStreamSynchronize(stream));
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    if (err.empty()) err = capture(&graph, &exec);
    const int64_t own = ownDeviceBytes(comm);
    if (err.empty()) {
      const clbResult_t rc = clbCommSuspend(comm);
      const std::string msg = clbGetLastError();
      int suspended = 1;
      clbCommSuspended(comm, &suspended);
      if (rc != clbInvalidUsage || msg.find("captured in CUDA graphs that still exist") == std::string::npos ||
          msg.find("destroy those graphs") == std::string::npos || suspended)
        err = "suspend while the graph exists: expected INVALID_USAGE naming the graphs, not suspended; got " +
              std::to_string(rc) + " (suspended " + std::to_string(suspended) + "): " + msg;
      else if (ownDeviceBytes(comm) != own)
        err = "the refused suspend changed the communicator's device memory";
    }
    for (int rep = 0; rep < 3 && err.empty(); rep++) {
      err = fill(rep);
      if (err.empty()) err = replay(exec, stream, {comm});
      if (err.empty()) err = check(rep, "replay " + std::to_string(rep));
    }
    // The graph without its instantiation still holds: refused again.
    if (exec) d->cuGraphExecDestroy(exec);
    exec = nullptr;
    if (err.empty() && clbCommSuspend(comm) != clbInvalidUsage)
      err = std::string("suspend while the graph (not its instantiation) exists: not refused: ") + clbGetLastError();
    // A clone of the graph holds as the graph does: with the original destroyed, still refused,
    // and the clone's replays right.
    CUgraph clone = nullptr;
    if (err.empty()) CU_OK(d->cuGraphClone(&clone, graph));
    if (graph) d->cuGraphDestroy(graph);
    graph = nullptr;
    if (err.empty() && clbCommSuspend(comm) != clbInvalidUsage)
      err = std::string("suspend while a clone of the destroyed graph exists: not refused: ") + clbGetLastError();
    if (err.empty()) {
      CU_OK(d->cuGraphInstantiateWithFlags(&exec, clone, 0));
      CU_OK(d->cuGraphUpload(exec, stream));
      CU_OK(d->cuStreamSynchronize(stream));
    }
    if (err.empty()) err = fill(5);
    if (err.empty()) err = replay(exec, stream, {comm});
    if (err.empty()) err = check(5, "replay of the clone");
    if (exec) d->cuGraphExecDestroy(exec);
    exec = nullptr;
    if (clone) d->cuGraphDestroy(clone);
    // Gone: the user objects' destructors run when the driver releases the graph, a little after
    // the destroy, and the suspend waits for that: it goes through at the first try.
    if (err.empty() && clbCommSuspend(comm) != clbSuccess)
      err = std::string("suspend right after the graph was destroyed: ") + clbGetLastError();
    if (err.empty() && ownDeviceBytes(comm) != 0)
      err = "suspended, the communicator still counts " + std::to_string(ownDeviceBytes(comm)) + " device bytes";
    if (err.empty() && clbCommResume(comm) != clbSuccess) err = std::string("resume: ") + clbGetLastError();
    if (err.empty()) err = fill(7);
    if (err.empty() && clbAllReduce((void*)in, (void*)out, count, clbFloat32, clbSum, comm, stream) != clbSuccess)
      err = std::string("eager call after the resume: ") + clbGetLastError();
    if (err.empty()) err = check(7, "eager call after the resume");
    if (err.empty()) err = capture(&graph, &exec);
    for (int rep = 0; rep < 2 && err.empty(); rep++) {
      err = fill(20 + rep);
      if (err.empty()) err = replay(exec, stream, {comm});
      if (err.empty()) err = check(20 + rep, "a new graph's replay " + std::to_string(rep) + " after the resume");
    }
    if (exec) d->cuGraphExecDestroy(exec);
    if (graph) d->cuGraphDestroy(graph);
    clbCommDestroy(comm);
    d->cuMemFree(in);
    d->cuMemFree(out);
    d->cuStreamDestroy(stream);
    return err;
  });
}

// Rank processes (peer buffers through CUDA IPC, which the suspend closes): a round, the suspend,
// a refused call, the resume, a round with new inputs; each process's communicator counts 0 bytes
// while suspended.
TEST(DeviceSuspendChild, Rank) {
  int rank = 0, n = 0;
  clbUniqueId id;
  if (!rankSpec("CLB_SUSPEND_CHILD", &rank, &n, &id)) GTEST_SKIP() << "runs only as a child of DeviceSuspendProcesses";
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  ASSERT_EQ(openRank(id, rank, n, &d, &stream, &comm), "");
  Buffers b;
  ASSERT_EQ(allocate(d, n, &b), "");
  EXPECT_EQ(callRound(d, comm, stream, b, rank, n, 300), "");
  ASSERT_EQ(clbCommSuspend(comm), clbSuccess) << clbGetLastError();
  EXPECT_EQ(ownDeviceBytes(comm), 0);
  EXPECT_EQ(refusedWhileSuspended(comm, b.send[0], stream), "");
  ASSERT_EQ(clbCommResume(comm), clbSuccess) << clbGetLastError();
  EXPECT_EQ(callRound(d, comm, stream, b, rank, n, 400), "");
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess);
  release(d, &b);
  d->cuStreamDestroy(stream);
}

class DeviceSuspendProcesses : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(DeviceSuspendProcesses, AProcessOfEachRankResumesOnTheSamePeers) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  const std::string path = std::get<1>(GetParam());
  runRankProcesses(
      "DeviceSuspendChild.Rank", "CLB_SUSPEND_CHILD", std::get<0>(GetParam()),
      {"COLIBRI_DEVICE_PATH=auto", std::string("COLIBRI_DEVICE_P2P=") + (path == "viahost" ? "off" : "auto")});
}
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceSuspendProcesses,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values("auto", "viahost")),
                         [](const ::testing::TestParamInfo<std::tuple<int, std::string>>& p) {
                           return std::to_string(std::get<0>(p.param)) + "processes_" + std::get<1>(p.param);
                         });
