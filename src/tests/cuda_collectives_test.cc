// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device collectives on one GPU, several ranks: as threads of one process (pointers shared) and as
// processes (CUDA IPC). Random inputs, poisoned outputs, odd counts, several calls in a row on each
// rank's own stream without host synchronization in between; every result is compared bit for bit
// with the host's reduction of the same inputs in rank order (the device path's order).
// Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "base/dtype.h"
#include "tests/cuda_test_util.h"
#ifdef CLB_HAVE_VERBS
#include "tests/verbs_emu/emu_client.h"  // its knobs are read once: reset after setenv
#endif

namespace {

using clb::cuda::Driver;

// Ranks as threads share one CUDA context. Eager calls need no more hardware queues than the
// driver's default of 8 (the ranks meet before launching; cuda_robustness_test runs at 8), but a
// replayed graph launches without meeting, so there a rank's waiting kernel could sit in a queue
// in front of the kernel it waits for: a queue per stream for the graph tests with 8 ranks. Set
// before the first CUDA call of the process; docs/troubleshooting.md says the same.
const int kConnections = setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);

std::vector<Call> theCalls() {
  std::vector<Call> v;
  for (int t = 0; t < clbNumTypes; t++) v.push_back({1, (clbDataType_t)t, clbSum, 1003, false});
  for (clbDataType_t t : {clbInt32, clbFloat32, clbBfloat16, clbFloat16, clbUint64})
    for (clbRedOp_t o : {clbProd, clbMin, clbMax, clbAvg}) v.push_back({1, t, o, 517, false});
  v.push_back({1, clbFloat32, clbSum, 3000001, false});  // several rounds through staging
  v.push_back({1, clbBfloat16, clbAvg, 400003, false});  // two-shot with 3+ ranks: odd segments
  v.push_back({1, clbInt64, clbMax, 200001, true});
  v.push_back({1, clbFloat32, clbSum, 4099, true});
  v.push_back({1, clbFloat32, clbSum, 1000003, true});  // through host memory: in place, in rounds
  v.push_back({2, clbInt8, clbSum, 1001, false});
  v.push_back({2, clbFloat32, clbSum, 777, true});
  v.push_back({2, clbBfloat16, clbSum, 1500007, false});
  v.push_back({3, clbBfloat16, clbAvg, 5003, false});
  v.push_back({3, clbFloat32, clbSum, 1500000, false});
  v.push_back({3, clbInt64, clbMax, 333, true});
  v.push_back({4, clbFloat64, clbSum, 12345, false});
  v.push_back({4, clbUint8, clbSum, 7, true});
  v.push_back({5, clbFloat32, clbSum, 1003, false});  // reduce: LL
  v.push_back({5, clbBfloat16, clbAvg, 517, true});
  v.push_back({5, clbInt64, clbMax, 200001, true});      // direct or staged
  v.push_back({5, clbFloat32, clbSum, 3000001, false});  // several rounds through staging
  v.push_back({5, clbUint8, clbProd, 7, false});
  return v;
}

// How a test runs: COLIBRI_DEVICE_PATH (the library reads it when a communicator first touches
// device memory) and CLB_TEST_SPREAD; both set before the rank threads or processes start.
// "registered" and "mixed" (processes) run the auto path with registered buffers
// (CLB_TEST_REGISTER); "windows" forces direct with registered buffers, so that the calls of the
// LL sizes read the peers' windows (CallShape::windowed; rank 0's missing for odd eager calls);
// "viahost" the auto path through host memory, as between GPUs without peer access (LL, then the
// copy engines); "viahoststaged" the staged kernel there instead of the copies.
void setPlacement(const std::string& path, bool spread) {
  const bool reg = path == "registered" || path == "mixed" || path == "windows";
  const bool viaHost = path == "viahost" || path == "viahoststaged";
  setenv("COLIBRI_DEVICE_PATH",
         path == "windows"          ? "direct"
         : reg || path == "viahost" ? "auto"
         : path == "viahoststaged"  ? "staged"
                                    : path.c_str(),
         1);
  setenv("COLIBRI_DEVICE_P2P", viaHost ? "off" : "auto", 1);
  if (reg)
    setenv("CLB_TEST_REGISTER", path.c_str(), 1);
  else
    unsetenv("CLB_TEST_REGISTER");
  setenv("CLB_TEST_SPREAD", spread ? "1" : "0", 1);
}

// A registration that must fail on every rank because the last rank passes host memory: the last
// rank is told why, the others which rank failed.
std::string registrationFailsEverywhere(const Driver* d, clbComm_t comm, int rank, int n) {
  std::vector<char> host(256);
  CUdeviceptr dev = 0;
  CU_OK(d->cuMemAlloc(&dev, 256));
  void* handle = nullptr;
  clbResult_t rc = clbCommRegister(comm, rank == n - 1 ? (void*)host.data() : (void*)dev, 256, &handle);
  const std::string msg = clbGetLastError();
  d->cuMemFree(dev);
  const std::string want = rank == n - 1 ? "host memory" : "rank " + std::to_string(n - 1) + " could not register";
  if (rc != clbInvalidArgument || handle || msg.find(want) == std::string::npos)
    return "registering host memory on rank " + std::to_string(n - 1) + ": expected INVALID_ARGUMENT saying '" + want +
           "', got " + std::to_string(rc) + ": " + msg;
  return "";
}

// Two ranks make different large calls: with registrations every rank learns it by name, at once.
std::string mismatchNamed(clbComm_t comm, int rank, CUdeviceptr send, CUdeviceptr recv, size_t count, CUstream stream) {
  clbResult_t rc =
      clbAllReduce((void*)send, (void*)recv, rank == 0 ? count : count - 1, clbFloat32, clbSum, comm, stream);
  const std::string msg = clbGetLastError();
  if (rc != clbInvalidUsage || msg.find("rank 0 called allReduce") == std::string::npos)
    return "mismatched calls: expected INVALID_USAGE naming rank 0's call, got " + std::to_string(rc) + ": " + msg;
  return "";
}

