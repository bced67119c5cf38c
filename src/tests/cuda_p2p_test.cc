// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point on device buffers (ranks as threads or as processes on one GPU: the on-GPU path;
// processes with COLIBRI_DEVICE_P2P=off: through host memory): a ring exchange in a group posted
// in opposite orders, all-to-all against a group of sends and receives, all-to-allv with empty
// pairs, reduce in place, gather and scatter, every result copied back and checked element by
// element against values computed here; a pipeline step and an all-to-all captured and replayed
// with new data, the application allocating, freeing and synchronizing between calls; through
// host memory a call inside a CUDA graph capture refused with what to do, the communicator still
// usable; between threads batches that do not pair up refused on both ranks. Skipped without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"
#include "tests/test_tls.h"  // clbtest::ScopedEnv

namespace {

int64_t val(int from, int to, size_t i) { return (int64_t)from * 1000000007LL + (int64_t)to * 1000003LL + (int64_t)i; }

// Device buffers allocated and freed around each call, as applications do: between ranks that
// are threads on one GPU, cuMemAlloc and cuMemFree may wait for every kernel in the context, so
// this holds only because no rank launches before its peers are in their calls and none returns
// before they launched (device/peer_meet.h).
// Its copies run on the rank's stream, in order with the calls (a synchronous copy from pageable
// memory may return before its data reached the GPU, and the legacy stream it runs on is not
// ordered with the ranks' non-blocking streams).
struct DevBuf {
  const Driver* d;
  CUstream s;
  CUdeviceptr p = 0;
  size_t n;
  DevBuf(const Driver* drv, CUstream stream, size_t elems) : d(drv), s(stream), n(elems) {
    d->cuMemAlloc(&p, std::max<size_t>(8, elems * 8));
  }
  ~DevBuf() {
    if (p) d->cuMemFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* ptr(size_t at = 0) const { return reinterpret_cast<void*>(p + at * 8); }
  bool put(const std::vector<int64_t>& v) {
    return d->cuMemcpyHtoDAsync(p, v.data(), v.size() * 8, s) == CUDA_SUCCESS &&
           d->cuStreamSynchronize(s) == CUDA_SUCCESS;
  }
  std::vector<int64_t> get() const {
    std::vector<int64_t> v(n);
    if (d->cuMemcpyDtoHAsync(v.data(), p, n * 8, s) != CUDA_SUCCESS || d->cuStreamSynchronize(s) != CUDA_SUCCESS)
      v.assign(n, -1);
    return v;
  }
};

// Ends a rank: first the communicator's asynchronous error, when the rank found nothing wrong
// itself and `async` asks (a device wait that timed out shows there), then the communicator and
// the stream go. Returns what went wrong, "" if nothing.
std::string closeRank(const Driver* d, clbComm_t comm, CUstream stream, std::string err, bool async = false) {
  clbResult_t rc = clbSuccess;
  if (async) clbCommGetAsyncError(comm, &rc);
  if (err.empty() && rc != clbSuccess) err = std::string("async error: ") + clbGetLastError();
  clbCommDestroy(comm);
  d->cuStreamDestroy(stream);
  return err;
}

#define CLB_OK(call)                                                                       \
  do {                                                                                     \
    if ((call) != clbSuccess) return std::string(#call) + " failed: " + clbGetLastError(); \
  } while (0)

std::string exchange(const Driver* d, CUstream stream, clbComm_t comm, int r, int n) {
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // A ring exchange, half the ranks posting the receive first.
  const size_t count = 300007;
  std::vector<int64_t> out(count);
  for (size_t i = 0; i < count; i++) out[i] = val(r, next, i);
  DevBuf dout(d, stream, count), din(d, stream, count);
  if (!dout.put(out)) return "cuMemcpyHtoD failed";
  CLB_OK(clbGroupStart());
  if (r % 2) {
    CLB_OK(clbRecv(din.ptr(), count, clbInt64, prev, comm, stream));
    CLB_OK(clbSend(dout.ptr(), count, clbInt64, next, comm, stream));
  } else {
    CLB_OK(clbSend(dout.ptr(), count, clbInt64, next, comm, stream));
    CLB_OK(clbRecv(din.ptr(), count, clbInt64, prev, comm, stream));
  }
  CLB_OK(clbGroupEnd());
  CU_OK(d->cuStreamSynchronize(stream));
  std::vector<int64_t> in = din.get();
  for (size_t i = 0; i < count; i++)
    if (in[i] != val(prev, r, i)) return "ring exchange: element " + std::to_string(i) + " wrong";
  // All-to-all, and the same as a group of sends and receives.
  const size_t c = 4099;
  std::vector<int64_t> s(c * n);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < c; i++) s[p * c + i] = val(r, p, i);
  DevBuf ds(d, stream, c * n), dr(d, stream, c * n), dr2(d, stream, c * n);
  if (!ds.put(s)) return "cuMemcpyHtoD failed";
  CLB_OK(clbAllToAll(ds.ptr(), dr.ptr(), c, clbInt64, comm, stream));
  CLB_OK(clbGroupStart());
  for (int p = n - 1; p >= 0; p--) {
    CLB_OK(clbRecv(dr2.ptr(p * c), c, clbInt64, p, comm, stream));
    CLB_OK(clbSend(ds.ptr(p * c), c, clbInt64, p, comm, stream));
  }
  CLB_OK(clbGroupEnd());
  CU_OK(d->cuStreamSynchronize(stream));  // the calls are asynchronous on the GPU path
  std::vector<int64_t> g = dr.get(), g2 = dr2.get();
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < c; i++) {
      if (g[p * c + i] != val(p, r, i)) return "allToAll: block " + std::to_string(p) + " element " + std::to_string(i);
      if (g2[p * c + i] != val(p, r, i)) return "group all-to-all: block " + std::to_string(p);
    }
  // All-to-allv with empty pairs.
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t so = 0, ro = 0;
  auto cnt = [](int from, int to) { return (size_t)((from + to) % 3 == 0 ? 0 : 1000 * (from + 1) + to); };
  for (int p = 0; p < n; p++) {
    sc[p] = cnt(r, p), sd[p] = so, so += sc[p];
    rc[p] = cnt(p, r), rd[p] = ro, ro += rc[p];
  }
  std::vector<int64_t> vs(so);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < sc[p]; i++) vs[sd[p] + i] = val(r, p, i);
  DevBuf dvs(d, stream, so), dvr(d, stream, ro);
  if (!dvs.put(vs)) return "cuMemcpyHtoD failed";
  CLB_OK(clbAllToAllv(dvs.ptr(), sc.data(), sd.data(), dvr.ptr(), rc.data(), rd.data(), clbInt64, comm, stream));
  CU_OK(d->cuStreamSynchronize(stream));
  std::vector<int64_t> vr = dvr.get();
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < rc[p]; i++)
      if (vr[rd[p] + i] != val(p, r, i)) return "allToAllv: from " + std::to_string(p);
  // Reduce in place at the root, gather, scatter.
  const int root = n - 1;
  const size_t m = 20011;
  std::vector<int64_t> mine(m);
  for (size_t i = 0; i < m; i++) mine[i] = val(r, root, i);
  DevBuf dm(d, stream, m), dall(d, stream, m * n), dgot(d, stream, m);
  if (!dm.put(mine)) return "cuMemcpyHtoD failed";
  CLB_OK(clbGather(dm.ptr(), dall.ptr(), m, clbInt64, root, comm, stream));
  CLB_OK(clbScatter(dall.ptr(), dgot.ptr(), m, clbInt64, root, comm, stream));
  CLB_OK(clbReduce(dm.ptr(), dm.ptr(), m, clbInt64, clbSum, root, comm, stream));
  CU_OK(d->cuStreamSynchronize(stream));
  std::vector<int64_t> got = dgot.get(), red = dm.get(), all = dall.get();
  for (size_t i = 0; i < m; i++) {
    if (got[i] != val(r, root, i)) return "scatter of the gathered blocks: element " + std::to_string(i);
    if (r != root) continue;
    int64_t want = 0;
    for (int p = 0; p < n; p++) {
      want += val(p, root, i);
      if (all[p * m + i] != val(p, root, i)) return "gather: block " + std::to_string(p);
    }
    if (red[i] != want) return "reduce in place: element " + std::to_string(i);
  }
  // A reduce inside a group (recorded, run at the group's end), to root 0, out of place.
  DevBuf dg(d, stream, m);
  CLB_OK(clbGroupStart());
  CLB_OK(clbReduce(dgot.ptr(), r == 0 ? dg.ptr() : nullptr, m, clbInt64, clbSum, 0, comm, stream));
  CLB_OK(clbGroupEnd());
  CU_OK(d->cuStreamSynchronize(stream));
  if (r == 0) {
    std::vector<int64_t> gr = dg.get();
    for (size_t i = 0; i < m; i++) {
      int64_t want = 0;
      for (int p = 0; p < n; p++) want += val(p, root, i);  // each rank's dgot holds its scattered block
      if (gr[i] != want) return "reduce in a group: element " + std::to_string(i);
    }
  }
  return "";
}

