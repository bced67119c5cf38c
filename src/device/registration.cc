// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Registered device buffers (clbCommRegister). Ranks in several processes cannot hand each other
// raw addresses the way ranks of one process do (the direct path): a peer's buffer must first be
// mapped here through CUDA IPC, which costs a driver call of tens of microseconds and cannot
// happen inside a CUDA graph capture. So buffers are registered once, collectively: every rank
// exports the allocation holding its buffer, and every rank maps every other process's
// allocation, once per allocation however many registrations cover it.
//
// At a call, ranks must agree whether all of them use registered buffers, or they would take
// different paths. When the communicator has registrations and the call is large enough to leave
// the LL path, the ranks exchange one small record over the host (which registration and offset
// each buffer is at, and the call itself): then every rank decides alike from the same table,
// falls back to staging when any rank's buffer is not registered, and names a rank that made a
// different call instead of waiting for the device timeout. The exchange is host work only, so it
// is allowed inside a capture, and a replayed graph does not repeat it.
//
// Registrations (paths.h) holds them; Device::run asks it (agreeCall) whether a call goes direct.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "device/device_context.h"
#include "base/dtype.h"
#include "base/error.h"
#include "device/device.h"

namespace clb::cuda {

constexpr uint64_t kNone = ~0ull;

struct RegInfo {
  int32_t code;      // clbSuccess, or why this rank's buffer cannot be registered
  int32_t pid;       // unused: which ranks share a process is Bootstrap::inThisProcess
  int32_t exported;  // 1: `handle` is valid (CUDA IPC can share this allocation)
  int32_t pad;
  uint64_t base, offset;  // the allocation's start in the owner's address space; buffer - base
  uint64_t bufferId;      // CU_POINTER_ATTRIBUTE_BUFFER_ID of the allocation
  CUipcMemHandle handle;
  char why[256];  // the reason, when code or !exported says something failed
};

namespace {

void note(RegInfo* info, clbResult_t code) {
  info->code = code;
  snprintf(info->why, sizeof info->why, "%s", clbGetLastError());
}

// The first rank that failed, as the error every rank returns (its own message on that rank).
clbResult_t firstFailure(const std::vector<RegInfo>& all, int me) {
  for (size_t p = 0; p < all.size(); p++) {
    if (all[p].code == clbSuccess) continue;
    if ((int)p == me) return setError((clbResult_t)all[p].code, "%s", all[p].why);
    return setError((clbResult_t)all[p].code, "rank %zu could not register its buffer, so no rank did: %s", p,
                    all[p].why);
  }
  return clbSuccess;
}

// What a rank says about one device call when the communicator has registrations.
struct CallDesc {
  OpDesc op;
  uint64_t sendId, sendOffset, recvId, recvOffset;  // registration IDs (kNone: not registered)
  uint64_t liveDigest;                              // which registrations this rank holds: ranks that differ all stage
};

uint64_t mixId(uint64_t x) {  // a 64-bit mix, so that the sum over live IDs tells sets apart
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool sameCall(const OpDesc& x, const OpDesc& y) {
  return x.coll == y.coll && x.dtype == y.dtype && x.op == y.op && x.root == y.root && x.count == y.count;
}

}  // namespace

clbResult_t Registrations::registerLocal(void* buff, size_t bytes, RegInfo* info) {
  info->pid = getpid();
  if (!buff || bytes == 0) {
    setError(clbInvalidArgument, "rank %d registers buffer %p of %zu bytes: pass device memory and a size above 0",
             s_.comm->rank, buff, bytes);
    return clbInvalidArgument;
  }
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  bool isDevice = false;
  int ordinal = -1;
  CLB_CHECK(classifyPointer(buff, &isDevice, &ordinal));
  if (!isDevice)
    return setError(clbInvalidArgument,
                    "rank %d registers %p, which is host memory: register device memory (cudaMalloc, cuMemAlloc, "
                    "clbDeviceAlloc); host buffers need no registration",
                    s_.comm->rank, buff);
  if (s_.ordinal >= 0 && ordinal != s_.ordinal)
    return setError(clbInvalidArgument,
                    "rank %d registers a buffer on GPU %d but its communicator works with GPU %d: one communicator "
                    "per GPU",
                    s_.comm->rank, ordinal, s_.ordinal);
  Allocation al;
  CLB_CHECK(allocationOf(d, buff, &al));
  const CUdeviceptr base = al.base;
  const size_t size = al.size;
  const unsigned long long id = al.id;
  const uintptr_t b = reinterpret_cast<uintptr_t>(buff);
  if (bytes > base + size - b)
    return setError(clbInvalidArgument,
                    "rank %d registers %zu bytes at %p, but that allocation ends %llu bytes after it: register a "
                    "range inside one allocation",
                    s_.comm->rank, bytes, buff, (unsigned long long)(base + size - b));
  info->base = base;
  info->offset = b - base;
  info->bufferId = id;
  // Exporting fails for memory CUDA IPC cannot share (stream-ordered pools, cuMemCreate): that only
  // matters when a peer lives in another process, which the exchange will tell.
  CUdevice dev;
  CUcontext ctx;
  CLB_CU(d, cuDeviceGet, &dev, ordinal);
  CLB_CU(d, cuDevicePrimaryCtxRetain, &ctx, dev);
  CUresult rc;
  {
    CtxScope scope(d, ctx);
    rc = d->cuIpcGetMemHandle(&info->handle, base);
  }
  d->cuDevicePrimaryCtxRelease(dev);
  info->exported = rc == CUDA_SUCCESS;
  if (!info->exported) {
    cuError(rc, "cuIpcGetMemHandle");
    snprintf(info->why, sizeof info->why,
             "rank %d's buffer cannot be shared with another process through CUDA IPC (%s): allocate it with "
             "cudaMalloc, cuMemAlloc or clbDeviceAlloc (not from a stream-ordered pool or cuMemCreate)",
             s_.comm->rank, clbGetLastError());
  }
  return clbSuccess;
}

clbResult_t Registrations::mapRegistration(const std::vector<RegInfo>& all, Registration* reg) {
  const int n = s_.comm->nranks;
  const auto& peers = s_.comm->boot.peers();
  reg->peer.assign(n, nullptr);
  CtxScope scope(s_.d, s_.ctx);
  for (int p = 0; p < n; p++) {
    if (s_.layout.inProcess[p]) {  // same address space
      reg->peer[p] = reinterpret_cast<char*>(all[p].base + all[p].offset);
      continue;
    }
    if (s_.layout.viaHost) continue;  // no GPU reads another's memory here: calls are staged through the host
    if (!all[p].exported) return setError(clbInvalidArgument, "%s", all[p].why);
    // The peer's process: its pid and PID namespace (a pid alone may be two processes' here).
    const auto key = std::make_tuple(peers[p].pid, peers[p].pidNamespace, all[p].bufferId);
    Mapping& m = mappings_[key];
    if (!m.local) {
      CUresult rc = s_.d->cuIpcOpenMemHandle(&m.local, all[p].handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      if (rc != CUDA_SUCCESS) {
        mappings_.erase(key);
        return cuError(rc, "cuIpcOpenMemHandle (mapping a peer's registered buffer)");
      }
    }
    m.refs++;
    reg->mapped.push_back(key);
    reg->peer[p] = reinterpret_cast<char*>(m.local + all[p].offset);
  }
  return clbSuccess;
}

void Registrations::unmap(Registration* reg, bool closeNow) {
  for (const auto& key : reg->mapped) {
    auto it = mappings_.find(key);
    if (it == mappings_.end() || --it->second.refs > 0) continue;
    if (!closeNow)
      closeLater_.push_back(it->second.local);
    else if (CUresult rc = s_.d->cuIpcCloseMemHandle(it->second.local); rc != CUDA_SUCCESS)
      CLB_WARN("rank %d: cuIpcCloseMemHandle of a peer's registered buffer failed (%d)", s_.comm->rank, (int)rc);
    mappings_.erase(it);
  }
  reg->mapped.clear();
}

clbResult_t Registrations::registerBuffer(void* buff, size_t bytes, void** handle) {
  const int n = s_.comm->nranks, me = s_.comm->rank;
  std::vector<RegInfo> all(n);
  RegInfo& mine = all[me];
  memset(&mine, 0, sizeof mine);
  if (!handle) {
    setError(clbInvalidArgument, "handle (output) is NULL");
    note(&mine, clbInvalidArgument);
  } else if (clbResult_t rc = registerLocal(buff, bytes, &mine); rc != clbSuccess) {
    note(&mine, rc);
  }
  // Every rank reaches the exchange, failed or not, so that a bad buffer on one rank is an error
  // on all of them rather than a wait.
  const uint64_t id = nextRegId_++;
  CLB_CHECK(s_.comm->boot.allGather(all.data(), sizeof(RegInfo)));
  CLB_CHECK(firstFailure(all, me));
  if (!s_.ready()) {
    bool isDevice = false;
    int ordinal = -1;
    CLB_CHECK(classifyPointer(buff, &isDevice, &ordinal));
    CLB_CHECK(s_.setUp(ordinal, nullptr));  // collective too: every rank got here
  }
  auto reg = std::make_unique<Registration>();
  reg->id = id;
  reg->begin = reinterpret_cast<uintptr_t>(buff);
  reg->end = reg->begin + bytes;
  reg->bufferId = mine.bufferId;
  // Mapping can fail on one rank only (a peer's memory that cannot be shared fails on all alike):
  // a second exchange keeps "all or none". Ranks of one process map nothing.
  clbResult_t mapped = mapRegistration(all, reg.get());
  if (!s_.layout.allInProcess) mapped = agreeOnStatus(s_.comm, mapped, "its mappings of the registered buffers");
  if (mapped != clbSuccess) {
    CtxScope scope(s_.d, s_.ctx);
    unmap(reg.get(), true);  // nothing used these mappings yet
    return mapped;
  }
  liveDigest_ += mixId(id);
  CLB_INFO("rank %d: registered %zu bytes at %p (registration %llu; %zu peer allocation(s) mapped)", me, bytes, buff,
           (unsigned long long)id, reg->mapped.size());
  *handle = reg.get();
  regs_.push_back(std::move(reg));
  return clbSuccess;
}

namespace {

// What each rank says at a deregistration: whether it can (its handle is one of its registrations,
// held by no CUDA graph), and why not.
struct CanDrop {
  int32_t code;
  int32_t pad;
  char why[248];
};

void CUDA_CB dropGraphHold(void* p) {  // a graph's user object destroyed: its hold goes
  auto* hold = static_cast<std::shared_ptr<std::atomic<int>>*>(p);
  (*hold)->fetch_sub(1);
  delete hold;
}

}  // namespace

clbResult_t holdWhileGraphLives(const Driver* d, CUstream stream, const std::shared_ptr<std::atomic<int>>& holds) {
  if (!stream) return clbSuccess;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t captureId = 0;
  CUgraph graph = nullptr;
  const CUgraphNode* deps = nullptr;
  size_t ndeps = 0;
  CLB_CU(d, cuStreamGetCaptureInfo_v2, stream, &status, &captureId, &graph, &deps, &ndeps);
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph) return clbSuccess;
  auto* hold = new std::shared_ptr<std::atomic<int>>(holds);
  (*hold)->fetch_add(1);
  CUuserObject object = nullptr;
  if (CUresult rc = d->cuUserObjectCreate(&object, hold, dropGraphHold, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
      rc != CUDA_SUCCESS) {
    dropGraphHold(hold);
    return cuError(rc, "cuUserObjectCreate");
  }
  if (CUresult rc = d->cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE); rc != CUDA_SUCCESS) {
    d->cuUserObjectRelease(object, 1);  // its destructor drops the hold
    return cuError(rc, "cuGraphRetainUserObject");
  }
  return clbSuccess;
}

clbResult_t Registrations::holdForGraph(CUstream stream, uint64_t id) {
  Registration* reg = nullptr;
  for (const auto& r : regs_)
    if (r->id == id) reg = r.get();
  if (!reg)
    return setError(clbInternalError, "rank %d: registration %llu is gone", s_.comm->rank, (unsigned long long)id);
  return holdWhileGraphLives(s_.d, stream, reg->graphHolds);
}

clbResult_t Registrations::deregisterBuffer(void* handle) {
  // Collective from the start: every rank says whether it can, so that a handle one rank does not
  // hold, or a registration one rank's graphs still read, is refused on every rank at once (none
  // waits in the barrier below for a rank that refused, none closes mappings a graph reads).
  const int n = s_.comm->nranks, me = s_.comm->rank;
  auto found = regs_.end();
  for (auto it = regs_.begin(); it != regs_.end(); ++it)
    if (it->get() == handle) found = it;
  std::vector<CanDrop> all(n);
  memset(all.data(), 0, all.size() * sizeof(CanDrop));
  if (!handle) {
    setError(clbInvalidArgument, "rank %d: handle is NULL: pass what clbCommRegister returned", me);
    all[me].code = clbInvalidArgument;
  } else if (found == regs_.end()) {
    setError(clbInvalidArgument,
             "rank %d: %p is not a registration of this communicator (deregistered already, or from another "
             "communicator)",
             me, handle);
    all[me].code = clbInvalidArgument;
  } else if (int graphs = (*found)->graphHolds->load(); graphs > 0) {
    setError(clbInvalidUsage,
             "rank %d: the registration is used by %d call(s) captured in CUDA graphs that still exist, whose "
             "replays read the peers' buffers through it: destroy those graphs and their instantiations "
             "(cuGraphDestroy, cuGraphExecDestroy) before deregistering",
             me, graphs);
    all[me].code = clbInvalidUsage;
  }
  snprintf(all[me].why, sizeof all[me].why, "%s", clbGetLastError());
  if (n > 1) CLB_CHECK(s_.comm->boot.allGather(all.data(), sizeof(CanDrop)));
  for (int p = 0; p < n; p++)
    if (all[p].code != clbSuccess)
      return setError((clbResult_t)all[p].code, "%s%.248s", p == me ? "" : "no rank deregistered, because ",
                      all[p].why);
  clearError();
  if (!(*found)->mapped.empty()) {
    // Kernels of this rank may still read the peers' buffers through these mappings. With other
    // ranks in this process, waiting for the context could wait for their kernels, which may wait
    // for this rank: close at destroy instead.
    const bool now = !s_.layout.sharedProcess;
    CtxScope scope(s_.d, s_.ctx);
    if (now) CLB_CU(s_.d, cuCtxSynchronize);
    unmap(found->get(), now);
  }
  liveDigest_ -= mixId((*found)->id);
  regs_.erase(found);
  // Collective: no rank goes on (and perhaps frees its buffer) before every rank has closed its
  // mapping of it.
  if (n > 1) CLB_CHECK(s_.comm->boot.barrier());
  return clbSuccess;
}

void Registrations::release() {
  for (auto& reg : regs_) unmap(reg.get(), true);
  regs_.clear();
  for (CUdeviceptr p : closeLater_) s_.d->cuIpcCloseMemHandle(p);
  closeLater_.clear();
}

const Registrations::Registration* Registrations::findRegistration(const void* p, size_t len, uint64_t* offset) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  for (const auto& r : regs_) {
    if (b < r->begin || b >= r->end || len > r->end - b) continue;
    // Freed and allocated again (perhaps at the same address): the peers' mappings show the old
    // allocation, so this registration is off.
    unsigned long long id = 0;
    if (s_.d->cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)p) != CUDA_SUCCESS ||
        id != r->bufferId)
      continue;
    *offset = b - r->begin;
    return r.get();
  }
  return nullptr;
}