// One rank's part: every call on its own stream back to back, then one synchronize and the checks.
// With CLB_TEST_REGISTER (ranks as processes) every call's buffers are registered first; with
// "mixed", rank 0 registers a spare buffer instead for odd calls, which then stage (or, with
// "windows", read every rank's copy in its LL buffer).
std::string rankBody(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  std::vector<Call> calls = theCalls();
  struct Bufs {
    CUdeviceptr send, recv, recvView;
    size_t sendBytes, recvBytes;
  };
  std::vector<Bufs> bufs;
  std::string err;
  for (size_t i = 0; i < calls.size() && err.empty(); i++) {
    const Call& c = calls[i];
    size_t esz = clbTypeSize(c.type);
    size_t inElems = c.coll == 3 ? c.count * n : c.count;
    size_t outElems = c.coll == 2 ? c.count * n : c.count;
    Bufs b{};
    b.sendBytes = std::max(inElems, outElems) * esz;
    CU_OK(d->cuMemAlloc(&b.send, b.sendBytes));
    std::vector<uint8_t> in = makeInput(rank, inElems, c.type, (int)i);
    if (c.inPlace) {
      b.recv = b.send;
      CU_OK(d->cuMemsetD8Async(b.recv, 0xa5, outElems * esz, stream));
      CU_OK(d->cuStreamSynchronize(stream));  // the poison lands before the input is copied in
      CUdeviceptr inAt = c.coll == 2 ? b.recv + rank * c.count * esz : b.send;
      CU_OK(upload(d, inAt, in.data(), in.size()));
      b.recvView = c.coll == 3 ? b.send + rank * c.count * esz : b.recv;
    } else {
      CU_OK(d->cuMemAlloc(&b.recv, outElems * esz));
      // On the rank's own stream: ordered before its collectives. (cuMemsetD8 would run on the
      // legacy stream, which a non-blocking stream does not wait for.)
      CU_OK(d->cuMemsetD8Async(b.recv, 0xa5, outElems * esz, stream));
      CU_OK(upload(d, b.send, in.data(), in.size()));
      b.recvView = b.recv;
    }
    b.recvBytes = outElems * esz;
    bufs.push_back(b);
  }
  const char* reg = getenv("CLB_TEST_REGISTER");
  std::vector<void*> handles;
  CUdeviceptr spare = 0;
  if (reg && err.empty()) {
    err = registrationFailsEverywhere(d, comm, rank, n);
    CU_OK(d->cuMemAlloc(&spare, 1 << 20));
    for (size_t i = 0; i < bufs.size() && err.empty(); i++) {
      const bool other = (!strcmp(reg, "mixed") || !strcmp(reg, "windows")) && rank == 0 && i % 2;
      for (int k = 0; k < (bufs[i].recv != bufs[i].send ? 2 : 1) && err.empty(); k++) {
        void* h = nullptr;
        void* p = other ? (void*)spare : (void*)(k ? bufs[i].recv : bufs[i].send);
        size_t bytes = other ? (1 << 20) : k ? bufs[i].recvBytes : bufs[i].sendBytes;
        if (clbCommRegister(comm, p, bytes, &h) != clbSuccess) err = std::string("register: ") + clbGetLastError();
        handles.push_back(h);
        // "registered": the first half of the same range registered again (NCCL lets a window
        // overlap another); it goes on when the whole range's registration goes, below.
        void* again = nullptr;
        if (err.empty() && !strcmp(reg, "registered") && clbCommRegister(comm, p, bytes / 2 + 1, &again) != clbSuccess)
          err = std::string("register the first half again: ") + clbGetLastError();
        if (again) handles.push_back(again);
      }
    }
  }
  for (size_t i = 0; i < calls.size() && err.empty(); i++) {
    const clbResult_t rc = issue(calls[i], bufs[i].send, bufs[i].recv, rank, n, comm, stream);
    if (rc != clbSuccess) err = "call " + std::to_string(i) + ": " + clbGetLastError();
  }
  CU_OK(d->cuStreamSynchronize(stream));
  for (size_t i = 0; i < bufs.size() && err.empty(); i++) {
    const Call& c = calls[i];
    size_t esz = clbTypeSize(c.type);
    std::vector<uint8_t> want = expected(c, rank, n, (int)i), got(want.size());
    CU_OK(d->cuMemcpyDtoH(got.data(), bufs[i].recvView, got.size()));
    for (size_t e = 0; e < want.size() / esz; e++)
      if (!sameBits(got.data() + e * esz, want.data() + e * esz, esz)) {
        err = "rank " + std::to_string(rank) + " call " + std::to_string(i) + " (coll " + std::to_string(c.coll) + " " +
              clb::typeName(c.type) + " " + clb::opName(c.op) + " count " + std::to_string(c.count) +
              (c.inPlace ? " in place" : "") + "): element " + std::to_string(e) + " differs";
        break;
      }
  }
  char info[2048];
  clbCommInfo(comm, info, sizeof info);
  // The last call (a broadcast beyond LL) read the root's registered buffer in place.
  if (err.empty() && reg && !strcmp(reg, "registered") && !strstr(info, "zero copy"))
    err = std::string("registered buffers, but the last call did not go zero copy: ") + info;
  if (err.empty() && reg) {
    size_t big = 0;
    while (big + 1 < calls.size() && calls[big].count != 3000001) big++;
    err = mismatchNamed(comm, rank, bufs[big].send, bufs[big].recv, calls[big].count, stream);
  }
  // Half the registrations go now, the rest with the communicator.
  for (size_t h = 0; h < handles.size() && err.empty(); h += 2)
    if (clbCommDeregister(comm, handles[h]) != clbSuccess) err = std::string("deregister: ") + clbGetLastError();
  // "registered": each buffer's whole range went, and its first half stays registered: the first
  // all-reduce of 3000001 floats (several rounds) again must be right over what is still covered
  // and what is not.
  if (err.empty() && reg && !strcmp(reg, "registered")) {
    size_t last = 0;
    while (last + 1 < calls.size() && calls[last].count != 3000001) last++;
    const size_t esz = clbTypeSize(calls[last].type);
    CU_OK(d->cuMemsetD8Async(bufs[last].recv, 0xa5, bufs[last].recvBytes, stream));
    if (issue(calls[last], bufs[last].send, bufs[last].recv, rank, n, comm, stream) != clbSuccess)
      err = std::string("the last call again, its buffers half registered: ") + clbGetLastError();
    CU_OK(d->cuStreamSynchronize(stream));
    std::vector<uint8_t> want = expected(calls[last], rank, n, (int)last), got(want.size());
    CU_OK(d->cuMemcpyDtoH(got.data(), bufs[last].recvView, got.size()));
    for (size_t e = 0; e < want.size() / esz && err.empty(); e++)
      if (!sameBits(got.data() + e * esz, want.data() + e * esz, esz))
        err = "rank " + std::to_string(rank) + ": the last call again, its buffers half registered: element " +
              std::to_string(e) + " differs";
  }
  clbMemStats_t st;
  clbCommMemStats(comm, &st);
  if (rank == 0)
    printf("rank 0 of %d: device bytes held %lld (peak %lld)\n%s", n, (long long)st.deviceBytes,
           (long long)st.devicePeakBytes, info);
  const char* p2p = getenv("COLIBRI_DEVICE_P2P");
  if (n == 1) {
    // One rank: copies on the stream at most, whatever the path setting (Device::runOneRank).
    if (err.empty() && (st.deviceBytes != 0 || !strstr(info, "one rank")))
      err = "one rank: device bytes held " + std::to_string(st.deviceBytes) + " (want 0): " + info;
  } else if (p2p && !strcmp(p2p, "off")) {
    // Everything shared lives in host memory; in device memory only this rank's block counters
    // with its copy of its call count and error word (32 bytes) and, where the copy engines moved
    // the bulk (not with the staged kernel forced), the scratch the peers' parts are copied into
    // (at most the staging's 16 MiB: a half, or both for an in-place fold on ranks 2 and up).
    const char* path = getenv("COLIBRI_DEVICE_PATH");
    const bool staged = path && !strcmp(path, "staged");
    const bool scratch = strstr(info, "device scratch") != nullptr;
    if (err.empty() && (!strstr(info, "in host memory") || scratch == staged ||
                        (staged ? st.deviceBytes != 32 : st.deviceBytes <= 32 || st.deviceBytes > 32 + (16 << 20))))
      err = std::string("through host memory") + (staged ? " (staged kernel)" : " (copies)") + ", device bytes held " +
            std::to_string(st.deviceBytes) + ": " + info;
  } else if (err.empty() && (st.deviceBytes <= 0 || st.deviceBytes > (16 << 20))) {
    err = "device bytes held " + std::to_string(st.deviceBytes) + " outside (0, 16 MiB]";
  }
  clbCommDestroy(comm);
  for (auto& b : bufs) {
    d->cuMemFree(b.send);
    if (b.recv != b.send) d->cuMemFree(b.recv);
  }
  if (spare) d->cuMemFree(spare);
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

// (ranks, COLIBRI_DEVICE_PATH, spread over every GPU)
using Placement = std::tuple<int, std::string, bool>;

std::string placementName(const ::testing::TestParamInfo<Placement>& i) {
  return std::to_string(std::get<0>(i.param)) + "ranks_" + std::get<1>(i.param) +
         (std::get<2>(i.param) ? "_spread" : "_gpu0");
}

// Skips unless there is a GPU (and, for spread placements, two or more), then sets the placement.
#define SKIP_UNLESS_PLACED(placement)                                                               \
  do {                                                                                              \
    if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;                                             \
    if (std::get<2>(placement) && gpuCount() < 2)                                                   \
      GTEST_SKIP() << "needs 2 or more GPUs to spread ranks over, this machine has " << gpuCount(); \
    setPlacement(std::get<1>(placement), std::get<2>(placement));                                   \
  } while (0)

class DeviceThreads : public ::testing::TestWithParam<Placement> {};

TEST_P(DeviceThreads, AllFourCollectivesMatchHostReferenceBitForBit) {
  SKIP_UNLESS_PLACED(GetParam());
  runThreads(std::get<0>(GetParam()), rankBody);
}
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceThreads,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values("auto", "ll", "staged", "direct", "viahost",
                                                              "viahoststaged"),
                                            ::testing::Values(false)),
                         placementName);