// `viaHost`: the ranks are processes with COLIBRI_DEVICE_P2P=off, whose pairs go through host
// memory (not capturable, nothing held on the GPU).
std::string rankBody(const clbUniqueId& id, int r, int n, bool viaHost) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  std::string err = exchange(d, stream, comm, r, n);
  // Through host memory, inside a capture: refused, nothing moved, usable after.
  if (err.empty() && viaHost) {
    DevBuf b(d, stream, 16);
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    clbResult_t rc = clbGroupStart();
    if (rc == clbSuccess) rc = clbSend(b.ptr(), 16, clbInt64, (r + 1) % n, comm, stream);
    if (rc == clbSuccess) rc = clbRecv(b.ptr(8), 8, clbInt64, (r + n - 1) % n, comm, stream);
    if (rc == clbSuccess) rc = clbGroupEnd();
    const std::string msg = clbGetLastError();
    CUgraph none = nullptr;
    d->cuStreamEndCapture(stream, &none);
    if (none) d->cuGraphDestroy(none);
    if (rc != clbInvalidUsage || msg.find("cannot be captured in a CUDA graph") == std::string::npos)
      err = "a send inside a capture: expected INVALID_USAGE saying so, got " + std::to_string(rc) + ": " + msg;
  }
  // Two all-to-alls in place in one group on two streams (their inputs are copied aside, on one
  // stream): refused on every rank before anything is queued, usable after.
  if (err.empty()) {
    CUstream other = nullptr;
    CU_OK(d->cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    DevBuf x(d, stream, 2 * n), y(d, stream, 2 * n);
    CU_OK(d->cuStreamSynchronize(stream));
    clbResult_t rc = clbGroupStart();
    if (rc == clbSuccess) rc = clbAllToAll(x.ptr(), x.ptr(), 2, clbInt64, comm, stream);
    if (rc == clbSuccess) rc = clbAllToAll(y.ptr(), y.ptr(), 2, clbInt64, comm, other);
    const clbResult_t end = clbGroupEnd();
    const std::string msg = clbGetLastError();
    d->cuStreamDestroy(other);
    if (rc != clbSuccess || end != clbInvalidUsage || msg.find("must use one stream") == std::string::npos)
      err = "staged inputs on two streams: expected INVALID_USAGE at the end saying so, got " + std::to_string(rc) +
            " / " + std::to_string(end) + ": " + msg;
  }
  if (err.empty()) err = exchange(d, stream, comm, r, n);
  // Pairs through host memory set nothing up on the GPU; the reduces of exchange() (small: LL)
  // hold only the collectives' 32 bytes there (block counters, and the copy of the call count).
  clbMemStats_t st{};
  clbCommMemStats(comm, &st);
  if (err.empty() && viaHost && st.deviceBytes != 32)
    err = "pairs through host memory (and small reduces) hold " + std::to_string(st.deviceBytes) +
          " bytes of device memory, expected the 32 of the reduces' block counters and call count";
  if (err.empty() && !viaHost && st.deviceBytes <= 0) err = "the pairs' device channels are not counted";
  return closeRank(d, comm, stream, err, true);
}

TEST(DevicePeer, ThreadsOnOneGpuEveryCallMatchesTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) runThreads(n, [](const clbUniqueId& id, int r, int k) { return rankBody(id, r, k, false); });
}

// Device buffers larger than the staging cap (64 MiB by default): the host copies a call makes
// are not staging, so they do not count against the cap (they used to fail the call, and the
// communicator with it).
TEST(DevicePeer, ASendLargerThanTheStagingCapGoesThrough) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runThreads(2, [](const clbUniqueId& id, int r, int n) -> std::string {
    const Driver* d = nullptr;
    CUstream stream = nullptr;
    clbComm_t comm = nullptr;
    if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
    const size_t count = (70u << 20) / 8;
    DevBuf b(d, stream, count);
    std::string err;
    if (r == 0) {
      std::vector<int64_t> v(count);
      for (size_t i = 0; i < count; i++) v[i] = val(0, 1, i);
      if (!b.put(v)) err = "cuMemcpyHtoD failed";
      if (err.empty() && clbSend(b.ptr(), count, clbInt64, 1, comm, stream) != clbSuccess)
        err = std::string("send: ") + clbGetLastError();
    } else if (clbRecv(b.ptr(), count, clbInt64, 0, comm, stream) != clbSuccess) {
      err = std::string("recv: ") + clbGetLastError();
    } else if (d->cuStreamSynchronize(stream) != CUDA_SUCCESS) {
      err = "sync failed";
    } else {
      std::vector<int64_t> v = b.get();
      for (size_t i = 0; i < count && err.empty(); i++)
        if (v[i] != val(0, 1, i)) err = "element " + std::to_string(i) + " wrong";
    }
    return closeRank(d, comm, stream, err);
  });
}

