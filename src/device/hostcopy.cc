// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The copies path (HostCopyPath, paths.h): messages above the LL sizes between GPUs without peer
// access, where the flags and the staging live in pinned host memory that every rank maps. The
// staged kernel would move the bulk with GPU loads and stores over PCIe (0.6 GB/s measured on an
// H200 with the path forced); here the copy engines move it instead. A call goes in rounds, each
// through one half of every rank's staging (round j: half j % 2), in two streams:
//
//   caller's stream   GATE j      every rank finished reading this rank's half (round j - 2, or the
//                                 call before)
//                     copy        this rank's input -> its half (device to host; a
//                                 reduceScatter's slices for its n - 1 peers)
//                     POSTED j    tell every rank
//   second stream     WAIT j      every rank posted round j
//   (forked from the  copy        each peer's half -> the device scratch (reducing collectives) or
//    caller's after               straight into the output (allGather, broadcast) (host to device)
//    POSTED j)        READ j      tell every rank this one read their halves
//                     COMBINE j   out = rank 0's part op ... op rank n-1's, in rank order
//                                 (allReduce, reduce and reduceScatter fold instead where the bits
//                                 allow: each peer's part copied in and added by a reduce kernel
//                                 in turn, fold())
//   caller's stream   DONE        (after the last round, joined back) the call is done here
//
// so that round j + 1's copy in overlaps round j's copies out (the PCIe link carries both
// directions at once). An allReduce over three or more ranks goes as a reduceScatter into each
// rank's slice of the output, then an allGather of the slices (splitCopyCall): parts of one call
// whose rounds follow on from each other (the allGather's first waits for the reduceScatter's
// last COMBINE). Each rank then copies in 2 (n - 1) / n of the message rather than every peer's
// whole input. The steps in capitals are launches of clb_dev_hostcopy (one block; plain
// loads and stores on the flags: no atomics on host memory) and, for COMBINE,
// clb_dev_hostcopy_combine. Everything is on the caller's stream or joined back to it, so a CUDA
// graph captures it. Ranks that share this GPU and process enqueue each round's caller-stream
// steps, meet, then its second-stream steps: every wait then waits for work enqueued before it,
// whichever hardware queues the streams share.
#include <algorithm>

#include "device/device_context.h"
#include "base/dtype.h"
#include "device/paths.h"

