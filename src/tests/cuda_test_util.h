// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the device test suites share: the GPU (or why there is none), deterministic inputs per
// rank, element and call, the host reference of every collective in rank order (the device
// path's order), and unique ids as text for rank processes.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "base/dtype.h"
#include "tests/test_ranks.h"

namespace {

using clb::cuda::Driver;

std::string why;
inline const Driver* gpu() {
  const Driver* d = nullptr;
  if (clb::cuda::driver(&d) != clbSuccess) {
    why = clbGetLastError();
    return nullptr;
  }
  int n = 0;
  if (d->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    why = "no CUDA device";
    return nullptr;
  }
  return d;
}

// Host to device, done on the GPU when it returns. cuMemcpyHtoD from pageable memory may return
// before its DMA has finished (CUDA's "API synchronization behavior"), and nothing orders that
// DMA with work on a non-blocking stream: a collective launched there next could read the old
// data (seen on an H100: eager call 37 of DeviceLaunch read one rank's previous inputs at the
// end of a 280 KB buffer). Synchronizing the legacy stream waits for the DMA and for nothing on
// the tests' streams, so no rank's kernel waiting for a peer can hold it.
inline CUresult upload(const Driver* d, CUdeviceptr dst, const void* src, size_t bytes) {
  const CUresult rc = d->cuMemcpyHtoD(dst, src, bytes);
  return rc == CUDA_SUCCESS ? d->cuStreamSynchronize(CU_STREAM_LEGACY) : rc;
}

inline uint64_t inputBits(int rank, size_t i, int salt) {
  uint64_t x = (uint64_t)(rank + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull ^ (uint64_t)salt << 32;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 29);
}

// A finite element value from bits (as the host test of the kernels does).
inline void element(uint8_t* p, clbDataType_t t, uint64_t r) {
  switch (t) {
    case clbFloat16: {
      uint16_t h = (uint16_t)(r & 0x3bff);
      memcpy(p, &h, 2);
      break;
    }  // |x| < 1
    case clbBfloat16: {
      uint16_t b = (uint16_t)(r & 0xbf7f);
      memcpy(p, &b, 2);
      break;
    }
    case clbFloat32: {
      float f = (float)((int64_t)(r >> 12) % 200001 - 100000) / 1024.0f;
      memcpy(p, &f, 4);
      break;
    }
    case clbFloat64: {
      double f = (double)((int64_t)(r >> 12) % 2000001 - 1000000) / 4096.0;
      memcpy(p, &f, 8);
      break;
    }
    default: memcpy(p, &r, clbTypeSize(t));
  }
}

inline std::vector<uint8_t> makeInput(int rank, size_t elems, clbDataType_t t, int salt) {
  size_t esz = clbTypeSize(t);
  std::vector<uint8_t> v(elems * esz);
  for (size_t i = 0; i < elems; i++) element(v.data() + i * esz, t, inputBits(rank, i, salt));
  return v;
}

struct Call {
  int coll;  // 1 allReduce, 2 allGather, 3 reduceScatter, 4 broadcast (root n - 1), 5 reduce (root n / 2)
  clbDataType_t type;
  clbRedOp_t op;
  size_t count;
  bool inPlace;
};

// What rank `rank` must hold after `call`: the host reduction of all ranks' inputs in rank order.
inline std::vector<uint8_t> expected(const Call& c, int rank, int n, int salt) {
  size_t esz = clbTypeSize(c.type);
  size_t inElems = c.coll == 3 ? c.count * n : c.count;
  std::vector<std::vector<uint8_t>> in(n);
  for (int p = 0; p < n; p++) in[p] = makeInput(p, inElems, c.type, salt);
  std::vector<uint8_t> out;
  std::vector<const void*> srcs(n);
  switch (c.coll) {
    case 1:
      out.resize(c.count * esz);
      for (int p = 0; p < n; p++) srcs[p] = in[p].data();
      clb::reduceMany(out.data(), srcs.data(), n, c.count, c.type, c.op, n);
      break;
    case 3:
      out.resize(c.count * esz);
      for (int p = 0; p < n; p++) srcs[p] = in[p].data() + rank * c.count * esz;
      clb::reduceMany(out.data(), srcs.data(), n, c.count, c.type, c.op, n);
      break;
    case 2:
      for (int p = 0; p < n; p++) out.insert(out.end(), in[p].begin(), in[p].end());
      break;
    case 4:
      out = in[n - 1];  // root: the last rank
      break;
    case 5:  // root n / 2; the others' recv keeps what it held: its input in place, else the poison
      if (rank == n / 2) {
        out.resize(c.count * esz);
        for (int p = 0; p < n; p++) srcs[p] = in[p].data();
        clb::reduceMany(out.data(), srcs.data(), n, c.count, c.type, c.op, n);
      } else if (c.inPlace) {
        out = in[rank];
      } else {
        out.assign(c.count * esz, 0xa5);
      }
      break;
  }
  return out;
}

// Makes `c` on a rank's buffers as the suites do: in place, an allGather's input is the rank's
// slot of recv and a reduceScatter's output its slot of send; a reduce's other ranks pass no recv
// out of place (NCCL's clients pass theirs or NULL).
inline clbResult_t issue(const Call& c, CUdeviceptr sendBuf, CUdeviceptr recvBuf, int rank, int n, clbComm_t comm,
                         CUstream stream) {
  const size_t slot = rank * c.count * clbTypeSize(c.type);
  const void* send = (const void*)(c.inPlace && c.coll == 2 ? recvBuf + slot : sendBuf);
  void* recv = (void*)(c.inPlace && c.coll == 3 ? sendBuf + slot : recvBuf);
  switch (c.coll) {
    case 1: return clbAllReduce(send, recv, c.count, c.type, c.op, comm, stream);
    case 2: return clbAllGather(send, recv, c.count, c.type, comm, stream);
    case 3: return clbReduceScatter(send, recv, c.count, c.type, c.op, comm, stream);
    case 4: return clbBroadcast(send, recv, c.count, c.type, n - 1, comm, stream);
    case 5:
      return clbReduce(send, rank == n / 2 || c.inPlace ? recv : nullptr, c.count, c.type, c.op, n / 2, comm, stream);
  }
  return clbInvalidArgument;
}

inline bool sameBits(const uint8_t* a, const uint8_t* b, size_t esz) { return memcmp(a, b, esz) == 0; }

#define CU_OK(call)                                                                         \
  do {                                                                                      \
    CUresult rc_ = (call);                                                                  \
    if (rc_ != CUDA_SUCCESS) return std::string(#call) + " failed: " + std::to_string(rc_); \
  } while (0)

using clbtest::expectRanksEnd;
using clbtest::hex;
using clbtest::unhex;

// Where ranks go: every rank on GPU 0, or rank r on GPU r % (number of GPUs) with
// CLB_TEST_SPREAD=1 (set by the *Gpus suites; children of DeviceProcesses inherit it).
inline int rankGpu(const Driver* d, int rank) {
  const char* s = getenv("CLB_TEST_SPREAD");
  int count = 1;
  if (!s || strcmp(s, "1") != 0 || d->cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1) return 0;
  return rank % count;
}

inline int gpuCount() {
  const Driver* d = gpu();
  int count = 0;
  if (!d || d->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

// The rank's GPU's primary context on this thread, a stream of its own, and its communicator.
inline std::string setUpRank(const Driver* d, const clbUniqueId& id, int rank, int n, CUstream* stream, clbComm_t* comm,
                             int64_t timeoutMs = 30000) {
  CUdevice dev;
  CUcontext ctx;
  CU_OK(d->cuDeviceGet(&dev, rankGpu(d, rank)));
  CU_OK(d->cuDevicePrimaryCtxRetain(&ctx, dev));
  CU_OK(d->cuCtxSetCurrent(ctx));
  CU_OK(d->cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.timeoutMs = timeoutMs;
  if (clbCommInitRank(comm, &id, rank, n, &cfg) != clbSuccess) return std::string("init: ") + clbGetLastError();
  return "";
}

// The GPU (or why there is none), then setUpRank.
inline std::string openRank(const clbUniqueId& id, int rank, int n, const Driver** d, CUstream* stream, clbComm_t* comm,
                            int64_t timeoutMs = 30000) {
  if (!(*d = gpu())) return "no GPU: " + why;
  return setUpRank(*d, id, rank, n, stream, comm, timeoutMs);
}

// Replays `exec` on `stream` through clbGraphLaunch, for a graph holding calls of `comms` (rank
// threads sharing a GPU meet there, and their captured kernels run only inside such a launch):
// "" or what failed.
inline std::string replay(CUgraphExec exec, CUstream stream, std::initializer_list<clbComm_t> comms) {
  std::vector<clbComm_t> v(comms);
  if (clbGraphLaunch(exec, stream, v.data(), (int)v.size()) != clbSuccess)
    return std::string("clbGraphLaunch: ") + clbGetLastError();
  return "";
}

// Starts a GPU rank process: this test binary on the tests matching `filter`, with this
// environment plus `extra` (clbtest::spawnSelf). Unless `extra` says otherwise, it has the driver's
// default of 8 hardware queues: under MPS, 32 (the test binaries' own setting, for rank threads)
// in each of several processes makes the later ones' contexts fail as out of memory.
inline pid_t spawnGpuRank(const std::string& filter, std::vector<std::string> extra) {
  bool queuesGiven = false;
  for (const std::string& e : extra) queuesGiven = queuesGiven || e.rfind("CUDA_DEVICE_MAX_CONNECTIONS=", 0) == 0;
  if (!queuesGiven) extra.push_back("CUDA_DEVICE_MAX_CONNECTIONS=8");
  return clbtest::spawnSelf(filter, extra);
}

// Starts n processes of this test binary that run test `child` (spawnGpuRank), rank r's
// environment holding `specVar`="r:n:id" (the unique id in hex) plus `extra`, and expects each to
// end with 0 within `seconds`. The child reads its part with rankSpec.
inline void runRankProcesses(const char* child, const char* specVar, int n, const std::vector<std::string>& extra,
                             int seconds = 120) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    std::vector<std::string> env = extra;
    env.push_back(std::string(specVar) + "=" + std::to_string(r) + ":" + std::to_string(n) + ":" + hex(id));
    const pid_t pid = spawnGpuRank(child, env);
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  expectRanksEnd(pids, std::chrono::steady_clock::now() + std::chrono::seconds(seconds));
}

// A rank process's part (runRankProcesses): false when `specVar` is not set (the test runs on its
// own, and skips).
inline bool rankSpec(const char* specVar, int* rank, int* n, clbUniqueId* id) {
  const char* spec = getenv(specVar);
  char idHex[2 * CLB_UNIQUE_ID_BYTES + 1] = {0};
  if (!spec || sscanf(spec, "%d:%d:%256s", rank, n, idHex) != 3) return false;
  *id = unhex(idHex);
  return true;
}

// Runs body(id, rank, n) for every rank on its own thread and expects each to return "".
inline void runThreads(int n, const std::function<std::string(const clbUniqueId&, int, int)>& body) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++) ts.emplace_back([&, r] { errs[r] = body(id, r, n); });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
}

}  // namespace
