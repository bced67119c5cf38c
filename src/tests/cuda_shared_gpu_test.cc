// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks that share one GPU (processes, and threads of one process), doing what a tensor-parallel decode step does
// between its collectives: kernels that want whole SMs (as large GEMMs and attention kernels do) on a compute stream,
// the collectives on a stream of their own ordered after it by events (as PyTorch orders its communication stream), an
// all-reduce after each "layer" and an all-gather of vocab-parallel logits at the end, eager and captured in a CUDA
// graph. One rank is late by a few milliseconds before each step, so the others' collectives are already on the GPU
// while its whole-SM kernels still have to run. No rank may hold up another: every step ends well within the
// communicator's timeout with every element right.
//
// The whole-SM kernel is PTX, JIT-compiled by the driver: each block asks for all the shared
// memory a block may opt in to, so it runs only on an SM where nothing else is resident, and
// spins on the global timer for a set time (a GEMM's tile, without the arithmetic).
//
// Run with the MPS daemon up (scripts/gpu-shared.sh starts it): rank processes are time-sliced
// without it. Skipped without a GPU. CLB_TEST_REPEAT repeats each case's steps (default 1 pass of
// kSteps).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "tests/cuda_test_util.h"

namespace {

constexpr int64_t kTimeoutMs = 20000;  // the communicator's: a held-up rank ends there, failing the case
constexpr int kSteps = 4;              // decode steps per pass
constexpr int kLayers = 2;             // whole-SM kernel + allReduce per layer, per step

const char kHogPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 clb_hog_smem[];
.visible .entry clb_test_hog(.param .u64 clb_test_hog_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [clb_test_hog_ns];
  mov.u32 %r1, %tid.x;
  st.shared.u32 [clb_hog_smem], %r1;
  mov.u64 %rd2, %globaltimer;
SPIN:
  mov.u64 %rd3, %globaltimer;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra SPIN;
  ret;
}
)";

// The case: how many rank processes, eager or graph, and the sizes of the step's collectives
// (float32 elements: the all-reduce's count, the all-gather's per rank).
struct Shape {
  int ranks;
  bool threads;  // rank threads of one process (else rank processes)
  bool graph;
  size_t reduceCount;
  size_t gatherCount;
  const char* name;
};

// Exact in float32 for any number of ranks here: small integers.
float valueOf(int rank, size_t i, int step, int salt) {
  return (float)((rank + 1) * (int)(i % 13 + 1) + step * 3 + salt);
}

struct Hog {
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  int sms = 0;
  int smem = 0;
};

