// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The copies path (HostCopyPath, paths.h): messages above the LL sizes between GPUs without peer
// access, where the flags and the staging live in pinned host memory that every rank maps. The
// staged kernel would move the bulk with GPU loads and stores over PCIe (0.6 GB/s measured on an
// H200 with the path forced); here the copy engines move it instead, on the caller's stream:
//
//   GATE     every rank finished reading this rank's staging in the previous call
//   copy     this rank's input -> its own staging (device to host; a reduceScatter's n slices)
//   POSTED   tell every rank
//   WAIT     every rank posted
//   copy     each peer's staging -> this rank's device scratch (reducing collectives), or straight
//            into the output (allGather, broadcast) (host to device)
//   COMBINE  out = rank 0's part op ... op rank n-1's part, in rank order (reducing collectives)
//   DONE     tell every rank this one finished reading, and count the call
//
// (the steps in capitals are launches of clb_dev_hostcopy, one block each, and COMBINE of
// clb_dev_hostcopy_combine; plain
// loads and stores on the flags: no atomics on host memory). A message larger than a round goes in
// rounds, each a call of its own. Everything is on the caller's stream, so a CUDA graph captures
// it. Ranks that share this GPU and process enqueue the first three steps of a round, meet, then
// the rest: every wait then waits for work enqueued before it, whichever hardware queue the
// streams share.
#include <algorithm>

#include "core/comm.h"
#include "core/dtype.h"
#include "device/paths.h"

