// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The LL path (LLPath, paths.h): small messages inside a node. Each rank pushes its data, 8 bytes
// with the call's number in every 16-byte line, into its slot of every rank's LL buffer (two
// halves, by call parity); a reader polls its own memory, so a call needs no flag round trip
// (the kernel: clb_dev_ll, src/kernels/collective.cu). The buffer is set up whole at the first
// call, so that every size up to the LL limit can be captured in a CUDA graph after one call.
#include <algorithm>

#include "device/device_context.h"
#include "base/dtype.h"
#include "device/paths.h"

namespace clb::cuda {

size_t llBytes(int n, size_t perRank) { return 2 * (size_t)n * (((perRank + 7) / 8 * 16 + 4095) / 4096 * 4096); }

clbResult_t LLPath::load(const Kernels& k, CUfunction* occupancy) {
  CLB_CHECK(k.function("clb_dev_ll", &fn_));
  *occupancy = fn_;
  return clbSuccess;
}

clbResult_t LLPath::ahead(CUstream stream) {
  // The LL buffer is set up whole at the first call of any size, so that after one call every
  // size up to llMax can be captured in a CUDA graph.
  if (!s_.memory.llBuf.mine && s_.settings.llMax > 0 && (s_.settings.automatic() || s_.settings.forcedTo(name())))
    CLB_CHECK(s_.memory.ensure(&s_.memory.llBuf, llBytes(s_.comm->nranks, s_.settings.llMax), stream, "LL"));
  return clbSuccess;
}

clbResult_t LLPath::prepare(const CollArgs& a, CUstream stream) {
  const size_t perDest = a.count * clbTypeSize(a.type);
  return s_.memory.ensure(&s_.memory.llBuf, std::max(s_.memory.llBuf.bytes, llBytes(s_.comm->nranks, perDest)), stream,
                          "LL");
}

clbResult_t LLPath::run(const CollArgs& a, CUstream stream, const ClbDevCallArgs*) {
  return s_.launch.together(a, [&] {
    CtxScope scope(s_.d, s_.ctx);
    return launch(a, stream);
  });
}

clbResult_t LLPath::launch(const CollArgs& a, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = s_.comm->nranks;
  ClbDevCallArgs k{};
  s_.common(&k, a);
  for (int p = 0; p < n; p++) k.staging[p] = s_.memory.llBuf.peers[p];
  k.half = s_.memory.llBuf.bytes / 2;
  k.slot = k.half / n;
  // A thread per data line, and a warp of n more that read the ranks' call lines meanwhile (the
  // kernel's checkersAt).
  const size_t threads = ((a.count * esz + 7) / 8 + 31) / 32 * 32 + n;
  const unsigned blocks =
      (unsigned)std::min<size_t>(s_.layout.maxBlocks, std::max<size_t>(1, (threads + kThreads - 1) / kThreads));
  CLB_CHECK(s_.launch.gate(s_.d, k, blocks, stream));
  return s_.launch.launchCounting(s_.d, fn_, blocks, kThreads, stream, &k);
}

}  // namespace clb::cuda
