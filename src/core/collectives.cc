// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The four collectives and the barrier: argument checks, the algorithm choice, and error bookkeeping
// (inside a group they are recorded instead: core/p2p.h).
#include <cstring>

#include "algo/algorithms.h"
#include "core/comm.h"
#include "base/dtype.h"
#include "core/p2p.h"
#include "core/premul.h"
#include "transport/transport.h"
#include "device/runtime.h"

using namespace clb;

namespace {

clbResult_t validate(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count, int type, int op, int root,
                     void* stream) {
  CLB_CHECK(c->checkUsable());
  if (!validType(type)) return setError(clbInvalidArgument, "unknown data type %d: use a clbDataType_t value", type);
  if ((coll == kAllReduce || coll == kReduceScatter || coll == kReduce) && !validOp(op))
    return setError(clbInvalidArgument, "unknown reduction op %d: use a clbRedOp_t value", op);
  if ((coll == kBroadcast || coll == kReduce) && (root < 0 || root >= c->nranks))
    return setError(clbInvalidArgument, "root=%d is out of range for %d ranks: use 0..%d", root, c->nranks,
                    c->nranks - 1);
  size_t esz = clbTypeSize((clbDataType_t)type);
  size_t mult = (coll == kAllGather || coll == kReduceScatter) ? (size_t)c->nranks : 1;
  if (count > SIZE_MAX / esz / mult)
    return setError(clbInvalidArgument, "count=%zu elements of %zu bytes overflows the address space", count, esz);
  // A broadcast's other ranks read no send buffer, a reduce's write no recv buffer.
  const bool needSend = !(coll == kBroadcast && c->rank != root), needRecv = !(coll == kReduce && c->rank != root);
  if (count > 0 && ((needRecv && !recv) || (needSend && !send)))
    return setError(clbInvalidArgument, "%s buffer is NULL with count=%zu", needRecv && !recv ? "recv" : "send", count);
  // Each buffer's end is an address (no wrap past the last one), and buffers that overlap without
  // being the in-place layout would be read where they are written: refused rather than computed
  // into garbage (host and device buffers alike).
  if (count > 0) {
    const size_t sendBytes = count * esz * (coll == kReduceScatter ? c->nranks : 1);
    const size_t recvBytes = count * esz * (coll == kAllGather ? c->nranks : 1);
    const char* name = collectiveName(coll);
    if (needSend) CLB_CHECK(checkExtent(name, "send", send, sendBytes));
    if (needRecv) CLB_CHECK(checkExtent(name, "recv", recv, recvBytes));
    if (needSend && needRecv) {
      const uintptr_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
      const uintptr_t slice = (uintptr_t)c->rank * count * esz;  // inside the extent checked above
      const bool inPlace = coll == kAllGather ? s == r + slice : coll == kReduceScatter ? r == s + slice : s == r;
      if (!inPlace)
        CLB_CHECK(checkOverlap(name, send, sendBytes, recv, recvBytes,
                               coll == kAllGather       ? "send = recv + rank x count elements"
                               : coll == kReduceScatter ? "recv = send + rank x recvcount elements"
                                                        : "send = recv"));
    }
  }
  return clbSuccess;
}

// A collective's buffers: the send buffer only where the call reads one (not on a broadcast's
// other ranks), the recv buffer only where it writes one (not on a reduce's other ranks).
clbResult_t memoryKind(clbComm* c, uint32_t coll, const void* send, void* recv, int root, void* stream, bool* onDevice,
                       int* ordinal) {
  const bool hasSend = !(coll == kBroadcast && c->rank != root) && send;
  const bool hasRecv = !(coll == kReduce && c->rank != root) && recv;
  return cuda::bufferMemory(hasSend ? send : nullptr, hasRecv ? recv : nullptr, stream, onDevice, ordinal);
}

}  // namespace

