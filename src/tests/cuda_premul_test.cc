// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// PreMulSum operations on device buffers, ranks as threads on one GPU: allReduce, reduceScatter
// and reduce with a different scalar on every rank, host immediate and in device memory (changed
// after the operation was made: the kernel reads it when it runs), in place and not, checked
// element by element against the exact references of tests/premul_reference.h; a captured graph
// that reads a new scalar at each replay (after the refusal of a first call inside a capture);
// calls on two streams sharing the scratch, its memory and trim; the scalar's memory.
// Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "base/dtype.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"
#include "tests/premul_reference.h"

namespace {

using namespace clbtest::premul;

// Copies `v` into new device memory.
template <class S>
std::string toDevice(const Driver* d, const std::vector<S>& v, CUdeviceptr* p) {
  CU_OK(d->cuMemAlloc(p, std::max<size_t>(v.size(), 1) * sizeof(S)));
  if (!v.empty()) CU_OK(upload(d, *p, v.data(), v.size() * sizeof(S)));
  return "";
}

template <class S>
std::string fromDevice(const Driver* d, CUdeviceptr p, std::vector<S>* v) {
  if (!v->empty()) CU_OK(d->cuMemcpyDtoH(v->data(), p, v->size() * sizeof(S)));
  return "";
}

// The first element of `got` that is not `want(i)`, as a message ("" when all are).
template <class R, class Want>
std::string compare(const std::vector<typename R::S>& got, Want want, const std::string& what) {
  for (size_t i = 0; i < got.size(); i++)
    if (!same(got[i], want(i)))
      return what + ", element " + std::to_string(i) + ": " + show(got[i]) + " instead of " + show(want(i));
  return "";
}

// One rank's calls for one type and count: per residence an operation with this rank's scalar,
// then allReduce, reduceScatter and reduce (root: the last rank), all queued on the rank's stream
// before one synchronization; in place with the immediate scalar, out of place with the device one.
template <class R>
std::string rankCalls(const Driver* d, clbComm_t comm, CUstream stream, int r, int n, size_t count) {
  using S = typename R::S;
  const bool exact = exactFor(n);
  const clbDataType_t T = R::kType;
  std::string err;
  CUdeviceptr dScalar = 0;
  CU_OK(d->cuMemAlloc(&dScalar, sizeof(S)));
  for (int residence : {clbScalarHostImmediate, clbScalarDevice}) {
    const bool immediate = residence == clbScalarHostImmediate;
    const std::string what = std::string(clb::typeName(T)) + (immediate ? ", host immediate" : ", device scalar") +
                             ", rank " + std::to_string(r) + " of " + std::to_string(n) + ", count " +
                             std::to_string(count);
    // The scalar changes after the operation is made: the immediate one was read then, the device
    // one is read by the kernel.
    S hostScalar = immediate ? R::scalar(r, exact) : R::junk();
    S junk = R::junk();
    CU_OK(upload(d, dScalar, &junk, sizeof(S)));
    clbRedOp_t op = clbSum;
    if (clbRedOpCreatePreMulSum(&op, immediate ? (void*)&hostScalar : (void*)dScalar, T, residence, comm) != clbSuccess)
      return what + ": create: " + clbGetLastError();
    hostScalar = R::junk();
    if (!immediate) {
      const S s = R::scalar(r, exact);
      CU_OK(upload(d, dScalar, &s, sizeof(S)));
    }
    std::vector<S> in(count), big(count * n);
    for (size_t i = 0; i < count; i++) in[i] = R::input(r, i, exact);
    for (size_t j = 0; j < big.size(); j++) big[j] = R::input(r, j, exact);
    std::vector<S> poison(count, R::junk());
    CUdeviceptr dIn = 0, dOut = 0, dBig = 0, dRs = 0, dRedIn = 0, dRed = 0;
    if ((err = toDevice(d, in, &dIn)).empty() && (err = toDevice(d, poison, &dOut)).empty() &&
        (err = toDevice(d, big, &dBig)).empty() && (err = toDevice(d, poison, &dRs)).empty() &&
        (err = toDevice(d, in, &dRedIn)).empty())
      err = toDevice(d, poison, &dRed);
    const int root = n - 1;
    const CUdeviceptr arOut = immediate ? dIn : dOut;
    const CUdeviceptr rsOut = immediate ? dBig + r * count * sizeof(S) : dRs;
    const CUdeviceptr redOut = immediate ? dRedIn : dRed;
    if (err.empty() && clbAllReduce((void*)dIn, (void*)arOut, count, T, op, comm, stream) != clbSuccess)
      err = what + ": allReduce: " + clbGetLastError();
    if (err.empty() && clbReduceScatter((void*)dBig, (void*)rsOut, count, T, op, comm, stream) != clbSuccess)
      err = what + ": reduceScatter: " + clbGetLastError();
    if (err.empty() &&
        clbReduce((void*)dRedIn, r == root ? (void*)redOut : nullptr, count, T, op, root, comm, stream) != clbSuccess)
      err = what + ": reduce: " + clbGetLastError();
    // The operation may go as soon as the calls returned (their work is queued).
    if (clbRedOpDestroy(op, comm) != clbSuccess && err.empty()) err = what + ": destroy: " + clbGetLastError();
    if (err.empty()) CU_OK(d->cuStreamSynchronize(stream));
    std::vector<S> got(count), gotBig(count * n);
    if (err.empty()) err = fromDevice(d, arOut, &got);
    if (err.empty())
      err = compare<R>(
          got, [&](size_t i) { return sumAt<R>(n, i); }, "allReduce, " + what);
    if (err.empty() && !immediate && (err = fromDevice(d, dIn, &got)).empty())
      err = compare<R>(
          got, [&](size_t i) { return in[i]; }, "allReduce's send changed, " + what);
    if (err.empty() && immediate && (err = fromDevice(d, dBig, &gotBig)).empty())
      for (size_t i = 0; i < count; i++) got[i] = gotBig[r * count + i];
    if (err.empty() && !immediate) err = fromDevice(d, dRs, &got);
    if (err.empty())
      err = compare<R>(
          got, [&](size_t i) { return sumAt<R>(n, r * count + i); }, "reduceScatter, " + what);
    if (err.empty() && !immediate && (err = fromDevice(d, dBig, &gotBig)).empty())
      err = compare<R>(
          gotBig, [&](size_t j) { return big[j]; }, "reduceScatter's send changed, " + what);
    if (err.empty() && r == root && (err = fromDevice(d, redOut, &got)).empty())
      err = compare<R>(
          got, [&](size_t i) { return sumAt<R>(n, i); }, "reduce, " + what);
    if (err.empty() && r != root && (err = fromDevice(d, dRedIn, &got)).empty())
      err = compare<R>(
          got, [&](size_t i) { return in[i]; }, "reduce's send changed, " + what);
    for (CUdeviceptr p : {dIn, dOut, dBig, dRs, dRedIn, dRed})
      if (p) d->cuMemFree(p);
    if (!err.empty()) break;
  }
  d->cuMemFree(dScalar);
  return err;
}

std::string everyTypeAndCount(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  std::string err;
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000003)}) {
    if (err.empty()) err = rankCalls<F32>(d, comm, stream, rank, n, count);
    if (err.empty()) err = rankCalls<F64>(d, comm, stream, rank, n, count);
    if (err.empty()) err = rankCalls<BF16>(d, comm, stream, rank, n, count);
    if (err.empty()) err = rankCalls<I32>(d, comm, stream, rank, n, count);
  }
  clbCommDestroy(comm);
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