// CUDA graphs (ranks as threads or processes on one GPU, the on-GPU path): a pipeline step
// (receive from the previous stage, copy, send to the next), an all-to-all and an all-to-all in
// place (its input copied aside into the communicator's scratch, on the stream), each captured
// once after an eager call and replayed with new data every time, every element checked after
// every replay.
std::string graphBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  const size_t count = 70001;  // three chunks of the pair's channel, and a tail
  DevBuf in(d, stream, count), out(d, stream, count);
  const size_t c = 1024;  // all-to-all: 8 KiB per peer
  DevBuf as(d, stream, c * n), ar(d, stream, c * n), ip(d, stream, c * n);
  auto step = [&]() -> clbResult_t {
    if (r > 0) {
      if (clbResult_t rc = clbRecv(in.ptr(), count, clbInt64, r - 1, comm, stream)) return rc;
      if (d->cuMemcpyDtoDAsync(out.p, in.p, count * 8, stream) != CUDA_SUCCESS) return clbInternalError;
    }
    if (r < n - 1) return clbSend(out.ptr(), count, clbInt64, r + 1, comm, stream);
    return clbSuccess;
  };
  auto fill = [&](int round) -> std::string {
    if (r == 0) {
      std::vector<int64_t> v(count);
      for (size_t i = 0; i < count; i++) v[i] = val(round, 7, i);
      if (!out.put(v)) return "cuMemcpyHtoD failed";
    }
    std::vector<int64_t> s(c * n), t(c * n);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < c; i++)
        s[p * c + i] = val(r * 100 + round, p, i), t[p * c + i] = val(r * 100 + round + 50, p, i);
    return as.put(s) && ip.put(t) ? "" : "cuMemcpyHtoD failed";
  };
  auto check = [&](int round) -> std::string {
    if (r == n - 1) {
      std::vector<int64_t> v = out.get();
      for (size_t i = 0; i < count; i++)
        if (v[i] != val(round, 7, i))
          return "pipeline round " + std::to_string(round) + ": element " + std::to_string(i);
    }
    std::vector<int64_t> g = ar.get(), h = ip.get();
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < c; i++) {
        if (g[p * c + i] != val(p * 100 + round, r, i))
          return "all-to-all round " + std::to_string(round) + ": from " + std::to_string(p);
        if (h[p * c + i] != val(p * 100 + round + 50, r, i))
          return "all-to-all in place round " + std::to_string(round) + ": from " + std::to_string(p) + " element " +
                 std::to_string(i);
      }
    return "";
  };
  std::string err = fill(0);
  // Eager once: sets every pair's channel up.
  if (err.empty() && step() != clbSuccess) err = std::string("eager step: ") + clbGetLastError();
  if (err.empty() && clbAllToAll(as.ptr(), ar.ptr(), c, clbInt64, comm, stream) != clbSuccess)
    err = std::string("eager allToAll: ") + clbGetLastError();
  if (err.empty() && clbAllToAll(ip.ptr(), ip.ptr(), c, clbInt64, comm, stream) != clbSuccess)
    err = std::string("eager allToAll in place: ") + clbGetLastError();
  if (err.empty() && d->cuStreamSynchronize(stream) != CUDA_SUCCESS) err = "sync failed";
  if (err.empty()) err = check(0);
  CUgraph g = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    clbResult_t rc = step();
    if (rc == clbSuccess) rc = clbAllToAll(as.ptr(), ar.ptr(), c, clbInt64, comm, stream);
    if (rc == clbSuccess) rc = clbAllToAll(ip.ptr(), ip.ptr(), c, clbInt64, comm, stream);
    const std::string msg = clbGetLastError();
    CU_OK(d->cuStreamEndCapture(stream, &g));
    if (rc != clbSuccess) err = "captured calls: " + msg;
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, g, 0));
    // Uploaded before any rank replays: a first launch that uploads may wait for the work running
    // in the context, which could be a peer's replay waiting for this rank (docs/device.md).
    if (err.empty()) CU_OK(d->cuGraphUpload(exec, stream));
    CU_OK(d->cuStreamSynchronize(stream));
  }
  if (clbBarrier(comm, nullptr) != clbSuccess && err.empty()) err = std::string("barrier: ") + clbGetLastError();
  for (int round = 1; round <= 5 && err.empty(); round++) {
    err = fill(round);
    if (err.empty() && d->cuGraphLaunch(exec, stream) != CUDA_SUCCESS) err = "cuGraphLaunch failed";
    if (err.empty() && d->cuStreamSynchronize(stream) != CUDA_SUCCESS) err = "sync after the replay failed";
    if (err.empty()) err = check(round);
    // The next round's input is written only once every rank checked this one.
    if (clbBarrier(comm, nullptr) != clbSuccess && err.empty()) err = std::string("barrier: ") + clbGetLastError();
  }
  clbMemStats_t st{};
  clbCommMemStats(comm, &st);
  if (err.empty() && st.deviceBytes <= 0) err = "the pairs' device channels are not counted";
  if (exec) d->cuGraphExecDestroy(exec);
  if (g) d->cuGraphDestroy(g);
  return closeRank(d, comm, stream, err, true);
}

TEST(DevicePeer, GraphsOfAPipelineStepAndAnAllToAllReplayWithNewData) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) runThreads(n, graphBody);
}

// The application allocates, frees and synchronizes between calls (ranks staggered so that each
// one's allocation falls while a peer's call is under way): every round of a ring exchange arrives
// whole, none waits to the timeout.
std::string churnBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  std::string err;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int round = 0; round < 40 && err.empty(); round++) {
    const size_t count = 1000 + 4099 * (size_t)round;  // up to 160,000 elements: lines and in place
    std::this_thread::sleep_for(std::chrono::microseconds(((round + r) % n) * 500));
    DevBuf out(d, stream, count), in(d, stream, count);
    std::vector<int64_t> v(count);
    for (size_t i = 0; i < count; i++) v[i] = val(r * 100 + round, next, i);
    if (!out.put(v)) err = "cuMemcpyHtoD failed";
    if (err.empty() &&
        (clbGroupStart() != clbSuccess || clbSend(out.ptr(), count, clbInt64, next, comm, stream) != clbSuccess ||
         clbRecv(in.ptr(), count, clbInt64, prev, comm, stream) != clbSuccess || clbGroupEnd() != clbSuccess))
      err = "round " + std::to_string(round) + ": " + clbGetLastError();
    if (err.empty() && d->cuCtxSynchronize() != CUDA_SUCCESS) err = "cuCtxSynchronize failed";
    if (err.empty()) {
      std::vector<int64_t> g = in.get();
      for (size_t i = 0; i < count && err.empty(); i++)
        if (g[i] != val(prev * 100 + round, r, i))
          err = "round " + std::to_string(round) + ": element " + std::to_string(i);
    }
  }
  return closeRank(d, comm, stream, err);
}