clbResult_t clb::checkExtent(const char* call, const char* what, const void* p, size_t bytes) {
  if (wrapsAround(p, bytes))
    return setError(clbInvalidArgument,
                    "%s: %s [%p, +%zu bytes) runs past the end of the address space (the address plus the size "
                    "wraps around, to memory below the buffer): a count or displacement is wrong; pass counts and "
                    "displacements that stay inside the memory the buffer holds",
                    call, what, p, bytes);
  return clbSuccess;
}

clbResult_t clb::checkOverlap(const char* call, const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                              const char* inPlace) {
  if (!sendBytes || !recvBytes) return clbSuccess;
  CLB_CHECK(checkExtent(call, "send", send, sendBytes));
  CLB_CHECK(checkExtent(call, "recv", recv, recvBytes));
  const uintptr_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (s < r + recvBytes && r < s + sendBytes)
    return setError(clbInvalidArgument,
                    "%s: send [%p, +%zu bytes) and recv [%p, +%zu bytes) overlap%s%s%s: pass separate buffers%s", call,
                    send, sendBytes, recv, recvBytes, inPlace ? ", and not as in place (" : "", inPlace ? inPlace : "",
                    inPlace ? ")" : "", inPlace ? ", or the in-place layout" : "");
  return clbSuccess;
}

