// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The point-to-point calls (clbSend, clbRecv) and those made of them (clbAllToAll, clbAllToAllv,
// clbGather, clbScatter, clbReduce): their checks, the operations each becomes (algo/p2p.h), and
// groups. Outside a group a call is a batch of its own; inside one it is recorded, and the
// outermost clbGroupEnd runs each communicator's sends and receives as one batch, then its
// collectives in call order. Several communicators in one group run side by side (each on a thread
// of its own, the first on the caller's), so that one thread can drive the ranks of one clique.
#include "core/p2p.h"

#include <algorithm>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "algo/p2p.h"
#include "base/dtype.h"
#include "transport/transport.h"
#include "device/runtime.h"

using namespace clb;

namespace {

// One recorded call of a group: point-to-point operations, or a collective to run at the end.
struct GroupItem {
  clbComm* comm = nullptr;
  bool collective = false;
  PeerOp op;  // !collective
  uint32_t coll = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  clbDataType_t type = clbUint8;
  clbRedOp_t redop = clbSum;  // what it computes with (clbSum for a PreMulSum: pm)
  int root = 0;
  void* stream = nullptr;
  PreMul pm;  // its PreMulSum, taken when it was recorded (the operation may be destroyed since)
};

struct GroupState {
  int depth = 0;
  std::vector<GroupItem> items;
  clbResult_t refused = clbSuccess;  // the first call of the group that was refused
  std::string refusal;
};
thread_local GroupState tGroup;

clbResult_t checkType(int type) {
  if (!validType(type)) return setError(clbInvalidArgument, "unknown data type %d: use a clbDataType_t value", type);
  return clbSuccess;
}

clbResult_t checkRank(clbComm* c, const char* what, int r) {
  if (r < 0 || r >= c->nranks)
    return setError(clbInvalidArgument, "%s=%d is out of range for %d ranks: use 0..%d", what, r, c->nranks,
                    c->nranks - 1);
  return clbSuccess;
}

// bytes = count x elements x the type's size, refused where it overflows the address space.
clbResult_t checkBytes(size_t count, size_t elements, clbDataType_t type, size_t* bytes) {
  const size_t esz = clbTypeSize(type);
  if (elements && count > SIZE_MAX / esz / elements)
    return setError(clbInvalidArgument, "count=%zu elements of %zu bytes (x %zu) overflows the address space", count,
                    esz, elements);
  *bytes = count * esz * elements;
  return clbSuccess;
}

// cuda::bufferMemory (device/runtime.h), the refusal naming the call.
clbResult_t memoryOf(clbComm* c, const char* call, const void* a, const void* b, void* stream, bool* onDevice) {
  int ordinal = -1;
  if (clbResult_t rc = cuda::bufferMemory(a, b, stream, onDevice, &ordinal))
    return setError(rc, "rank %d: %s: %s", c->rank, call, lastError().c_str());
  return clbSuccess;
}

PeerOp peerOp(PeerOp::Kind kind, int peer, const void* src, void* dst, size_t count, clbDataType_t type, uint32_t call,
              int root) {
  PeerOp o;
  o.kind = kind;
  o.peer = peer;
  o.src = src;
  o.dst = dst;
  o.count = count;
  o.type = type;
  o.call = call;
  o.root = root;
  return o;
}

// A rooted call's message without data (PeerOp::announce) against the way its data flows: the
// root of a gather or reduce tells each other rank which call it is in, each other rank of a
// scatter tells the root. So every rank of such a call receives a message tagged with a peer's
// view of it (count, type, op, root, the call's number) and checks it: a rank that wrongly
// believes it is the root, or that another rank is, fails at once instead of returning success
// with a block that is not its root's, or waiting out the timeout.
PeerOp announcement(PeerOp::Kind kind, int peer, size_t count, clbDataType_t type, uint32_t call, int root) {
  PeerOp o = peerOp(kind, peer, nullptr, nullptr, count, type, call, root);
  o.announce = true;
  return o;
}

// The inputs a batch stages before anything moves: a reduce with a PreMulSum operation scales the
// rank's input (the batch then runs it as a sum), and an all-to-all in place copies its input
// aside (its receives overwrite the buffer its sends read). The root's copy scales straight into
// its recv (the sum's start, element-wise: in place is safe), so it copies nothing; a send's input
// goes into the communicator's scratch, a region of its own per send (a group may hold several
// calls), host or device memory as its buffers are. Device buffers: kernels or copies on the
// batch's stream ahead of its launch; *staging then says so (begun, and the stream: NULL is the
// legacy default stream), and cuda::endStaging must follow the batch's launch.
struct DeviceStaging {
  bool begun = false;
  void* stream = nullptr;
};
clbResult_t stageInputs(clbComm* c, std::vector<PeerOp>& ops, DeviceStaging* staging) {
  *staging = DeviceStaging();
  auto region = [](const PeerOp& o) { return (o.count * clbTypeSize(o.type) + 255) & ~(size_t)255; };
  auto staged = [](const PeerOp& o) { return (o.scale.on || o.copyAside) && o.count; };
  size_t hostBytes = 0, deviceBytes = 0;
  const PeerOp* firstOnDevice = nullptr;
  for (const PeerOp& o : ops) {
    if (!staged(o)) continue;
    if (o.onDevice && !firstOnDevice) firstOnDevice = &o;
    // The copies and scalings go on one stream, ordered after the work on it that produced their
    // inputs: a batch whose staged device calls name several streams is refused before anything
    // is queued (the GPU path refuses any mix; through host memory one would read stale input).
    if (o.onDevice && o.stream != firstOnDevice->stream)
      return setError(clbInvalidUsage,
                      "rank %d: the device calls of one group on one communicator that stage their input (a "
                      "PreMulSum reduce, an all-to-all in place) must use one stream: pass the same stream to each",
                      c->rank);
    if (o.kind == PeerOp::kSend) (o.onDevice ? deviceBytes : hostBytes) += region(o);
  }
  char* host = nullptr;
  if (hostBytes) CLB_CHECK(hostScratch(c, hostBytes, reinterpret_cast<void**>(&host)));
  char* device = nullptr;
  if (firstOnDevice) {
    // A group's device operations on one communicator take one stream (PeerDevice refuses others).
    CLB_CHECK(cuda::beginStaging(c, firstOnDevice->src, deviceBytes, firstOnDevice->stream, &device));
    staging->begun = true;
    staging->stream = firstOnDevice->stream;
  }
  for (PeerOp& o : ops) {
    if (!staged(o)) continue;
    void* dst = o.dst;  // the root's copy: into its recv
    if (o.kind == PeerOp::kSend) {
      char*& next = o.onDevice ? device : host;
      dst = next;
      next += region(o);
    }
    if (o.onDevice) {
      CLB_CHECK(cuda::stageInput(c, dst, o, staging->stream));
    } else if (o.scale.on) {
      uint64_t scalar = 0;
      CLB_CHECK(hostScalar(c, o.scale, &scalar));
      scaleInto(dst, o.src, o.count, o.type, &scalar);
    } else {
      memcpy(dst, o.src, o.count * clbTypeSize(o.type));
    }
    o.src = dst;
  }
  return clbSuccess;
}

// Runs one communicator's batch under its call (the refusal names `call` if another thread is in one).
clbResult_t runBatch(clbComm* c, uint32_t call, std::vector<PeerOp>& ops) {
  CallScope scope(c, call);
  CLB_CHECK(scope.result());
  CLB_CHECK(c->checkUsable());
  bool device = false;
  for (const PeerOp& o : ops) device = device || o.onDevice;
  DeviceStaging staged;  // the batch's staged device inputs, if any
  clbResult_t scaled = stageInputs(c, ops, &staged);
  // What read the device scratch is queued once the batch is (or nothing more will be).
  struct EndStaging {
    clbComm* c;
    const DeviceStaging& s;
    ~EndStaging() {
      if (s.begun) cuda::endStaging(c, s.stream);
    }
  } endStaging{c, staged};
  CLB_CHECK(scaled);
  const clbResult_t rc = device
                             ? cuda::runPeerOps(c, ops, [c](std::vector<PeerOp>& host) { return runPeerOps(c, host); })
                             : runPeerOps(c, ops);
  c->lastAlgo = clbAlgoNone;  // no collective algorithm ran (clbCommLastAlgorithm)
  if (rc != clbSuccess) {
    appendBreadcrumb(__FILE__, __LINE__);
    // Refusals before anything moved leave the communicator usable; midway, the peers' state is unknown.
    if (rc != clbInvalidArgument && rc != clbUnsupported && rc != clbInvalidUsage) c->markFailed(rc);
  }
  return rc;
}

// A call's operations (on device memory or not, with the call's stream): recorded inside a group,
// else run now.
clbResult_t issue(clbComm* c, uint32_t call, std::vector<PeerOp> ops, bool onDevice, void* stream) {
  // An operation of 0 elements moves nothing and waits for no one (its peer's matching one, of 0
  // elements too, goes the same way), whichever path the call's other operations take: none
  // reaches the device paths (the host path skips them too). A reduce's chain (`after`) has all or
  // none of them. A call left with none still runs its (empty) batch outside a group, which
  // says that no collective algorithm ran (clbCommLastAlgorithm).
  // A call that every rank makes is numbered alike on every rank, also when it moves nothing here.
  if (call != kSendRecv) {
    const uint32_t epoch = ++c->peerCollectives;
    for (PeerOp& o : ops) o.epoch = epoch;
  }
  ops.erase(std::remove_if(ops.begin(), ops.end(), [](const PeerOp& o) { return o.count == 0; }), ops.end());
  if (ops.empty() && tGroup.depth > 0) return clbSuccess;
  for (PeerOp& o : ops) {
    o.onDevice = onDevice;
    o.stream = stream;
  }
  if (tGroup.depth > 0) {
    // An operation's `after` counts within its call: within the group it moves with the call.
    std::vector<GroupItem>& items = tGroup.items;
    int base = 0;
    for (const GroupItem& it : items)
      if (it.comm == c && !it.collective) base++;
    for (PeerOp& o : ops) {
      if (o.after >= 0) o.after += base;
      GroupItem it;
      it.comm = c;
      it.op = o;
      items.push_back(it);
    }
    return clbSuccess;
  }
  return runBatch(c, call, ops);
}

// A refusal inside a group is also the group's: its end runs nothing and says why.
clbResult_t refuse(clbResult_t rc) {
  if (rc != clbSuccess && tGroup.depth > 0 && tGroup.refused == clbSuccess) {
    tGroup.refused = rc;
    tGroup.refusal = lastError();
  }
  return rc;
}
// A call's refusal: of its arguments, it fails the communicator and tells the peers
// (refuseArguments); inside a group it is the group's too.
clbResult_t refuse(clbComm* c, clbResult_t rc, const char* call, uint32_t code) {
  return refuse(refuseArguments(c, rc, call, code, false));
}

clbResult_t begin(clbComm* c) {
  clearError();
  CLB_CHECK(checkComm(c));
  return c->checkUsable();
}

clbResult_t sendRecv(bool send, void* buf, size_t count, clbDataType_t type, int peer, clbComm* c, void* stream) {
  CLB_CHECK(begin(c));
  const char* call = send ? "clbSend" : "clbRecv";
  CLB_CHECK(checkType(type));
  CLB_CHECK(checkRank(c, "peer", peer));
  size_t bytes = 0;
  CLB_CHECK(checkBytes(count, 1, type, &bytes));
  if (count && !buf) return setError(clbInvalidArgument, "%s: the buffer is NULL with count=%zu", call, count);
  CLB_CHECK(checkExtent(call, "the buffer", buf, bytes));
  bool onDevice = false;
  CLB_CHECK(memoryOf(c, call, buf, nullptr, stream, &onDevice));
  std::vector<PeerOp> ops{peerOp(send ? PeerOp::kSend : PeerOp::kRecv, peer, buf, buf, count, type, kSendRecv, -1)};
  if (peer == c->rank && tGroup.depth == 0 && count)
    return setError(clbInvalidUsage,
                    "rank %d: %s to/from itself outside a group: the send to this rank itself is copied to its "
                    "matching receive, so put both in one group (clbGroupStart / clbGroupEnd)",
                    c->rank, call);
  return issue(c, kSendRecv, std::move(ops), onDevice, stream);
}

clbResult_t allToAllv(clbComm* c, uint32_t call, const void* send, const size_t* sendCounts, const size_t* sendDispls,
                      void* recv, const size_t* recvCounts, const size_t* recvDispls, clbDataType_t type,
                      void* stream) {
  const char* name = call == kAllToAll ? "clbAllToAll" : "clbAllToAllv";
  const int n = c->nranks, me = c->rank;
  const size_t esz = clbTypeSize(type);
  // Extents, for the NULL and overlap checks (in elements).
  size_t sendEnd = 0, recvEnd = 0;
  for (int p = 0; p < n; p++) {
    size_t b = 0;
    CLB_CHECK(checkBytes(sendCounts[p], 1, type, &b));
    CLB_CHECK(checkBytes(recvCounts[p], 1, type, &b));
    if (sendDispls[p] > SIZE_MAX / esz - sendCounts[p] || recvDispls[p] > SIZE_MAX / esz - recvCounts[p])
      return setError(clbInvalidArgument, "%s: the displacement of peer %d plus its count overflows the address space",
                      name, p);
    if (sendCounts[p]) sendEnd = std::max(sendEnd, sendDispls[p] + sendCounts[p]);
    if (recvCounts[p]) recvEnd = std::max(recvEnd, recvDispls[p] + recvCounts[p]);
  }
  if (sendEnd && !send) return setError(clbInvalidArgument, "%s: send is NULL but some send count is not 0", name);
  if (recvEnd && !recv) return setError(clbInvalidArgument, "%s: recv is NULL but some recv count is not 0", name);
  // Every block's end is an address: a displacement so large that the buffer's address plus it
  // wraps around would read or write below the buffer. The largest end bounds the others; where
  // it wraps, the message names the block.
  for (const bool isSend : {true, false}) {
    const void* buf = isSend ? send : recv;
    if (!wrapsAround(buf, (isSend ? sendEnd : recvEnd) * esz)) continue;
    for (int p = 0; p < n; p++) {
      const size_t displ = isSend ? sendDispls[p] : recvDispls[p], cnt = isSend ? sendCounts[p] : recvCounts[p];
      if (!cnt || !wrapsAround(buf, (displ + cnt) * esz)) continue;
      char what[160];
      if (call == kAllToAll)
        snprintf(what, sizeof what, "the %s block of peer %d (at %d x count=%zu elements of %zu bytes) in %s",
                 isSend ? "send" : "recv", p, p, cnt, esz, isSend ? "send" : "recv");
      else
        snprintf(what, sizeof what, "the %s block of peer %d (%s[%d]=%zu, %s[%d]=%zu elements of %zu bytes) in %s",
                 isSend ? "send" : "recv", p, isSend ? "sdispls" : "rdispls", p, displ,
                 isSend ? "sendcounts" : "recvcounts", p, cnt, esz, isSend ? "send" : "recv");
      return checkExtent(name, what, buf, (displ + cnt) * esz);
    }
  }
  // In place: one buffer and one layout (the counts and displacements of what is sent equal
  // those of what is received, as clbAllToAll's always are); every send reads a copy of the input
  // made before anything moves (stageInputs). Any other overlap would send what is already
  // overwritten: refused rather than computed into garbage.
  bool inPlace = send == recv && sendEnd;
  for (int p = 0; p < n && inPlace; p++)
    inPlace = sendCounts[p] == recvCounts[p] && (sendCounts[p] == 0 || sendDispls[p] == recvDispls[p]);
  if (!inPlace)
    CLB_CHECK(checkOverlap(name, send, sendEnd * esz, recv, recvEnd * esz,
                           send == recv ? "the same counts and displacements for sending and receiving" : nullptr));
  bool onDevice = false;
  CLB_CHECK(memoryOf(c, name, sendEnd ? send : nullptr, recvEnd ? recv : nullptr, stream, &onDevice));
  std::vector<PeerOp> ops;
  // This rank's own part first (a copy), then the peers from the next rank on, so that the ranks
  // do not all start with rank 0. A block of 0 elements has no address (issue drops it): its
  // displacement is not applied to the buffer, which may be NULL, or end before the displacement
  // (the pointer arithmetic would be undefined behaviour).
  auto block = [esz](const void* buf, size_t displ, size_t count) {
    return count ? static_cast<const char*>(buf) + displ * esz : nullptr;
  };
  for (int s = 0; s < n; s++) {
    const int to = (me + s) % n, from = (me - s + n) % n;
    ops.push_back(peerOp(PeerOp::kSend, to, block(send, sendDispls[to], sendCounts[to]), nullptr, sendCounts[to], type,
                         call, -1));
    ops.back().copyAside = inPlace;
    ops.push_back(peerOp(PeerOp::kRecv, from, nullptr,
                         const_cast<char*>(block(recv, recvDispls[from], recvCounts[from])), recvCounts[from], type,
                         call, -1));
  }
  return issue(c, call, std::move(ops), onDevice, stream);
}

// Gather (every rank's block to the root) and scatter (the root's blocks to every rank) are
// mirror images: the root's buffer of nranks blocks (gather: recv, scatter: send) and every
// rank's own block (gather: send, scatter: recv).
clbResult_t gatherOrScatter(uint32_t call, const void* sendbuff, void* recvbuff, size_t count, clbDataType_t type,
                            int root, clbComm* c, void* stream) {
  const bool gather = call == kGather;
  const char* name = gather ? "clbGather" : "clbScatter";
  CLB_CHECK(begin(c));
  CLB_CHECK(checkType(type));
  CLB_CHECK(checkRank(c, "root", root));
  size_t bytes = 0, all = 0;
  CLB_CHECK(checkBytes(count, 1, type, &bytes));
  CLB_CHECK(checkBytes(count, (size_t)c->nranks, type, &all));
  const int me = c->rank, n = c->nranks;
  const bool isRoot = me == root;
  char* whole = static_cast<char*>(const_cast<void*>(gather ? recvbuff : sendbuff));
  void* part = gather ? const_cast<void*>(sendbuff) : recvbuff;
  if (count && (!part || (isRoot && !whole)))
    return setError(clbInvalidArgument, "%s: %s is NULL with count=%zu", name,
                    !part ? (gather ? "send" : "recv") : (gather ? "recv (at the root)" : "send (at the root)"), count);
  CLB_CHECK(checkExtent(name, gather ? "send" : "recv", part, bytes));
  if (isRoot)
    CLB_CHECK(
        checkExtent(name, gather ? "recv (nranks x count elements)" : "send (nranks x count elements)", whole, all));
  // In place at the root: its own block already sits at root x count elements into the whole.
  const bool inPlace = isRoot && count && part == whole + (size_t)me * bytes;
  if (isRoot && !inPlace)
    CLB_CHECK(gather ? checkOverlap(name, part, bytes, whole, all, "send = recv + root x count elements")
                     : checkOverlap(name, whole, all, part, bytes, "recv = send + root x count elements"));
  bool onDevice = false;
  CLB_CHECK(memoryOf(c, name, isRoot || gather ? sendbuff : nullptr, isRoot || !gather ? recvbuff : nullptr, stream,
                     &onDevice));
  std::vector<PeerOp> ops;
  if (!isRoot) {
    ops.push_back(gather ? peerOp(PeerOp::kSend, root, part, nullptr, count, type, call, root)
                         : peerOp(PeerOp::kRecv, root, nullptr, part, count, type, call, root));
    ops.push_back(announcement(gather ? PeerOp::kRecv : PeerOp::kSend, root, count, type, call, root));
  } else {
    char* own = whole + (size_t)me * bytes;
    ops.push_back(gather ? peerOp(PeerOp::kCopy, me, part, own, count, type, call, root)
                         : peerOp(PeerOp::kCopy, me, own, part, count, type, call, root));
    for (int s = 1; s < n; s++) {
      const int p = (me + s) % n;
      char* block = whole + (size_t)p * bytes;
      ops.push_back(gather ? peerOp(PeerOp::kRecv, p, nullptr, block, count, type, call, root)
                           : peerOp(PeerOp::kSend, p, block, nullptr, count, type, call, root));
      ops.push_back(announcement(gather ? PeerOp::kSend : PeerOp::kRecv, p, count, type, call, root));
    }
  }
  return issue(c, call, std::move(ops), onDevice, stream);
}

}  // namespace

