// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The direct path (DirectPath, paths.h): inside a node, every rank's kernel reads the peers'
// buffers in place, their addresses published through the flag blocks (every rank in this
// process) or given by the host (every rank's buffers registered: Registrations::agreeCall).
// allReduce goes one-shot, or two-shot for larger messages (the kernel: clb_dev_direct).
#include "device/device_context.h"
#include "base/dtype.h"
#include "device/paths.h"

namespace clb::cuda {

constexpr size_t kTwoShotMin = 256u << 10;  // allReduce, more than 2 ranks: two-shot from here

clbResult_t DirectPath::load(const Kernels& k, CUfunction* occupancy) {
  CLB_CHECK(k.function("clb_dev_direct", &fn_));
  *occupancy = fn_;
  return clbSuccess;
}

bool DirectPath::takes(const CallShape& c) const {
  if (c.registered) return true;  // the agreement gave every rank's buffers
  if (!s_.layout.allInProcess || s_.layout.viaHost) return false;
  return s_.settings.forcedTo(name()) || (s_.settings.automatic() && c.msg >= s_.settings.directMin);
}

clbResult_t DirectPath::run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) {
  ClbDevCallArgs k{};
  if (given)
    k = *given;
  else
    s_.common(&k, a);
  return s_.launch.together(a, [&] {
    CtxScope scope(s_.d, s_.ctx);
    return launch(a, stream, k);
  });
}

clbResult_t DirectPath::launch(const CollArgs& a, CUstream stream, ClbDevCallArgs k) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks;
  size_t bytes = a.count * esz;  // what this rank writes
  switch (a.desc.coll) {
    case kAllReduce:
      // Two-shot moves 2(n-1)/n of the message per rank instead of n-1, for one more barrier. The
      // kernel also takes it when any rank works in place (one-shot would read a buffer its owner
      // is overwriting); every rank decides alike, from the count and what all ranks published.
      k.twoShot = n > 2 && bytes >= kTwoShotMin;
      break;
    case kAllGather: bytes *= n; break;
  }
  const unsigned blocks = s_.blocksFor(bytes);
  CLB_CHECK(s_.launch.gate(s_.d, k, blocks, stream));
  return s_.launch.launchCounting(s_.d, fn_, blocks, kThreads, stream, &k);
}

}  // namespace clb::cuda