std::string loadHog(const Driver* d, Hog* h) {
  CU_OK(d->cuModuleLoadData(&h->module, kHogPtx));
  CU_OK(d->cuModuleGetFunction(&h->fn, h->module, "clb_test_hog"));
  CUdevice dev;
  CU_OK(d->cuCtxGetDevice(&dev));
  CU_OK(d->cuDeviceGetAttribute(&h->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CU_OK(d->cuDeviceGetAttribute(&h->smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  // A block of it must leave no room on its SM for any other block (each block also reserves some
  // shared memory): else it would not need a whole SM, and the test could not fail.
  int perSm = 0, reserved = 0;
  CU_OK(d->cuDeviceGetAttribute(&perSm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev));
  CU_OK(d->cuDeviceGetAttribute(&reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev));
  if (perSm - (h->smem + reserved) >= reserved)
    return "a block with " + std::to_string(h->smem) + " bytes of shared memory leaves " +
           std::to_string(perSm - h->smem - reserved) + " of the SM's " + std::to_string(perSm) +
           " bytes to other blocks: the whole-SM kernel would not need a whole SM on this GPU";
  CU_OK(d->cuFuncSetAttribute(h->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, h->smem));
  return "";
}

// Two waves of whole-SM blocks, each spinning `ns`.
std::string launchHog(const Driver* d, const Hog& h, CUstream s, unsigned long long ns) {
  void* args[] = {&ns};
  CU_OK(d->cuLaunchKernel(h.fn, 2 * h.sms, 1, 1, 256, 1, 1, h.smem, s, args, nullptr));
  return "";
}

// One rank: kSteps decode steps (times CLB_TEST_REPEAT), each checked element by element. Graphs
// replay through clbGraphLaunch, each rank as soon as its own graph is uploaded (no barrier between
// the ranks: a rank thread may still be capturing while another replays). Rank threads also
// allocate and free device memory between steps (a free synchronizes the whole context, which
// waits for every thread's work on the GPU).
std::string sharedRank(const clbUniqueId& id, int rank, const Shape& sh) {
  const int n = sh.ranks;
  const Driver* d = nullptr;
  CUstream compute = nullptr, comm = nullptr;
  clbComm_t c = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &comm, &c, kTimeoutMs); !e.empty()) return e;
  CU_OK(d->cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING));
  Hog hog;
  if (std::string e = loadHog(d, &hog); !e.empty()) return e;
  const int late = n - 1;
  const char* rep = getenv("CLB_TEST_REPEAT");
  const int passes = rep ? std::max(1, atoi(rep)) : 1;
  const size_t rc = sh.reduceCount, gc = sh.gatherCount;
  CUdeviceptr act = 0, red = 0, gin = 0, gout = 0;
  CU_OK(d->cuMemAlloc(&act, rc * 4 * kLayers));
  CU_OK(d->cuMemAlloc(&red, rc * 4 * kLayers));
  CU_OK(d->cuMemAlloc(&gin, gc * 4));
  CU_OK(d->cuMemAlloc(&gout, gc * 4 * n));
  CUevent computed = nullptr, communicated = nullptr;
  CU_OK(d->cuEventCreate(&computed, CU_EVENT_DISABLE_TIMING));
  CU_OK(d->cuEventCreate(&communicated, CU_EVENT_DISABLE_TIMING));
  std::vector<float> hostAct(rc * kLayers), hostGin(gc);
  std::string err;

  // The step as the decode enqueues it: per layer a whole-SM kernel on the compute stream, then
  // the all-reduce on the communication stream after an event, the compute stream waiting for it;
  // then the all-gather of the logits the same way.
  auto step = [&]() -> std::string {
    for (int l = 0; l < kLayers; l++) {
      if (std::string e = launchHog(d, hog, compute, 200 * 1000); !e.empty()) return e;
      CU_OK(d->cuEventRecord(computed, compute));
      CU_OK(d->cuStreamWaitEvent(comm, computed, 0));
      if (clbAllReduce((void*)(act + l * rc * 4), (void*)(red + l * rc * 4), rc, clbFloat32, clbSum, c, comm) !=
          clbSuccess)
        return std::string("allReduce: ") + clbGetLastError();
      CU_OK(d->cuEventRecord(communicated, comm));
      CU_OK(d->cuStreamWaitEvent(compute, communicated, 0));
    }
    if (std::string e = launchHog(d, hog, compute, 200 * 1000); !e.empty()) return e;
    CU_OK(d->cuEventRecord(computed, compute));
    CU_OK(d->cuStreamWaitEvent(comm, computed, 0));
    if (clbAllGather((void*)gin, (void*)gout, gc, clbFloat32, c, comm) != clbSuccess)
      return std::string("allGather: ") + clbGetLastError();
    CU_OK(d->cuEventRecord(communicated, comm));
    CU_OK(d->cuStreamWaitEvent(compute, communicated, 0));
    return "";
  };
  // Inputs of step `s` (graph replays: the same inputs, s = 0), written before the step.
  auto fill = [&](int s) -> std::string {
    for (int l = 0; l < kLayers; l++)
      for (size_t i = 0; i < rc; i++) hostAct[l * rc + i] = valueOf(rank, i, s, l);
    for (size_t i = 0; i < gc; i++) hostGin[i] = valueOf(rank, i, s, 7);
    CU_OK(upload(d, act, hostAct.data(), rc * 4 * kLayers));
    CU_OK(upload(d, gin, hostGin.data(), gc * 4));
    CU_OK(d->cuMemsetD8(red, 0xa5, rc * 4 * kLayers));
    CU_OK(d->cuMemsetD8(gout, 0xa5, gc * 4 * n));
    return "";
  };
  auto check = [&](int s, const std::string& what) -> std::string {
    // A hang shows here: the step's work ends only once the collectives have (or timed out).
    const auto t0 = std::chrono::steady_clock::now();
    CU_OK(d->cuStreamSynchronize(compute));
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    clbResult_t async = clbSuccess;
    clbCommGetAsyncError(c, &async);
    if (async != clbSuccess)
      return what + ": the communicator failed after " + std::to_string(ms) + " ms: " + clbGetLastError();
    std::vector<float> got(rc * kLayers), gathered(gc * n);
    CU_OK(d->cuMemcpyDtoH(got.data(), red, rc * 4 * kLayers));
    CU_OK(d->cuMemcpyDtoH(gathered.data(), gout, gc * 4 * n));
    for (int l = 0; l < kLayers; l++)
      for (size_t i = 0; i < rc; i++) {
        float want = 0;
        for (int p = 0; p < n; p++) want += valueOf(p, i, s, l);
        if (got[l * rc + i] != want)
          return what + ": layer " + std::to_string(l) + " allReduce element " + std::to_string(i) + " is " +
                 std::to_string(got[l * rc + i]) + ", not " + std::to_string(want);
      }
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < gc; i++)
        if (gathered[p * gc + i] != valueOf(p, i, s, 7))
          return what + ": allGather element " + std::to_string(i) + " of rank " + std::to_string(p) + " is " +
                 std::to_string(gathered[p * gc + i]) + ", not " + std::to_string(valueOf(p, i, s, 7));
    return "";
  };
  auto beLate = [&] {
    if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  };

  // A first step eager in lockstep sets up what the sizes need (every path's buffers).
  if (err.empty()) err = fill(0);
  if (err.empty()) err = step();
  if (err.empty()) err = check(0, "the first step");
  CUgraphExec exec = nullptr;
  CUgraph graph = nullptr;
  if (err.empty() && sh.graph) {
    CU_OK(d->cuStreamBeginCapture(compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    err = step();
    CUresult end = d->cuStreamEndCapture(compute, &graph);
    if (err.empty() && end != CUDA_SUCCESS) err = "cuStreamEndCapture failed: " + std::to_string(end);
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
    if (err.empty()) CU_OK(d->cuGraphUpload(exec, compute));
    if (err.empty()) CU_OK(d->cuStreamSynchronize(compute));
  }
  for (int k = 0; k < passes * kSteps && err.empty(); k++) {
    const int s = sh.graph ? 0 : k + 1;
    err = fill(s);
    if (!err.empty()) break;
    beLate();
    if (sh.graph) {
      if (clbGraphLaunch(exec, compute, &c, 1) != clbSuccess) err = std::string("clbGraphLaunch: ") + clbGetLastError();
    } else {
      err = step();
    }
    if (err.empty()) err = check(s, (sh.graph ? "replay " : "step ") + std::to_string(k + 1));
    if (err.empty() && sh.threads) {  // the allocator between steps
      CUdeviceptr scratch = 0;
      CU_OK(d->cuMemAlloc(&scratch, (size_t)(k + 1) << 20));
      CU_OK(d->cuMemFree(scratch));
    }
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  clbCommDestroy(c);
  d->cuMemFree(act);
  d->cuMemFree(red);
  d->cuMemFree(gin);
  d->cuMemFree(gout);
  d->cuEventDestroy(computed);
  d->cuEventDestroy(communicated);
  d->cuModuleUnload(hog.module);
  d->cuStreamDestroy(compute);
  d->cuStreamDestroy(comm);
  return err.empty() ? "" : "rank " + std::to_string(rank) + (rank == late ? " (the late one)" : "") + ": " + err;
}

const Shape kShapes[] = {
    // The decode's sizes (Llama-8B-shaped, batch 16): all-reduces of 256 KiB, the logits'
    // all-gather of 250 KB per rank; 128 KiB all-reduces alone, and small ones, as control.
    {2, false, false, 65536, 64000, "2ranks_eager_decode"},
    {4, false, false, 65536, 64000, "4ranks_eager_decode"},
    {8, false, false, 65536, 64000, "8ranks_eager_decode"},
    {2, false, true, 65536, 64000, "2ranks_graph_decode"},
    {4, false, true, 65536, 64000, "4ranks_graph_decode"},
    {8, false, true, 65536, 64000, "8ranks_graph_decode"},
    {4, false, false, 32768, 2, "4ranks_eager_allreduce128k"},
    {4, false, false, 2, 2, "4ranks_eager_small"},
    {4, false, true, 2, 2, "4ranks_graph_small"},
    {4, true, false, 65536, 64000, "4threads_eager_decode"},
    {8, true, false, 65536, 64000, "8threads_eager_decode"},
    {4, true, true, 65536, 64000, "4threads_graph_decode"},
    {8, true, true, 65536, 64000, "8threads_graph_decode"},
};

const Shape* shapeNamed(const std::string& name) {
  for (const Shape& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

// The body of one rank process (started by DeviceSharedGpu); skipped when run on its own.
TEST(DeviceSharedGpuChild, Rank) {
  const char* spec = getenv("CLB_SHARED_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as a child of DeviceSharedGpu";
  int rank = 0;
  char name[64] = {0}, idHex[2 * CLB_UNIQUE_ID_BYTES + 1] = {0};
  ASSERT_EQ(sscanf(spec, "%d:%63[^:]:%256s", &rank, name, idHex), 3);
  const Shape* sh = shapeNamed(name);
  ASSERT_NE(sh, nullptr) << name;
  EXPECT_EQ(sharedRank(unhex(idHex), rank, *sh), "");
}

class DeviceSharedGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(DeviceSharedGpu, NoRankIsHeldUpByAnother) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  const Shape& sh = GetParam();
  unsetenv("CLB_TEST_SPREAD");
  if (sh.threads) {
    runThreads(sh.ranks, [&](const clbUniqueId& id, int r, int) { return sharedRank(id, r, sh); });
    return;
  }
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < sh.ranks; r++) {
    const std::string spec = std::to_string(r) + ":" + sh.name + ":" + hex(id);
    // The MPS server's default hardware queues per client: 32 (which colibri_tests sets for its
    // thread suites) would exceed the server's connections with 8 clients.
    pid_t pid = spawnGpuRank("DeviceSharedGpuChild.Rank", {"CLB_SHARED_CHILD=" + spec});
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  // A held-up rank shows as the others' timeout (kTimeoutMs) and a failed step; past that plus
  // set-up, a rank process that has not ended is killed.
  const char* rep = getenv("CLB_TEST_REPEAT");
  const int passes = rep ? std::max(1, atoi(rep)) : 1;
  expectRanksEnd(pids,
                 std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * kTimeoutMs + 30000 + passes * 2000));
}

INSTANTIATE_TEST_SUITE_P(SharedGpu, DeviceSharedGpu, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return std::string(info.param.name); });

// Rank threads sharing the GPU that replay a graph holding their calls with a plain
// cuGraphLaunch, not clbGraphLaunch: every rank's call fails at once naming clbGraphLaunch (the
// kernels find the permit clear), long before the timeout, and the communicator then refuses
// the next call. (Every graph is uploaded before any launch, so nothing else could hold them.)
TEST(DeviceSharedGpuThreads, APlainReplayFailsAtOnceNamingClbGraphLaunch) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  unsetenv("CLB_TEST_SPREAD");
  constexpr int n = 4;
  std::atomic<int> uploaded{0};
  runThreads(n, [&](const clbUniqueId& id, int rank, int) -> std::string {
    const Driver* d = nullptr;
    CUstream s = nullptr;
    clbComm_t c = nullptr;
    if (std::string e = openRank(id, rank, n, &d, &s, &c, kTimeoutMs); !e.empty()) return e;
    CUdeviceptr buf = 0;
    const size_t count = 65536;
    CU_OK(d->cuMemAlloc(&buf, count * 4));
    CU_OK(d->cuMemsetD8(buf, 0, count * 4));
    std::string err;
    if (clbAllReduce((void*)buf, (void*)buf, count, clbFloat32, clbSum, c, s) != clbSuccess)
      err = std::string("the eager call: ") + clbGetLastError();
    CU_OK(d->cuStreamSynchronize(s));
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    if (err.empty()) {
      CU_OK(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      if (clbAllReduce((void*)buf, (void*)buf, count, clbFloat32, clbSum, c, s) != clbSuccess)
        err = std::string("the captured call: ") + clbGetLastError();
      CU_OK(d->cuStreamEndCapture(s, &graph));
    }
    if (err.empty()) {
      CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
      CU_OK(d->cuGraphUpload(exec, s));
      CU_OK(d->cuStreamSynchronize(s));
      uploaded++;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a rank that failed before
      while (uploaded.load() < n && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      const auto t0 = std::chrono::steady_clock::now();
      CU_OK(d->cuGraphLaunch(exec, s));
      CU_OK(d->cuStreamSynchronize(s));
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      clbResult_t async = clbSuccess;
      clbCommGetAsyncError(c, &async);
      const std::string msg = clbGetLastError();
      if (async == clbSuccess)
        err = "the plain replay was not refused";
      else if (msg.find("without clbGraphLaunch") == std::string::npos)
        err = "the error does not name the cause: " + msg;
      else if (ms > 5000)
        err = "refused after " + std::to_string(ms) + " ms, not at once";
      else if (clbAllReduce((void*)buf, (void*)buf, count, clbFloat32, clbSum, c, s) == clbSuccess)
        err = "the call after the refusal was accepted";
    }
    if (exec) d->cuGraphExecDestroy(exec);
    if (graph) d->cuGraphDestroy(graph);
    clbCommDestroy(c);
    d->cuMemFree(buf);
    d->cuStreamDestroy(s);
    return err;
  });
}