TEST(DevicePeer, AllocationsFreesAndSynchronizationsBetweenCallsDoNotDeadlock) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) runThreads(n, churnBody);
}

// Rank 0 sends two messages in one group, rank 1 receives them in two calls: between ranks that
// are threads on one GPU the batches must pair up, so both are refused naming what each posted,
// nothing is launched, and a pair of calls that does pair up goes through after.
TEST(DevicePeer, BatchesThatDoNotPairUpAreRefusedOnBothRanks) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runThreads(2, [](const clbUniqueId& id, int r, int n) -> std::string {
    const Driver* d = nullptr;
    CUstream stream = nullptr;
    clbComm_t comm = nullptr;
    if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
    std::string err;
    const size_t count = 100;
    DevBuf a(d, stream, count), b(d, stream, count);
    clbResult_t rc = clbSuccess;
    if (r == 0) {
      if (clbGroupStart() != clbSuccess) return "groupStart";
      clbSend(a.ptr(), count, clbInt64, 1, comm, stream);
      clbSend(b.ptr(), count, clbInt64, 1, comm, stream);
      rc = clbGroupEnd();
    } else {
      rc = clbRecv(a.ptr(), count, clbInt64, 0, comm, stream);
    }
    const std::string msg = clbGetLastError();
    if (rc != clbInvalidUsage) err = "refusal: got " + std::to_string(rc) + ": " + msg;
    if (err.empty() && msg.find(r == 0 ? "2 sends (800, 800 bytes) to rank 1" : "1 receive (800 bytes) from rank 0") ==
                           std::string::npos)
      err = "refusal does not say what was posted: " + msg;
    std::vector<int64_t> v(count);
    for (size_t i = 0; i < count; i++) v[i] = val(7, r, i);
    if (err.empty() && r == 0 && !a.put(v)) err = "cuMemcpyHtoD failed";
    if (err.empty()) {
      rc = r == 0 ? clbSend(a.ptr(), count, clbInt64, 1, comm, stream)
                  : clbRecv(b.ptr(), count, clbInt64, 0, comm, stream);
      if (rc != clbSuccess) err = std::string("the call after: ") + clbGetLastError();
    }
    if (err.empty() && d->cuStreamSynchronize(stream) != CUDA_SUCCESS) err = "sync failed";
    if (err.empty() && r == 1) {
      std::vector<int64_t> g = b.get();
      for (size_t i = 0; i < count && err.empty(); i++)
        if (g[i] != val(7, 0, i)) err = "element " + std::to_string(i);
    }
    return closeRank(d, comm, stream, err);
  });
}

// A reduce into a separate output at the root (the root's copy of its own data and the first
// receive that adds into it run in one launch: the receive waits for the copy), checked over 20
// rounds with the output poisoned before each; and one rank's calls on two streams, the first one
// held back on the receiving side, which must not share the pair's numbers (a rank's launches run
// in call order whatever their streams).
std::string reduceAndStreamsBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr, other = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  CU_OK(d->cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  std::string err;
  const int root = n - 1;
  for (size_t m : {(size_t)1024, (size_t)100003}) {
    DevBuf ds(d, stream, m), dr(d, stream, m);
    std::vector<int64_t> mine(m), poison(m, 0x1111111111111111LL);
    for (size_t i = 0; i < m; i++) mine[i] = val(r, 9, i);
    if (!ds.put(mine)) err = "cuMemcpyHtoD failed";
    for (int round = 0; round < 20 && err.empty(); round++) {
      if (!dr.put(poison)) err = "cuMemcpyHtoD failed";
      if (err.empty() && clbReduce(ds.ptr(), dr.ptr(), m, clbInt64, clbSum, root, comm, stream) != clbSuccess)
        err = std::string("reduce: ") + clbGetLastError();
      if (err.empty() && r == root) {
        std::vector<int64_t> g = dr.get();
        for (size_t i = 0; i < m && err.empty(); i++) {
          int64_t want = 0;
          for (int p = 0; p < n; p++) want += val(p, 9, i);
          if (g[i] != want)
            err = "reduce of " + std::to_string(m) + ", round " + std::to_string(round) + ": element " +
                  std::to_string(i);
        }
      }
      if (err.empty() && clbBarrier(comm, nullptr) != clbSuccess) err = std::string("barrier: ") + clbGetLastError();
    }
  }
  // Pairs (0, 1), (2, 3): the even rank sends a then b, on two streams; the odd one receives a on
  // a stream held back 50 ms, b on the other.
  const size_t big = (8u << 20) / 8;
  const int peer = r ^ 1;
  DevBuf a(d, stream, big), b(d, other, big);
  for (int round = 0; round < 5 && err.empty() && peer < n; round++) {
    std::vector<int64_t> va(big), vb(big);
    for (size_t i = 0; i < big; i++) va[i] = val(round, 1, i), vb[i] = val(round, 2, i);
    if (r % 2 == 0) {
      if (!a.put(va) || !b.put(vb)) err = "cuMemcpyHtoD failed";
      if (err.empty() && (clbSend(a.ptr(), big, clbInt64, peer, comm, stream) != clbSuccess ||
                          clbSend(b.ptr(), big, clbInt64, peer, comm, other) != clbSuccess))
        err = std::string("send: ") + clbGetLastError();
    } else {
      CU_OK(d->cuLaunchHostFunc(
          stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, nullptr));
      if (clbRecv(a.ptr(), big, clbInt64, peer, comm, stream) != clbSuccess ||
          clbRecv(b.ptr(), big, clbInt64, peer, comm, other) != clbSuccess)
        err = std::string("recv: ") + clbGetLastError();
    }
    if (err.empty() &&
        (d->cuStreamSynchronize(stream) != CUDA_SUCCESS || d->cuStreamSynchronize(other) != CUDA_SUCCESS))
      err = "sync failed";
    if (err.empty() && r % 2 == 1) {
      std::vector<int64_t> ga = a.get(), gb = b.get();
      for (size_t i = 0; i < big && err.empty(); i++)
        if (ga[i] != va[i] || gb[i] != vb[i])
          err = "two streams, round " + std::to_string(round) + ": element " + std::to_string(i);
    }
  }
  d->cuStreamDestroy(other);
  return closeRank(d, comm, stream, err, true);
}

TEST(DevicePeer, AReduceIntoAnotherBufferAndCallsOnTwoStreamsGetEveryElementRight) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) runThreads(n, reduceAndStreamsBody);
}