TEST(DevicePreMulSum, ThreadsOnOneGpuMatchTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {1, 2, 3}) runThreads(n, everyTypeAndCount);
}

namespace {

// A first PreMulSum call inside a capture is refused (nothing set up yet), the communicator stays
// usable; after a warm-up outside, a graph of a reduceScatter and an allReduce with the scalar in
// device memory reads a new scalar at each replay.
std::string graphRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  const size_t count = 300007;
  std::string err;
  CUdeviceptr dScalar = 0, dIn = 0, dAr = 0, dRs = 0;
  CU_OK(d->cuMemAlloc(&dScalar, sizeof(float)));
  CU_OK(d->cuMemAlloc(&dIn, count * n * sizeof(float)));
  CU_OK(d->cuMemAlloc(&dAr, count * sizeof(float)));
  CU_OK(d->cuMemAlloc(&dRs, count * sizeof(float)));
  std::vector<float> in(count * n);
  for (size_t j = 0; j < in.size(); j++) in[j] = (float)(j % 1001) - 500.0f + rank;
  CU_OK(upload(d, dIn, in.data(), in.size() * sizeof(float)));
  float one = 1.0f;
  CU_OK(upload(d, dScalar, &one, sizeof one));
  clbRedOp_t op = clbSum;
  if (clbRedOpCreatePreMulSum(&op, (void*)dScalar, clbFloat32, clbScalarDevice, comm) != clbSuccess)
    return std::string("create: ") + clbGetLastError();
  // 1. The first such call inside a capture: refused, saying what to do.
  CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  clbResult_t rc = clbReduceScatter((void*)dIn, (void*)dRs, count, clbFloat32, op, comm, stream);
  const std::string msg = clbGetLastError();
  CUgraph g0 = nullptr;
  d->cuStreamEndCapture(stream, &g0);
  if (g0) d->cuGraphDestroy(g0);
  if (rc != clbInvalidUsage || msg.find("outside the capture") == std::string::npos)
    err = "first call inside a capture: expected INVALID_USAGE saying to call outside it first, got " +
          std::to_string(rc) + ": " + msg;
  // 2. Warm-up outside (sets the scaling and the collectives up), then the capture.
  if (err.empty() && (clbReduceScatter((void*)dIn, (void*)dRs, count, clbFloat32, op, comm, stream) != clbSuccess ||
                      clbAllReduce((void*)dIn, (void*)dAr, count, clbFloat32, op, comm, stream) != clbSuccess))
    err = std::string("warm-up: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    if (clbReduceScatter((void*)dIn, (void*)dRs, count, clbFloat32, op, comm, stream) != clbSuccess ||
        clbAllReduce((void*)dIn, (void*)dAr, count, clbFloat32, op, comm, stream) != clbSuccess)
      err = std::string("captured calls: ") + clbGetLastError();
    CU_OK(d->cuStreamEndCapture(stream, &graph));
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
  }
  clbMemStats_t held{};
  clbCommMemStats(comm, &held);
  // 3. Replays, each with other scalars (rank r: (rep + 1) * (r + 1) / 4, exact in float32).
  for (int rep = 0; rep < 3 && err.empty(); rep++) {
    const float s = (float)((rep + 1) * (rank + 1)) / 4.0f;
    CU_OK(upload(d, dScalar, &s, sizeof s));
    CU_OK(d->cuMemsetD8Async(dAr, 0xa5, count * sizeof(float), stream));
    CU_OK(d->cuMemsetD8Async(dRs, 0xa5, count * sizeof(float), stream));
    if (std::string e = replay(exec, stream, {comm}); !e.empty()) return e;
    CU_OK(d->cuStreamSynchronize(stream));
    std::vector<float> ar(count), rs(count);
    CU_OK(d->cuMemcpyDtoH(ar.data(), dAr, count * sizeof(float)));
    CU_OK(d->cuMemcpyDtoH(rs.data(), dRs, count * sizeof(float)));
    auto x = [](int p, size_t j) { return (float)(j % 1001) - 500.0f + p; };
    for (size_t i = 0; i < count && err.empty(); i++) {
      float wantAr = 0, wantRs = 0;
      for (int p = 0; p < n; p++) {
        const float sp = (float)((rep + 1) * (p + 1)) / 4.0f;
        wantAr += x(p, i) * sp;
        wantRs += x(p, rank * count + i) * sp;
      }
      if (ar[i] != wantAr || rs[i] != wantRs)
        err = "replay " + std::to_string(rep) + " element " + std::to_string(i) + ": allReduce " +
              std::to_string(ar[i]) + " (want " + std::to_string(wantAr) + "), reduceScatter " + std::to_string(rs[i]) +
              " (want " + std::to_string(wantRs) + ")";
    }
  }
  // The scratch a capture used stays through trim (a replay still writes it).
  clbMemStats_t trimmed{};
  if (err.empty() && clbCommTrim(comm) != clbSuccess) err = std::string("trim: ") + clbGetLastError();
  clbCommMemStats(comm, &trimmed);
  if (err.empty() && trimmed.deviceBytes != held.deviceBytes)
    err = "trim changed the device memory a captured graph uses: " + std::to_string(held.deviceBytes) + " -> " +
          std::to_string(trimmed.deviceBytes);
  clbRedOpDestroy(op, comm);
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  clbCommDestroy(comm);
  for (CUdeviceptr p : {dScalar, dIn, dAr, dRs}) d->cuMemFree(p);
  d->cuStreamDestroy(stream);
  return err;
}