namespace {

// One rank's collectives are copies at most (Device::runOneRank): rankBody's calls captured into
// a CUDA graph before any eager call (there is nothing to set up first), replayed twice with new
// inputs and checked element by element, then made eagerly; the communicator never holds device
// memory (its count throughout, the GPU's free memory around the eager calls), says so in its
// info, and suspends after the capture.
std::string oneRankBody(const Driver* d) {
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) return std::string("unique id: ") + clbGetLastError();
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = setUpRank(d, id, 0, 1, &stream, &comm); !e.empty()) return e;
  std::vector<Call> calls = theCalls();
  std::vector<CUdeviceptr> send(calls.size()), recv(calls.size());
  std::string err;
  for (size_t i = 0; i < calls.size(); i++) {
    const size_t bytes = calls[i].count * clbTypeSize(calls[i].type);
    CU_OK(d->cuMemAlloc(&send[i], bytes));
    if (calls[i].inPlace)
      recv[i] = send[i];
    else
      CU_OK(d->cuMemAlloc(&recv[i], bytes));
  }
  size_t free0 = 0, free1 = 0, total = 0;
  CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (size_t i = 0; i < calls.size() && err.empty(); i++)
    if (issue(calls[i], send[i], recv[i], 0, 1, comm, stream) != clbSuccess)
      err = "captured call " + std::to_string(i) + ": " + clbGetLastError();
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CU_OK(d->cuStreamEndCapture(stream, &graph));
  if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
  for (int rep = 0; rep < 2 && err.empty(); rep++) {
    for (size_t i = 0; i < calls.size(); i++) {
      const std::vector<uint8_t> in = makeInput(0, calls[i].count, calls[i].type, (int)i + 100 * rep);
      // On the stream (ordered before the replay); from pageable memory the copy is staged before
      // the call returns, so `in` may go.
      if (!calls[i].inPlace) CU_OK(d->cuMemsetD8Async(recv[i], 0xa5, in.size(), stream));
      CU_OK(d->cuMemcpyHtoDAsync(send[i], in.data(), in.size(), stream));
      CU_OK(d->cuStreamSynchronize(stream));
    }
    if (std::string e = replay(exec, stream, {comm}); !e.empty()) err = e;
    CU_OK(d->cuStreamSynchronize(stream));
    for (size_t i = 0; i < calls.size() && err.empty(); i++) {
      const Call& c = calls[i];
      const size_t esz = clbTypeSize(c.type);
      std::vector<uint8_t> want = expected(c, 0, 1, (int)i + 100 * rep), got(want.size());
      CU_OK(d->cuMemcpyDtoH(got.data(), recv[i], got.size()));
      for (size_t e = 0; e < want.size() / esz && err.empty(); e++)
        if (!sameBits(got.data() + e * esz, want.data() + e * esz, esz))
          err = "replay " + std::to_string(rep) + " call " + std::to_string(i) + " (coll " + std::to_string(c.coll) +
                " " + clb::typeName(c.type) + " " + clb::opName(c.op) + (c.inPlace ? " in place" : "") + "): element " +
                std::to_string(e) + " differs";
    }
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  // Eager calls too: the same copies. The GPU's free memory is compared around them only: the
  // driver keeps memory of its own for the graph above (2 MiB on an H100), which is not
  // Colibri's; Colibri's own count covers the graph's part.
  CU_OK(d->cuStreamSynchronize(stream));
  CU_OK(d->cuMemGetInfo(&free0, &total));
  for (size_t i = 0; i < calls.size() && err.empty(); i++)
    if (issue(calls[i], send[i], recv[i], 0, 1, comm, stream) != clbSuccess)
      err = "eager call " + std::to_string(i) + ": " + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  CU_OK(d->cuMemGetInfo(&free1, &total));
  clbMemStats_t st;
  clbCommMemStats(comm, &st);
  char info[2048];
  clbCommInfo(comm, info, sizeof info);
  if (err.empty() && (st.deviceBytes != 0 || st.devicePeakBytes != 0 || free1 != free0))
    err = "one rank held device memory: its count " + std::to_string(st.deviceBytes) + " (peak " +
          std::to_string(st.devicePeakBytes) + "), the GPU's free memory " + std::to_string(free0) + " -> " +
          std::to_string(free1);
  if (err.empty() && !strstr(info, "one rank")) err = std::string("the info does not name the one-rank path: ") + info;
  // PreMulSum: an allReduce and a reduce scale straight into recv (one rank needs no scratch).
  for (const bool reduce : {false, true}) {
    if (!err.empty()) break;
    const size_t n = 3000;
    std::vector<float> in(n), out(n);
    for (size_t e = 0; e < n; e++) in[e] = (float)(e % 97) - 40.0f;
    float scalar = 0.25f;
    clbRedOp_t op;
    if (clbRedOpCreatePreMulSum(&op, &scalar, clbFloat32, clbScalarHostImmediate, comm) != clbSuccess) {
      err = std::string("PreMulSum: ") + clbGetLastError();
      break;
    }
    CUdeviceptr src = 0, dst = 0;
    CU_OK(d->cuMemAlloc(&src, n * 4));
    CU_OK(d->cuMemAlloc(&dst, n * 4));
    CU_OK(upload(d, src, in.data(), n * 4));
    CU_OK(d->cuMemsetD8(dst, 0xa5, n * 4));
    const clbResult_t rc = reduce ? clbReduce((void*)src, (void*)dst, n, clbFloat32, op, 0, comm, stream)
                                  : clbAllReduce((void*)src, (void*)dst, n, clbFloat32, op, comm, stream);
    if (rc != clbSuccess) err = std::string("PreMulSum call: ") + clbGetLastError();
    CU_OK(d->cuStreamSynchronize(stream));
    CU_OK(d->cuMemcpyDtoH(out.data(), dst, n * 4));
    d->cuMemFree(src);
    d->cuMemFree(dst);
    for (size_t e = 0; e < n && err.empty(); e++)
      if (out[e] != in[e] * scalar)
        err = std::string("PreMulSum ") + (reduce ? "reduce" : "allReduce") + ": element " + std::to_string(e);
    clbRedOpDestroy(op, comm);
    clbCommMemStats(comm, &st);
    if (err.empty() && st.devicePeakBytes != 0)
      err = std::string("a PreMulSum ") + (reduce ? "reduce" : "allReduce") + " of one rank took " +
            std::to_string(st.devicePeakBytes) + " bytes of device memory";
  }
  // Nothing to free, and no graph holds anything of it: the suspend is taken.
  if (err.empty() && clbCommSuspend(comm) != clbSuccess) err = std::string("suspend: ") + clbGetLastError();
  if (err.empty() && clbCommResume(comm) != clbSuccess) err = std::string("resume: ") + clbGetLastError();
  clbCommDestroy(comm);
  for (size_t i = 0; i < calls.size(); i++) {
    d->cuMemFree(send[i]);
    if (recv[i] != send[i]) d->cuMemFree(recv[i]);
  }
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

TEST(DeviceOneRank, CapturedCallsAreCopiesAndHoldNoDeviceMemory) {
  const Driver* d = gpu();
  if (!d) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  EXPECT_EQ(oneRankBody(d), "");
}

INSTANTIATE_TEST_SUITE_P(AllGpus, DeviceThreads,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values("ll", "staged", "direct", "viahost"),
                                            ::testing::Values(true)),
                         placementName);