bool clb::inGroup() { return tGroup.depth > 0; }

clbResult_t clb::refuseInGroup(clbResult_t rc) { return refuse(rc); }

clbResult_t clb::recordCollective(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count,
                                  clbDataType_t type, clbRedOp_t op, int root, void* stream, const PreMul& pm) {
  GroupItem it;
  it.pm = pm;
  it.comm = c;
  it.collective = true;
  it.coll = coll;
  it.send = send;
  it.recv = recv;
  it.count = count;
  it.type = type;
  it.redop = op;
  it.root = root;
  it.stream = stream;
  tGroup.items.push_back(it);
  return clbSuccess;
}

namespace {

clbResult_t runCollective(const GroupItem& it) {
  clbComm* c = it.comm;
  switch (it.coll) {
    case kAllReduce:
      if (it.root == kBarrierRoot) return clbBarrier(c, it.stream);
      return runRecordedCollective(c, kAllReduce, it.send, it.recv, it.count, it.type, it.redop, 0, it.stream, it.pm);
    case kAllGather: return clbAllGather(it.send, it.recv, it.count, it.type, c, it.stream);
    case kReduceScatter:
      return runRecordedCollective(c, kReduceScatter, it.send, it.recv, it.count, it.type, it.redop, 0, it.stream,
                                   it.pm);
    case kBroadcast: return clbBroadcast(it.send, it.recv, it.count, it.type, it.root, c, it.stream);
    case kReduce:  // on device memory of one host (clbReduce)
      return runRecordedCollective(c, kReduce, it.send, it.recv, it.count, it.type, it.redop, it.root, it.stream,
                                   it.pm);
  }
  return setError(clbInternalError, "group: unknown collective %u", it.coll);
}

// One communicator's part of a group: its sends and receives as one batch, then its collectives.
clbResult_t runCommItems(clbComm* c, const std::vector<const GroupItem*>& items) {
  std::vector<PeerOp> ops;
  for (const GroupItem* it : items)
    if (!it->collective) ops.push_back(it->op);
  if (!ops.empty()) CLB_CHECK(runBatch(c, kCallPeers, ops));
  for (const GroupItem* it : items)
    if (it->collective) CLB_CHECK(runCollective(*it));
  return clbSuccess;
}

}  // namespace