namespace clb::cuda {

namespace {
bool reducing(const CollArgs& a) {
  return a.desc.coll == kAllReduce || a.desc.coll == kReduce || a.desc.coll == kReduceScatter;
}
}  // namespace

size_t HostCopyPath::roundBytes(const CollArgs& a) const {
  // A reducing collective copies every rank's part of a round into the scratch (as large as the
  // staging): a round of staging / n bytes per part (a reduceScatter's staging holds n slices of
  // that). allGather and broadcast copy into the output: a round of the whole staging.
  return (reducing(a) ? s_.staging.bytes / s_.comm->nranks : s_.staging.bytes) / 256 * 256;
}

clbResult_t HostCopyPath::prepare(const CollArgs& a, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks;
  // The staging as the staged path sizes it (there: two halves of a slot per rank; here each
  // rank's whole staging is its own input's, and readers copy from it).
  size_t want = std::min(std::max(a.count * esz * n, kMinHalf), kMaxHalf);
  want = (want + kMinHalf - 1) / kMinHalf * kMinHalf;
  CLB_CHECK(s_.ensureShared(&s_.staging, std::max(s_.staging.bytes, 2 * want), stream, "staging"));
  // The scratch, for the reducing collectives, follows the staging (local: no peer sees it),
  // grown outside a capture only.
  if (!reducing(a) || scratchBytes_ >= s_.staging.bytes) return clbSuccess;
  CLB_CHECK(s_.refuseInCapture(stream, s_.staging.bytes));
  CtxScope scope(s_.d, s_.ctx);
  if (scratch_) {
    CLB_CU(s_.d, cuStreamSynchronize, stream);  // the calls before on this stream have read it
    s_.d->cuMemFree(scratch_);
    s_.comm->mem.addDevice(-(int64_t)scratchBytes_);
    scratch_ = 0;
    scratchBytes_ = 0;
  }
  CLB_CU(s_.d, cuMemAlloc, &scratch_, s_.staging.bytes);
  scratchBytes_ = s_.staging.bytes;
  s_.comm->mem.addDevice((int64_t)scratchBytes_);
  return clbSuccess;
}

void HostCopyPath::release() {
  if (!scratch_) return;
  CtxScope scope(s_.d, s_.ctx);
  s_.d->cuMemFree(scratch_);
  s_.comm->mem.addDevice(-(int64_t)scratchBytes_);
  scratch_ = 0;
  scratchBytes_ = 0;
}

clbResult_t HostCopyPath::run(const CollArgs& a, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const size_t perRound = roundBytes(a) / esz;  // elements per rank (a reduceScatter's per slice)
  if (perRound == 0)
    return setError(clbInternalError, "the staging (%zu bytes) holds no element of %zu bytes per rank",
                    s_.staging.bytes, esz);
  for (size_t e0 = 0; e0 < a.count; e0 += perRound) {
    const size_t m = std::min(perRound, a.count - e0);
    CLB_CHECK(s_.together(a, [&] {
      CtxScope scope(s_.d, s_.ctx);
      return post(a, e0, m, stream);
    }));
    CLB_CHECK(s_.together(a, [&] {
      CtxScope scope(s_.d, s_.ctx);
      return collect(a, e0, m, stream);
    }));
  }
  return clbSuccess;
}

clbResult_t HostCopyPath::step(const CollArgs& a, int phase, size_t m, void* out, unsigned blocks, CUstream stream) {
  ClbDevCallArgs k{};
  s_.common(&k, a);
  k.phase = phase;
  k.count = m;
  k.out = out;
  for (int p = 0; p < s_.comm->nranks; p++) k.peerIn[p] = parts_[p];
  if (phase == CLB_HC_COMBINE) return s_.launcher.launch(s_.d, s_.hostCombineFn, blocks, kThreads, stream, &k, sizeof k);
  return s_.launcher.launch(s_.d, s_.hostCopyFn, 1, 32, stream, &k, sizeof k);
}

// GATE, this rank's input into its staging, POSTED.
clbResult_t HostCopyPath::post(const CollArgs& a, size_t e0, size_t m, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks, r = s_.comm->rank;
  CLB_CHECK(step(a, CLB_HC_GATE, m, nullptr, 1, stream));
  const char* in = static_cast<const char*>(a.send);
  char* mine = s_.staging.hostPeers[r];  // pinned host memory: the copy engines' way
  switch (a.desc.coll) {
    case kReduceScatter:  // slice p of this round, for rank p, at p * m elements
      for (int p = 0; p < n; p++)
        CLB_CU(s_.d, cuMemcpyDtoHAsync, mine + p * m * esz, (CUdeviceptr)(in + (p * a.count + e0) * esz), m * esz,
               stream);
      break;
    case kBroadcast:
      if (r == a.root) CLB_CU(s_.d, cuMemcpyDtoHAsync, mine, (CUdeviceptr)(in + e0 * esz), m * esz, stream);
      break;
    default:
      CLB_CU(s_.d, cuMemcpyDtoHAsync, mine, (CUdeviceptr)(in + e0 * esz), m * esz, stream);
  }
  return step(a, CLB_HC_POSTED, m, nullptr, 1, stream);
}

// WAIT, the peers' staging out, COMBINE (reducing collectives), DONE.
clbResult_t HostCopyPath::collect(const CollArgs& a, size_t e0, size_t m, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks, r = s_.comm->rank;
  const size_t bytes = m * esz;
  CLB_CHECK(step(a, CLB_HC_WAIT, m, nullptr, 1, stream));
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  auto staging = [&](int p) -> const char* { return s_.staging.hostPeers[p]; };
  auto copy = [&](const void* dst, const char* fromHost) -> clbResult_t {  // host to device
    CLB_CU(s_.d, cuMemcpyHtoDAsync, (CUdeviceptr)dst, fromHost, bytes, stream);
    return clbSuccess;
  };
  auto copyOnDevice = [&](const void* dst, const char* src) -> clbResult_t {
    CLB_CU(s_.d, cuMemcpyDtoDAsync, (CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream);
    return clbSuccess;
  };
  void* combineInto = nullptr;
  switch (a.desc.coll) {
    case kAllReduce:
    case kReduce:
    case kReduceScatter: {
      if (a.desc.coll == kReduce && r != a.root) break;  // only the root combines
      const size_t mineAt = a.desc.coll == kReduceScatter ? (r * a.count + e0) * esz : e0 * esz;
      const size_t theirsAt = a.desc.coll == kReduceScatter ? r * bytes : 0;
      for (int p = 0; p < n; p++) {
        if (p == r) {
          parts_[p] = in + mineAt;
          continue;
        }
        char* at = reinterpret_cast<char*>(scratch_) + p * bytes;
        CLB_CHECK(copy(at, staging(p) + theirsAt));
        parts_[p] = at;
      }
      combineInto = out + e0 * esz;
      break;
    }
    case kAllGather:
      for (int p = 0; p < n; p++) {
        char* dst = out + (p * a.count + e0) * esz;
        if (p != r) CLB_CHECK(copy(dst, staging(p)));
        else if (dst != in + e0 * esz) CLB_CHECK(copyOnDevice(dst, in + e0 * esz));
      }
      break;
    case kBroadcast:
      if (r != a.root) CLB_CHECK(copy(out + e0 * esz, staging(a.root)));
      else if (out != in) CLB_CHECK(copyOnDevice(out + e0 * esz, in + e0 * esz));
      break;
  }
  if (combineInto) CLB_CHECK(step(a, CLB_HC_COMBINE, m, combineInto, s_.blocksFor(bytes * n), stream));
  return step(a, CLB_HC_DONE, m, nullptr, 1, stream);
}

}  // namespace clb::cuda