namespace {
std::string graphRank(const clbUniqueId& id, int rank, int n);
std::string launchRank(const clbUniqueId& id, int rank, int n, const char* want);
// What a rank process runs (DeviceChild.Rank).
enum ChildBody { kCalls = 0, kGraph = 1, kLaunchReplays = 2 };
// A rank alone in its process replays graphs by default (auto); ranks sharing a process launch
// ordinarily unless COLIBRI_DEVICE_LAUNCH=graph; =kernel never replays.
constexpr const char* kReplays = "eager launches replay graphs (16 prepared)";
constexpr const char* kOrdinary = "eager launches are ordinary (0 prepared)";
}  // namespace

// The body of one rank process (started by DeviceProcesses, DeviceProcessGraphs and DeviceLaunch);
// skipped when run on its own.
TEST(DeviceChild, Rank) {
  const char* spec = getenv("CLB_DEVICE_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as a child of DeviceProcesses";
  int rank = 0, n = 0, body = 0;
  char idHex[2 * CLB_UNIQUE_ID_BYTES + 1] = {0};
  ASSERT_EQ(sscanf(spec, "%d:%d:%d:%256s", &rank, &n, &body, idHex), 4);
  const clbUniqueId id = unhex(idHex);
  EXPECT_EQ(body == kLaunchReplays ? launchRank(id, rank, n, kReplays)
            : body == kGraph       ? graphRank(id, rank, n)
                                   : rankBody(id, rank, n),
            "");
}

// Starts n rank processes of this test binary (DeviceChild.Rank) and expects each to pass.
void runProcesses(int n, ChildBody body) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    pid_t pid = spawnGpuRank("DeviceChild.Rank", {"CLB_DEVICE_CHILD=" + std::to_string(r) + ":" + std::to_string(n) +
                                                  ":" + std::to_string((int)body) + ":" + hex(id)});
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  for (int r = 0; r < n; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank process " << r << " status " << status;
  }
}

class DeviceProcesses : public ::testing::TestWithParam<Placement> {};

TEST_P(DeviceProcesses, AllFourCollectivesThroughCudaIpc) {
  SKIP_UNLESS_PLACED(GetParam());
  runProcesses(std::get<0>(GetParam()), kCalls);
}
// Across processes: LL and staged, and direct on registered buffers ("registered": every rank's;
// "mixed": rank 0's missing for odd calls, which stage; "windows": forced direct, the small calls
// reading the peers' windows where every rank's is registered, else copies).
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceProcesses,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values("auto", "staged", "registered", "mixed", "windows",
                                                              "viahost", "viahoststaged"),
                                            ::testing::Values(false)),
                         placementName);
INSTANTIATE_TEST_SUITE_P(AllGpus, DeviceProcesses,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values("auto", "staged", "registered", "mixed", "viahost"),
                                            ::testing::Values(true)),
                         placementName);