// Between processes the host does not compare a send with its receive: the receive of another
// size (`recvCount` against 1000 sent) finds it in the lines' second flag word (the call
// signature) and fails at once (asyncError: REMOTE_ERROR saying so), long before the 30 s
// timeout, instead of taking part of the message or waiting out the timeout.
std::string sizeMismatchBody(const clbUniqueId& id, int r, int n, size_t recvCount) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  DevBuf b(d, stream, std::max<size_t>(1000, recvCount));
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  if (r == 0 && clbSend(b.ptr(), 1000, clbInt64, 1, comm, stream) != clbSuccess)
    err = std::string("send: ") + clbGetLastError();
  if (r == 1 && clbRecv(b.ptr(), recvCount, clbInt64, 0, comm, stream) != clbSuccess)
    err = std::string("recv: ") + clbGetLastError();
  if (err.empty()) d->cuStreamSynchronize(stream);
  if (err.empty() && r == 1) {
    clbResult_t rc = clbSuccess;
    clbCommGetAsyncError(comm, &rc);
    const std::string msg = clbGetLastError();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != clbRemoteError || msg.find("met its peer's of another call, count or type") == std::string::npos)
      err = "a receive of " + std::to_string(recvCount) +
            " against a send of 1000: expected REMOTE_ERROR saying so, "
            "got " +
            std::to_string(rc) + ": " + msg;
    else if (s > 10)
      err = "the size mismatch was found only after " + std::to_string(s) + " s";
  }
  return closeRank(d, comm, stream, err);
}

// Rank processes whose buffers are registered (clbCommRegister): a receive over 16 KiB into a
// registered buffer tells its sender where, and the sender's blocks write the message in place.
// Ring exchanges in a group at three sizes (one at an offset of 8 bytes), a receive into an
// unregistered buffer between them (lines), an all-to-all between registered buffers, and a ring
// step captured once and replayed with new data, every element checked.
std::string registeredBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t most = 1048583;  // 8 MiB and a little: the largest message, or an all-to-all's whole buffer
  DevBuf out(d, stream, most + 1), in(d, stream, most + 1), loose(d, stream, 131075);
  void* regs[2] = {nullptr, nullptr};
  CLB_OK(clbCommRegister(comm, out.ptr(), (most + 1) * 8, &regs[0]));
  CLB_OK(clbCommRegister(comm, in.ptr(), (most + 1) * 8, &regs[1]));
  std::string err;
  auto ring = [&](size_t count, size_t at, void* into, int round) -> std::string {
    std::vector<int64_t> v(count);
    for (size_t i = 0; i < count; i++) v[i] = val(r * 100 + round, next, i);
    if (d->cuMemcpyHtoDAsync(out.p + at * 8, v.data(), count * 8, stream) != CUDA_SUCCESS) return "cuMemcpyHtoD failed";
    CLB_OK(clbGroupStart());
    CLB_OK(clbRecv(into, count, clbInt64, prev, comm, stream));
    CLB_OK(clbSend(out.ptr(at), count, clbInt64, next, comm, stream));
    CLB_OK(clbGroupEnd());
    std::vector<int64_t> g(count);
    if (d->cuMemcpyDtoHAsync(g.data(), (CUdeviceptr)into, count * 8, stream) != CUDA_SUCCESS ||
        d->cuStreamSynchronize(stream) != CUDA_SUCCESS)
      return "copy back failed";
    for (size_t i = 0; i < count; i++)
      if (g[i] != val(prev * 100 + round, r, i))
        return "ring of " + std::to_string(count) + " (round " + std::to_string(round) + "): element " +
               std::to_string(i);
    return "";
  };
  int round = 0;
  for (size_t count : {(size_t)2049, (size_t)131075, most}) {
    if (err.empty()) err = ring(count, 0, in.ptr(), round++);
    if (err.empty()) err = ring(count, 1, in.ptr(1), round++);
    if (err.empty() && count <= loose.n) err = ring(count, 0, loose.ptr(), round++);
  }
  // All-to-all between the registered buffers: 32 KiB and a little to each peer.
  const size_t c = 4099;
  std::vector<int64_t> s(c * n);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < c; i++) s[p * c + i] = val(r, p, i);
  if (err.empty() && !out.put(s)) err = "cuMemcpyHtoD failed";
  if (err.empty() && clbAllToAll(out.ptr(), in.ptr(), c, clbInt64, comm, stream) != clbSuccess)
    err = std::string("allToAll: ") + clbGetLastError();
  if (err.empty() && d->cuStreamSynchronize(stream) != CUDA_SUCCESS) err = "sync failed";
  if (err.empty()) {
    std::vector<int64_t> g = in.get();
    for (int p = 0; p < n && err.empty(); p++)
      for (size_t i = 0; i < c && err.empty(); i++)
        if (g[p * c + i] != val(p, r, i)) err = "allToAll: from " + std::to_string(p) + " element " + std::to_string(i);
  }
  // A ring step captured once, replayed with new data.
  const size_t count = 131075;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    clbResult_t rc = clbGroupStart();
    if (rc == clbSuccess) rc = clbRecv(in.ptr(), count, clbInt64, prev, comm, stream);
    if (rc == clbSuccess) rc = clbSend(out.ptr(), count, clbInt64, next, comm, stream);
    if (rc == clbSuccess) rc = clbGroupEnd();
    const std::string msg = clbGetLastError();
    CU_OK(d->cuStreamEndCapture(stream, &graph));
    if (rc != clbSuccess) err = "captured ring: " + msg;
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
    if (err.empty()) CU_OK(d->cuGraphUpload(exec, stream));
    CU_OK(d->cuStreamSynchronize(stream));
  }
  for (int k = 0; k < 4 && err.empty(); k++) {
    std::vector<int64_t> v(count);
    for (size_t i = 0; i < count; i++) v[i] = val(r * 100 + 50 + k, next, i);
    if (!out.put(v)) err = "cuMemcpyHtoD failed";
    if (err.empty() && clbBarrier(comm, nullptr) != clbSuccess) err = std::string("barrier: ") + clbGetLastError();
    if (err.empty() && d->cuGraphLaunch(exec, stream) != CUDA_SUCCESS) err = "cuGraphLaunch failed";
    if (err.empty() && d->cuStreamSynchronize(stream) != CUDA_SUCCESS) err = "sync after the replay failed";
    if (err.empty()) {
      std::vector<int64_t> g = in.get();
      for (size_t i = 0; i < count && err.empty(); i++)
        if (g[i] != val(prev * 100 + 50 + k, r, i))
          err = "replay " + std::to_string(k) + ": element " + std::to_string(i);
    }
    // The next replay's input is written only once every rank checked this one.
    if (clbBarrier(comm, nullptr) != clbSuccess && err.empty()) err = std::string("barrier: ") + clbGetLastError();
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  for (void* h : regs)
    if (h && clbCommDeregister(comm, h) != clbSuccess && err.empty())
      err = std::string("deregister: ") + clbGetLastError();
  return closeRank(d, comm, stream, err, true);
}