namespace {

// `op` is what the call computes with (clbSum for a PreMulSum, whose descriptor says kOpPreMulSum:
// a rank in a plain sum and one in a PreMulSum make different calls).
CollArgs describeCall(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                      clbRedOp_t op, int root, bool preMul = false) {
  CollArgs a{};
  // Only the call that holds c->inCall writes seq (see comm.h).
  a.desc.seq = c->seq.load(std::memory_order_relaxed) + 1;
  c->seq.store(a.desc.seq, std::memory_order_relaxed);
  a.desc.coll = coll;
  a.desc.dtype = type;
  a.desc.op = (coll == kAllReduce || coll == kReduceScatter || coll == kReduce) ? (preMul ? kOpPreMulSum : op) : 0;
  // The root only a broadcast and a reduce have; kBarrierRoot marks clbBarrier's all-reduce (its
  // tags differ).
  a.desc.root = coll == kBroadcast || coll == kReduce || root == kBarrierRoot ? root : -1;
  a.desc.count = count;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.type = type;
  a.op = op;
  a.root = root;
  return a;
}

// Host buffers, nranks > 1: the algorithm (forced by config, else the transport's direct algorithm
// for small messages where it has one), run, and the failure bookkeeping. `recordAlgo` false: an
// internal exchange, which leaves the user's lastAlgorithm alone.
clbResult_t runHost(clbComm* c, CollArgs& a, bool recordAlgo) {
  const uint32_t coll = a.desc.coll;
  const size_t count = a.count, esz = clbTypeSize(a.type);
  // Init refuses algorithm direct on a transport without one.
  DirectAlgorithm* direct = c->carrier->direct();
  int algo = c->cfg.algorithm;
  if (algo == clbAlgoAuto) {
    size_t msgBytes = coll == kAllReduce || coll == kBroadcast ? count * esz : count * esz * c->nranks;
    algo = (direct && msgBytes <= (size_t)c->cfg.directMaxBytes &&
            (int64_t)direct->scratchBytes(a) <= c->cfg.stagingCapBytes / 2)
               ? clbAlgoDirect
               : clbAlgoRing;
  }
  a.desc.algo = algo;
  c->carrier->beginCollective(a.desc);
  CLB_DEBUG("rank %d: %s with algorithm %s", c->rank, describe(a.desc).c_str(), clbAlgorithmName(algo));
  clbResult_t rc = algo == clbAlgoDirect ? direct->run(a) : ringRun(c, a);
  if (recordAlgo) c->lastAlgo = algo;
  if (rc != clbSuccess) {
    appendBreadcrumb(__FILE__, __LINE__);
    // Midway through a collective the peers' state is unknown: the communicator cannot go on.
    if (rc != clbInvalidArgument && rc != clbUnsupported) c->markFailed(rc);
  }
  return rc;
}

// A PreMulSum's scaling of this rank's input (core/premul.h), before the call runs as a sum: into
// recv where recv is all the call writes (allReduce, and any call of one rank: element-wise, so
// in place is safe), else into the communicator's scratch (reduceScatter reads nranks x count
// elements and writes count). a.send then points at the scaled input.
clbResult_t scaleHostInput(clbComm* c, CollArgs& a, const PreMul& pm) {
  const size_t elems = a.desc.coll == kReduceScatter ? a.count * c->nranks : a.count;
  void* dst = a.recv;
  if (a.desc.coll == kReduceScatter && c->nranks > 1) CLB_CHECK(hostScratch(c, elems * clbTypeSize(a.type), &dst));
  uint64_t scalar = 0;
  CLB_CHECK(hostScalar(c, pm, &scalar));
  scaleInto(dst, a.send, elems, a.type, &scalar);
  a.send = dst;
  return clbSuccess;
}

// A collective on a communicator whose call the caller holds (CallScope). `pm`: the call's
// PreMulSum, resolved when the call was made (op is then clbSum).
clbResult_t runTaken(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                     clbRedOp_t op, int root, void* stream, const PreMul& pm = PreMul()) {
  CLB_CHECK(validate(c, coll, send, recv, count, type, op, root, stream));
  CollArgs a = describeCall(c, coll, send, recv, count, type, op, root, pm.on);

  if (count == 0) {
    c->lastAlgo = clbAlgoNone;
    return clbSuccess;
  }
  bool onDevice = false;
  int ordinal = -1;
  CLB_CHECK(memoryKind(c, coll, send, recv, root, stream, &onDevice, &ordinal));
  if (onDevice) {
    clbResult_t rc = cuda::runCollective(c, a, pm, ordinal, stream);
    c->lastAlgo = clbAlgoDirect;
    return rc;
  }
  // A reduce comes here on device memory of ranks that share a host only (clbReduce, p2p.cc).
  if (coll == kReduce) return setError(clbInternalError, "rank %d: a reduce reached the host collectives", c->rank);
  if (pm.on) {
    CLB_CHECK(scaleHostInput(c, a, pm));
    send = a.send;
  }
  if (c->nranks == 1) {
    // One rank: every collective is a copy (a reduction of one input; avg divides by 1).
    if (send != recv) memmove(recv, send, count * clbTypeSize(type));
    c->lastAlgo = clbAlgoNone;
    return clbSuccess;
  }

  return runHost(c, a, true);
}

clbResult_t run(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                clbRedOp_t op, int root, void* stream) {
  clearError();
  // The operation as the call takes it now: a PreMulSum's scalar (or its pointer) is the call's
  // from here on, so the operation may be destroyed once the call returns (also in a group).
  PreMul pm;
  const bool reduction = coll == kAllReduce || coll == kReduceScatter || coll == kReduce;
  // Inside a group (clbGroupStart): checked now, and recorded to run at the group's end; a refusal
  // is the group's too (its end runs nothing).
  // A refusal of the arguments fails the communicator and tells the peers (refuseArguments).
  const char* name = coll == kAllReduce && root == kBarrierRoot ? "barrier" : collectiveName(coll);
  if (inGroup()) {
    clbResult_t rc = checkComm(c);
    if (rc != clbSuccess) return refuseInGroup(rc);
    if (reduction) rc = resolveOp(c, op, type, collectiveName(coll), &pm);
    if (rc == clbSuccess) rc = validate(c, coll, send, recv, count, type, arithmeticOp(op, pm), root, stream);
    if (rc != clbSuccess) return refuseInGroup(refuseArguments(c, rc, name, coll, false));
    return recordCollective(c, coll, send, recv, count, type, arithmeticOp(op, pm), root, stream, pm);
  }
  CLB_CHECK(checkComm(c));
  // One call at a time: a second thread's call is refused here, before it reads or writes anything
  // (its arguments too: a usage refusal changes nothing).
  CallScope call(c, coll);
  CLB_CHECK(call.result());
  if (reduction)
    CLB_CHECK(refuseArguments(c, resolveOp(c, op, type, collectiveName(coll), &pm), name, coll, true, true));
  // A refusal before the call took its number (describeCall) takes it then.
  const uint64_t before = c->seq.load(std::memory_order_relaxed);
  const clbResult_t rc = runTaken(c, coll, send, recv, count, type, arithmeticOp(op, pm), root, stream, pm);
  return refuseArguments(c, rc, name, coll, true, c->seq.load(std::memory_order_relaxed) == before);
}

}  // namespace