namespace {

// Captures 100 calls into a CUDA graph, allReduces and (every fourth, from the second) reduces
// at root i % n, and replays it with new data; first checks that a capture before the staging
// exists is refused with the reason. A reduce's other ranks pass no recv buffer, and theirs keeps
// its bytes.
std::string graphRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  const int calls = 100;
  auto isReduce = [](int i) { return i % 4 == 1; };
  std::vector<CUdeviceptr> in(calls), out(calls);
  std::vector<size_t> count(calls);
  size_t maxCount = 0;
  // Registered (rank processes): beyond the LL sizes, so the captured calls read in place; with
  // "windows", of the LL sizes, so that the all-reduces read the peers' windows (the reduces stage).
  const char* regMode = getenv("CLB_TEST_REGISTER");
  const bool reg = regMode != nullptr, windows = reg && !strcmp(regMode, "windows");
  // Through host memory: a quarter of the calls (allReduces and reduces) beyond the LL sizes and
  // over a round of the staging, so that the copies path is captured too.
  const char* p2p = getenv("COLIBRI_DEVICE_P2P");
  const bool copies = p2p && !strcmp(p2p, "off");
  auto isLarge = [&](int i) { return copies && (i % 8 == 3 || i % 8 == 5); };
  std::string err;
  int largest = 0;
  for (int i = 0; i < calls && err.empty(); i++) {
    count[i] = (isLarge(i) ? 1500000 : reg && !windows ? 70000 : 1000) + 37 * i;
    if (count[i] > maxCount) largest = i;
    maxCount = std::max(maxCount, count[i]);
    CU_OK(d->cuMemAlloc(&in[i], count[i] * 4));
    CU_OK(d->cuMemAlloc(&out[i], count[i] * 4));
    void* h = nullptr;
    if (reg && (clbCommRegister(comm, (void*)in[i], count[i] * 4, &h) != clbSuccess ||
                clbCommRegister(comm, (void*)out[i], count[i] * 4, &h) != clbSuccess))
      err = std::string("register: ") + clbGetLastError();
  }
  // 1. Capturing before any staging exists: refused, and the communicator stays usable.
  CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  clbResult_t rc = clbAllReduce((void*)in[0], (void*)out[0], count[0], clbFloat32, clbSum, comm, stream);
  std::string msg = clbGetLastError();
  CUgraph g0 = nullptr;
  d->cuStreamEndCapture(stream, &g0);
  if (g0) d->cuGraphDestroy(g0);
  if (err.empty() && (rc != clbInvalidUsage || msg.find("CUDA graph") == std::string::npos))
    err = "capture before set-up: expected INVALID_USAGE naming the graph, got " + std::to_string(rc) + ": " + msg;
  // 2. Warm up with the largest size, then capture 100 calls. The reduce too: with registered
  // buffers the all-reduces go zero copy, but a reduce stages (its other ranks have no recv
  // buffer to register), and the staging must exist before the capture.
  // With windows the all-reduce warms up with the smallest call: the LL buffer their copies use is
  // set up whole at the first call, so the larger captured calls need nothing more (a buffer
  // grown by a later call would refuse the capture, or free what a graph replays into).
  const int warm = windows ? 0 : largest;
  if (err.empty() &&
      clbAllReduce((void*)in[warm], (void*)out[warm], count[warm], clbFloat32, clbSum, comm, stream) != clbSuccess)
    err = std::string("warm-up: ") + clbGetLastError();
  if (err.empty() && clbReduce((void*)in[largest], rank == 0 ? (void*)out[largest] : nullptr, maxCount, clbFloat32,
                               clbSum, 0, comm, stream) != clbSuccess)
    err = std::string("warm-up reduce: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (int i = 0; i < calls && err.empty(); i++) {
      const clbResult_t rc =
          isReduce(i) ? clbReduce((void*)in[i], rank == i % n ? (void*)out[i] : nullptr, count[i], clbFloat32, clbSum,
                                  i % n, comm, stream)
                      : clbAllReduce((void*)in[i], (void*)out[i], count[i], clbFloat32, clbSum, comm, stream);
      if (rc != clbSuccess) err = "captured call " + std::to_string(i) + ": " + clbGetLastError();
    }
    CU_OK(d->cuStreamEndCapture(stream, &graph));
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
    // Uploaded before any rank replays: a first launch that uploads may wait for the work running
    // in the context, which could be a peer's replay waiting for this rank (docs/troubleshooting.md).
    // Seen with ranks as threads once the copies path's calls were captured too: a larger graph.
    if (err.empty()) CU_OK(d->cuGraphUpload(exec, stream));
    CU_OK(d->cuStreamSynchronize(stream));
  }
  if (clbBarrier(comm, nullptr) != clbSuccess && err.empty()) err = std::string("barrier: ") + clbGetLastError();
  // 3. Replay with new data three times.
  for (int rep = 0; rep < 3 && err.empty(); rep++) {
    for (int i = 0; i < calls; i++) {
      std::vector<float> v(count[i]);
      for (size_t e = 0; e < count[i]; e++) v[e] = (float)((rank + 1) * 1000 + (int)e % 977 + rep * 7 + i);
      CU_OK(upload(d, in[i], v.data(), v.size() * 4));
      CU_OK(d->cuMemsetD8Async(out[i], 0xa5, count[i] * 4, stream));  // ordered before the graph
    }
    if (std::string e = replay(exec, stream, {comm}); !e.empty()) return e;
    CU_OK(d->cuStreamSynchronize(stream));
    for (int i = 0; i < calls && err.empty(); i++) {
      std::vector<float> got(count[i]);
      CU_OK(d->cuMemcpyDtoH(got.data(), out[i], got.size() * 4));
      const bool untouched = isReduce(i) && rank != i % n;  // the poison stays
      for (size_t e = 0; e < count[i]; e++) {
        float want = 0;
        for (int p = 0; p < n; p++) want += (float)((p + 1) * 1000 + (int)e % 977 + rep * 7 + i);
        uint32_t poison = 0xa5a5a5a5u;
        if (untouched) memcpy(&want, &poison, 4);
        if (memcmp(&got[e], &want, 4) != 0) {
          err = "replay " + std::to_string(rep) + " call " + std::to_string(i) + " element " + std::to_string(e) +
                ": got " + std::to_string(got[e]) + " want " + std::to_string(want);
          break;
        }
      }
    }
  }
  char info[2048];
  clbCommInfo(comm, info, sizeof info);
  if (err.empty() && reg && !strstr(info, windows ? "last call direct (windows" : "last call direct (zero copy"))
    err = std::string("registered buffers, but the captured calls did not go ") +
          (windows ? "windowed: " : "zero copy: ") + info;
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  clbCommDestroy(comm);
  for (int i = 0; i < calls; i++) {
    d->cuMemFree(in[i]);
    d->cuMemFree(out[i]);
  }
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

class DeviceGraphs : public ::testing::TestWithParam<Placement> {};

TEST_P(DeviceGraphs, HundredCapturedAllReducesReplayWithNewData) {
  SKIP_UNLESS_PLACED(GetParam());
  runThreads(std::get<0>(GetParam()), graphRank);
}
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceGraphs,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values("ll", "staged", "direct", "viahost", "viahoststaged"),
                                            ::testing::Values(false)),
                         placementName);
INSTANTIATE_TEST_SUITE_P(AllGpus, DeviceGraphs,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values("ll", "staged", "direct", "viahost"),
                                            ::testing::Values(true)),
                         placementName);

// The same with rank processes: LL and staging ("auto"), registered buffers read in place beyond
// the LL sizes ("registered") and the windows of the LL sizes ("windows").
class DeviceProcessGraphs : public ::testing::TestWithParam<Placement> {};

TEST_P(DeviceProcessGraphs, HundredCapturedAllReducesReplayWithNewData) {
  SKIP_UNLESS_PLACED(GetParam());
  runProcesses(std::get<0>(GetParam()), kGraph);
}
INSTANTIATE_TEST_SUITE_P(AllGpus, DeviceProcessGraphs,
                         ::testing::Combine(::testing::Values(2),
                                            ::testing::Values("auto", "registered", "windows", "viahost"),
                                            ::testing::Values(true)),
                         placementName);
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceProcessGraphs,
                         ::testing::Combine(::testing::Values(2), ::testing::Values("registered", "viahost"),
                                            ::testing::Values(false)),
                         placementName);
INSTANTIATE_TEST_SUITE_P(OneGpuWindows, DeviceProcessGraphs,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values("windows"),
                                            ::testing::Values(false)),
                         placementName);

// Footprint and set-up time, printed for the results file (targets live in benchmarks, not here).
class DeviceFootprint : public ::testing::TestWithParam<int> {};

TEST_P(DeviceFootprint, Report) {
  const Driver* d = gpu();
  if (!d) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  const int n = GetParam();
  CUdevice dev;
  CUcontext ctx;
  ASSERT_EQ(d->cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  ASSERT_EQ(d->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  size_t free0, free1, free2, total;
  ASSERT_EQ(d->cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<clbComm_t> comms(n);
  std::vector<double> initMs(n), firstMs(n);
  std::vector<CUdeviceptr> bufs(n);
  for (int r = 0; r < n; r++) ASSERT_EQ(d->cuMemAlloc(&bufs[r], 4096 * 4), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      d->cuCtxSetCurrent(ctx);
      auto t0 = std::chrono::steady_clock::now();
      clbCommInitRank(&comms[r], &id, r, n, nullptr);
      initMs[r] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    });
  for (auto& t : ts) t.join();
  ts.clear();
  ASSERT_EQ(d->cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      d->cuCtxSetCurrent(ctx);
      CUstream s;
      d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);  // ranks of one process need their own streams
      auto t0 = std::chrono::steady_clock::now();
      clbAllReduce((void*)bufs[r], (void*)bufs[r], 4096, clbFloat32, clbSum, comms[r], s);
      d->cuStreamSynchronize(s);
      firstMs[r] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      d->cuStreamDestroy(s);
    });
  for (auto& t : ts) t.join();
  ASSERT_EQ(d->cuMemGetInfo(&free2, &total), CUDA_SUCCESS);
  clbMemStats_t st;
  clbCommMemStats(comms[0], &st);
  double maxInit = 0, maxFirst = 0;
  for (int r = 0; r < n; r++) maxInit = std::max(maxInit, initMs[r]), maxFirst = std::max(maxFirst, firstMs[r]);
  printf(
      "FOOTPRINT ranks=%d init_ms_max=%.2f first_device_op_ms_max=%.2f device_MiB_per_rank_after_init=%.2f "
      "after_first_op=%.2f memstats_device_bytes=%lld\n",
      n, maxInit, maxFirst, (double)(free0 - free1) / n / 1048576.0, (double)(free0 - free2) / n / 1048576.0,
      (long long)st.deviceBytes);
  for (int r = 0; r < n; r++) clbCommDestroy(comms[r]);
  for (int r = 0; r < n; r++) d->cuMemFree(bufs[r]);
}
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceFootprint, ::testing::Values(1, 2, 4, 8));