// Calls alternating between two streams without a synchronization share the device scratch
// (reduceScatter scales into it): every result right; the scratch is counted and trimmed.
std::string twoStreamsRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream streams[2] = {};
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &streams[0], &comm); !e.empty()) return e;
  CU_OK(d->cuStreamCreate(&streams[1], CU_STREAM_NON_BLOCKING));
  const size_t count = 1 << 20;
  const int calls = 8;
  std::string err;
  float s = rank == 0 ? 0.5f : -2.0f;
  clbRedOp_t op = clbSum;
  if (clbRedOpCreatePreMulSum(&op, &s, clbFloat32, clbScalarHostImmediate, comm) != clbSuccess)
    return std::string("create: ") + clbGetLastError();
  std::vector<CUdeviceptr> in(calls), out(calls);
  auto x = [](int p, int call, size_t j) { return (float)((j + 13 * call) % 509) + p; };
  for (int c = 0; c < calls; c++) {
    std::vector<float> v(count * n);
    for (size_t j = 0; j < v.size(); j++) v[j] = x(rank, c, j);
    CU_OK(d->cuMemAlloc(&in[c], v.size() * sizeof(float)));
    CU_OK(d->cuMemAlloc(&out[c], count * sizeof(float)));
    CU_OK(upload(d, in[c], v.data(), v.size() * sizeof(float)));
  }
  clbMemStats_t before{}, after{}, trimmed{};
  clbCommMemStats(comm, &before);
  for (int c = 0; c < calls && err.empty(); c++)
    if (clbReduceScatter((void*)in[c], (void*)out[c], count, clbFloat32, op, comm, streams[c % 2]) != clbSuccess)
      err = "call " + std::to_string(c) + ": " + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(streams[0]));
  CU_OK(d->cuStreamSynchronize(streams[1]));
  for (int c = 0; c < calls && err.empty(); c++) {
    std::vector<float> got(count);
    CU_OK(d->cuMemcpyDtoH(got.data(), out[c], count * sizeof(float)));
    for (size_t i = 0; i < count && err.empty(); i++) {
      float want = 0;
      for (int p = 0; p < n; p++) want += x(p, c, rank * count + i) * (p == 0 ? 0.5f : -2.0f);
      if (got[i] != want)
        err = "call " + std::to_string(c) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) +
              " instead of " + std::to_string(want);
    }
  }
  clbCommMemStats(comm, &after);
  const int64_t scratch = (int64_t)(count * n * sizeof(float));
  if (err.empty() && after.deviceBytes - before.deviceBytes < scratch)
    err = "the device scratch is not counted: " + std::to_string(before.deviceBytes) + " -> " +
          std::to_string(after.deviceBytes);
  if (err.empty() && clbCommTrim(comm) != clbSuccess) err = std::string("trim: ") + clbGetLastError();
  clbCommMemStats(comm, &trimmed);
  if (err.empty() && trimmed.deviceBytes > after.deviceBytes - scratch)
    err = "trim kept the device scratch: " + std::to_string(after.deviceBytes) + " -> " +
          std::to_string(trimmed.deviceBytes);
  clbRedOpDestroy(op, comm);
  clbCommDestroy(comm);
  for (int c = 0; c < calls; c++) {
    d->cuMemFree(in[c]);
    d->cuMemFree(out[c]);
  }
  d->cuStreamDestroy(streams[0]);
  d->cuStreamDestroy(streams[1]);
  return err;
}

}  // namespace