bool Registrations::locate(const void* p, size_t len, uint64_t* id, uint64_t* offset) {
  // With some GPUs unable to reach each other no rank maps its peers' registrations (every rank
  // decides that alike at set-up), so a sender could not write there.
  if (s_.layout.viaHost) return false;
  const Registration* r = regs_.empty() ? nullptr : findRegistration(p, len, offset);
  if (r) *id = r->id;
  return r != nullptr;
}

char* Registrations::peerRange(uint64_t id, int peer) const {
  for (const auto& r : regs_)
    if (r->id == id) return peer >= 0 && peer < (int)r->peer.size() ? r->peer[peer] : nullptr;
  return nullptr;
}

clbResult_t Registrations::agreeCall(const CollArgs& a, bool zeroCopy, CUstream capture, ClbDevCallArgs* k,
                                     bool* given) {
  *given = false;
  const int n = s_.comm->nranks, me = s_.comm->rank;
  const size_t bytes = a.count * clbTypeSize(a.type);
  const bool gather = a.desc.coll == kAllGather, scatter = a.desc.coll == kReduceScatter;
  const bool hasSend = a.desc.coll != kBroadcast || me == a.root;
  std::vector<CallDesc> all(n);
  CallDesc& mine = all[me];
  memset(&mine, 0, sizeof mine);
  mine.op = a.desc;
  mine.sendId = mine.recvId = kNone;
  mine.liveDigest = liveDigest_;
  if (zeroCopy) {
    const Registration* r = hasSend ? findRegistration(a.send, scatter ? bytes * n : bytes, &mine.sendOffset) : nullptr;
    if (r) mine.sendId = r->id;
    if ((r = findRegistration(a.recv, gather ? bytes * n : bytes, &mine.recvOffset))) mine.recvId = r->id;
  }
  // Over the host transport (shared memory on one node): a host collective of its own.
  CLB_CHECK(s_.comm->hostCollective(kAllGather, &mine, all.data(), sizeof(CallDesc), clbUint8, clbSum, 0));
  for (int p = 0; p < n; p++)
    if (!sameCall(all[p].op, all[0].op))
      return setError(clbInvalidUsage,
                      "device call %llu: rank 0 called %s but rank %d called %s: every rank must make the same "
                      "calls in the same order",
                      (unsigned long long)a.desc.seq, clb::describe(all[0].op).c_str(), p,
                      clb::describe(all[p].op).c_str());
  if (!zeroCopy) return clbSuccess;
  // Ranks holding different registrations (one deregistered early, or a registration failed on
  // one rank only) cannot trust each other's IDs: all of them stage, decided from the same table.
  for (int p = 0; p < n; p++)
    if (all[p].liveDigest != all[0].liveDigest) {
      if (!warnedDigest_)
        CLB_WARN(
            "rank %d: ranks hold different buffer registrations (register and deregister on every rank at the "
            "same point): device calls are staged until they agree",
            me);
      warnedDigest_ = true;
      return clbSuccess;
    }
  // Peers read every rank's send buffer (a broadcast: the root's), and an allReduce's output too
  // (two-shot copies the other segments from their owners).
  for (int p = 0; p < n; p++) {
    const bool needSend = a.desc.coll != kBroadcast || p == a.root;
    if ((needSend && all[p].sendId == kNone) || (a.desc.coll == kAllReduce && all[p].recvId == kNone))
      return clbSuccess;
  }
  auto lookup = [this](uint64_t id) -> const Registration* {
    for (const auto& reg : regs_)
      if (reg->id == id) return reg.get();
    return nullptr;
  };
  for (int p = 0; p < n; p++) {
    const Registration* s = all[p].sendId == kNone ? nullptr : lookup(all[p].sendId);
    const Registration* o = all[p].recvId == kNone ? nullptr : lookup(all[p].recvId);
    if ((all[p].sendId != kNone && !s) || (all[p].recvId != kNone && !o))  // equal digests: cannot happen
      return setError(clbInternalError, "rank %d uses registration %llu, which rank %d does not hold", p,
                      (unsigned long long)(s ? all[p].recvId : all[p].sendId), me);
    k->peerIn[p] = s ? s->peer[p] + all[p].sendOffset : nullptr;
    k->peerOut[p] = o ? o->peer[p] + all[p].recvOffset : nullptr;
  }
  // This rank's own buffers need no registration (a broadcast reads only the root's): the
  // kernel gets them as they are.
  k->peerIn[me] = static_cast<const char*>(k->in);
  k->peerOut[me] = static_cast<char*>(k->out);
  k->given = 1;
  *given = true;
  // A captured call: its graph holds every registration the kernel reads through (once each).
  if (capture) {
    std::vector<uint64_t> held;
    for (int p = 0; p < n; p++)
      for (uint64_t id : {all[p].sendId, all[p].recvId})
        if (id != kNone && std::find(held.begin(), held.end(), id) == held.end()) {
          CLB_CHECK(holdForGraph(capture, id));
          held.push_back(id);
        }
  }
  return clbSuccess;
}

}  // namespace clb::cuda