namespace clb::cuda {

namespace {
bool reducing(const CollArgs& a) {
  return a.desc.coll == kAllReduce || a.desc.coll == kReduce || a.desc.coll == kReduceScatter;
}
// The reducing collectives fold the peers' parts in one by one (fold()) where that gives the
// bits of one pass over all parts: two ranks (one step), or types whose accumulation type is
// their own (every step rounds as a register would). 16-bit floats with more ranks combine all
// parts at once.
bool folding(const CollArgs& a, int nranks) {
  return reducing(a) && (nranks <= 2 || (a.type != clbFloat16 && a.type != clbBfloat16));
}
// A reduceScatter's half holds one slice per peer (not the owner's own, which it reads from its
// input): rank p's slice in rank `owner`'s half is at this index.
int slotOf(int p, int owner) { return p < owner ? p : p - 1; }
// Rounds and slices start at multiples of 256 bytes.
size_t granule(const CollArgs& a) { return std::max<size_t>(1, 256 / clbTypeSize(a.type)); }
// Whether this rank's part and its output are the same memory (in place).
bool inPlace(const CollArgs& a, int rank) {
  if (a.desc.coll != kReduceScatter) return a.send == a.recv;
  return a.recv == static_cast<const char*>(a.send) + (size_t)rank * a.count * clbTypeSize(a.type);
}
}  // namespace

int splitCopyCall(const CollArgs& a, int nranks, int rank, size_t granule, CollArgs parts[3]) {
  parts[0] = a;
  const size_t q = nranks >= 3 && a.desc.coll == kAllReduce ? a.count / nranks / granule * granule : 0;
  if (q == 0) return 1;
  const size_t esz = clbTypeSize(a.type), all = (size_t)nranks * q;
  char* out = static_cast<char*>(a.recv);
  char* mine = out + (size_t)rank * q * esz;  // this rank's slice of the output
  parts[0].desc.coll = kReduceScatter;
  parts[0].count = q;
  parts[0].recv = mine;
  parts[1] = a;
  parts[1].desc.coll = kAllGather;
  parts[1].count = q;
  parts[1].send = mine;
  if (a.count == all) return 2;
  parts[2] = a;
  parts[2].count = a.count - all;
  parts[2].send = static_cast<const char*>(a.send) + all * esz;
  parts[2].recv = out + all * esz;
  return 3;
}

size_t copyRoundBytes(size_t fits, size_t walked) {
  return std::min(fits, std::max(kCopyRoundMin, walked / kCopyRounds)) / 256 * 256;
}

size_t HostCopyPath::roundBytes(const CollArgs& a) const {
  // Per round at most a half of the staging: this rank's part of the round (allGather,
  // broadcast, and a fold, which copies the peers' parts in one at a time through a scratch of a
  // half). Combining all parts at once copies them into the scratch together: parts of half / n
  // bytes. A reduceScatter's half holds a slice per peer: slices of half / (n - 1), folded or
  // combined. copyRoundBytes makes them smaller where a call would have too few rounds.
  const size_t half = s_.memory.staging.bytes / 2, walked = a.count * clbTypeSize(a.type);
  const int n = s_.comm->nranks;
  if (a.desc.coll == kReduceScatter) return copyRoundBytes(half / std::max(1, n - 1), walked);  // a slice per peer
  const bool together = reducing(a) && !folding(a, n);
  return copyRoundBytes(together ? half / n : half, walked);
}

size_t HostCopyPath::scratchFor(const CollArgs& a) const {
  if (!reducing(a)) return 0;
  const size_t half = s_.memory.staging.bytes / 2;
  // The fold's accumulator is the output, except in place before this rank's own part joins (it
  // is the input there): ranks 2 and above then fold ranks 0..r-1 in a second half.
  const int r = s_.comm->rank;
  const bool second =
      folding(a, s_.comm->nranks) && inPlace(a, r) && r >= 2 && !(a.desc.coll == kReduce && r != a.root);
  return second ? 2 * half : half;
}

size_t HostCopyPath::scratchForCall(const CollArgs& a) const {
  CollArgs parts[3];
  const int n = splitCopyCall(a, s_.comm->nranks, s_.comm->rank, granule(a), parts);
  size_t most = 0;
  for (int k = 0; k < n; k++) most = std::max(most, scratchFor(parts[k]));
  return most;
}

clbResult_t HostCopyPath::load(const Kernels& k, CUfunction*) {
  CLB_CHECK(k.function("clb_dev_hostcopy", &copyFn_));  // one-block kernels: no occupancy bound
  return k.function("clb_dev_hostcopy_combine", &combineFn_);
}

bool HostCopyPath::takes(const CallShape&) const { return s_.layout.viaHost && !s_.settings.forcedTo("staged"); }

std::string HostCopyPath::note() const {
  return scratchBytes_ ? ", device scratch " + std::to_string(scratchBytes_) + " bytes" : "";
}

clbResult_t HostCopyPath::prepare(const CollArgs& a, CUstream stream) {
  // The staging as the staged path sizes it (two halves; here each rank's halves hold its own
  // input, and readers copy from them).
  CLB_CHECK(s_.memory.ensureStaging(a, stream));
  // The second stream and its events, and the scratch for the reducing collectives (as large as
  // a half; local: no peer sees it): made outside a capture only.
  const size_t scratch = scratchForCall(a);
  if (side_ && scratchBytes_ >= scratch) return clbSuccess;
  CLB_CHECK(s_.memory.refuseInCapture(stream, s_.memory.staging.bytes / 2));
  CtxScope scope(s_.d, s_.ctx);
  if (!side_) {
    CLB_CU(s_.d, cuStreamCreate, &side_, CU_STREAM_NON_BLOCKING);
    CLB_CU(s_.d, cuEventCreate, &fork_, CU_EVENT_DISABLE_TIMING);
    CLB_CU(s_.d, cuEventCreate, &join_, CU_EVENT_DISABLE_TIMING);
  }
  if (scratchBytes_ >= scratch) return clbSuccess;
  if (scratch_) {
    CLB_CU(s_.d, cuStreamSynchronize, side_);  // the calls before have read it (all on side_)
    s_.runtime.free(scratch_, scratchBytes_);
    scratch_ = 0;
    scratchBytes_ = 0;
  }
  CLB_CHECK(s_.runtime.alloc(scratch, "the copies path's scratch", &scratch_));
  scratchBytes_ = scratch;
  return clbSuccess;
}

void HostCopyPath::release() {
  if (!s_.d || (!scratch_ && !side_)) return;
  CtxScope scope(s_.d, s_.ctx);
  if (side_) s_.d->cuStreamSynchronize(side_);
  s_.runtime.free(scratch_, scratchBytes_);
  if (fork_) s_.d->cuEventDestroy(fork_);
  if (join_) s_.d->cuEventDestroy(join_);
  if (side_) s_.d->cuStreamDestroy(side_);
  scratch_ = 0;
  scratchBytes_ = 0;
  side_ = nullptr;
  fork_ = join_ = nullptr;
}

clbResult_t HostCopyPath::run(const CollArgs& a, CUstream stream, const ClbDevCallArgs*) {
  const size_t esz = clbTypeSize(a.type);
  CollArgs parts[3];
  const int nparts = splitCopyCall(a, s_.comm->nranks, s_.comm->rank, granule(a), parts);
  rounds_.clear();
  for (int k = 0; k < nparts; k++) {
    const size_t perRound = roundBytes(parts[k]) / esz;  // elements per rank (a reduceScatter's per slice)
    if (perRound == 0)
      return setError(clbInternalError, "the staging (%zu bytes) holds no element of %zu bytes per rank",
                      s_.memory.staging.bytes, esz);
    for (size_t e0 = 0; e0 < parts[k].count; e0 += perRound)
      rounds_.push_back({k, e0, std::min(perRound, parts[k].count - e0)});
  }
  const size_t rounds = rounds_.size();
  if (rounds >= (1u << CLB_HC_ROUND_BITS))
    return setError(clbInvalidArgument,
                    "%zu elements take %zu rounds of the host-memory staging, more than the %u "
                    "a call can count: split the call",
                    a.count, rounds, (1u << CLB_HC_ROUND_BITS) - 1);
  // What every step passes alike, built once per call (a step sets its phase, round and parts).
  base_ = ClbDevCallArgs{};
  s_.common(&base_, a);
  for (size_t j = 0; j < rounds; j++) {
    const Round rd = rounds_[j];
    const CollArgs& part = parts[rd.part];
    // An allReduce's allGather sends the slice its reduceScatter combined on the second stream.
    const bool gathersReduced = rd.part == 1 && rd.e0 == 0;
    CLB_CHECK(s_.launch.together(a, [&] {
      CtxScope scope(s_.d, s_.ctx);
      if (gathersReduced) {
        CLB_CU(s_.d, cuEventRecord, join_, side_);
        CLB_CU(s_.d, cuStreamWaitEvent, stream, join_, 0);
      }
      return post(part, (int)j, rd.e0, rd.m, stream);
    }));
    CLB_CHECK(s_.launch.together(a, [&] {
      CtxScope scope(s_.d, s_.ctx);
      CLB_CHECK(collect(part, (int)j, rd.e0, rd.m));
      if (j + 1 < rounds) return clbSuccess;
      // The last round: the second stream joins the caller's, which counts the call.
      CLB_CU(s_.d, cuEventRecord, join_, side_);
      CLB_CU(s_.d, cuStreamWaitEvent, stream, join_, 0);
      return step(CLB_HC_DONE, (int)j, 0, nullptr, 1, stream);
    }));
  }
  return clbSuccess;
}

clbResult_t HostCopyPath::step(int phase, int round, size_t m, void* out, unsigned blocks, CUstream stream) {
  ClbDevCallArgs k = base_;
  k.phase = phase;
  k.round = round;
  k.count = m;
  k.out = out;
  for (int p = 0; p < s_.comm->nranks; p++) k.peerIn[p] = parts_[p];
  if (phase == CLB_HC_COMBINE)
    return s_.launch.launcher.launch(s_.d, combineFn_, blocks, kThreads, stream, &k, sizeof k);
  if (phase == CLB_HC_DONE) return s_.launch.launchCounting(s_.d, copyFn_, 1, 32, stream, &k);  // counts the call
  return s_.launch.launcher.launch(s_.d, copyFn_, 1, 32, stream, &k, sizeof k);
}

// Round j on the caller's stream: GATE, this rank's input into its half, POSTED; then the second
// stream forks from it.
clbResult_t HostCopyPath::post(const CollArgs& a, int j, size_t e0, size_t m, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks, r = s_.comm->rank;
  CLB_CHECK(step(CLB_HC_GATE, j, m, nullptr, 1, stream));
  const char* in = static_cast<const char*>(a.send);
  char* mine =
      s_.memory.staging.hostPeers[r] + (j % 2) * (s_.memory.staging.bytes / 2);  // pinned: the copy engines' way
  switch (a.desc.coll) {
    case kReduceScatter:  // slice p of this round, for rank p, at slotOf(p, r) * m elements
      for (int p = 0; p < n; p++)
        if (p != r)
          CLB_CU(s_.d, cuMemcpyDtoHAsync, mine + slotOf(p, r) * m * esz, (CUdeviceptr)(in + (p * a.count + e0) * esz),
                 m * esz, stream);
      break;
    case kBroadcast:
      if (r == a.root) CLB_CU(s_.d, cuMemcpyDtoHAsync, mine, (CUdeviceptr)(in + e0 * esz), m * esz, stream);
      break;
    default: CLB_CU(s_.d, cuMemcpyDtoHAsync, mine, (CUdeviceptr)(in + e0 * esz), m * esz, stream);
  }
  CLB_CHECK(step(CLB_HC_POSTED, j, m, nullptr, 1, stream));
  CLB_CU(s_.d, cuEventRecord, fork_, stream);
  CLB_CU(s_.d, cuStreamWaitEvent, side_, fork_, 0);
  return clbSuccess;
}

// Round j on the second stream: WAIT, the peers' halves out, READ, COMBINE (reducing collectives).
clbResult_t HostCopyPath::collect(const CollArgs& a, int j, size_t e0, size_t m) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks, r = s_.comm->rank;
  const size_t bytes = m * esz, halfAt = (j % 2) * (s_.memory.staging.bytes / 2);
  CLB_CHECK(step(CLB_HC_WAIT, j, m, nullptr, 1, side_));
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  auto staging = [&](int p) -> const char* { return s_.memory.staging.hostPeers[p] + halfAt; };
  auto copy = [&](const void* dst, const char* fromHost) -> clbResult_t {  // host to device
    CLB_CU(s_.d, cuMemcpyHtoDAsync, (CUdeviceptr)dst, fromHost, bytes, side_);
    return clbSuccess;
  };
  auto copyOnDevice = [&](const void* dst, const char* src) -> clbResult_t {
    CLB_CU(s_.d, cuMemcpyDtoDAsync, (CUdeviceptr)dst, (CUdeviceptr)src, bytes, side_);
    return clbSuccess;
  };
  void* combineInto = nullptr;
  switch (a.desc.coll) {
    case kAllReduce:
    case kReduce:
    case kReduceScatter: {
      if (a.desc.coll == kReduce && r != a.root) break;  // only the root combines
      if (folding(a, n)) return fold(a, j, e0, m);
      const bool rs = a.desc.coll == kReduceScatter;
      const size_t mineAt = rs ? (r * a.count + e0) * esz : e0 * esz;
      for (int p = 0; p < n; p++) {
        if (p == r) {
          parts_[p] = in + mineAt;
          continue;
        }
        char* at = reinterpret_cast<char*>(scratch_) + slotOf(p, r) * bytes;
        CLB_CHECK(copy(at, staging(p) + (rs ? slotOf(r, p) * bytes : 0)));
        parts_[p] = at;
      }
      combineInto = out + e0 * esz;
      break;
    }
    case kAllGather:
      for (int p = 0; p < n; p++) {
        char* dst = out + (p * a.count + e0) * esz;
        if (p != r)
          CLB_CHECK(copy(dst, staging(p)));
        else if (dst != in + e0 * esz)
          CLB_CHECK(copyOnDevice(dst, in + e0 * esz));
      }
      break;
    case kBroadcast:
      if (r != a.root)
        CLB_CHECK(copy(out + e0 * esz, staging(a.root)));
      else if (out != in)
        CLB_CHECK(copyOnDevice(out + e0 * esz, in + e0 * esz));
      break;
  }
  CLB_CHECK(step(CLB_HC_READ, j, m, nullptr, 1, side_));
  if (combineInto) CLB_CHECK(step(CLB_HC_COMBINE, j, m, combineInto, s_.blocksFor(bytes * n), side_));
  return clbSuccess;
}