// A send whose registered receive is of another size (both over 16 KiB): only the receive's
// record tells the sender, which refuses its call at once naming both sizes; the receiver, told
// nothing, waits for the message until the timeout (6 s here) and says so.
std::string registeredMismatchBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm, 6000); !e.empty()) return e;
  DevBuf b(d, stream, 4096);
  void* reg = nullptr;
  CLB_OK(clbCommRegister(comm, b.ptr(), 4096 * 8, &reg));
  std::string err;
  if (r == 0) {
    const clbResult_t rc = clbSend(b.ptr(), 4096, clbInt64, 1, comm, stream);
    const std::string msg = clbGetLastError();
    if (rc != clbInvalidUsage ||
        msg.find("sends 32768 bytes to rank 1, whose receive is of 24000 bytes") == std::string::npos)
      err = "a send of 32768 bytes to a receive of 24000: expected INVALID_USAGE naming both, got " +
            std::to_string(rc) + ": " + msg;
  } else {
    if (clbRecv(b.ptr(), 3000, clbInt64, 0, comm, stream) != clbSuccess)
      err = std::string("recv: ") + clbGetLastError();
    if (err.empty()) d->cuStreamSynchronize(stream);
    clbResult_t rc = clbSuccess;
    clbCommGetAsyncError(comm, &rc);
    if (err.empty() && rc == clbSuccess) err = "the receive whose send was refused reports no error";
  }
  return closeRank(d, comm, stream, err);
}

// Ranks that share no memory (rank processes with COLIBRI_TRANSPORT=verbs over the emulator and
// COLIBRI_DEVICE_P2P=off: "hosts" to each other): every call of exchange(), twice. With GPU memory for the pairs'
// channels (`gpuMemory`: GPUDirect RDMA, the emulator registering the GPU's dma-bufs) the sends
// and receives move between the buffers and the channels' slots in GPU memory, counted as device
// bytes; with COLIBRI_VERBS_GPU_MEMORY=host through host memory, nothing on the GPU for them.
// Either way a call inside a capture is refused, saying why.
std::string acrossHostsBody(const clbUniqueId& id, int r, int n, bool gpuMemory) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  std::string err = exchange(d, stream, comm, r, n);
  if (err.empty()) err = exchange(d, stream, comm, r, n);
  char info[4096] = "";
  clbCommInfo(comm, info, sizeof info);
  clbMemStats_t st{};
  clbCommMemStats(comm, &st);
  const std::string want = gpuMemory ? "point-to-point on device buffers between hosts: channels in GPU memory, "
                                       "GPUDirect RDMA through dma-buf"
                                     : "point-to-point on device buffers between hosts: through host memory "
                                       "(COLIBRI_VERBS_GPU_MEMORY=host)";
  if (err.empty() && !strstr(info, want.c_str())) err = "transportInfo does not say \"" + want + "\": " + info;
  // The collectives of exchange() are small reduces between "hosts": through host memory or
  // GPUDirect's ring channel, which holds GPU memory of its own when GPU memory is on.
  if (err.empty() && gpuMemory && st.deviceBytes <= 0) err = "the channels' GPU memory is not counted";
  if (err.empty()) {
    DevBuf b(d, stream, 16);
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    clbResult_t rc = clbSend(b.ptr(), 16, clbInt64, (r + 1) % n, comm, stream);
    const std::string msg = clbGetLastError();
    CUgraph none = nullptr;
    d->cuStreamEndCapture(stream, &none);
    if (none) d->cuGraphDestroy(none);
    if (rc != clbInvalidUsage || msg.find("cannot be captured in a CUDA graph") == std::string::npos)
      err = "a send between hosts inside a capture: expected INVALID_USAGE saying so, got " + std::to_string(rc) +
            ": " + msg;
  }
  return closeRank(d, comm, stream, err, true);
}

// The message before a failure in the tests below: 1000 elements from rank 0 to rank 1 in `b`, which
// rank 1 checks element by element ("" or what was wrong).
std::string messageBefore(const Driver* d, CUstream stream, clbComm_t comm, int r, DevBuf& b, const char* failure) {
  std::string err;
  std::vector<int64_t> mine(1000);
  for (size_t i = 0; i < mine.size(); i++) mine[i] = val(r, 1 - r, i);
  if (r == 0 && (!b.put(mine) || clbSend(b.ptr(), 1000, clbInt64, 1, comm, stream) != clbSuccess))
    err = std::string("send: ") + clbGetLastError();
  if (r == 1 && clbRecv(b.ptr(), 1000, clbInt64, 0, comm, stream) != clbSuccess)
    err = std::string("recv: ") + clbGetLastError();
  d->cuStreamSynchronize(stream);
  if (err.empty() && r == 1) {
    const std::vector<int64_t> got = b.get();
    for (size_t i = 0; i < got.size() && err.empty(); i++)
      if (got[i] != val(0, 1, i))
        err = std::string("the message before ") + failure + ": element " + std::to_string(i) + " is " +
              std::to_string(got[i]);
  }
  return err;
}

