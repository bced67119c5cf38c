// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// colibri_device_bench: collectives on device memory, ranks as threads of this process (or, with
// --processes, as processes) sharing the GPUs it sees (round robin), nccl-tests style table. Also
// measures the device-to-device copy bandwidth of GPU 0 in the same run, the ceiling for anything
// on one GPU.
//   colibri_device_bench [--ranks N] [--min BYTES] [--max BYTES] [--iters K] [--graph] [--nccl]
//                        [--inplace] [--dtype float32|bfloat16]
//                        [--coll all|allreduce|...|sendrecv|alltoall|alltoallv] [--processes] [--register]
// allToAllv sends uneven shares (unevenCount: 1/3 to 3/3 of the block to each peer, as MoE
// dispatch); its size column is one rank's whole buffer and its bus bandwidth what rank 0 sends
// to the others per second.
// --register registers every rank's buffers (clbCommRegister) after init: with --processes the
// ranks then read each other's buffers in place instead of staging.
// --footprint prints device memory, host RSS and init times instead of the sweep (see footprint()).
// --enqueue prints what one 8-byte call costs the calling thread (1 rank), next to the driver calls
// it is made of (see enqueueCost()).
// --wait-cost LATE_US prints what a device wait of LATE_US takes from a whole-SM kernel on another
// stream, by message size (see waitCost()).
// --nccl runs the same sweep through NCCL (libnccl.so.2 loaded at run time, one rank per GPU)
// instead of Colibri. Both print init time and the device memory in use on GPU 0 (cuMemGetInfo)
// after init, after the first collective and at its highest, above the benchmark's own buffers.
// Time per call: every rank starts together, runs K calls on its own stream and synchronizes;
// the slowest rank's time / K. With --graph the K calls are captured once and replayed.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "kernels/kernel_abi.h"