extern "C" {

clbResult_t clbGroupStart() {
  clearError();
  if (tGroup.depth == 0) {
    tGroup.items.clear();
    tGroup.refused = clbSuccess;
    tGroup.refusal.clear();
  }
  tGroup.depth++;
  return clbSuccess;
}

namespace {

// A group's end that runs nothing (`rc`, saying `why`): each communicator of the group with a call
// to another rank fails, once, and its peers are told (tellRefusal), for they wait at their ends
// for what runs nothing here.
clbResult_t refuseGroup(const std::vector<GroupItem>& items, clbResult_t rc, const std::string& why) {
  std::vector<clbComm*> told;
  for (const GroupItem& it : items) {
    if (std::find(told.begin(), told.end(), it.comm) != told.end()) continue;
    if (checkComm(it.comm) != clbSuccess) continue;  // destroyed since: nothing of it is read
    if (!it.collective && it.op.peer == it.comm->rank) continue;
    told.push_back(it.comm);
    setError(rc, "%s", why.c_str());
    tellRefusal(it.comm, rc, "group", kCallPeers, false);
  }
  return setError(rc, "%s", why.c_str());
}

}  // namespace

clbResult_t clbGroupRefuse(const char* reason) {
  const std::string why = refusalReason(reason, 400);
  clearError();
  if (tGroup.depth == 0)
    return setError(clbInvalidUsage, "clbGroupRefuse outside a group: there is no group on this thread to refuse");
  return refuse(setError(clbInvalidArgument, "%s", why.c_str()));
}

clbResult_t clbGroupEnd() {
  clearError();
  if (tGroup.depth == 0)
    return setError(clbInvalidUsage,
                    "clbGroupEnd without a clbGroupStart on this thread (a group belongs to the "
                    "thread that started it)");
  if (--tGroup.depth > 0) return clbSuccess;  // nested: the outermost end runs the group
  std::vector<GroupItem> items;
  items.swap(tGroup.items);
  if (tGroup.refused != clbSuccess) {
    const clbResult_t rc = tGroup.refused;
    tGroup.refused = clbSuccess;
    // The refused call's communicator failed already where its arguments were refused; the
    // group's others fail too where a peer waits at its end for what runs nothing here.
    return refuseGroup(items, rc, "nothing in this group ran, because one of its calls was refused: " + tGroup.refusal);
  }
  // Each communicator's items, communicators in the order they first appear.
  std::vector<clbComm*> comms;
  std::vector<std::vector<const GroupItem*>> perComm;
  for (const GroupItem& it : items) {
    size_t k = 0;
    while (k < comms.size() && comms[k] != it.comm) k++;
    if (k == comms.size()) {
      comms.push_back(it.comm);
      perComm.emplace_back();
    }
    perComm[k].push_back(&it);
  }
  if (comms.empty()) return clbSuccess;
  // A communicator destroyed since its calls were recorded: refused, nothing of it read.
  for (clbComm* c : comms)
    if (clbResult_t rc = checkComm(c)) return refuseGroup(items, rc, "nothing in this group ran: " + lastError());
  // Every communicator's refusals before anything runs on any (a wait on one for a peer whose
  // batch was refused on another would last until the timeout).
  for (size_t k = 0; k < comms.size(); k++) {
    std::vector<PeerOp> ops;
    for (const GroupItem* it : perComm[k])
      if (!it->collective) ops.push_back(it->op);
    if (clbResult_t rc = checkPeerOps(comms[k], ops))
      return refuseGroup(items, rc, "nothing in this group ran: " + lastError());
  }
  if (comms.size() == 1) return runCommItems(comms[0], perComm[0]);
  // Several communicators: side by side, or the ranks of one clique driven from this thread would
  // wait for each other. The first error (by communicator order) is this call's.
  std::vector<clbResult_t> rcs(comms.size(), clbSuccess);
  std::vector<std::string> errors(comms.size());
  std::vector<std::thread> threads;
  for (size_t k = 1; k < comms.size(); k++)
    threads.emplace_back([&, k] {
      rcs[k] = runCommItems(comms[k], perComm[k]);
      if (rcs[k] != clbSuccess) errors[k] = lastError();
    });
  rcs[0] = runCommItems(comms[0], perComm[0]);
  if (rcs[0] != clbSuccess) errors[0] = lastError();
  for (std::thread& t : threads) t.join();
  // The cause rather than its echo: a failure that is not a wait ended by another's failure.
  auto echo = [](clbResult_t rc) { return rc == clbTimeout || rc == clbRemoteError || rc == clbAborted; };
  for (int pass = 0; pass < 2; pass++)
    for (size_t k = 0; k < comms.size(); k++)
      if (rcs[k] != clbSuccess && (pass == 1 || !echo(rcs[k]))) return setError(rcs[k], "%s", errors[k].c_str());
  return clbSuccess;
}

clbResult_t clbSend(const void* sendbuff, size_t count, clbDataType_t datatype, int peer, clbComm_t comm,
                    void* stream) {
  return refuse(comm, sendRecv(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream), "clbSend",
                kSendRecv);
}

clbResult_t clbRecv(void* recvbuff, size_t count, clbDataType_t datatype, int peer, clbComm_t comm, void* stream) {
  return refuse(comm, sendRecv(false, recvbuff, count, datatype, peer, comm, stream), "clbRecv", kSendRecv);
}

clbResult_t clbAllToAll(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, clbComm_t comm,
                        void* stream) {
  clbResult_t rc = begin(comm);
  if (rc == clbSuccess) rc = checkType(datatype);
  if (rc == clbSuccess) {
    size_t bytes = 0;
    rc = checkBytes(count, (size_t)comm->nranks, datatype, &bytes);
  }
  if (rc != clbSuccess) return refuse(comm, rc, "clbAllToAll", kAllToAll);
  std::vector<size_t> counts(comm->nranks, count), displs(comm->nranks);
  for (int p = 0; p < comm->nranks; p++) displs[p] = (size_t)p * count;
  return refuse(comm,
                allToAllv(comm, kAllToAll, sendbuff, counts.data(), displs.data(), recvbuff, counts.data(),
                          displs.data(), datatype, stream),
                "clbAllToAll", kAllToAll);
}

clbResult_t clbAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                         const size_t* recvcounts, const size_t* rdispls, clbDataType_t datatype, clbComm_t comm,
                         void* stream) {
  clbResult_t rc = begin(comm);
  if (rc == clbSuccess) rc = checkType(datatype);
  if (rc == clbSuccess && (!sendcounts || !sdispls || !recvcounts || !rdispls))
    rc = setError(clbInvalidArgument, "clbAllToAllv: %s is NULL: pass an array of nranks (%d) entries",
                  !sendcounts   ? "sendcounts"
                  : !sdispls    ? "sdispls"
                  : !recvcounts ? "recvcounts"
                                : "rdispls",
                  comm->nranks);
  if (rc != clbSuccess) return refuse(comm, rc, "clbAllToAllv", kAllToAllv);
  return refuse(
      comm, allToAllv(comm, kAllToAllv, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, stream),
      "clbAllToAllv", kAllToAllv);
}