// Milliseconds since t0.
long long msSince(std::chrono::steady_clock::time_point t0) {
  return (long long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
      .count();
}

// What a rank whose operation waits for a peer that failed learns (the tests below): the first
// error clbCommGetAsyncError reports within 5 s of t0 (none when `poll` is false), its message,
// when it came, and when the rank's stream drained.
struct Told {
  clbResult_t async = clbSuccess;
  std::string msg;
  long long told = 0, drained = 0;
};
Told awaitTold(const Driver* d, clbComm_t comm, CUstream stream, std::chrono::steady_clock::time_point t0, bool poll) {
  Told t;
  while (poll && t.async == clbSuccess && msSince(t0) < 5000) {
    clbCommGetAsyncError(comm, &t.async);
    if (t.async == clbSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  t.msg = clbGetLastError();
  t.told = msSince(t0);
  d->cuStreamSynchronize(stream);
  t.drained = msSince(t0);
  return t;
}

// Rank 0 aborts its communicator while rank 1's receive from it waits on the GPU: between
// processes that call returned, so only the watchdog can end its kernel (PeerDevice's stop). The
// async query must name the abort and the stream drain within 1.5 s of the receive (the timeout is
// 30 s); a message before it arrives whole (checked element by element).
std::string abortedBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  DevBuf b(d, stream, 1000);
  std::string err = messageBefore(d, stream, comm, r, b, "the abort");
  if (err.empty() && r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1's receive waits by now
    if (clbCommAbort(comm) != clbSuccess) err = std::string("clbCommAbort: ") + clbGetLastError();
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // stays up, as a server does
  } else if (err.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    if (clbRecv(b.ptr(), 1000, clbInt64, 0, comm, stream) != clbSuccess)
      err = std::string("the receive that waits: ") + clbGetLastError();
    const auto [async, msg, told, drained] = awaitTold(d, comm, stream, t0, err.empty());
    if (err.empty() && (async != clbAborted || msg.find("rank 0") == std::string::npos))
      err = "the async query says " + std::to_string(async) + " (want ABORTED naming rank 0): " + msg;
    else if (err.empty() && (told > 1500 || drained > 1500))
      err = "told after " + std::to_string(told) + " ms, the stream drained after " + std::to_string(drained) +
            " ms (want both within 1.5 s; the timeout is 30 s)";
    else if (err.empty())
      printf("rank 1: told after %lld ms, the stream drained after %lld ms: %s\n", told, drained, msg.c_str());
  }
  return closeRank(d, comm, stream, err);
}

// Rank 0 refuses a point-to-point call (clbCommRefuse, as a binding does for a heap buffer) and
// stays up, as a server does, while rank 1's device operation waits for it: with `send` false a
// receive of what rank 0 never sends, with `send` true a send of 1 MiB (between processes in lines
// past the slots: it waits for credits rank 0 never gives; between threads in place: it waits for
// the receiver's readiness). Between processes that call returned, so only
// rank 0's watchdog can end the kernel (PeerDevice::tellPeersOfEnd). Rank 1 must be told at once,
// naming rank 0 and its reason, its stream must drain within 1.5 s (the timeout is 30 s), the
// async error must then name the point-to-point wait, and the message before the refusal arrives
// whole (checked element by element). Rank threads (inProcess) may instead fail the waiting call
// itself at once, naming rank 0 and its reason. With `destroy`, rank 0 destroys its communicator
// right after the refusal (its boxes stay for PeerDevice's grace while rank 1's kernel reads them).
std::string refusedBody(const clbUniqueId& id, int r, int n, bool send, bool inProcess, bool destroy = false) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  const size_t big = 1 << 17;  // 1 MiB: 32 chunks of 32 KiB between processes (in place between threads)
  DevBuf b(d, stream, 1000), large(d, stream, big);
  std::string err = messageBefore(d, stream, comm, r, b, "the refusal");
  const char* reason = "the buffer is a heap buffer (a test's refusal)";
  if (err.empty() && r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1's operation waits by now
    if (clbCommRefuse(comm, send ? "recv" : "send", 0, reason) != clbInvalidArgument)
      err = std::string("clbCommRefuse did not refuse: ") + clbGetLastError();
    if (destroy) {
      if (clbCommDestroy(comm) != clbSuccess && err.empty()) err = std::string("destroy: ") + clbGetLastError();
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // the process stays up
      d->cuStreamDestroy(stream);
      return err;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // stays up, as a server does
  } else if (err.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    auto ms = [&] { return msSince(t0); };
    const clbResult_t rc =
        send ? clbSend(large.ptr(), big, clbInt64, 0, comm, stream) : clbRecv(b.ptr(), 1000, clbInt64, 0, comm, stream);
    if (rc != clbSuccess) {
      // Rank threads meet before they launch (unless COLIBRI_DEVICE_MEET=off): the call itself
      // fails, naming the refusal.
      const std::string why = clbGetLastError();
      if (!inProcess || rc != clbRemoteError || why.find("rank 0") == std::string::npos ||
          why.find(reason) == std::string::npos || ms() > 1500)
        err = "the operation that waits returned " + std::to_string(rc) + " after " + std::to_string(ms()) +
              " ms: " + why;
      else
        printf("rank 1 (%s, threads): the call failed after %lld ms: %s\n", send ? "send" : "receive", ms(),
               why.c_str());
      return closeRank(d, comm, stream, err);
    }
    const auto [first, msg, told, drained] = awaitTold(d, comm, stream, t0, err.empty());
    (void)first;  // the query once drained is the one checked (it reports the same)
    clbResult_t now = clbSuccess;
    clbCommGetAsyncError(comm, &now);
    const std::string after = clbGetLastError();
    if (err.empty() &&
        (now != clbRemoteError || msg.find("rank 0") == std::string::npos || msg.find(reason) == std::string::npos))
      err = "the async query says " + std::to_string(now) + " (want REMOTE_ERROR naming rank 0 and its reason): " + msg;
    else if (err.empty() && (told > 1500 || drained > 1500))
      err = "told after " + std::to_string(told) + " ms, the stream drained after " + std::to_string(drained) +
            " ms (want both within 1.5 s; the timeout is 30 s)";
    else if (err.empty() && (after.find("waited for rank 0, whose communicator failed") == std::string::npos ||
                             after.find(reason) == std::string::npos))
      err = "once drained, the async query says: " + after;
    else if (err.empty())
      printf("rank 1 (%s): told after %lld ms, the stream drained after %lld ms: %s\n", send ? "send" : "receive", told,
             drained, after.c_str());
  }
  return closeRank(d, comm, stream, err);
}

// Rank 0's send and rank 1's receive of 1000 elements, captured in a CUDA graph on each rank and
// replayed once together (rank 1 checks the message element by element). Then rank 1 replays its
// graph again while rank 0 refuses a call instead and stays up. Replays move the pair's counts on
// without the host, so rank 0 cannot tell how far its sends go: it ends every device kernel of the
// communicator, its own and rank 1's (device/stop.h). Rank 1's replayed receive must end within
// 1.5 s (the timeout is 30 s), and its async error name rank 0 and its reason.
std::string refusedAfterCaptureBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  DevBuf b(d, stream, 1000);
  std::string err = messageBefore(d, stream, comm, r, b, "the capture");  // sets the pair up
  const char* reason = "the buffer is a heap buffer (a test's refusal after a capture)";
  CUgraph g = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    const clbResult_t rc =
        r == 0 ? clbSend(b.ptr(), 1000, clbInt64, 1, comm, stream) : clbRecv(b.ptr(), 1000, clbInt64, 0, comm, stream);
    const std::string why = clbGetLastError();
    CU_OK(d->cuStreamEndCapture(stream, &g));
    if (rc != clbSuccess) err = "the captured call: " + why;
  }
  if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, g, 0));
  std::vector<int64_t> mine(1000);
  for (size_t i = 0; i < mine.size(); i++) mine[i] = val(7, 1, i);
  if (err.empty() && r == 0 && !b.put(mine)) err = "cuMemcpyHtoD failed";
  if (err.empty()) {
    CU_OK(d->cuGraphLaunch(exec, stream));
    CU_OK(d->cuStreamSynchronize(stream));
  }
  if (err.empty() && r == 1) {
    const std::vector<int64_t> got = b.get();
    for (size_t i = 0; i < got.size() && err.empty(); i++)
      if (got[i] != val(7, 1, i))
        err = "the replay together: element " + std::to_string(i) + " is " + std::to_string(got[i]);
  }
  if (err.empty() && r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1's replay waits by now
    if (clbCommRefuse(comm, "send", 0, reason) != clbInvalidArgument)
      err = std::string("clbCommRefuse did not refuse: ") + clbGetLastError();
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // stays up, as a server does
  } else if (err.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    CU_OK(d->cuGraphLaunch(exec, stream));
    const auto [first, msg, told, drained] = awaitTold(d, comm, stream, t0, true);
    (void)first;
    clbResult_t now = clbSuccess;
    clbCommGetAsyncError(comm, &now);
    const std::string after = clbGetLastError();
    if (now != clbRemoteError || after.find("rank 0") == std::string::npos || after.find(reason) == std::string::npos)
      err = "once drained, the async query says " + std::to_string(now) +
            " (want REMOTE_ERROR naming rank 0 and its reason): " + after;
    else if (told > 1500 || drained > 1500)
      err = "told after " + std::to_string(told) + " ms, the stream drained after " + std::to_string(drained) +
            " ms (want both within 1.5 s; the timeout is 30 s)";
    else
      printf("rank 1 (a replayed receive): told after %lld ms, the stream drained after %lld ms: %s\n", told, drained,
             after.c_str());
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (g) d->cuGraphDestroy(g);
  return closeRank(d, comm, stream, err);
}