namespace {

// Eager calls launch their kernels by replaying prepared one-kernel graphs (one per stream and
// kernel, at most 16, ordinary launches beyond): calls of every path and several grid sizes on 20
// streams in turn, each call made twice with new inputs, each stream drained before the next
// takes over, then one capture on a stream that has a prepared graph, replayed. Every result checked against the sum of
// the ranks' inputs.
std::string launchRank(const clbUniqueId& id, int rank, int n, const char* want) {
  const Driver* d = nullptr;
  CUstream first = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &first, &comm); !e.empty()) return e;
  const size_t counts[] = {3, 1000, 70001, 1500007};  // LL, LL, then more blocks each
  const size_t maxCount = 1500007;
  CUdeviceptr in, out;
  CU_OK(d->cuMemAlloc(&in, maxCount * 4));
  CU_OK(d->cuMemAlloc(&out, maxCount * 4));
  std::vector<CUstream> streams{first};
  for (int i = 1; i < 20; i++) {
    CUstream s;
    CU_OK(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    streams.push_back(s);
  }
  auto value = [](int p, size_t e, int call) { return (float)((p + 1) * 100 + (int)(e % 613) + call); };
  std::string err;
  auto check = [&](size_t count, int call, const char* what) {
    std::vector<float> got(count);
    if (d->cuMemcpyDtoH(got.data(), out, count * 4) != CUDA_SUCCESS) return std::string("cuMemcpyDtoH failed");
    for (size_t e = 0; e < count; e++) {
      float want = 0;
      for (int p = 0; p < n; p++) want += value(p, e, call);
      if (got[e] != want)
        return std::string(what) + " call " + std::to_string(call) + " (" + std::to_string(count) +
               " elements) element " + std::to_string(e) + ": got " + std::to_string(got[e]) + " want " +
               std::to_string(want);
    }
    return std::string();
  };
  auto fill = [&](size_t count, int call, CUstream s) {
    std::vector<float> v(count);
    for (size_t e = 0; e < count; e++) v[e] = value(rank, e, call);
    return upload(d, in, v.data(), count * 4) == CUDA_SUCCESS &&
           d->cuMemsetD8Async(out, 0xa5, count * 4, s) == CUDA_SUCCESS;
  };
  int call = 0;
  for (CUstream s : streams) {
    // Each call twice with new data: the second has the same parameters (it replays the graph as
    // it is) and must still see the new inputs.
    for (size_t count : counts)
      for (int again = 0; again < 2 && err.empty(); again++) {
        if (!fill(count, call, s))
          err = "filling the buffers failed";
        else if (clbAllReduce((void*)in, (void*)out, count, clbFloat32, clbSum, comm, s) != clbSuccess)
          err = "eager call " + std::to_string(call) + ": " + clbGetLastError();
        else if (d->cuStreamSynchronize(s) != CUDA_SUCCESS)
          err = "cuStreamSynchronize failed";
        else
          err = check(count, call, "eager");
        call++;
      }
  }
  char info[2048];
  clbCommInfo(comm, info, sizeof info);
  if (err.empty() && !strstr(info, want)) err = std::string("expected '") + want + "' in: " + info;
  // A capture on the first stream (it has prepared graphs): recorded as ordinary launches.
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(first, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (size_t count : counts)
      if (err.empty() && clbAllReduce((void*)in, (void*)out, count, clbFloat32, clbSum, comm, first) != clbSuccess)
        err = std::string("captured call: ") + clbGetLastError();
    CU_OK(d->cuStreamEndCapture(first, &graph));
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
  }
  // The graph's calls all write `out`; the last (largest) decides what it holds.
  if (err.empty() && !fill(maxCount, call, first)) err = "filling the buffers failed";
  if (err.empty()) {
    if (std::string e = replay(exec, first, {comm}); !e.empty()) return e;
    CU_OK(d->cuStreamSynchronize(first));
    err = check(maxCount, call, "replayed");
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  clbCommDestroy(comm);
  d->cuMemFree(in);
  d->cuMemFree(out);
  for (CUstream s : streams) d->cuStreamDestroy(s);
  return err;
}

}  // namespace

// Two rank processes, each alone in its process (one rank alone makes no launches at all: its
// calls are copies, DeviceOneRank).
TEST(DeviceLaunch, EagerCallsOfARankAloneInItsProcessReplayPreparedGraphs) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  unsetenv("COLIBRI_DEVICE_LAUNCH");
  runProcesses(2, kLaunchReplays);
}

TEST(DeviceLaunch, RanksSharingAProcessReplayGraphsOnlyWhenAsked) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  unsetenv("COLIBRI_DEVICE_LAUNCH");
  runThreads(2, [](const clbUniqueId& id, int r, int n) { return launchRank(id, r, n, kOrdinary); });
  setenv("COLIBRI_DEVICE_LAUNCH", "graph", 1);
  runThreads(2, [](const clbUniqueId& id, int r, int n) { return launchRank(id, r, n, kReplays); });
  unsetenv("COLIBRI_DEVICE_LAUNCH");
}

TEST(DeviceLaunch, OrdinaryLaunchesWhenAskedGiveTheSameResults) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  setenv("COLIBRI_DEVICE_LAUNCH", "kernel", 1);
  runThreads(2, [](const clbUniqueId& id, int r, int n) { return launchRank(id, r, n, kOrdinary); });
  unsetenv("COLIBRI_DEVICE_LAUNCH");
}

// Refused at init (the settings come from the environment there), naming the variable and its words.
TEST(DeviceLaunch, ABadLaunchModeIsRefusedByName) {
  setenv("COLIBRI_DEVICE_LAUNCH", "graphs", 1);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t comm = nullptr;
  EXPECT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbInvalidArgument);
  const std::string msg = clbGetLastError();
  EXPECT_NE(msg.find("COLIBRI_DEVICE_LAUNCH='graphs' is not one of auto, graph, kernel"), std::string::npos) << msg;
  EXPECT_EQ(comm, nullptr);
  unsetenv("COLIBRI_DEVICE_LAUNCH");
  if (comm) clbCommDestroy(comm);
}

