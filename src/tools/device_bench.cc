// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// colibri_device_bench: collectives on device memory, ranks as threads of this process sharing
// the GPUs it sees (round robin), nccl-tests style table. Also measures the device-to-device copy
// bandwidth of GPU 0 in the same run, the ceiling for anything on one GPU.
//   colibri_device_bench [--ranks N] [--min BYTES] [--max BYTES] [--iters K] [--graph] [--coll all|allreduce|...]
// Time per call: every rank starts together, runs K calls on its own stream and synchronizes;
// the slowest rank's time / K. With --graph the K calls are captured once and replayed.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "core/cuda/driver.h"

namespace {

const clb::cuda::Driver* d = nullptr;

#define CHECK_CU(call)                                                        \
  do {                                                                        \
    CUresult rc_ = (call);                                                    \
    if (rc_ != CUDA_SUCCESS) {                                                \
      fprintf(stderr, "%s failed: %d\n", #call, (int)rc_);                    \
      exit(2);                                                                \
    }                                                                         \
  } while (0)

struct Barrier {
  std::atomic<int> count{0}, gen{0};
  int n;
  explicit Barrier(int n) : n(n) {}
  void wait() {
    int g = gen.load();
    if (count.fetch_add(1) + 1 == n) {
      count = 0;
      gen++;
    } else {
      while (gen.load() == g) std::this_thread::yield();
    }
  }
};

double copyCeilingGBs() {
  CUdevice dev;
  CUcontext ctx;
  CHECK_CU(d->cuDeviceGet(&dev, 0));
  CHECK_CU(d->cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK_CU(d->cuCtxSetCurrent(ctx));
  size_t bytes = 1ull << 30;
  CUdeviceptr a, b;
  CHECK_CU(d->cuMemAlloc(&a, bytes));
  CHECK_CU(d->cuMemAlloc(&b, bytes));
  CUstream s;
  CHECK_CU(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1;
  CHECK_CU(d->cuEventCreate(&e0, 0));
  CHECK_CU(d->cuEventCreate(&e1, 0));
  CHECK_CU(d->cuMemcpyDtoDAsync(b, a, bytes, s));
  CHECK_CU(d->cuEventRecord(e0, s));
  for (int i = 0; i < 10; i++) CHECK_CU(d->cuMemcpyDtoDAsync(b, a, bytes, s));
  CHECK_CU(d->cuEventRecord(e1, s));
  CHECK_CU(d->cuEventSynchronize(e1));
  float ms = 0;
  CHECK_CU(d->cuEventElapsedTime(&ms, e0, e1));
  d->cuMemFree(a);
  d->cuMemFree(b);
  d->cuStreamDestroy(s);
  return 10.0 * bytes / (ms / 1e3) / 1e9;  // bytes copied per second (read + write = 2x traffic)
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2, iters = 50;
  size_t minBytes = 8, maxBytes = 64u << 20;
  bool graph = false;
  std::string which = "all";
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--ranks") nranks = std::stoi(next());
    else if (a == "--min") minBytes = std::stoull(next());
    else if (a == "--max") maxBytes = std::stoull(next());
    else if (a == "--iters") iters = std::stoi(next());
    else if (a == "--graph") graph = true;
    else if (a == "--coll") which = next();
    else {
      fprintf(stderr, "usage: %s [--ranks N] [--min B] [--max B] [--iters K] [--graph] [--coll all|allreduce|allgather|reducescatter|broadcast]\n", argv[0]);
      return 2;
    }
  }
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (clb::cuda::driver(&d) != clbSuccess) {
    fprintf(stderr, "%s\n", clbGetLastError());
    return 2;
  }
  int ngpus = 0;
  CHECK_CU(d->cuDeviceGetCount(&ngpus));
  char name[128];
  CUdevice dev0;
  CHECK_CU(d->cuDeviceGet(&dev0, 0));
  d->cuDeviceGetName(name, sizeof name, dev0);
  printf("# colibri_device_bench: %d ranks as threads on %d GPU(s) (%s), %s mode, %d iterations per size\n", nranks,
         ngpus, name, graph ? "CUDA graph" : "eager", iters);
  printf("# device-to-device copy on GPU 0 (1 GiB cuMemcpyDtoD): %.1f GB/s copied (the ceiling on one GPU)\n",
         copyCeilingGBs());
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) {
    fprintf(stderr, "%s\n", clbGetLastError());
    return 2;
  }
  const char* names[] = {"allReduce", "allGather", "reduceScatter", "broadcast"};
  const double factor[] = {2.0 * (nranks - 1) / nranks, (nranks - 1.0) / nranks, (nranks - 1.0) / nranks, 1.0};
  Barrier bar(nranks);
  std::vector<double> seconds(nranks);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < nranks; r++)
    ts.emplace_back([&, r] {
      CUdevice dev;
      CUcontext ctx;
      CHECK_CU(d->cuDeviceGet(&dev, r % ngpus));
      CHECK_CU(d->cuDevicePrimaryCtxRetain(&ctx, dev));
      CHECK_CU(d->cuCtxSetCurrent(ctx));
      CUstream s;
      CHECK_CU(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      clbComm_t comm;
      if (clbCommInitRank(&comm, &id, r, nranks, nullptr) != clbSuccess) {
        fprintf(stderr, "rank %d init: %s\n", r, clbGetLastError());
        exit(2);
      }
      CUdeviceptr sendb, recvb;
      CHECK_CU(d->cuMemAlloc(&sendb, maxBytes * (size_t)nranks));
      CHECK_CU(d->cuMemAlloc(&recvb, maxBytes * (size_t)nranks));
      for (int c = 0; c < 4; c++) {
        std::string lower = names[c];
        for (auto& ch : lower) ch = (char)tolower(ch);
        if (which != "all" && which != lower) continue;
        if (r == 0)
          printf("#\n# %s\n# %12s %12s %10s %10s %10s\n", names[c], "size(B)", "count", "time(us)", "algbw", "busbw");
        for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
          // size = the message (allReduce, broadcast) or all ranks' data (allGather, reduceScatter)
          size_t count = (c == 1 || c == 2) ? bytes / 4 / nranks : bytes / 4;
          if (count == 0) continue;
          auto call = [&]() {
            clbResult_t rc = clbSuccess;
            switch (c) {
              case 0: rc = clbAllReduce((void*)sendb, (void*)recvb, count, clbFloat32, clbSum, comm, s); break;
              case 1: rc = clbAllGather((void*)sendb, (void*)recvb, count, clbFloat32, comm, s); break;
              case 2: rc = clbReduceScatter((void*)sendb, (void*)recvb, count, clbFloat32, clbSum, comm, s); break;
              case 3: rc = clbBroadcast((void*)sendb, (void*)recvb, count, clbFloat32, 0, comm, s); break;
            }
            if (rc != clbSuccess) {
              fprintf(stderr, "rank %d: %s\n", r, clbGetLastError());
              failures++;
            }
          };
          for (int w = 0; w < 5; w++) call();  // warm-up (and staging set-up)
          CHECK_CU(d->cuStreamSynchronize(s));
          CUgraphExec exec = nullptr;
          CUgraph g = nullptr;
          if (graph) {
            CHECK_CU(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
            for (int k = 0; k < iters; k++) call();
            CHECK_CU(d->cuStreamEndCapture(s, &g));
            CHECK_CU(d->cuGraphInstantiateWithFlags(&exec, g, 0));
            // Instantiation and the first launch's upload may wait for work running in the context:
            // with several ranks on one GPU in one process, every rank finishes both before any
            // rank starts kernels that wait for peers.
            CHECK_CU(d->cuGraphUpload(exec, s));
            CHECK_CU(d->cuStreamSynchronize(s));
            bar.wait();
            CHECK_CU(d->cuGraphLaunch(exec, s));  // one replay to warm the graph
            CHECK_CU(d->cuStreamSynchronize(s));
          }
          bar.wait();
          auto t0 = std::chrono::steady_clock::now();
          if (graph) CHECK_CU(d->cuGraphLaunch(exec, s));
          else
            for (int k = 0; k < iters; k++) call();
          CHECK_CU(d->cuStreamSynchronize(s));
          seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
          bar.wait();
          if (exec) d->cuGraphExecDestroy(exec);
          if (g) d->cuGraphDestroy(g);
          if (r == 0) {
            double t = 0;
            for (double x : seconds) t = std::max(t, x);
            size_t sz = (c == 1 || c == 2) ? count * 4 * nranks : count * 4;
            double algbw = sz / t / 1e9;
            printf("  %12zu %12zu %10.2f %10.2f %10.2f\n", sz, count, t * 1e6, algbw, algbw * factor[c]);
            fflush(stdout);
          }
          bar.wait();
        }
      }
      clbMemStats_t st;
      clbCommMemStats(comm, &st);
      if (r == 0) printf("# device memory held by rank 0: %lld bytes (peak %lld)\n", (long long)st.deviceBytes, (long long)st.devicePeakBytes);
      clbCommDestroy(comm);
      d->cuMemFree(sendb);
      d->cuMemFree(recvb);
    });
  for (auto& t : ts) t.join();
  return failures ? 1 : 0;
}