// A rank process of the tests below: CLB_DEVICE_PEER_BODY says what it runs ("calls": every call
// twice, "graphs", "churn", "shorter" and "longer": a receive of another size, "registered" and
// "registered-mismatch": registered buffers, "across-hosts": over verbs without shared memory,
// "aborted": a receive from a rank that aborts, "refused-recv", "refused-send",
// "refused-recv-destroyed" and "refused-after-capture": an operation with a rank that refuses its
// call); with COLIBRI_DEVICE_P2P=off in its environment the pairs go through host memory.
TEST(DevicePeerChild, Rank) {
  const char* id = getenv("CLB_DEVICE_PEER_ID");
  if (!id) GTEST_SKIP() << "runs only as a rank process of DevicePeer";
  const int r = atoi(getenv("CLB_DEVICE_PEER_RANK")), n = atoi(getenv("CLB_DEVICE_PEER_NRANKS"));
  const std::string body = getenv("CLB_DEVICE_PEER_BODY");
  const char* p2p = getenv("COLIBRI_DEVICE_P2P");
  const bool viaHost = p2p && std::string(p2p) == "off";
  std::string err = "unknown CLB_DEVICE_PEER_BODY " + body;
  if (body == "calls") err = rankBody(unhex(id), r, n, viaHost);
  if (body == "graphs") err = graphBody(unhex(id), r, n);
  if (body == "churn") err = churnBody(unhex(id), r, n);
  if (body == "shorter") err = sizeMismatchBody(unhex(id), r, n, 500);
  if (body == "longer") err = sizeMismatchBody(unhex(id), r, n, 2000);
  if (body == "registered") err = registeredBody(unhex(id), r, n);
  if (body == "registered-mismatch") err = registeredMismatchBody(unhex(id), r, n);
  if (body == "aborted") err = abortedBody(unhex(id), r, n);
  if (body == "refused-recv") err = refusedBody(unhex(id), r, n, false, false);
  if (body == "refused-send") err = refusedBody(unhex(id), r, n, true, false);
  if (body == "refused-recv-destroyed") err = refusedBody(unhex(id), r, n, false, false, true);
  if (body == "refused-after-capture") err = refusedAfterCaptureBody(unhex(id), r, n);
  if (body == "across-hosts") {
    const char* gm = getenv("COLIBRI_VERBS_GPU_MEMORY");
    err = acrossHostsBody(unhex(id), r, n, !(gm && std::string(gm) == "host"));
  }
  EXPECT_EQ(err, "");
}

void runProcesses(int n, const std::string& body, const std::vector<std::string>& env = {}) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    std::vector<std::string> e = {"CLB_DEVICE_PEER_ID=" + hex(id), "CLB_DEVICE_PEER_RANK=" + std::to_string(r),
                                  "CLB_DEVICE_PEER_NRANKS=" + std::to_string(n), "CLB_DEVICE_PEER_BODY=" + body};
    e.insert(e.end(), env.begin(), env.end());
    pids.push_back(spawnGpuRank("DevicePeerChild.Rank", e));
  }
  for (int r = 0; r < n; r++) {
    ASSERT_GT(pids[r], 0);
    int status = 0;
    ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << body << ": rank process " << r << " of " << n << " failed";
  }
  clbUniqueIdRelease(&id);
}

// Rank processes on one GPU map each other's boxes through CUDA IPC at their first device call
// with each other and move on the GPU: every call, graphs replayed with new data, allocations
// between calls. Without the MPS daemon the processes' kernels are time-sliced (slow, but they pass).
TEST(DevicePeer, ProcessesOnOneGpuEveryCallMatchesTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) runProcesses(n, "calls");
}

TEST(DevicePeer, ProcessesOnOneGpuReplayGraphsWithNewDataAndSurviveAllocations) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) {
    runProcesses(n, "graphs");
    runProcesses(n, "churn");
  }
}

TEST(DevicePeer, ProcessesEndAReceiveFromARankThatAbortedAtOnce) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runProcesses(2, "aborted");
}

TEST(DevicePeer, ProcessesEndAnOperationWithARankThatRefusedItsCallAtOnce) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runProcesses(2, "refused-recv");
  runProcesses(2, "refused-send");
  runProcesses(2, "refused-recv-destroyed");
  runProcesses(2, "refused-after-capture");
}

// Rank threads meet on the host before they launch, so the waiting call fails there; with
// COLIBRI_DEVICE_MEET=off they launch without meeting, and the kernel ends as between processes.
TEST(DevicePeer, ThreadsEndAnOperationWithARankThatRefusedItsCallAtOnce) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (const char* meet : {"on", "off"}) {
    clbtest::ScopedEnv env({{"COLIBRI_DEVICE_MEET", meet}});
    for (bool send : {false, true})
      runThreads(2, [send](const clbUniqueId& id, int r, int n) { return refusedBody(id, r, n, send, true); });
  }
}

TEST(DevicePeer, ProcessesFindAReceiveOfAnotherSizeAtOnce) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runProcesses(2, "shorter");
  runProcesses(2, "longer");
}

TEST(DevicePeer, ProcessesWriteLargeMessagesInPlaceIntoRegisteredBuffers) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  if (const char* v = getenv("COLIBRI_DEVICE_P2P_IN_PLACE"); v && std::string(v) == "off")
    GTEST_SKIP() << "COLIBRI_DEVICE_P2P_IN_PLACE=off: every message moves in lines";
  for (int n : {2, 4}) runProcesses(n, "registered");
  runProcesses(2, "registered-mismatch");
}

TEST(DevicePeer, ProcessesAcrossHostsOverVerbsMoveThroughChannelsInGpuMemory) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 3}) {
    runProcesses(n, "across-hosts", {"COLIBRI_TRANSPORT=verbs", "COLIBRI_DEVICE_P2P=off"});
    runProcesses(n, "across-hosts",
                 {"COLIBRI_TRANSPORT=verbs", "COLIBRI_DEVICE_P2P=off", "COLIBRI_VERBS_GPU_MEMORY=host"});
  }
}

// COLIBRI_DEVICE_P2P=off: the pairs across processes go through host memory (nothing on the GPU).
TEST(DevicePeer, ProcessesThroughHostMemoryEveryCallMatchesTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  runProcesses(2, "calls", {"COLIBRI_DEVICE_P2P=off"});
}

}  // namespace
