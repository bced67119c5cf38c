// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point on device buffers (ranks as threads on one GPU, and as processes): a ring
// exchange in a group posted in opposite orders, all-to-all against a group of sends and
// receives, all-to-allv with empty pairs, reduce in place, gather and scatter, every result copied
// back and checked element by element against values computed here; a call inside a CUDA graph
// capture refused with what to do, the communicator still usable. Skipped without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"

namespace {

int64_t val(int from, int to, size_t i) { return (int64_t)from * 1000000007LL + (int64_t)to * 1000003LL + (int64_t)i; }

struct DevBuf {
  const Driver* d;
  CUdeviceptr p = 0;
  size_t n;
  DevBuf(const Driver* drv, size_t elems) : d(drv), n(elems) { d->cuMemAlloc(&p, std::max<size_t>(8, elems * 8)); }
  ~DevBuf() {
    if (p) d->cuMemFree(p);
  }
  void* ptr(size_t at = 0) const { return reinterpret_cast<void*>(p + at * 8); }
  bool put(const std::vector<int64_t>& v) { return d->cuMemcpyHtoD(p, v.data(), v.size() * 8) == CUDA_SUCCESS; }
  std::vector<int64_t> get() const {
    std::vector<int64_t> v(n);
    d->cuMemcpyDtoH(v.data(), p, n * 8);
    return v;
  }
};

#define CLB_OK(call)                                                                            \
  do {                                                                                          \
    if ((call) != clbSuccess) return std::string(#call) + " failed: " + clbGetLastError(); \
  } while (0)

std::string exchange(const Driver* d, CUstream stream, clbComm_t comm, int r, int n) {
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // A ring exchange, half the ranks posting the receive first.
  const size_t count = 300007;
  std::vector<int64_t> out(count);
  for (size_t i = 0; i < count; i++) out[i] = val(r, next, i);
  DevBuf dout(d, count), din(d, count);
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
  DevBuf ds(d, c * n), dr(d, c * n), dr2(d, c * n);
  if (!ds.put(s)) return "cuMemcpyHtoD failed";
  CLB_OK(clbAllToAll(ds.ptr(), dr.ptr(), c, clbInt64, comm, stream));
  CLB_OK(clbGroupStart());
  for (int p = n - 1; p >= 0; p--) {
    CLB_OK(clbRecv(dr2.ptr(p * c), c, clbInt64, p, comm, stream));
    CLB_OK(clbSend(ds.ptr(p * c), c, clbInt64, p, comm, stream));
  }
  CLB_OK(clbGroupEnd());
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
  DevBuf dvs(d, so), dvr(d, ro);
  if (!dvs.put(vs)) return "cuMemcpyHtoD failed";
  CLB_OK(clbAllToAllv(dvs.ptr(), sc.data(), sd.data(), dvr.ptr(), rc.data(), rd.data(), clbInt64, comm, stream));
  std::vector<int64_t> vr = dvr.get();
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < rc[p]; i++)
      if (vr[rd[p] + i] != val(p, r, i)) return "allToAllv: from " + std::to_string(p);
  // Reduce in place at the root, gather, scatter.
  const int root = n - 1;
  const size_t m = 20011;
  std::vector<int64_t> mine(m);
  for (size_t i = 0; i < m; i++) mine[i] = val(r, root, i);
  DevBuf dm(d, m), dall(d, m * n), dgot(d, m);
  if (!dm.put(mine)) return "cuMemcpyHtoD failed";
  CLB_OK(clbGather(dm.ptr(), dall.ptr(), m, clbInt64, root, comm, stream));
  CLB_OK(clbScatter(dall.ptr(), dgot.ptr(), m, clbInt64, root, comm, stream));
  CLB_OK(clbReduce(dm.ptr(), dm.ptr(), m, clbInt64, clbSum, root, comm, stream));
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
  return "";
}

std::string rankBody(const clbUniqueId& id, int r, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, r, n, &d, &stream, &comm); !e.empty()) return e;
  std::string err = exchange(d, stream, comm, r, n);
  // Inside a capture: refused, nothing moved, usable after.
  if (err.empty()) {
    DevBuf b(d, 16);
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
  if (err.empty()) err = exchange(d, stream, comm, r, n);
  clbCommDestroy(comm);
  d->cuStreamDestroy(stream);
  return err;
}

TEST(DevicePeer, ThreadsOnOneGpuEveryCallMatchesTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) runThreads(n, rankBody);
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
    DevBuf b(d, count);
    std::string err;
    if (r == 0) {
      std::vector<int64_t> v(count);
      for (size_t i = 0; i < count; i++) v[i] = val(0, 1, i);
      if (!b.put(v)) err = "cuMemcpyHtoD failed";
      if (err.empty() && clbSend(b.ptr(), count, clbInt64, 1, comm, stream) != clbSuccess)
        err = std::string("send: ") + clbGetLastError();
    } else if (clbRecv(b.ptr(), count, clbInt64, 0, comm, stream) != clbSuccess) {
      err = std::string("recv: ") + clbGetLastError();
    } else {
      std::vector<int64_t> v = b.get();
      for (size_t i = 0; i < count && err.empty(); i++)
        if (v[i] != val(0, 1, i)) err = "element " + std::to_string(i) + " wrong";
    }
    clbCommDestroy(comm);
    d->cuStreamDestroy(stream);
    return err;
  });
}

TEST(DevicePeerChild, Rank) {
  const char* id = getenv("CLB_DEVICE_PEER_ID");
  if (!id) GTEST_SKIP() << "runs only as a rank process of DevicePeer";
  const int r = atoi(getenv("CLB_DEVICE_PEER_RANK")), n = atoi(getenv("CLB_DEVICE_PEER_NRANKS"));
  EXPECT_EQ(rankBody(unhex(id), r, n), "");
}

TEST(DevicePeer, ProcessesOnOneGpuEveryCallMatchesTheReference) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  const int n = 2;
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++)
    pids.push_back(clbtest::spawnSelf("DevicePeerChild.Rank", {"CLB_DEVICE_PEER_ID=" + hex(id),
                                                               "CLB_DEVICE_PEER_RANK=" + std::to_string(r),
                                                               "CLB_DEVICE_PEER_NRANKS=" + std::to_string(n)}));
  for (int r = 0; r < n; r++) {
    ASSERT_GT(pids[r], 0);
    int status = 0;
    ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank process " << r << " failed";
  }
  clbUniqueIdRelease(&id);
}

}  // namespace
