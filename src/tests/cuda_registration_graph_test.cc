// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A registration (clbCommRegister, the call under ncclCommWindowRegister) that calls captured in a
// CUDA graph read through: between rank processes a captured call on registered buffers reads the
// peers' buffers through this process's mappings of them, so the graph holds the registration
// until the graph and its instantiations are destroyed. Until then clbCommDeregister is refused on
// every rank, saying why, and the graph replays on with the right sums; afterwards the
// deregistration goes through and the buffers' calls stage. Skipped, with the reason, where there
// is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"

namespace {

using clb::cuda::Driver;

constexpr size_t kCount = 70001;  // past the LL sizes: a registered call reads the peers in place

// Fills `in` with rank-and-round values, runs `call` (eager or a replay), checks the sum.
std::string sumRight(const Driver* d, CUdeviceptr in, CUdeviceptr out, CUstream stream, int rank, int n, int round,
                     const std::function<std::string()>& call) {
  std::vector<float> v(kCount);
  for (size_t e = 0; e < kCount; e++) v[e] = (float)((rank + 1) * 1000 + (int)(e % 977) + round);
  CU_OK(upload(d, in, v.data(), v.size() * 4));
  CU_OK(d->cuMemsetD8Async(out, 0xa5, kCount * 4, stream));
  if (std::string e = call(); !e.empty()) return e;
  CU_OK(d->cuStreamSynchronize(stream));
  std::vector<float> got(kCount);
  CU_OK(d->cuMemcpyDtoH(got.data(), out, got.size() * 4));
  for (size_t e = 0; e < kCount; e++) {
    float want = 0;
    for (int p = 0; p < n; p++) want += (float)((p + 1) * 1000 + (int)(e % 977) + round);
    if (got[e] != want)
      return "round " + std::to_string(round) + " element " + std::to_string(e) + ": got " + std::to_string(got[e]) +
             " want " + std::to_string(want);
  }
  return "";
}

std::string graphHoldsRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  CUdeviceptr in = 0, out = 0;
  CU_OK(d->cuMemAlloc(&in, kCount * 4));
  CU_OK(d->cuMemAlloc(&out, kCount * 4));
  void *hin = nullptr, *hout = nullptr;
  if (clbCommRegister(comm, (void*)in, kCount * 4, &hin) != clbSuccess ||
      clbCommRegister(comm, (void*)out, kCount * 4, &hout) != clbSuccess)
    return std::string("register: ") + clbGetLastError();
  auto allReduce = [&]() -> std::string {
    return clbAllReduce((void*)in, (void*)out, kCount, clbFloat32, clbSum, comm, stream) == clbSuccess
               ? ""
               : std::string("allReduce: ") + clbGetLastError();
  };
  if (std::string e = sumRight(d, in, out, stream, rank, n, 0, allReduce); !e.empty()) return "eager: " + e;
  char info[2048];
  clbCommInfo(comm, info, sizeof info);
  if (!strstr(info, "last call direct (zero copy"))
    return std::string("registered buffers, but the eager call did not go zero copy: ") + info;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  std::string err = allReduce();
  CU_OK(d->cuStreamEndCapture(stream, &graph));
  if (!err.empty()) return "capture: " + err;
  CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
  CU_OK(d->cuGraphUpload(exec, stream));
  CU_OK(d->cuStreamSynchronize(stream));
  auto replay = [&]() -> std::string {
    CU_OK(d->cuGraphLaunch(exec, stream));
    return "";
  };
  if (std::string e = sumRight(d, in, out, stream, rank, n, 1, replay); !e.empty()) return "replay: " + e;
  // The graph exists: refused on every rank, nothing changed.
  for (void* h : {hin, hout}) {
    const clbResult_t rc = clbCommDeregister(comm, h);
    const std::string msg = clbGetLastError();
    if (rc != clbInvalidUsage || msg.find("captured in CUDA graphs that still exist") == std::string::npos)
      return "deregister under a live graph: expected INVALID_USAGE naming the graphs, got " + std::to_string(rc) +
             ": " + msg;
  }
  if (std::string e = sumRight(d, in, out, stream, rank, n, 2, replay); !e.empty()) return "replay after refusal: " + e;
  // Only the instantiation destroyed: the graph still holds it.
  CU_OK(d->cuGraphExecDestroy(exec));
  exec = nullptr;
  if (clbCommDeregister(comm, hin) != clbInvalidUsage)
    return std::string("deregister with the graph alive (its instantiation destroyed) was not refused: ") +
           clbGetLastError();
  CU_OK(d->cuGraphDestroy(graph));
  graph = nullptr;
  // The driver drops the graph's hold on a thread of its own, soon after: each try is collective,
  // so every rank sees the same outcome and tries as many times.
  for (void* h : {hin, hout}) {
    clbResult_t rc = clbInvalidUsage;
    for (int tries = 0; tries < 250 && rc == clbInvalidUsage; tries++) {
      rc = clbCommDeregister(comm, h);
      if (rc == clbInvalidUsage) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (rc != clbSuccess)
      return "deregister after the graph was destroyed: " + std::to_string(rc) + ": " + clbGetLastError();
  }
  if (std::string e = sumRight(d, in, out, stream, rank, n, 3, allReduce); !e.empty()) return "after: " + e;
  clbCommDestroy(comm);
  d->cuMemFree(in);
  d->cuMemFree(out);
  d->cuStreamDestroy(stream);
  return "";
}

}  // namespace

TEST(DeviceRegisteredGraphChild, Rank) {
  int rank = 0, n = 0;
  clbUniqueId id;
  if (!rankSpec("CLB_REG_GRAPH_CHILD", &rank, &n, &id)) GTEST_SKIP() << "runs only as a child of DeviceRegisteredGraph";
  EXPECT_EQ(graphHoldsRank(id, rank, n), "");
}

TEST(DeviceRegisteredGraph, HoldsItsRegistrationsUntilDestroyedAndDeregisterSaysSo) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runRankProcesses("DeviceRegisteredGraphChild.Rank", "CLB_REG_GRAPH_CHILD", 2,
                   {"COLIBRI_DEVICE_PATH=auto", "COLIBRI_DEVICE_P2P=auto"});
}
