// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include <cstring>

#include "algo/algorithms.h"
#include "base/dtype.h"
#include "transport/transport.h"

namespace clb {
namespace {

// Walks one collective's messages in order; the receiver's expectation mirrors the sender's.
class RingStepper {
 public:
  RingStepper(RingChannel& ch, RingMemory& mem, const CollArgs& a) : ch_(ch), mem_(mem), a_(a) {}

  // Sends `bytes` produced by fill(dst) (which returns a clbResult_t).
  template <class Fill>
  clbResult_t send(size_t bytes, Fill fill) {
    void* q = nullptr;
    CLB_CHECK(ch_.acquireSend(bytes, &q));
    CLB_CHECK(fill(q));
    CLB_CHECK(mem_.settle());  // the transport reads q once posted
    CLB_CHECK(ch_.postSend(MsgTag{a_.desc, sent_++, bytes}));
    return clbSuccess;
  }
  // Sends `bytes` of the caller's buffer at src: straight from it where the channel can (device
  // buffers over GPUDirect RDMA, no copy and no wait for one), else copied into the staging.
  clbResult_t sendFrom(size_t bytes, const void* src) {
    CLB_CHECK(mem_.settle());  // queued work may still write src
    bool sent = false;
    CLB_CHECK(ch_.sendFrom(src, MsgTag{a_.desc, sent_, bytes}, &sent));
    if (sent) {
      sent_++;
      return clbSuccess;
    }
    return send(bytes, [&](void* q) { return mem_.copy(q, src, bytes); });
  }
  // Receives the next message (expected size `bytes`) and hands it to use(src).
  template <class Use>
  clbResult_t recv(size_t bytes, Use use) {
    const void* p = nullptr;
    CLB_CHECK(ch_.waitRecv(MsgTag{a_.desc, recvd_++, bytes}, &p));
    clbResult_t rc = mem_.arrived();
    if (rc == clbSuccess) rc = use(p);
    // The slot is the sender's again after the release: whatever reads it must be done, also
    // when use() failed after queuing work.
    clbResult_t settled = mem_.settle();
    if (rc == clbSuccess) rc = settled;
    clbResult_t rel = ch_.releaseRecv();
    return rc != clbSuccess ? rc : rel;
  }
  RingMemory& mem() { return mem_; }

 private:
  RingChannel& ch_;
  RingMemory& mem_;
  const CollArgs& a_;
  uint64_t sent_ = 0, recvd_ = 0;
};

// Host buffers: plain loads and stores, done when the call returns.
class HostMemory : public RingMemory {
 public:
  clbResult_t copy(void* dst, const void* src, size_t bytes) override {
    memcpy(dst, src, bytes);
    return clbSuccess;
  }
  clbResult_t reduce(void* dst, const void* recvd, const void* mine, size_t n, clbDataType_t type, clbRedOp_t op,
                     int divideBy) override {
    if (divideBy)
      reducePairFinal(dst, recvd, mine, n, type, op, divideBy);
    else
      reducePair(dst, recvd, mine, n, type, op);
    return clbSuccess;
  }
};

struct Layout {
  size_t count;  // elements over all segments
  int n;
  size_t J;
  size_t esz;
  // Element range of slice j of segment i.
  size_t start(int i, size_t j) const {
    size_t se = segElems(count, n, i);
    return segStart(count, n, i) + j * (se / J) + (j < se % J ? j : se % J);
  }
  size_t len(int i, size_t j) const {
    size_t se = segElems(count, n, i);
    return se / J + (j < se % J ? 1 : 0);
  }
};

// Reduce-scatter phase for slice j; leaves segment r reduced in `out` (at its place in the layout,
// or at outBase for reduceScatter where out is only one segment).
clbResult_t reduceScatterSlice(CommContext* comm, RingStepper& st, const CollArgs& a, const Layout& L, size_t j,
                               const char* in, char* out, bool outIsSegmentOnly) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esz = L.esz;
  int seg0 = mod(r - 1, n);
  CLB_CHECK(st.sendFrom(L.len(seg0, j) * esz, in + L.start(seg0, j) * esz));
  for (int s = 0; s < n - 1; s++) {
    int seg = mod(r - 2 - s, n);
    size_t len = L.len(seg, j), off = L.start(seg, j);
    if (s < n - 2) {
      CLB_CHECK(st.recv(len * esz, [&](const void* p) {
        return st.send(len * esz, [&](void* q) { return st.mem().reduce(q, p, in + off * esz, len, a.type, a.op, 0); });
      }));
    } else {
      char* dst = outIsSegmentOnly ? out + (off - L.start(seg, 0)) * esz : out + off * esz;
      CLB_CHECK(st.recv(len * esz,
                        [&](const void* p) { return st.mem().reduce(dst, p, in + off * esz, len, a.type, a.op, n); }));
    }
  }
  return clbSuccess;
}

// All-gather phase for slice j: segment r of `out` is complete; fill all the others.
clbResult_t allGatherSlice(CommContext* comm, RingStepper& st, const Layout& L, size_t j, const char* own, char* out) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esz = L.esz;
  CLB_CHECK(st.sendFrom(L.len(r, j) * esz, own));
  for (int s = 0; s < n - 1; s++) {
    int seg = mod(r - 1 - s, n);
    size_t len = L.len(seg, j), off = L.start(seg, j);
    CLB_CHECK(st.recv(len * esz, [&](const void* p) {
      CLB_CHECK(st.mem().copy(out + off * esz, p, len * esz));
      if (s < n - 2) return st.send(len * esz, [&](void* q) { return st.mem().copy(q, p, len * esz); });
      return clbSuccess;
    }));
  }
  return clbSuccess;
}

}  // namespace