clbResult_t clb::reduceOnDevice(clbComm* c, const void* send, void* recv, size_t count, clbDataType_t type,
                                clbRedOp_t op, int root, void* stream) {
  return run(c, kReduce, send, recv, count, type, op, root, stream);
}

clbResult_t clb::runRecordedCollective(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count,
                                       clbDataType_t type, clbRedOp_t op, int root, void* stream, const PreMul& pm) {
  clearError();
  CLB_CHECK(checkComm(c));
  CallScope call(c, coll);
  CLB_CHECK(call.result());
  const uint64_t before = c->seq.load(std::memory_order_relaxed);
  const clbResult_t rc = runTaken(c, coll, send, recv, count, type, op, root, stream, pm);
  return refuseArguments(c, rc, collectiveName(coll), coll, true, c->seq.load(std::memory_order_relaxed) == before);
}

clbResult_t clbComm::hostCollective(uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                                    clbRedOp_t op, int root) {
  clbComm* c = this;
  CLB_CHECK(validate(c, coll, send, recv, count, type, op, root, nullptr));
  CollArgs a = describeCall(c, coll, send, recv, count, type, op, root);
  if (count == 0 || c->nranks == 1) {  // one rank: a copy, as in run()
    if (count && send && send != recv) memmove(recv, send, count * clbTypeSize(type));
    return clbSuccess;
  }
  return runHost(c, a, false);
}

extern "C" {

clbResult_t clbAllReduce(const void* send, void* recv, size_t count, clbDataType_t type, clbRedOp_t op, clbComm_t comm,
                         void* stream) {
  return run(comm, kAllReduce, send, recv, count, type, op, 0, stream);
}

clbResult_t clbAllGather(const void* send, void* recv, size_t sendcount, clbDataType_t type, clbComm_t comm,
                         void* stream) {
  return run(comm, kAllGather, send, recv, sendcount, type, clbSum, 0, stream);
}

clbResult_t clbReduceScatter(const void* send, void* recv, size_t recvcount, clbDataType_t type, clbRedOp_t op,
                             clbComm_t comm, void* stream) {
  return run(comm, kReduceScatter, send, recv, recvcount, type, op, 0, stream);
}

clbResult_t clbBroadcast(const void* send, void* recv, size_t count, clbDataType_t type, int root, clbComm_t comm,
                         void* stream) {
  return run(comm, kBroadcast, send, recv, count, type, clbSum, root, stream);
}

clbResult_t clbBarrier(clbComm_t comm, void* stream) {
  clearError();
  if (inGroup()) {
    if (clbResult_t rc = checkComm(comm); rc != clbSuccess) return refuseInGroup(rc);
    return recordCollective(comm, kAllReduce, nullptr, nullptr, 1, clbInt32, clbSum, kBarrierRoot, stream);
  }
  CLB_CHECK(checkComm(comm));
  if (!stream) {
    int32_t token = 0;  // host: the call returns once every rank has entered it
    return run(comm, kAllReduce, &token, &token, 1, clbInt32, clbSum, kBarrierRoot, nullptr);
  }
  // On the stream: an all-reduce of one int32 in device memory of the stream's context, made at
  // the communicator's first such barrier (not inside a graph capture: memory is not allocated
  // there). Under the call, like the collective itself: nothing else runs on comm meanwhile.
  CallScope call(comm, kAllReduce);
  CLB_CHECK(call.result());
  void* scratch = nullptr;
  CLB_CHECK(cuda::barrierScratch(comm, stream, &scratch));
  return runTaken(comm, kAllReduce, scratch, scratch, 1, clbInt32, clbSum, kBarrierRoot, stream);
}

}  // extern "C"
