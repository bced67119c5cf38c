// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The direct algorithm: an shm algorithm (it works on the shm transport's control blocks and
// scratch), so it lives beside that transport rather than in algo/.
#include <cstring>
#include <vector>

#include "algo/algorithms.h"
#include "base/dtype.h"
#include "transport/shm/shm.h"

namespace clb {

size_t ShmDirect::scratchBytes(const CollArgs& a) const {
  const size_t esz = clbTypeSize(a.type);
  switch (a.desc.coll) {
    case kAllReduce: return a.count * esz;
    case kAllGather: return a.count * esz;
    case kReduceScatter: return a.count * esz * comm_->nranks;
    case kBroadcast: return comm_->rank == a.root ? a.count * esz : 0;
  }
  return 0;
}

clbResult_t ShmDirect::run(const CollArgs& a) {
  ShmWorld& w = *world_;
  const int n = comm_->nranks, r = comm_->rank;
  const size_t esz = clbTypeSize(a.type);
  const size_t mine = scratchBytes(a);
  CtlBlock* me = w.self();

  CLB_CHECK(w.ensure(0, 0, mine));
  // Peers must be done reading what this rank posted last time before it is overwritten.
  for (int p = 0; p < n && w.lastDirectSeq; p++) {
    if (p == r) continue;
    CtlBlock* c = w.ctl(p);
    const uint64_t last = w.lastDirectSeq;
    CLB_CHECK(waitUntil(
        comm_, [&] { return c->directDone.v.load(std::memory_order_acquire) >= last; }, &c->directDone.v, &c->waiters,
        "a peer to finish the previous direct collective", p));
  }
  char* scratch = w.ownBase() ? w.ownBase() + me->seg.scratchOffset : nullptr;
  if (mine) memcpy(scratch, a.send, mine);
  me->directDesc = a.desc;
  storeAndWake(&me->directPosted.v, a.desc.seq, &me->waiters);
  w.lastDirectSeq = a.desc.seq;

  // Where every rank's input is (this rank reads its own from the user's buffer).
  // Reused across calls: no allocation on the small-message path.
  std::vector<const void*>& src = w.srcScratch;
  src.assign(n, nullptr);
  // Waits for peer p's call, checks it is the same call, and finds its input (if it posted one).
  auto fetch = [&](int p) -> clbResult_t {
    if (p == r) {
      src[p] = a.send;
      return clbSuccess;
    }
    CtlBlock* c = w.ctl(p);
    CLB_CHECK(waitUntil(
        comm_, [&] { return c->directPosted.v.load(std::memory_order_acquire) >= a.desc.seq; }, &c->directPosted.v,
        &c->waiters, "a peer's input for a direct collective", p));
    if (!(c->directDesc == a.desc))
      return setError(clbRemoteError,
                      "rank %d called %s but rank %d called %s: every rank must make the same "
                      "collective calls in the same order with the same count, type, op and root",
                      r, describe(a.desc).c_str(), p, describe(c->directDesc).c_str());
    if (a.desc.coll == kBroadcast && p != a.root) return clbSuccess;  // posted no data
    char* base = nullptr;
    CLB_CHECK(w.peerBase(p, &base));
    src[p] = base + c->seg.scratchOffset;
    return clbSuccess;
  };

  char* out = static_cast<char*>(a.recv);
  switch (a.desc.coll) {
    case kAllReduce:
      for (int p = 0; p < n; p++) CLB_CHECK(fetch(p));
      reduceMany(out, src.data(), n, a.count, a.type, a.op, n);
      break;
    case kReduceScatter: {
      for (int p = 0; p < n; p++) CLB_CHECK(fetch(p));
      for (int p = 0; p < n; p++) src[p] = static_cast<const char*>(src[p]) + (size_t)r * a.count * esz;
      reduceMany(out, src.data(), n, a.count, a.type, a.op, n);
      break;
    }
    case kAllGather:
      for (int p = 0; p < n; p++) {
        CLB_CHECK(fetch(p));
        char* dst = out + (size_t)p * a.count * esz;
        if (dst != src[p]) memcpy(dst, src[p], a.count * esz);
      }
      break;
    case kBroadcast:
      // Every rank checks every peer's call: a rank that wrongly believes it is the root would
      // otherwise return without noticing.
      for (int p = 0; p < n; p++) CLB_CHECK(fetch(p));
      if (out != src[a.root]) memcpy(out, src[a.root], a.count * esz);
      break;
    default: return setError(clbInternalError, "direct: unknown collective %u", a.desc.coll);
  }
  // Peers that post nothing still announce the call, so mismatches are seen; then say done.
  storeAndWake(&me->directDone.v, a.desc.seq, &me->waiters);
  return clbSuccess;
}

}  // namespace clb