clbResult_t ringRun(CommContext* comm, const CollArgs& a) {
  HostMemory host;
  return ringRunOn(comm, comm->carrier->ring(), host, a);
}

clbResult_t ringRunOn(CommContext* comm, RingChannel& ch, RingMemory& mem, const CollArgs& a) {
  const int n = comm->nranks, r = comm->rank;
  const size_t esz = clbTypeSize(a.type);
  const size_t chunk = (size_t)comm->cfg.chunkBytes;
  RingStepper st(ch, mem, a);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);

  switch (a.desc.coll) {
    case kAllReduce: {
      Layout L{a.count, n, sliceCount(segElems(a.count, n, 0), esz, chunk), esz};
      CLB_CHECK(ch.prepare(L.len(0, 0) * esz));
      for (size_t j = 0; j < L.J; j++) {
        CLB_CHECK(reduceScatterSlice(comm, st, a, L, j, in, out, false));
        CLB_CHECK(allGatherSlice(comm, st, L, j, out + L.start(r, j) * esz, out));
      }
      break;
    }
    case kReduceScatter: {
      Layout L{a.count * n, n, sliceCount(a.count, esz, chunk), esz};
      CLB_CHECK(ch.prepare(L.len(0, 0) * esz));
      for (size_t j = 0; j < L.J; j++) CLB_CHECK(reduceScatterSlice(comm, st, a, L, j, in, out, true));
      break;
    }
    case kAllGather: {
      Layout L{a.count * n, n, sliceCount(a.count, esz, chunk), esz};
      CLB_CHECK(ch.prepare(L.len(0, 0) * esz));
      char* mine = out + L.start(r, 0) * esz;
      if (mine != in) CLB_CHECK(mem.copy(mine, in, a.count * esz));
      for (size_t j = 0; j < L.J; j++) CLB_CHECK(allGatherSlice(comm, st, L, j, out + L.start(r, j) * esz, out));
      break;
    }
    case kBroadcast: {
      Layout L{a.count, 1, sliceCount(a.count, esz, chunk), esz};
      CLB_CHECK(ch.prepare(L.len(0, 0) * esz));
      const int pos = mod(r - a.root, n);
      // The ring's last rank also tells the root that it is in the same call: a message with no
      // data, sent first (one hop, beside the root's sends), whose tag the root checks after its
      // sends. So every rank receives, and so checks, a message of its previous rank's call: a
      // rank that wrongly believes it is the root (and would only send) learns so.
      if (n > 1 && pos == n - 1) CLB_CHECK(st.send(0, [](void*) { return clbSuccess; }));
      if (pos == 0 && out != in) CLB_CHECK(mem.copy(out, in, a.count * esz));
      for (size_t j = 0; j < L.J; j++) {
        size_t len = L.len(0, j), off = L.start(0, j);
        if (pos == 0) {
          CLB_CHECK(st.sendFrom(len * esz, in + off * esz));
        } else {
          CLB_CHECK(st.recv(len * esz, [&](const void* p) {
            CLB_CHECK(mem.copy(out + off * esz, p, len * esz));
            if (pos < n - 1) return st.send(len * esz, [&](void* q) { return mem.copy(q, p, len * esz); });
            return clbSuccess;
          }));
        }
      }
      if (n > 1 && pos == 0) CLB_CHECK(st.recv(0, [](const void*) { return clbSuccess; }));
      break;
    }
    default: return setError(clbInternalError, "ring: unknown collective %u", a.desc.coll);
  }
  CLB_CHECK(mem.settle());
  return ch.finish();
}

}  // namespace clb
