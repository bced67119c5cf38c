// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The staged path (StagedPath, paths.h): inside a node when peers' buffers cannot be read in
// place (ranks in several processes without registrations, or GPUs without peer access). Each
// rank writes its data into its slot of every rank's staging half (two halves, by call parity)
// and combines what the others wrote into its own (the kernel: clb_dev_staged). Messages larger
// than a slot go in rounds. The staging is sized to the first need (capped at kMaxHalf per half),
// and grows when a call needs more (a collective step every rank takes at the same call).
#include <algorithm>

#include "device/device_context.h"
#include "base/dtype.h"
#include "device/paths.h"

namespace clb::cuda {

size_t StagedPath::slotBytes() const { return s_.memory.staging.bytes / 2 / s_.comm->nranks / 16 * 16; }

clbResult_t StagedPath::load(const Kernels& k, CUfunction* occupancy) {
  CLB_CHECK(k.function("clb_dev_staged", &fn_));
  *occupancy = fn_;
  return clbSuccess;
}

clbResult_t StagedPath::prepare(const CollArgs& a, CUstream stream) { return s_.memory.ensureStaging(a, stream); }

clbResult_t StagedPath::run(const CollArgs& a, CUstream stream, const ClbDevCallArgs*) {
  const size_t esz = clbTypeSize(a.type);
  // Staged rounds meet one by one: two rounds of one rank in a row could otherwise share a
  // hardware queue with a peer's, the second waiting for the first, which waits for the peer's
  // first, queued behind them.
  const size_t perRound = slotBytes() / esz;
  for (size_t e0 = 0; e0 < a.count; e0 += perRound)
    CLB_CHECK(s_.launch.together(a, [&] {
      CtxScope scope(s_.d, s_.ctx);
      return launch(a, e0, std::min(perRound, a.count - e0), stream);
    }));
  return clbSuccess;
}

clbResult_t StagedPath::launch(const CollArgs& a, size_t e0, size_t m, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks, r = s_.comm->rank;
  ClbDevCallArgs k{};
  s_.common(&k, a);  // in, out and count are this round's, below
  k.half = s_.memory.staging.bytes / 2;
  k.slot = slotBytes();
  for (int p = 0; p < n; p++) k.staging[p] = s_.memory.staging.peers[p];
  k.inSlices = 1;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  switch (a.desc.coll) {
    case kAllReduce:
    case kReduce:  // the inputs to the root's staging only, and only the root writes (kernel_abi.h)
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.mode = 0;
      k.out = a.desc.coll == kReduce && r != a.root ? nullptr : out + e0 * esz;
      k.count = m;
      break;
    case kReduceScatter:  // rank p's slot gets the slice rank p reduces
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.inStride = a.count * esz;
      k.inSlices = n;
      k.mode = 0;
      k.out = out + e0 * esz;
      k.count = m;
      break;
    case kAllGather:
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.mode = 1;
      k.out = out + e0 * esz;
      k.outStride = a.count * esz;
      k.count = m * esz;
      break;
    case kBroadcast:
      k.in = r == a.root ? in + e0 * esz : nullptr;
      k.inBytes = r == a.root ? m * esz : 0;
      k.mode = 2;
      k.out = out + e0 * esz;
      k.count = m * esz;
      break;
    default:  // Device::run refuses what has no kernel before a path is chosen
      return checkDeviceCollective(a.desc.coll);
  }
  const size_t bytes = std::max<size_t>(k.inBytes * n, m * esz * (k.mode == 1 ? n : 1));
  const unsigned blocks = s_.blocksFor(bytes);
  // Only the first round: once every rank passed it, the rounds after it wait only for each other.
  if (e0 == 0) CLB_CHECK(s_.launch.gate(s_.d, k, blocks, stream));
  return s_.launch.launchCounting(s_.d, fn_, blocks, kThreads, stream, &k);
}

}  // namespace clb::cuda