namespace {

const clb::cuda::Driver* d = nullptr;

#define CHECK_CU(call)                                     \
  do {                                                     \
    CUresult rc_ = (call);                                 \
    if (rc_ != CUDA_SUCCESS) {                             \
      fprintf(stderr, "%s failed: %d\n", #call, (int)rc_); \
      exit(2);                                             \
    }                                                      \
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

// What the ranks share: in memory mapped before any process is forked, so that ranks as
// processes meet and report exactly as ranks as threads do.
struct Shared {
  Barrier bar;
  double seconds[64], initMs[64];
  std::atomic<int> failures{0};
  size_t used0 = 0, usedInit = 0, usedFirst = 0, usedPeak = 0;
  explicit Shared(int n) : bar(n) {}
};

Shared* makeShared(int n) {
  void* m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  return new (m) Shared(n);
}

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

// Pinned host memory <-> GPU 0 through the copy engines (64 MiB, cuMemcpyDtoHAsync /
// cuMemcpyHtoDAsync), GB/s each way: the ceiling of the path between GPUs without peer access
// (COLIBRI_DEVICE_P2P=off), measured in the same run.
void hostCopyCeilingGBs(double* toHost, double* toDevice) {
  CUdevice dev;
  CUcontext ctx;
  CHECK_CU(d->cuDeviceGet(&dev, 0));
  CHECK_CU(d->cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK_CU(d->cuCtxSetCurrent(ctx));
  const size_t bytes = 64ull << 20;
  CUdeviceptr g;
  void* h = nullptr;
  CHECK_CU(d->cuMemAlloc(&g, bytes));
  CHECK_CU(d->cuMemHostAlloc(&h, bytes, 0));
  CUstream s;
  CHECK_CU(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1;
  CHECK_CU(d->cuEventCreate(&e0, 0));
  CHECK_CU(d->cuEventCreate(&e1, 0));
  for (int dir = 0; dir < 2; dir++) {
    auto once = [&] {
      if (dir == 0)
        CHECK_CU(d->cuMemcpyDtoHAsync(h, g, bytes, s));
      else
        CHECK_CU(d->cuMemcpyHtoDAsync(g, h, bytes, s));
    };
    once();
    CHECK_CU(d->cuEventRecord(e0, s));
    for (int i = 0; i < 10; i++) once();
    CHECK_CU(d->cuEventRecord(e1, s));
    CHECK_CU(d->cuEventSynchronize(e1));
    float ms = 0;
    CHECK_CU(d->cuEventElapsedTime(&ms, e0, e1));
    (dir == 0 ? *toHost : *toDevice) = 10.0 * bytes / (ms / 1e3) / 1e9;
  }
  d->cuEventDestroy(e0);
  d->cuEventDestroy(e1);
  d->cuMemFree(g);
  d->cuMemFreeHost(h);
  d->cuStreamDestroy(s);
}

// NCCL, loaded at run time when asked for (--nccl): the same sweep through NCCL with the same
// buffers, streams and timing. Only the few entry points used are declared here (NCCL 2.x ABI).
namespace nccl {
typedef struct ncclComm* Comm;
struct UniqueId {
  char internal[128];
};
enum { kFloat32 = 7, kBfloat16 = 9, kSum = 0 };
int (*getVersion)(int*);
int (*getUniqueId)(UniqueId*);
int (*commInitRank)(Comm*, int, UniqueId, int);
int (*commDestroy)(Comm);
int (*allReduce)(const void*, void*, size_t, int, int, Comm, CUstream);
int (*allGather)(const void*, void*, size_t, int, Comm, CUstream);
int (*reduceScatter)(const void*, void*, size_t, int, int, Comm, CUstream);
int (*broadcast)(const void*, void*, size_t, int, int, Comm, CUstream);
int (*send)(const void*, size_t, int, int, Comm, CUstream);
int (*recv)(void*, size_t, int, int, Comm, CUstream);
int (*groupStart)();
int (*groupEnd)();
const char* (*errorString)(int);

bool load() {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "cannot load NCCL (libnccl.so.2): %s\n", dlerror());
    return false;
  }
  bool ok = true;
  auto sym = [&](const char* name) {
    void* f = dlsym(h, name);
    if (!f) fprintf(stderr, "NCCL has no %s\n", name), ok = false;
    return f;
  };
  getVersion = (int (*)(int*))sym("ncclGetVersion");
  getUniqueId = (int (*)(UniqueId*))sym("ncclGetUniqueId");
  commInitRank = (int (*)(Comm*, int, UniqueId, int))sym("ncclCommInitRank");
  commDestroy = (int (*)(Comm))sym("ncclCommDestroy");
  allReduce = (int (*)(const void*, void*, size_t, int, int, Comm, CUstream))sym("ncclAllReduce");
  allGather = (int (*)(const void*, void*, size_t, int, Comm, CUstream))sym("ncclAllGather");
  reduceScatter = (int (*)(const void*, void*, size_t, int, int, Comm, CUstream))sym("ncclReduceScatter");
  broadcast = (int (*)(const void*, void*, size_t, int, int, Comm, CUstream))sym("ncclBroadcast");
  send = (int (*)(const void*, size_t, int, int, Comm, CUstream))sym("ncclSend");
  recv = (int (*)(void*, size_t, int, int, Comm, CUstream))sym("ncclRecv");
  groupStart = (int (*)())sym("ncclGroupStart");
  groupEnd = (int (*)())sym("ncclGroupEnd");
  errorString = (const char* (*)(int))sym("ncclGetErrorString");
  return ok;
}
}  // namespace nccl

double mib(size_t bytes) { return bytes / 1048576.0; }

size_t usedOnGpu0() {  // device memory in use on GPU 0 (whole device; 2 MiB granularity)
  size_t freeB = 0, total = 0;
  d->cuMemGetInfo(&freeB, &total);
  return total - freeB;
}

// One rank's GPU side: its GPU's primary context current on this thread, a non-blocking stream,
// and send/receive buffers of `bytes` each (send zeroed: finite inputs for every type).
struct RankGpu {
  CUstream s = nullptr;
  CUdeviceptr send = 0, recv = 0;
  RankGpu(int gpu, size_t bytes) {
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(d->cuDeviceGet(&dev, gpu));
    CHECK_CU(d->cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(d->cuCtxSetCurrent(ctx));
    CHECK_CU(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(d->cuMemAlloc(&send, bytes));
    CHECK_CU(d->cuMemAlloc(&recv, bytes));
    CHECK_CU(d->cuMemsetD8(send, 0, bytes));
  }
  ~RankGpu() {
    d->cuMemFree(send);
    d->cuMemFree(recv);
  }
};

// A replay of a graph of calls: through clbGraphLaunch for Colibri (rank threads sharing a GPU
// meet there, and their captured kernels run only inside such a launch), cuGraphLaunch for NCCL.
void replayGraph(CUgraphExec exec, CUstream s, clbComm_t comm) {
  if (!comm) {
    CHECK_CU(d->cuGraphLaunch(exec, s));
  } else if (clbGraphLaunch(exec, s, &comm, 1) != clbSuccess) {
    fprintf(stderr, "clbGraphLaunch: %s\n", clbGetLastError());
    exit(2);
  }
}

// allToAllv: the elements rank r sends to rank p out of `count` per peer (1/3 to 3/3 of it, as
// MoE dispatch sends uneven shares; colibri_host_bench's definition).
size_t unevenCount(size_t count, int r, int p) { return count * (1 + (r + p) % 3) / 3; }

// One collective (0 allReduce, 1 allGather, 2 reduceScatter, 3 broadcast from rank 0, 4 sendRecv:
// a ring exchange, count to the next rank and from the previous one, in a group; 5 allToAll:
// count to every rank, a group of sends and receives for NCCL as nccl-tests makes it; 6
// allToAllv: unevenCount(count, rank, p) to every rank p, from block p of `count` elements, into
// block p) through Colibri or NCCL, sum for the reductions; "" or the library's error message.
std::string collective(int c, const void* in, void* out, size_t count, bool bf16, clbComm_t comm, nccl::Comm ncomm,
                       CUstream s, int rank = 0, int nranks = 1) {
  const size_t esz = bf16 ? 2 : 4;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  std::vector<size_t> sc, sd, rc6, rd;
  if (c == 6)
    for (int p = 0; p < nranks; p++) {
      sc.push_back(unevenCount(count, rank, p));
      rc6.push_back(unevenCount(count, p, rank));
      sd.push_back((size_t)p * count);
      rd.push_back((size_t)p * count);
    }
  if (ncomm) {
    const int t = bf16 ? nccl::kBfloat16 : nccl::kFloat32;
    int rc = 0;
    switch (c) {
      case 0: rc = nccl::allReduce(in, out, count, t, nccl::kSum, ncomm, s); break;
      case 1: rc = nccl::allGather(in, out, count, t, ncomm, s); break;
      case 2: rc = nccl::reduceScatter(in, out, count, t, nccl::kSum, ncomm, s); break;
      case 3: rc = nccl::broadcast(in, out, count, t, 0, ncomm, s); break;
      case 4:
        nccl::groupStart();
        rc = nccl::send(in, count, t, next, ncomm, s);
        if (!rc) rc = nccl::recv(out, count, t, prev, ncomm, s);
        if (int e = nccl::groupEnd()) rc = e;
        break;
      case 5:
        nccl::groupStart();
        for (int p = 0; p < nranks && !rc; p++) {
          rc = nccl::send((const char*)in + p * count * esz, count, t, p, ncomm, s);
          if (!rc) rc = nccl::recv((char*)out + p * count * esz, count, t, p, ncomm, s);
        }
        if (int e = nccl::groupEnd()) rc = e;
        break;
      case 6:
        nccl::groupStart();
        for (int p = 0; p < nranks && !rc; p++) {
          rc = nccl::send((const char*)in + sd[p] * esz, sc[p], t, p, ncomm, s);
          if (!rc) rc = nccl::recv((char*)out + rd[p] * esz, rc6[p], t, p, ncomm, s);
        }
        if (int e = nccl::groupEnd()) rc = e;
        break;
    }
    return rc ? nccl::errorString(rc) : "";
  }
  const clbDataType_t t = bf16 ? clbBfloat16 : clbFloat32;
  clbResult_t rc = clbSuccess;
  switch (c) {
    case 0: rc = clbAllReduce(in, out, count, t, clbSum, comm, s); break;
    case 1: rc = clbAllGather(in, out, count, t, comm, s); break;
    case 2: rc = clbReduceScatter(in, out, count, t, clbSum, comm, s); break;
    case 3: rc = clbBroadcast(in, out, count, t, 0, comm, s); break;
    case 4:
      clbGroupStart();
      rc = clbSend(in, count, t, next, comm, s);
      if (rc == clbSuccess) rc = clbRecv(out, count, t, prev, comm, s);
      if (clbResult_t e = clbGroupEnd(); rc == clbSuccess) rc = e;
      break;
    case 5: rc = clbAllToAll(in, out, count, t, comm, s); break;
    case 6: rc = clbAllToAllv(in, sc.data(), sd.data(), out, rc6.data(), rd.data(), t, comm, s); break;
  }
  return rc == clbSuccess ? "" : clbGetLastError();
}

long rssKiB() {  // resident set of this process
  FILE* f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

// --footprint: what a library holds and how long it takes to start, one process per run (so the
// first init is cold): ranks as threads sharing the GPUs round robin, device memory in use on
// GPU 0 by cuMemGetInfo (whole device, 2 MiB granularity) above the benchmark's own buffers,
// per rank on GPU 0, after init, after the first call of each collective (8 KiB), at the highest
// after 64 MiB calls of each, and after trim (Colibri); Colibri's own count; host RSS; init time
// of the first communicator in the process (cold) and of a second one (warm).
int footprint(int nranks, int ngpus, bool useNccl) {
  const char* names[] = {"allReduce", "allGather", "reduceScatter", "broadcast"};
  const size_t big = 64u << 20;
  std::string lib = "Colibri";
  if (useNccl) {
    int v = 0;
    nccl::getVersion(&v);
    lib = "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  }
  const int onGpu0 = (nranks + ngpus - 1) / ngpus;
  Barrier bar(nranks);
  std::vector<double> coldMs(nranks), warmMs(nranks);
  std::vector<size_t> used(16, 0);
  std::vector<std::string> what;
  std::vector<long long> own(16, -1);
  long rss0 = 0, rssEnd = 0;
  std::atomic<int> failures{0};
  clbUniqueId id, id2;
  nccl::UniqueId nid{}, nid2{};
  if (useNccl)
    nccl::getUniqueId(&nid), nccl::getUniqueId(&nid2);
  else
    clbGetUniqueId(&id), clbGetUniqueId(&id2);
  std::vector<std::thread> ts;
  for (int r = 0; r < nranks; r++)
    ts.emplace_back([&, r] {
      RankGpu g(r % ngpus, big * (size_t)nranks);
      CUstream s = g.s;
      auto point = [&](int k, const std::string& label, clbComm_t comm) {  // every rank, then rank 0 measures
        CHECK_CU(d->cuStreamSynchronize(s));
        bar.wait();
        if (r == 0) {
          used[k] = usedOnGpu0();
          if ((int)what.size() <= k) what.resize(k + 1);
          what[k] = label;
          if (comm) {
            clbMemStats_t st;
            clbCommMemStats(comm, &st);
            own[k] = st.deviceBytes;
          }
        }
        bar.wait();
      };
      point(0, "baseline", nullptr);
      if (r == 0) rss0 = rssKiB();
      bar.wait();
      auto init = [&](bool second, clbComm_t* comm, nccl::Comm* ncomm) {
        auto t0 = std::chrono::steady_clock::now();
        if (useNccl) {
          int rc = nccl::commInitRank(ncomm, nranks, second ? nid2 : nid, r);
          if (rc) fprintf(stderr, "rank %d ncclCommInitRank: %s\n", r, nccl::errorString(rc)), exit(2);
        } else if (clbCommInitRank(comm, second ? &id2 : &id, r, nranks, nullptr) != clbSuccess) {
          fprintf(stderr, "rank %d init: %s\n", r, clbGetLastError());
          exit(2);
        }
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      };
      clbComm_t comm = nullptr;
      nccl::Comm ncomm = nullptr;
      coldMs[r] = init(false, &comm, &ncomm);
      point(1, "after init", comm);
      auto call = [&](int c, size_t bytes) {
        const size_t count = (c == 1 || c == 2) ? bytes / 4 / nranks : bytes / 4;
        std::string e = collective(c, (const void*)g.send, (void*)g.recv, count, false, comm, ncomm, s);
        if (!e.empty()) fprintf(stderr, "rank %d %s: %s\n", r, names[c], e.c_str()), failures++;
      };
      for (int c = 0; c < 4; c++) {
        call(c, 8192);
        point(2 + c, std::string("after the first ") + names[c] + " (8 KiB)", comm);
      }
      for (int c = 0; c < 4; c++) {
        call(c, big);
        point(6 + c, std::string("after ") + names[c] + " of 64 MiB", comm);
      }
      if (!useNccl) {
        clbCommTrim(comm);
        point(10, "after trim", comm);
      }
      if (r == 0) rssEnd = rssKiB();
      bar.wait();
      // A second communicator in the same process: warm init (CUDA, libraries and bootstrap ready).
      clbComm_t comm2 = nullptr;
      nccl::Comm ncomm2 = nullptr;
      warmMs[r] = init(true, &comm2, &ncomm2);
      bar.wait();
      if (useNccl)
        nccl::commDestroy(ncomm2), nccl::commDestroy(ncomm);
      else
        clbCommDestroy(comm2), clbCommDestroy(comm);
    });
  for (auto& t : ts) t.join();
  double cold = 0, warm = 0;
  for (int r = 0; r < nranks; r++) cold = std::max(cold, coldMs[r]), warm = std::max(warm, warmMs[r]);
  printf("# footprint: %s, %d rank(s) as threads on %d GPU(s), %d on GPU 0\n", lib.c_str(), nranks, ngpus, onGpu0);
  printf("# %-44s %18s %22s\n", "point", "GPU 0 MiB per rank", "own count (rank 0) B");
  size_t peak = 0;
  for (size_t k = 1; k < what.size(); k++) {
    if (what[k].empty()) continue;
    const double per = mib(used[k] - used[0]) / onGpu0;
    if (k >= 6 && k <= 9) peak = std::max(peak, used[k]);
    if (own[k] >= 0)
      printf("  %-44s %18.1f %22lld\n", what[k].c_str(), per, own[k]);
    else
      printf("  %-44s %18.1f %22s\n", what[k].c_str(), per, "-");
  }
  printf("  %-44s %18.1f\n", "highest of the above", mib(peak - used[0]) / onGpu0);
  printf("# host RSS: +%.1f MiB over init and the calls (whole process)\n", (rssEnd - rss0) / 1024.0);
  printf("# init: first communicator in the process %.2f ms, a second one %.2f ms (slowest rank)\n", cold, warm);
  return failures ? 1 : 0;
}

// --enqueue: nanoseconds per call on the calling thread, for the call and for the driver calls it
// is made of: batches of kBatch calls into an idle stream (synchronized between batches, outside
// the timing), so the figure is the enqueue cost, not the GPU's time; the median of the batches.
// One rank (or NCCL's one rank), an 8-byte float32 allReduce on GPU 0.
int enqueueCost(bool useNccl) {
  constexpr int kBatch = 100, kBatches = 200;
  RankGpu g(0, 64);
  CUstream s = g.s;
  CUcontext ctx = nullptr;
  CHECK_CU(d->cuCtxGetCurrent(&ctx));
  // Empty kernels (PTX, compiled by the driver): one with an 8-byte parameter, one with a
  // parameter block the size of the collective kernels' (ClbDevCallArgs).
  char ptx[2048];
  snprintf(ptx, sizeof ptx,
           ".version 8.0\n.target sm_75\n.address_size 64\n"
           ".visible .entry noop8(.param .u64 p) { ret; }\n"
           ".visible .entry noopArgs(.param .align 8 .b8 p[%zu]) { ret; }\n"
           ".visible .entry spin(.param .u64 ns) {\n"
           "  .reg .u64 %%t0, %%t1, %%n, %%d;\n  .reg .pred %%p;\n  ld.param.u64 %%n, [ns];\n"
           "  mov.u64 %%t0, %%globaltimer;\nL: mov.u64 %%t1, %%globaltimer;\n  sub.u64 %%d, %%t1, %%t0;\n"
           "  setp.lt.u64 %%p, %%d, %%n;\n  @%%p bra L;\n  ret;\n}\n",
           sizeof(ClbDevCallArgs));
  CUmodule mod;
  CHECK_CU(d->cuModuleLoadData(&mod, ptx));
  CUfunction noop8, noopArgs, spin;
  CHECK_CU(d->cuModuleGetFunction(&noop8, mod, "noop8"));
  CHECK_CU(d->cuModuleGetFunction(&spin, mod, "spin"));
  CHECK_CU(d->cuModuleGetFunction(&noopArgs, mod, "noopArgs"));
  ClbDevCallArgs big{};
  unsigned long long small = 0;
  void* pSmall[] = {&small};
  void* pBig[] = {&big};
  clbComm_t comm = nullptr;
  nccl::Comm ncomm = nullptr;
  std::string lib = "Colibri";
  if (useNccl) {
    nccl::UniqueId nid{};
    if (nccl::getUniqueId(&nid) || nccl::commInitRank(&ncomm, 1, nid, 0))
      return fprintf(stderr, "NCCL init failed\n"), 2;
    lib = "NCCL";
  } else {
    clbUniqueId id;
    if (clbGetUniqueId(&id) != clbSuccess || clbCommInitRank(&comm, &id, 0, 1, nullptr) != clbSuccess)
      return fprintf(stderr, "init: %s\n", clbGetLastError()), 2;
  }
  int failures = 0;
  auto time = [&](const char* what, auto&& call) {
    std::vector<double> ns;
    for (int b = 0; b < kBatches + 5; b++) {
      CHECK_CU(d->cuStreamSynchronize(s));
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; i++)
        if (!call()) failures++;
      auto t1 = std::chrono::steady_clock::now();
      if (b >= 5) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    }
    std::sort(ns.begin(), ns.end());
    printf("  %-58s %9.0f %9.0f %9.0f\n", what, ns.front(), ns[ns.size() / 2], ns[ns.size() * 9 / 10]);
  };
  // Where in a batch the time goes: the first call after the stream went idle, and the others.
  auto positions = [&](const char* what, auto&& call) {
    std::vector<double> first, second, rest;
    for (int b = 0; b < kBatches + 5; b++) {
      CHECK_CU(d->cuStreamSynchronize(s));
      auto t = std::chrono::steady_clock::now();
      double sum = 0;
      for (int i = 0; i < kBatch; i++) {
        if (!call()) failures++;
        auto u = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(u - t).count();
        t = u;
        if (b < 5) continue;
        if (i == 0)
          first.push_back(ns);
        else if (i == 1)
          second.push_back(ns);
        else
          sum += ns;
      }
      if (b >= 5) rest.push_back(sum / (kBatch - 2));
    }
    auto med = [](std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    printf("  %-58s first %7.0f  second %7.0f  the others %7.0f (medians)\n", what, med(first), med(second), med(rest));
  };
  printf("# per position in a batch of %d calls into an idle stream (ns)\n", kBatch);
  positions("cuMemsetD8Async, 8 B", [&] { return d->cuMemsetD8Async(g.recv, 0, 8, s) == CUDA_SUCCESS; });
  positions("cuMemcpyDtoDAsync, 8 B", [&] { return d->cuMemcpyDtoDAsync(g.recv, g.send, 8, s) == CUDA_SUCCESS; });
  positions("cuLaunchKernel, empty kernel, 8 B of parameters",
            [&] { return d->cuLaunchKernel(noop8, 1, 1, 1, 32, 1, 1, 0, s, pSmall, nullptr) == CUDA_SUCCESS; });
  printf("# enqueue cost per call on the calling thread (ns): min, median, p90 of %d batches of %d calls\n", kBatches,
         kBatch);
  time("cuMemsetD8Async, 8 B", [&] { return d->cuMemsetD8Async(g.recv, 0, 8, s) == CUDA_SUCCESS; });
  time("cuMemcpyDtoDAsync, 8 B", [&] { return d->cuMemcpyDtoDAsync(g.recv, g.send, 8, s) == CUDA_SUCCESS; });
  time("cuLaunchKernel, empty kernel, 8 B of parameters",
       [&] { return d->cuLaunchKernel(noop8, 1, 1, 1, 32, 1, 1, 0, s, pSmall, nullptr) == CUDA_SUCCESS; });
  char label[96];
  snprintf(label, sizeof label, "cuLaunchKernel, empty kernel, %zu B of parameters", sizeof(ClbDevCallArgs));
  time(label, [&] { return d->cuLaunchKernel(noopArgs, 1, 1, 1, 512, 1, 1, 0, s, pBig, nullptr) == CUDA_SUCCESS; });
  time("cuPointerGetAttributes (memory type, ordinal)", [&] {
    unsigned int type = 0;
    int ord = -1;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* data[2] = {&type, &ord};
    return d->cuPointerGetAttributes(2, attrs, data, g.recv) == CUDA_SUCCESS;
  });
  time("cuPointerGetAttribute (buffer id)", [&] {
    unsigned long long id = 0;
    return d->cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, g.recv) == CUDA_SUCCESS;
  });
  time("cuStreamGetCtx", [&] {
    CUcontext c = nullptr;
    return d->cuStreamGetCtx(s, &c) == CUDA_SUCCESS;
  });
  time("cuCtxPushCurrent + cuCtxPopCurrent", [&] {
    CUcontext popped;
    return d->cuCtxPushCurrent(ctx) == CUDA_SUCCESS && d->cuCtxPopCurrent(&popped) == CUDA_SUCCESS;
  });
  time("cuCtxGetCurrent", [&] {
    CUcontext c;
    return d->cuCtxGetCurrent(&c) == CUDA_SUCCESS;
  });
  {
    // A prepared graph of one empty kernel, launched whole and with its kernel node's parameters
    // set before every launch: what an eager call costs that replays a prepared launch as it is,
    // and with this call's arguments.
    CUgraph graph;
    CUgraphNode node;
    CUgraphExec exec;
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = noopArgs;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 512;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = pBig;
    CHECK_CU(d->cuGraphCreate(&graph, 0));
    CHECK_CU(d->cuGraphAddKernelNode(&node, graph, nullptr, 0, &p));
    CHECK_CU(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK_CU(d->cuGraphUpload(exec, s));
    time("cuGraphLaunch, a graph of one empty kernel", [&] { return d->cuGraphLaunch(exec, s) == CUDA_SUCCESS; });
    {
      // The same graph instantiated for device launch (uploaded once, launchable from kernels too).
      CUgraphExec dexec;
      if (d->cuGraphInstantiateWithFlags(&dexec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) == CUDA_SUCCESS &&
          d->cuGraphUpload(dexec, s) == CUDA_SUCCESS) {
        time("cuGraphLaunch, the same graph instantiated for device launch",
             [&] { return d->cuGraphLaunch(dexec, s) == CUDA_SUCCESS; });
        CHECK_CU(d->cuStreamSynchronize(s));
        d->cuGraphExecDestroy(dexec);
      } else {
        printf("  (a graph instantiated for device launch: refused)\n");
      }
    }
    time("cuGraphExecKernelNodeSetParams + cuGraphLaunch", [&] {
      big.count++;
      return d->cuGraphExecKernelNodeSetParams(exec, node, &p) == CUDA_SUCCESS &&
             d->cuGraphLaunch(exec, s) == CUDA_SUCCESS;
    });
    // A kernel that runs 20 us: does updating a graph whose last launch still runs wait for it?
    unsigned long long spinNs = 20000;
    void* pSpin[] = {&spinNs};
    CUDA_KERNEL_NODE_PARAMS q = p;
    q.func = spin;
    q.kernelParams = pSpin;
    q.blockDimX = 32;
    time("cuLaunchKernel, a kernel that runs 20 us",
         [&] { return d->cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, s, pSpin, nullptr) == CUDA_SUCCESS; });
    CUgraph g2;
    CUgraphNode n2;
    CUgraphExec e2;
    CHECK_CU(d->cuGraphCreate(&g2, 0));
    CHECK_CU(d->cuGraphAddKernelNode(&n2, g2, nullptr, 0, &q));
    CHECK_CU(d->cuGraphInstantiateWithFlags(&e2, g2, 0));
    time("SetParams + cuGraphLaunch, a kernel that runs 20 us", [&] {
      spinNs ^= 1;
      return d->cuGraphExecKernelNodeSetParams(e2, n2, &q) == CUDA_SUCCESS && d->cuGraphLaunch(e2, s) == CUDA_SUCCESS;
    });
    CHECK_CU(d->cuStreamSynchronize(s));
    d->cuGraphExecDestroy(e2);
    d->cuGraphDestroy(g2);
    time("cuStreamIsCapturing", [&] {
      CUstreamCaptureStatus st;
      return d->cuStreamIsCapturing(s, &st) == CUDA_SUCCESS;
    });
    time("cuGraphExecKernelNodeSetParams alone", [&] {
      big.count++;
      return d->cuGraphExecKernelNodeSetParams(exec, node, &p) == CUDA_SUCCESS;
    });
    CHECK_CU(d->cuStreamSynchronize(s));
    d->cuGraphExecDestroy(exec);
    d->cuGraphDestroy(graph);
    // A captured graph of one 8-byte memset: the same graph as JMH CallOverhead.cuGraphLaunch.
    CUgraph mg;
    CUgraphExec me;
    CHECK_CU(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK_CU(d->cuMemsetD8Async(g.recv, 0, 8, s));
    CHECK_CU(d->cuStreamEndCapture(s, &mg));
    CHECK_CU(d->cuGraphInstantiateWithFlags(&me, mg, 0));
    CHECK_CU(d->cuGraphUpload(me, s));
    time("cuGraphLaunch, a graph of one 8-byte memset", [&] { return d->cuGraphLaunch(me, s) == CUDA_SUCCESS; });
    CHECK_CU(d->cuStreamSynchronize(s));
    d->cuGraphExecDestroy(me);
    d->cuGraphDestroy(mg);
  }
  // Stream memory operations (semaphore writes and waits the GPU's front end executes, no kernel).
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  using WriteValue = CUresult (*)(CUstream, CUdeviceptr, unsigned int, unsigned int);
  auto writeValue = cuda ? (WriteValue)dlsym(cuda, "cuStreamWriteValue32_v2") : nullptr;
  auto waitValue = cuda ? (WriteValue)dlsym(cuda, "cuStreamWaitValue32_v2") : nullptr;
  if (writeValue && waitValue) {
    unsigned int v = 0;
    time("cuStreamWriteValue32, device memory", [&] { return writeValue(s, g.recv, ++v, 0) == CUDA_SUCCESS; });
    CHECK_CU(d->cuStreamSynchronize(s));
    time("cuStreamWaitValue32 (already satisfied, GEQ)", [&] { return waitValue(s, g.recv, 1, 0x0) == CUDA_SUCCESS; });
  }
  const std::string out = lib + " allReduce, 8 B float32, out of place";
  time(out.c_str(),
       [&] { return collective(0, (const void*)g.send, (void*)g.recv, 2, false, comm, ncomm, s).empty(); });
  const std::string in = lib + " allReduce, 8 B float32, in place";
  time(in.c_str(), [&] { return collective(0, (const void*)g.recv, (void*)g.recv, 2, false, comm, ncomm, s).empty(); });
  CHECK_CU(d->cuStreamSynchronize(s));
  // Where a call's time goes beyond its launch: the checks before the device path (a call of 0
  // elements returns there), and the replay of the call's own kernel captured into a graph (the
  // launch alone, without the call around it).
  const std::string empty = lib + " allReduce, 0 elements (the checks before the device path)";
  time(empty.c_str(),
       [&] { return collective(0, (const void*)g.send, (void*)g.recv, 0, false, comm, ncomm, s).empty(); });
  CUgraph cg;
  CUgraphExec ce;
  CHECK_CU(d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  const std::string captured = collective(0, (const void*)g.send, (void*)g.recv, 2, false, comm, ncomm, s);
  CHECK_CU(d->cuStreamEndCapture(s, &cg));
  if (!captured.empty()) return fprintf(stderr, "captured allReduce: %s\n", captured.c_str()), 1;
  CHECK_CU(d->cuGraphInstantiateWithFlags(&ce, cg, 0));
  CHECK_CU(d->cuGraphUpload(ce, s));
  const std::string replay = "cuGraphLaunch of a captured " + lib + " allReduce, 8 B out of place";
  time(replay.c_str(), [&] { return d->cuGraphLaunch(ce, s) == CUDA_SUCCESS; });
  time(out.c_str(),
       [&] { return collective(0, (const void*)g.send, (void*)g.recv, 2, false, comm, ncomm, s).empty(); });
  CHECK_CU(d->cuStreamSynchronize(s));
  d->cuGraphExecDestroy(ce);
  d->cuGraphDestroy(cg);
  if (useNccl)
    nccl::commDestroy(ncomm);
  else
    clbCommDestroy(comm);
  d->cuModuleUnload(mod);
  if (failures) fprintf(stderr, "%d call(s) failed\n", failures);
  return failures ? 1 : 0;
}

}  // namespace

// What a device wait takes from the GPU's other work (--wait-cost): on GPU 0, rank 1 (a thread,
// without the launch meeting) comes `lateUs` late to an allReduce while rank 0, its kernel already
// waiting on the GPU, runs a GEMM-like kernel on
// another stream (whole-SM blocks: each wants all the shared memory a block may have, and spins
// 20 us; 16 waves of the GPU's SMs, about 330 us alone). The kernel's time beside the wait, less
// its time alone, is the SM time the waiting kernel took from it. Sizes from 8 B (LL, 1 block)
// to 4 MiB (the most blocks); run it with COLIBRI_DEVICE_GATE=off for what a rank alone on its GPU
// sees (its waiting kernel is never gated), and with the default for ranks sharing a GPU.
int waitCost(int lateUs) {
  constexpr int kReps = 7, kWaves = 16;
  constexpr unsigned long long kBlockNs = 20000;
  const char* ptx =
      ".version 7.0\n.target sm_70\n.address_size 64\n.extern .shared .align 16 .b8 smem[];\n"
      ".visible .entry gemmlike(.param .u64 ns) {\n  .reg .u64 %t0, %t1, %n, %d;\n  .reg .pred %p;\n"
      "  .reg .b32 %r;\n  ld.param.u64 %n, [ns];\n  mov.u32 %r, %tid.x;\n  st.shared.u32 [smem], %r;\n"
      "  mov.u64 %t0, %globaltimer;\nL: mov.u64 %t1, %globaltimer;\n  sub.u64 %d, %t1, %t0;\n"
      "  setp.lt.u64 %p, %d, %n;\n  @%p bra L;\n  ret;\n}\n";
  // The ranks are threads here, which would meet on the host before launching (the late one's
  // delay then spent there, not on the GPU): without the meeting, rank 0's kernel waits on the GPU.
  setenv("COLIBRI_DEVICE_MEET", "off", 1);
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) return fprintf(stderr, "%s\n", clbGetLastError()), 2;
  const size_t maxBytes = 4u << 20;
  Barrier bar(2);
  std::atomic<int> failures{0};
  std::vector<std::pair<size_t, double>> rows;  // bytes, extra us (median)
  double alone = 0;
  auto rank = [&](int r) {
    RankGpu g(0, maxBytes);
    clbComm_t comm = nullptr;
    if (clbCommInitRank(&comm, &id, r, 2, nullptr) != clbSuccess) {
      fprintf(stderr, "init: %s\n", clbGetLastError());
      failures++;
      return;
    }
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    CUstream other = nullptr;
    CUevent e0 = nullptr, e1 = nullptr;
    int sms = 0, smem = 0;
    CUdevice dev;
    CHECK_CU(d->cuDeviceGet(&dev, 0));
    CHECK_CU(d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CHECK_CU(d->cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    CHECK_CU(d->cuModuleLoadData(&mod, ptx));
    CHECK_CU(d->cuModuleGetFunction(&fn, mod, "gemmlike"));
    CHECK_CU(d->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
    CHECK_CU(d->cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK_CU(d->cuEventCreate(&e0, 0));
    CHECK_CU(d->cuEventCreate(&e1, 0));
    unsigned long long ns = kBlockNs;
    void* args[] = {&ns};
    auto gemm = [&]() -> double {  // launched on `other`; its time once it ends (us)
      CHECK_CU(d->cuEventRecord(e0, other));
      CHECK_CU(d->cuLaunchKernel(fn, kWaves * sms, 1, 1, 256, 1, 1, smem, other, args, nullptr));
      CHECK_CU(d->cuEventRecord(e1, other));
      CHECK_CU(d->cuEventSynchronize(e1));
      float ms = 0;
      CHECK_CU(d->cuEventElapsedTime(&ms, e0, e1));
      return ms * 1000.0;
    };
    if (r == 0) {
      std::vector<double> t;
      for (int i = 0; i < kReps; i++) t.push_back(gemm());
      std::sort(t.begin(), t.end());
      alone = t[t.size() / 2];
    }
    for (size_t bytes : {(size_t)8, (size_t)8192, (size_t)65536, (size_t)262144, (size_t)1 << 20, maxBytes}) {
      std::vector<double> extra;
      for (int i = 0; i < kReps + 1; i++) {
        bar.wait();
        if (r == 1) std::this_thread::sleep_for(std::chrono::microseconds(lateUs));
        if (clbAllReduce((void*)g.send, (void*)g.recv, bytes / 4, clbFloat32, clbSum, comm, g.s) != clbSuccess) {
          fprintf(stderr, "allReduce: %s\n", clbGetLastError());
          failures++;
        }
        if (r == 0) {
          const double t = gemm();
          if (i > 0) extra.push_back(t - alone);  // the first: the size's set-up
        }
        CHECK_CU(d->cuStreamSynchronize(g.s));
      }
      if (r == 0) {
        std::sort(extra.begin(), extra.end());
        rows.emplace_back(bytes, extra[extra.size() / 2]);
      }
    }
    clbCommDestroy(comm);
    d->cuEventDestroy(e0);
    d->cuEventDestroy(e1);
    d->cuStreamDestroy(other);
    d->cuModuleUnload(mod);
  };
  std::thread t1([&] { rank(1); });
  rank(0);
  t1.join();
  const char* gate = getenv("COLIBRI_DEVICE_GATE");
  printf(
      "# wait cost: rank 1 of 2 (threads on GPU 0) %d us late; a whole-SM kernel of %d waves on another stream "
      "of rank 0 took %.1f us alone; COLIBRI_DEVICE_GATE=%s\n",
      lateUs, kWaves, alone, gate ? gate : "(auto)");
  printf("# %12s %14s %14s\n", "bytes", "extra us", "share of wait");
  for (auto& [bytes, x] : rows) printf("  %12zu %14.1f %13.0f%%\n", bytes, x, 100.0 * x / lateUs);
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  int nranks = 2, iters = 50;
  size_t minBytes = 8, maxBytes = 64u << 20;
  bool graph = false, useNccl = false, inPlace = false, foot = false, procs = false, reg = false, enq = false;
  int waitLateUs = 0;
  std::string which = "all", dtype = "float32";
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--ranks")
      nranks = std::stoi(next());
    else if (a == "--min")
      minBytes = std::stoull(next());
    else if (a == "--max")
      maxBytes = std::stoull(next());
    else if (a == "--iters")
      iters = std::stoi(next());
    else if (a == "--graph")
      graph = true;
    else if (a == "--coll")
      which = next();
    else if (a == "--nccl")
      useNccl = true;
    else if (a == "--inplace")
      inPlace = true;
    else if (a == "--footprint")
      foot = true;
    else if (a == "--enqueue")
      enq = true;
    else if (a == "--dtype")
      dtype = next();
    else if (a == "--processes")
      procs = true;
    else if (a == "--register")
      reg = true;
    else if (a == "--wait-cost")
      waitLateUs = std::stoi(next());
    else {
      fprintf(stderr,
              "usage: %s [--ranks N] [--min B] [--max B] [--iters K] [--graph] [--nccl] [--inplace] "
              "[--dtype float32|bfloat16] [--coll "
              "all|allreduce|allgather|reducescatter|broadcast|sendrecv|alltoall|alltoallv] [--footprint] "
              "[--processes] [--register] [--enqueue] [--wait-cost LATE_US]\n",
              argv[0]);
      return 2;
    }
  }
  if (dtype != "float32" && dtype != "bfloat16") {
    fprintf(stderr, "--dtype %s: use float32 or bfloat16\n", dtype.c_str());
    return 2;
  }
  const size_t esz = dtype == "float32" ? 4 : 2;
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a killed run keeps the sizes it finished
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (nranks < 1 || nranks > 64) {
    fprintf(stderr, "--ranks %d: use 1..64\n", nranks);
    return 2;
  }
  if (procs && (useNccl || foot)) {
    fprintf(stderr, "--processes works with Colibri's sweep (not --nccl or --footprint)\n");
    return 2;
  }
  Shared* sh = makeShared(nranks);
  clbUniqueId id;
  std::vector<pid_t> children;
  int procRank = -1;  // with --processes: this process's rank (the parent only waits)
  if (procs) {
    // Fork before anything touches CUDA (a child cannot use a context its parent created).
    if (clbGetUniqueId(&id) != clbSuccess) {
      fprintf(stderr, "%s\n", clbGetLastError());
      return 2;
    }
    for (int r = 0; r < nranks && procRank < 0; r++) {
      pid_t pid = fork();
      if (pid == 0)
        procRank = r;
      else
        children.push_back(pid);
    }
    if (procRank < 0) {
      // The first rank that fails leaves the others waiting at a barrier: stop them all.
      int bad = 0;
      for (size_t left = children.size(); left > 0; left--) {
        int status = 0;
        if (waitpid(-1, &status, 0) < 0) break;
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !bad++) {
          fprintf(stderr, "a rank process failed (status %d): stopping the others\n", status);
          for (pid_t c : children) kill(c, SIGKILL);
        }
      }
      return bad ? 1 : 0;
    }
  }
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
  std::string lib = "Colibri";
  nccl::UniqueId nid{};
  if (useNccl) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // never NVLink multicast here
    if (!nccl::load()) return 2;
    int v = 0;
    nccl::getVersion(&v);
    lib = "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    if (nranks > ngpus) {
      fprintf(stderr, "NCCL puts one rank per GPU: --ranks %d but %d GPU(s)\n", nranks, ngpus);
      return 2;
    }
  }
  if (foot) return footprint(nranks, ngpus, useNccl);
  if (enq) return enqueueCost(useNccl);
  if (waitLateUs > 0) return waitCost(waitLateUs);
  if (procRank <= 0) {
    printf("# colibri_device_bench: %s, %d ranks as %s on %d GPU(s) (%s), %s mode, %s, %s, %d iterations per size%s\n",
           lib.c_str(), nranks, procs ? "processes" : "threads", ngpus, name, graph ? "CUDA graph" : "eager",
           dtype.c_str(), inPlace ? "in place" : "out of place", iters, reg ? ", registered buffers" : "");
    printf("# device-to-device copy on GPU 0 (1 GiB cuMemcpyDtoD): %.1f GB/s copied (the ceiling on one GPU)\n",
           copyCeilingGBs());
    double toHost = 0, toDevice = 0;
    hostCopyCeilingGBs(&toHost, &toDevice);
    printf(
        "# pinned host memory and GPU 0 (64 MiB, copy engines): %.1f GB/s to the host, %.1f GB/s to the GPU "
        "(the ceiling with COLIBRI_DEVICE_P2P=off)\n",
        toHost, toDevice);
  }
  if (procs) {
  } else if (useNccl) {
    int rc = nccl::getUniqueId(&nid);
    if (rc) {
      fprintf(stderr, "ncclGetUniqueId: %s\n", nccl::errorString(rc));
      return 2;
    }
  } else if (clbGetUniqueId(&id) != clbSuccess) {
    fprintf(stderr, "%s\n", clbGetLastError());
    return 2;
  }
  const char* names[] = {"allReduce", "allGather", "reduceScatter", "broadcast", "sendRecv", "allToAll", "allToAllv"};
  const double factor[] = {2.0 * (nranks - 1) / nranks,
                           (nranks - 1.0) / nranks,
                           (nranks - 1.0) / nranks,
                           1.0,
                           1.0,
                           (nranks - 1.0) / nranks,
                           1.0};
  Barrier& bar = sh->bar;
  double* seconds = sh->seconds;
  double* initMs = sh->initMs;
  std::atomic<int>& failures = sh->failures;
  size_t &used0 = sh->used0, &usedInit = sh->usedInit, &usedFirst = sh->usedFirst, &usedPeak = sh->usedPeak;
  auto rank = [&](int r) {
    RankGpu g(r % ngpus, maxBytes * (size_t)nranks);
    CUstream s = g.s;
    const CUdeviceptr sendb = g.send, recvb = g.recv;
    bar.wait();
    if (r == 0) used0 = usedOnGpu0();
    bar.wait();
    clbComm_t comm = nullptr;
    nccl::Comm ncomm = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    if (useNccl) {
      int rc = nccl::commInitRank(&ncomm, nranks, nid, r);
      if (rc) {
        fprintf(stderr, "rank %d ncclCommInitRank: %s\n", r, nccl::errorString(rc));
        exit(2);
      }
    } else if (clbCommInitRank(&comm, &id, r, nranks, nullptr) != clbSuccess) {
      fprintf(stderr, "rank %d init: %s\n", r, clbGetLastError());
      exit(2);
    }
    initMs[r] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<void*> regs(2);
    if (reg && !useNccl)
      for (int k = 0; k < 2; k++)
        if (clbCommRegister(comm, (void*)(k ? recvb : sendb), maxBytes * (size_t)nranks, &regs[k]) != clbSuccess) {
          fprintf(stderr, "rank %d register: %s\n", r, clbGetLastError());
          exit(2);
        }
    bar.wait();
    if (r == 0) usedInit = usedOnGpu0();
    bool first = true;
    for (int c = 0; c < 7; c++) {
      std::string lower = names[c];
      for (auto& ch : lower) ch = (char)tolower(ch);
      if (which != "all" && which != lower) continue;
      if (c >= 4 && inPlace) continue;  // no in-place form
      // Colibri's point-to-point between processes on different GPUs (or with COLIBRI_DEVICE_P2P=off)
      // goes through host memory in this version: no graph.
      const char* p2pEnv = getenv("COLIBRI_DEVICE_P2P");
      if (c >= 4 && graph && !useNccl && procs && (ngpus > 1 || (p2pEnv && !strcmp(p2pEnv, "off")))) {
        if (r == 0)
          printf("#\n# %s: not capturable between processes on several GPUs in this version (through host memory)\n",
                 names[c]);
        continue;
      }
      if (r == 0)
        printf("#\n# %s\n# %12s %12s %10s %10s %10s\n", names[c], "size(B)", "count", "time(us)", "algbw", "busbw");
      for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
        // size = the message (allReduce, broadcast, sendRecv) or all ranks' data (allGather,
        // reduceScatter) or one rank's whole buffer (allToAll: count to each of nranks)
        size_t count = (c == 1 || c == 2 || c >= 5) ? bytes / esz / nranks : bytes / esz;
        if (count == 0) continue;
        // In place as NCCL defines it: allGather's input is the rank's block of the output,
        // reduceScatter's output the rank's block of the input.
        const void* in = (const void*)sendb;
        void* out = (void*)recvb;
        if (inPlace) {
          out = (void*)sendb;
          if (c == 1) in = (const void*)(sendb + (size_t)r * count * esz);
          if (c == 2) out = (void*)(sendb + (size_t)r * count * esz);
        }
        auto call = [&]() {
          std::string e = collective(c, in, out, count, esz == 2, comm, ncomm, s, r, nranks);
          if (!e.empty()) fprintf(stderr, "rank %d: %s\n", r, e.c_str()), failures++;
        };
        for (int w = 0; w < 5; w++) call();  // warm-up (and staging set-up)
        CHECK_CU(d->cuStreamSynchronize(s));
        if (first) {
          bar.wait();
          if (r == 0) usedFirst = usedOnGpu0();
          first = false;
        }
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
          replayGraph(exec, s, comm);  // one replay to warm the graph
          CHECK_CU(d->cuStreamSynchronize(s));
        }
        bar.wait();
        auto t1 = std::chrono::steady_clock::now();
        if (graph)
          replayGraph(exec, s, comm);
        else
          for (int k = 0; k < iters; k++) call();
        CHECK_CU(d->cuStreamSynchronize(s));
        seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() / iters;
        bar.wait();
        if (exec) d->cuGraphExecDestroy(exec);
        if (g) d->cuGraphDestroy(g);
        if (r == 0) {
          usedPeak = std::max(usedPeak, usedOnGpu0());
          double t = 0;
          for (int p = 0; p < nranks; p++) t = std::max(t, seconds[p]);
          size_t sz = (c == 1 || c == 2 || c >= 5) ? count * esz * nranks : count * esz;
          double algbw = sz / t / 1e9;
          // allToAllv: the bus bandwidth counts what rank 0 sends to the others.
          double moved = 0;
          for (int p = 1; p < nranks && c == 6; p++) moved += (double)unevenCount(count, 0, p) * esz;
          printf("  %12zu %12zu %10.2f %10.2f %10.2f\n", sz, count, t * 1e6, algbw,
                 c == 6 ? moved / t / 1e9 : algbw * factor[c]);
          fflush(stdout);
        }
        bar.wait();
      }
    }
    bar.wait();
    if (r == 0) {
      double maxInit = 0;
      for (int p = 0; p < nranks; p++) maxInit = std::max(maxInit, initMs[p]);
      const int onGpu0 = (nranks + ngpus - 1) / ngpus;
      printf(
          "# %s footprint: init %.2f ms (slowest rank); device memory in use on GPU 0 (%d rank(s) there) above "
          "the buffers: after init %.1f MiB, after the first collective %.1f MiB, highest after a size %.1f MiB\n",
          lib.c_str(), maxInit, onGpu0, mib(usedInit - used0), mib(usedFirst - used0), mib(usedPeak - used0));
      if (!useNccl) {
        clbMemStats_t st;
        clbCommMemStats(comm, &st);
        printf("# Colibri's own count for rank 0: %lld bytes held (peak %lld)\n", (long long)st.deviceBytes,
               (long long)st.devicePeakBytes);
      }
    }
    if (r == 0 && !useNccl) {
      char info[2048];
      clbCommInfo(comm, info, sizeof info);
      const char* dev = strstr(info, "device:");
      printf("# %s", dev ? dev : "device: (no line)\n");
    }
    bar.wait();
    if (useNccl)
      nccl::commDestroy(ncomm);
    else
      clbCommDestroy(comm);
  };
  if (procs) {
    rank(procRank);
    return failures ? 1 : 0;
  }
  std::vector<std::thread> ts;
  for (int r = 0; r < nranks; r++) ts.emplace_back(rank, r);
  for (auto& t : ts) t.join();
  return failures ? 1 : 0;
}