// allReduce, reduceScatter (this rank's slice) and reduce (at its root), round j after WAIT:
// out = part 0 op part 1 ... op part n-1,
// folded left to right, each peer's part copied from its half into the scratch when its turn
// comes (the first lands where the fold starts), each step a reduce kernel of two inputs; READ
// once the last peer's part is copied in. The accumulator is the output, or, in place before this
// rank's own part joins (the output is its input then), the scratch's second half. The order is
// every rank's alike, and the bits are those of one pass over all parts (folding() says when).
clbResult_t HostCopyPath::fold(const CollArgs& a, int j, size_t e0, size_t m) {
  const size_t esz = clbTypeSize(a.type), bytes = m * esz, half = s_.memory.staging.bytes / 2;
  const int n = s_.comm->nranks, r = s_.comm->rank;
  const bool rs = a.desc.coll == kReduceScatter;  // this rank's slice of its input; peers' slots for it
  const char* mine = static_cast<const char*>(a.send) + ((rs ? r * a.count : 0) + e0) * esz;
  char* out = static_cast<char*>(a.recv) + e0 * esz;
  char* landing = reinterpret_cast<char*>(scratch_);
  char* before = out != mine ? out : r >= 2 ? landing + half : nullptr;  // the fold until part r joins
  const int lastPeer = r == n - 1 ? n - 2 : n - 1;
  const char* acc = nullptr;
  for (int p = 0; p < n; p++) {
    const char* part = mine;
    if (p != r) {
      // Into the fold's start if this is the first part and it may go there, else the landing.
      char* into = !acc && before ? before : landing;
      CLB_CU(s_.d, cuMemcpyHtoDAsync, (CUdeviceptr)into,
             s_.memory.staging.hostPeers[p] + (j % 2) * half + (rs ? slotOf(r, p) * bytes : 0), bytes, side_);
      if (p == lastPeer) CLB_CHECK(step(CLB_HC_READ, j, m, nullptr, 1, side_));
      part = into;
    }
    if (!acc) {
      acc = part;
      continue;
    }
    char* dst = p < r ? before : out;
    ClbReduceArgs k{};
    k.dst = dst;
    k.srcs[0] = acc;
    k.srcs[1] = part;
    k.k = 2;
    k.op = a.op;
    k.nranks = n;
    k.divide = a.op == clbAvg && p == n - 1;
    k.n = m;
    CLB_CHECK(s_.kernels->reduce(k, a.type, side_));
    acc = dst;
  }
  if (lastPeer < 0) {  // one rank: its input is the result
    CLB_CHECK(step(CLB_HC_READ, j, m, nullptr, 1, side_));
    if (out != mine) CLB_CU(s_.d, cuMemcpyDtoDAsync, (CUdeviceptr)out, (CUdeviceptr)mine, bytes, side_);
  }
  return clbSuccess;
}

}  // namespace clb::cuda