clbResult_t clbGather(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, int root,
                      clbComm_t comm, void* stream) {
  return refuse(comm, gatherOrScatter(kGather, sendbuff, recvbuff, count, datatype, root, comm, stream), "clbGather",
                kGather);
}

clbResult_t clbScatter(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, int root,
                       clbComm_t comm, void* stream) {
  return refuse(comm, gatherOrScatter(kScatter, sendbuff, recvbuff, count, datatype, root, comm, stream), "clbScatter",
                kScatter);
}

clbResult_t clbReduce(const void* sendbuff, void* recvbuff, size_t count, clbDataType_t datatype, clbRedOp_t op,
                      int root, clbComm_t comm, void* stream) {
  const clbRedOp_t given = op;
  clbResult_t rc = begin(comm);
  if (rc == clbSuccess) rc = checkType(datatype);
  // A PreMulSum's scalar (or its pointer) is the call's from here on (core/premul.h).
  PreMul pm;
  if (rc == clbSuccess) rc = resolveOp(comm, op, datatype, "clbReduce", &pm);
  if (rc == clbSuccess && !pm.on && !validOp(op))
    rc = setError(clbInvalidArgument, "unknown reduction op %d: use a clbRedOp_t value", op);
  op = arithmeticOp(op, pm);
  if (rc == clbSuccess) rc = checkRank(comm, "root", root);
  size_t bytes = 0;
  if (rc == clbSuccess) rc = checkBytes(count, 1, datatype, &bytes);
  if (rc != clbSuccess) return refuse(comm, rc, "clbReduce", kReduce);
  const int me = comm->rank, n = comm->nranks;
  const bool isRoot = me == root;
  if (count && (!sendbuff || (isRoot && !recvbuff)))
    return refuse(comm,
                  setError(clbInvalidArgument, "clbReduce: %s is NULL with count=%zu",
                           !sendbuff ? "send" : "recv (at the root)", count),
                  "clbReduce", kReduce);
  if ((rc = checkExtent("clbReduce", "send", sendbuff, bytes))) return refuse(comm, rc, "clbReduce", kReduce);
  if (isRoot && (rc = checkExtent("clbReduce", "recv", recvbuff, bytes))) return refuse(comm, rc, "clbReduce", kReduce);
  if (isRoot && sendbuff != recvbuff)
    if ((rc = checkOverlap("clbReduce", sendbuff, bytes, recvbuff, bytes, "send = recv")))
      return refuse(comm, rc, "clbReduce", kReduce);
  bool onDevice = false;
  if ((rc = memoryOf(comm, "clbReduce", sendbuff, isRoot ? recvbuff : nullptr, stream, &onDevice)))
    return refuse(comm, rc, "clbReduce", kReduce);
  // Device memory, ranks on one host: a device collective (fast, capturable, whichever process
  // each rank is in), every rank deciding alike (their buffers are all device memory, and the
  // transport is the communicator's). Elsewhere a root's chain of receives (below).
  if (onDevice && count && (n == 1 || comm->carrier->sharesMemory()))
    return reduceOnDevice(comm, sendbuff, isRoot ? recvbuff : nullptr, count, datatype, given, root, stream);
  std::vector<PeerOp> ops;
  if (!isRoot) {
    PeerOp s = peerOp(PeerOp::kSend, root, sendbuff, nullptr, count, datatype, kReduce, root);
    s.op = op;
    s.scale = pm;  // a PreMulSum scales what it sends (runBatch)
    ops.push_back(s);
    ops.push_back(announcement(PeerOp::kRecv, root, count, datatype, kReduce, root));
    ops.back().op = op;
  } else {
    // The root's own data first, then every peer's added in rank order (each after the one before),
    // so that the result is the same whoever is faster; an average divides at the last step.
    ops.push_back(peerOp(PeerOp::kCopy, me, sendbuff, recvbuff, count, datatype, kReduce, root));
    ops.back().scale = pm;  // a PreMulSum scales its own data into recv (runBatch)
    int last = -1;
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      PeerOp r = peerOp(PeerOp::kRecvReduce, p, nullptr, recvbuff, count, datatype, kReduce, root);
      r.op = op;
      r.after = last;
      last = (int)ops.size();
      ops.push_back(r);
    }
    if (last >= 0) ops[last].divideBy = n;
    for (int p = 0; p < n; p++)
      if (p != me) {
        ops.push_back(announcement(PeerOp::kSend, p, count, datatype, kReduce, root));
        ops.back().op = op;
      }
  }
  for (PeerOp& o : ops) o.preMulSum = pm.on;
  return refuse(comm, issue(comm, kReduce, std::move(ops), onDevice, stream), "clbReduce", kReduce);
}

}  // extern "C"