// A stream of another GPU than the buffers' is refused by name; the communicator stays usable.
TEST(DeviceMemory, AStreamOfAnotherGpuIsRefusedWithTheReason) {
  const Driver* d = gpu();
  if (!d) GTEST_SKIP() << "no GPU here: " << why;
  if (gpuCount() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << gpuCount();
  setPlacement("auto", false);
  CUdevice dev0, dev1;
  CUcontext ctx0, ctx1;
  ASSERT_EQ(d->cuDeviceGet(&dev0, 0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuDeviceGet(&dev1, 1), CUDA_SUCCESS);
  ASSERT_EQ(d->cuDevicePrimaryCtxRetain(&ctx0, dev0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuDevicePrimaryCtxRetain(&ctx1, dev1), CUDA_SUCCESS);
  CUstream s0, s1;
  ASSERT_EQ(d->cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d->cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr buf;
  ASSERT_EQ(d->cuMemAlloc(&buf, 1024 * 4), CUDA_SUCCESS);
  std::vector<float> ones(1024, 1.0f), got(1024);
  ASSERT_EQ(upload(d, buf, ones.data(), 4096), CUDA_SUCCESS);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t comm;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess);
  // First on the right stream (sets up), then on GPU 1's stream, then on the right one again.
  EXPECT_EQ(clbAllReduce((void*)buf, (void*)buf, 1024, clbFloat32, clbSum, comm, s0), clbSuccess) << clbGetLastError();
  EXPECT_EQ(clbAllReduce((void*)buf, (void*)buf, 1024, clbFloat32, clbSum, comm, s1), clbInvalidArgument);
  std::string msg = clbGetLastError();
  EXPECT_NE(msg.find("stream belongs to GPU 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPU 0"), std::string::npos) << msg;
  EXPECT_EQ(clbAllReduce((void*)buf, (void*)buf, 1024, clbFloat32, clbSum, comm, s0), clbSuccess) << clbGetLastError();
  ASSERT_EQ(d->cuStreamSynchronize(s0), CUDA_SUCCESS);
  ASSERT_EQ(d->cuMemcpyDtoH(got.data(), buf, 4096), CUDA_SUCCESS);
  EXPECT_EQ(got, ones);
  clbCommDestroy(comm);
  d->cuMemFree(buf);
  d->cuStreamDestroy(s0);
  d->cuCtxSetCurrent(ctx1);
  d->cuStreamDestroy(s1);
  d->cuCtxSetCurrent(ctx0);
}

namespace {

// With COLIBRI_DEVICE_CHECK_CALLS=1 every rank learns, by name and at once, that ranks made
// different device calls; the communicator stays usable for the next, matching call.
std::string mismatchRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  const size_t count = 4096;
  CUdeviceptr in = 0, out = 0;
  CU_OK(d->cuMemAlloc(&in, count * 4));
  CU_OK(d->cuMemAlloc(&out, count * 4));
  std::vector<float> v(count, (float)(rank + 1));
  CU_OK(upload(d, in, v.data(), count * 4));
  std::string err;
  // Another count on rank 0, then another collective on the last rank.
  for (int round = 0; round < 2 && err.empty(); round++) {
    clbResult_t rc = round == 1 && rank == n - 1
                         ? clbBroadcast((void*)in, (void*)out, count, clbFloat32, 0, comm, stream)
                         : clbAllReduce((void*)in, (void*)out, round == 0 && rank == 0 ? count : count - 1, clbFloat32,
                                        clbSum, comm, stream);
    const std::string msg = clbGetLastError();
    const std::string want =
        round == 0 ? "rank 0 called allReduce" : "rank " + std::to_string(n - 1) + " called broadcast";
    if (rc != clbInvalidUsage || msg.find(want) == std::string::npos)
      err = "round " + std::to_string(round) + ": expected INVALID_USAGE saying '" + want + "', got " +
            std::to_string(rc) + ": " + msg;
  }
  if (err.empty() && clbAllReduce((void*)in, (void*)out, count, clbFloat32, clbSum, comm, stream) != clbSuccess)
    err = std::string("the matching call after: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  std::vector<float> got(count);
  CU_OK(d->cuMemcpyDtoH(got.data(), out, count * 4));
  for (size_t e = 0; e < count && err.empty(); e++)
    if (got[e] != (float)(n * (n + 1) / 2)) err = "element " + std::to_string(e) + " = " + std::to_string(got[e]);
  clbCommDestroy(comm);
  d->cuMemFree(in);
  d->cuMemFree(out);
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

TEST(DeviceCheckCalls, DifferentCallsAreNamedOnEveryRank) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  setenv("COLIBRI_DEVICE_CHECK_CALLS", "1", 1);
  for (int n : {2, 4}) runThreads(n, mismatchRank);
  unsetenv("COLIBRI_DEVICE_CHECK_CALLS");
}

namespace {

// Ranks that share no memory (COLIBRI_TRANSPORT=socket, or verbs over the emulator): device
// buffers go through pinned host memory and the host ring, or over verbs with GPUDirect RDMA
// (the emulator registers the GPU's dma-bufs and reaches them through the driver) unless
// COLIBRI_VERBS_GPU_MEMORY=host. Inputs are small integers, exact in any summation order (the
// ring's order is not rank order).
std::string acrossHostsRank(const clbUniqueId& id, int rank, int n) {
  const char* gm = getenv("COLIBRI_VERBS_GPU_MEMORY");
  const char* tr = getenv("COLIBRI_TRANSPORT");
  const char* nd = getenv("COLIBRI_VERBS_EMU_DMABUF");
  const bool noDmabuf = nd && std::string(nd) == "0";  // the emulator refuses dma-bufs: auto falls back
  const bool gdr = tr && std::string(tr) == "verbs" && !(gm && std::string(gm) == "host") && !noDmabuf;
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  const size_t count = 3001;
  auto value = [](int r, size_t e) { return (r + 1) * 100 + (int)(e % 89); };
  std::vector<float> f(count * n);
  std::vector<int32_t> k(count * n);
  for (size_t e = 0; e < count * n; e++) f[e] = (float)value(rank, e), k[e] = value(rank, e);
  CUdeviceptr fin, fout, kin, kout;
  CU_OK(d->cuMemAlloc(&fin, count * n * 4));
  CU_OK(d->cuMemAlloc(&fout, count * n * 4));
  CU_OK(d->cuMemAlloc(&kin, count * n * 4));
  CU_OK(d->cuMemAlloc(&kout, count * n * 4));
  CU_OK(upload(d, fin, f.data(), count * n * 4));
  CU_OK(upload(d, kin, k.data(), count * n * 4));
  std::string err;
  auto check = [&](const char* what, CUdeviceptr at, size_t elems, bool isFloat,
                   const std::function<int(size_t)>& want) {
    std::vector<int32_t> got(elems);
    CUresult rc = d->cuMemcpyDtoH(got.data(), at, elems * 4);
    for (size_t e = 0; e < elems && err.empty(); e++) {
      float gf;
      memcpy(&gf, &got[e], 4);
      const long long g = isFloat ? (long long)gf : got[e];
      if (rc != CUDA_SUCCESS || g != want(e))
        err = std::string(what) + " element " + std::to_string(e) + ": got " + std::to_string(g) + " want " +
              std::to_string(want(e));
    }
  };
  auto sumOf = [&](size_t e) {
    int s = 0;
    for (int p = 0; p < n; p++) s += value(p, e);
    return s;
  };
  // Five calls back to back on the stream, then one synchronize.
  clbResult_t rc = clbAllReduce((void*)fin, (void*)fout, count, clbFloat32, clbSum, comm, stream);
  if (rc == clbSuccess) rc = clbAllReduce((void*)kin, (void*)kin, count, clbInt32, clbMax, comm, stream);
  if (rc == clbSuccess) rc = clbAllGather((void*)fin, (void*)fout, count, clbFloat32, comm, stream);
  if (rc != clbSuccess) err = std::string("calls: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  check("allGather", fout, count * n, true, [&](size_t e) { return value((int)(e / count), e % count); });
  check("allReduce max in place", kin, count, false, [&](size_t e) { return value(n - 1, e); });
  if (err.empty() && clbAllReduce((void*)fin, (void*)fout, count, clbFloat32, clbSum, comm, stream) != clbSuccess)
    err = std::string("allReduce: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  check("allReduce", fout, count, true, sumOf);
  CU_OK(upload(d, kin, k.data(), count * n * 4));
  if (err.empty() && clbReduceScatter((void*)kin, (void*)kout, count, clbInt32, clbSum, comm, stream) != clbSuccess)
    err = std::string("reduceScatter: ") + clbGetLastError();
  if (err.empty() && clbBroadcast(rank == n - 1 ? (void*)fin : nullptr, (void*)fout, count, clbFloat32, n - 1, comm,
                                  stream) != clbSuccess)
    err = std::string("broadcast: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  check("reduceScatter", kout, count, false, [&](size_t e) { return sumOf(rank * count + e); });
  check("broadcast", fout, count, true, [&](size_t e) { return value(n - 1, e); });
  // Many ring chunks (4 MiB and 3 elements of float32, chunks of 256 KiB), avg: exact (sums of
  // small integers divided by n, compared with the same division).
  const size_t big = (1u << 20) + 3;
  CUdeviceptr bin, bout;
  CU_OK(d->cuMemAlloc(&bin, big * 4));
  CU_OK(d->cuMemAlloc(&bout, big * 4));
  std::vector<float> bv(big);
  for (size_t e = 0; e < big; e++) bv[e] = (float)value(rank, e);
  CU_OK(upload(d, bin, bv.data(), big * 4));
  if (err.empty() && clbAllReduce((void*)bin, (void*)bout, big, clbFloat32, clbAvg, comm, stream) != clbSuccess)
    err = std::string("large allReduce avg: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  if (err.empty()) {
    std::vector<float> got(big);
    CU_OK(d->cuMemcpyDtoH(got.data(), bout, big * 4));
    for (size_t e = 0; e < big && err.empty(); e++)
      if (got[e] != (float)sumOf(e) / (float)n)
        err = "large allReduce avg element " + std::to_string(e) + ": got " + std::to_string(got[e]) + " want " +
              std::to_string((float)sumOf(e) / (float)n);
  }
  d->cuMemFree(bin);
  d->cuMemFree(bout);
  // Said, counted, given back by trim, and refused inside a graph capture.
  char info[2048];
  clbCommInfo(comm, info, sizeof info);
  clbMemStats_t before, after;
  clbCommMemStats(comm, &before);
  clbCommTrim(comm);
  clbCommMemStats(comm, &after);
  if (gdr) {
    // GPU memory registered with the NIC (slots and staging), counted as device bytes; trim gives
    // the staging back at once (the slots when the peer acknowledges).
    // The 4 MiB buffers are whole-page allocations: sent from without a copy, registered once.
    if (err.empty() && (!strstr(info, "GPUDirect RDMA through dma-buf") || before.deviceBytes <= after.deviceBytes ||
                        !strstr(info, "sent from user buffers without a copy") ||
                        strstr(info, "without a copy: 0 allocation(s)") || strstr(info, "registered (0 bytes)")))
      err = "GPUDirect info or device accounting: device bytes " + std::to_string(before.deviceBytes) + " -> " +
            std::to_string(after.deviceBytes) + "; " + info;
  } else if (err.empty() && (!strstr(info, "pinned host memory") || (noDmabuf && !strstr(info, "ibv_reg_dmabuf_mr")) ||
                             before.hostBytes - after.hostBytes < (int64_t)(count * n * 4))) {
    err = "info or host staging accounting: host bytes " + std::to_string(before.hostBytes) + " -> " +
          std::to_string(after.hostBytes) + "; " + info;
  }
  CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  rc = clbAllReduce((void*)fin, (void*)fout, count, clbFloat32, clbSum, comm, stream);
  const std::string msg = clbGetLastError();
  CUgraph g = nullptr;
  d->cuStreamEndCapture(stream, &g);
  if (g) d->cuGraphDestroy(g);
  if (err.empty() && (rc != clbInvalidUsage || msg.find("CUDA graph") == std::string::npos))
    err = "capture across hosts: expected INVALID_USAGE naming the graph, got " + std::to_string(rc) + ": " + msg;
  clbCommDestroy(comm);
  for (CUdeviceptr p : {fin, fout, kin, kout}) d->cuMemFree(p);
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

void resetEmulator() {
#ifdef CLB_HAVE_VERBS
  clbtest::emu::resetConfig();
#endif
}

// (ranks, transport)
class DeviceAcrossHosts : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(DeviceAcrossHosts, AllFourMatchTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  const std::string param = std::get<1>(GetParam());
  const std::string transport = param == "socket" ? "socket" : "verbs";
  setenv("COLIBRI_TRANSPORT", transport.c_str(), 1);
  if (param == "verbs_hoststaged") setenv("COLIBRI_VERBS_GPU_MEMORY", "host", 1);
  if (param == "verbs_nodmabuf") setenv("COLIBRI_VERBS_EMU_DMABUF", "0", 1);
  resetEmulator();
  runThreads(std::get<0>(GetParam()), acrossHostsRank);
  unsetenv("COLIBRI_TRANSPORT");
  unsetenv("COLIBRI_VERBS_GPU_MEMORY");
  unsetenv("COLIBRI_VERBS_EMU_DMABUF");
  resetEmulator();
}

namespace {

// A forced GPU-memory mode that cannot work, or a bad value, fails the device call on every rank
// with the reason, and stays failed (no silent fallback at the next call).
std::string forcedModeRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  CUdeviceptr buf;
  CU_OK(d->cuMemAlloc(&buf, 4096));
  const std::string want = getenv("COLIBRI_VERBS_GPU_MEMORY") == std::string("bogus")
                               ? "COLIBRI_VERBS_GPU_MEMORY='bogus' is not one of auto, dmabuf, peermem, host"
                               : "(COLIBRI_VERBS_GPU_MEMORY=dmabuf)";
  std::string err;
  for (int call = 0; call < 2 && err.empty(); call++) {
    clbResult_t rc = clbAllReduce((void*)buf, (void*)buf, 1024, clbFloat32, clbSum, comm, stream);
    const std::string msg = clbGetLastError();
    if (rc == clbSuccess || msg.find(want) == std::string::npos)
      err = "call " + std::to_string(call) + ": expected a failure saying '" + want + "', got " + std::to_string(rc) +
            ": " + msg;
  }
  clbCommDestroy(comm);
  d->cuMemFree(buf);
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

TEST(DeviceAcrossHostsGpuDirect, ForcedModeThatCannotWorkFailsEveryCall) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  setPlacement("auto", false);
  setenv("COLIBRI_TRANSPORT", "verbs", 1);
  setenv("COLIBRI_VERBS_EMU_DMABUF", "0", 1);
  setenv("COLIBRI_VERBS_GPU_MEMORY", "dmabuf", 1);
  resetEmulator();
  runThreads(2, forcedModeRank);
  // A mode that does not exist is refused at init, naming the variable and its words.
  setenv("COLIBRI_VERBS_GPU_MEMORY", "bogus", 1);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t comm = nullptr;
  EXPECT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbInvalidArgument);
  const std::string msg = clbGetLastError();
  EXPECT_NE(msg.find("COLIBRI_VERBS_GPU_MEMORY='bogus' is not one of auto, dmabuf, peermem, host"), std::string::npos)
      << msg;
  if (comm) clbCommDestroy(comm);
  for (const char* v : {"COLIBRI_TRANSPORT", "COLIBRI_VERBS_EMU_DMABUF", "COLIBRI_VERBS_GPU_MEMORY"}) unsetenv(v);
  resetEmulator();
}
INSTANTIATE_TEST_SUITE_P(OneGpu, DeviceAcrossHosts,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values("socket", "verbs", "verbs_hoststaged", "verbs_nodmabuf")),
                         [](const ::testing::TestParamInfo<std::tuple<int, std::string>>& i) {
                           return std::to_string(std::get<0>(i.param)) + "ranks_" + std::get<1>(i.param);
                         });
