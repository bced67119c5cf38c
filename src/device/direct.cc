// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The direct path (DirectPath, paths.h): inside a node, every rank's kernel reads the peers'
// buffers in place, their addresses published through the flag blocks (every rank in this
// process) or given by the host (every rank's buffers registered: Registrations::agreeCall).
// allReduce goes one-shot, or two-shot for larger messages (the kernel: clb_dev_direct).
// Windowed calls (CallShape::windowed: ranks in several processes, small messages, registrations
// held) are decided on the GPU instead, with no word over the host, so that eager calls cost no
// more than a launch: each rank's kernel posts where its send buffer lies (postWindow), and every
// rank reads the peers' windows in place where all lie in one (ncclCommWindowRegister's symmetric
// memory), else each rank's copy in its own LL buffer.
#include "device/device_context.h"
#include "base/dtype.h"
#include "device/device.h"
#include "device/paths.h"

namespace clb::cuda {

constexpr size_t kTwoShotMin = 256u << 10;  // allReduce, more than 2 ranks: two-shot from here

clbResult_t DirectPath::load(const Kernels& k, CUfunction* occupancy) {
  CLB_CHECK(k.function("clb_dev_direct", &fn_));
  *occupancy = fn_;
  return clbSuccess;
}

bool DirectPath::takes(const CallShape& c) const {
  if (c.registered || c.windowed) return true;  // the agreement gave every rank's buffers, or windows
  if (!s_.layout.allInProcess || s_.layout.viaHost) return false;
  return s_.settings.forcedTo(name()) || (s_.settings.automatic() && c.msg >= s_.settings.directMin);
}

clbResult_t DirectPath::ahead(CUstream stream) {
  // A windowed call's copies go into the LL buffer, set up whole (as LLPath::ahead does under auto)
  // once the communicator holds registrations, so that every windowed call can be captured after
  // one call, and no later call grows it under a graph that replays into it.
  if (s_.memory.llBuf.mine || !s_.settings.forcedTo(name()) || s_.settings.llMax == 0 || s_.layout.allInProcess ||
      s_.layout.viaHost || s_.comm->device->registrations().empty())
    return clbSuccess;
  return s_.memory.ensure(&s_.memory.llBuf, llBytes(s_.comm->nranks, s_.settings.llMax), stream, "LL");
}

clbResult_t DirectPath::run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) {
  ClbDevCallArgs k{};
  if (given)
    k = *given;
  else
    s_.common(&k, a);
  // Between processes without the agreement's buffers, only windowed calls come here (takes()).
  if (!k.given && !s_.layout.allInProcess) CLB_CHECK(postWindow(a, stream, &k));
  return s_.launch.together(a, [&] {
    CtxScope scope(s_.d, s_.ctx);
    return launch(a, stream, k);
  });
}

clbResult_t DirectPath::postWindow(const CollArgs& a, CUstream stream, ClbDevCallArgs* k) {
  const int n = s_.comm->nranks;
  for (int p = 0; p < n; p++) k->staging[p] = s_.memory.llBuf.peers[p];
  k->half = s_.memory.llBuf.bytes / 2;
  k->window = 1;
  // Named in the call line: a rank that took another path for this call fails it (registrations
  // that differ between ranks), instead of meeting this kernel on the same flags.
  const unsigned root = (unsigned)(k->sig >> 14) & 0xFF;
  k->sig = (k->sig & ~(0xFFull << 14)) |
           ((unsigned long long)(root == CLB_DEV_SIG_BARRIER ? CLB_DEV_SIG_WINDOW_BARRIER : CLB_DEV_SIG_WINDOW) << 14);
  k->inBytes = a.count * clbTypeSize(a.type) * (a.desc.coll == kReduceScatter ? n : 1);
  // An allReduce in place posts a copy: one-shot would read a buffer its owner overwrites.
  if (a.desc.coll == kAllReduce && a.send == a.recv) return clbSuccess;
  Registrations& regs = s_.comm->device->registrations();
  uint64_t id = 0, off = 0;
  if (!regs.locate(a.send, k->inBytes, &id, &off)) return clbSuccess;
  for (int p = 0; p < n; p++)
    if (!(k->peerIn[p] = regs.peerRange(id, p)))
      return setError(clbInternalError, "rank %d: registration %llu of rank %d is not mapped here", s_.comm->rank,
                      (unsigned long long)id, p);
  k->windowId = id + 1;
  k->windowOff = off;
  // A captured call reads the peers' ranges through this registration's mappings at every replay.
  if (s_.launch.capturing) CLB_CHECK(regs.holdForGraph(stream, id));
  return clbSuccess;
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
      k.twoShot = n > 2 && bytes >= kTwoShotMin && !k.window;
      break;
    case kAllGather: bytes *= n; break;
  }
  const unsigned blocks = s_.blocksFor(bytes);
  CLB_CHECK(s_.launch.gate(s_.d, k, blocks, stream));
  return s_.launch.launchCounting(s_.d, fn_, blocks, kThreads, stream, &k);
}

}  // namespace clb::cuda