TEST(DevicePreMulSum, ACapturedGraphReadsTheDeviceScalarAtEachReplay) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 3}) runThreads(n, graphRank);
}

TEST(DevicePreMulSum, CallsOnTwoStreamsShareTheScratch) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runThreads(2, twoStreamsRank);
}

// Where the scalar lies: a "device" scalar in plain host memory is refused for device buffers
// (unless this GPU reads pageable memory), and a device-memory scalar serves host buffers too.
TEST(DevicePreMulSum, TheScalarMustBeMemoryItsReaderReaches) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runThreads(1, [](const clbUniqueId& id, int rank, int n) -> std::string {
    const Driver* d = nullptr;
    CUstream stream = nullptr;
    clbComm_t comm = nullptr;
    if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
    std::string err;
    float* hostScalar = static_cast<float*>(malloc(sizeof(float)));
    *hostScalar = 3.0f;
    CUdeviceptr dScalar = 0, dIn = 0, dOut = 0;
    const float two = 2.0f, x[4] = {1, 2, 3, 4};
    CU_OK(d->cuMemAlloc(&dScalar, sizeof two));
    CU_OK(upload(d, dScalar, &two, sizeof two));
    CU_OK(d->cuMemAlloc(&dIn, sizeof x));
    CU_OK(d->cuMemAlloc(&dOut, sizeof x));
    CU_OK(upload(d, dIn, x, sizeof x));
    clbRedOp_t onHost = clbSum, onDevice = clbSum;
    if (clbRedOpCreatePreMulSum(&onHost, hostScalar, clbFloat32, clbScalarDevice, comm) != clbSuccess ||
        clbRedOpCreatePreMulSum(&onDevice, (void*)dScalar, clbFloat32, clbScalarDevice, comm) != clbSuccess)
      err = std::string("create: ") + clbGetLastError();
    // A device pointer as a host-immediate scalar is refused at once.
    clbRedOp_t wrong = clbSum;
    if (err.empty() && (clbRedOpCreatePreMulSum(&wrong, (void*)dScalar, clbFloat32, clbScalarHostImmediate, comm) !=
                            clbInvalidArgument ||
                        std::string(clbGetLastError()).find("device memory") == std::string::npos))
      err = std::string("a device scalar as host immediate: expected INVALID_ARGUMENT, got: ") + clbGetLastError();
    CUdevice dev = 0;
    int pageable = 0;
    CU_OK(d->cuDeviceGet(&dev, 0));
    CU_OK(d->cuDeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev));
    if (err.empty()) {
      clbResult_t rc = clbAllReduce((void*)dIn, (void*)dOut, 4, clbFloat32, onHost, comm, stream);
      const std::string msg = clbGetLastError();
      if (!pageable && (rc != clbInvalidArgument || msg.find("host memory the GPU cannot read") == std::string::npos))
        err = "a host scalar with device buffers: expected INVALID_ARGUMENT, got " + std::to_string(rc) + ": " + msg;
      if (pageable && rc != clbSuccess) err = "a pageable scalar on a GPU that reads pageable memory: " + msg;
    }
    // Host buffers with the scalar in device memory: copied when the call runs.
    float y[4] = {};
    if (err.empty() && clbAllReduce(x, y, 4, clbFloat32, onDevice, comm, nullptr) != clbSuccess)
      err = std::string("host buffers, device scalar: ") + clbGetLastError();
    if (err.empty() && (y[0] != 2.0f || y[3] != 8.0f))
      err = "host buffers, device scalar: got " + std::to_string(y[0]) + ", " + std::to_string(y[3]);
    clbRedOpDestroy(onHost, comm);
    clbRedOpDestroy(onDevice, comm);
    clbCommDestroy(comm);
    for (CUdeviceptr p : {dScalar, dIn, dOut}) d->cuMemFree(p);
    free(hostScalar);
    d->cuStreamDestroy(stream);
    return err;
  });
}
