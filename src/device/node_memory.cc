// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// NodeMemory (node_memory.h): the buffers every rank of a node sees, made, grown and given back
// by collective steps all ranks take at the same call.
#include "device/node_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/dtype.h"
#include "base/error.h"
#include "transport/shm/shm.h"

namespace clb::cuda {

namespace {
struct StagingInfo {  // exchanged whenever a shared buffer is (re)allocated in device memory
  uint64_t staging;
  CUipcMemHandle hStaging;
};
struct HostShmInfo {  // ... or in host memory
  int32_t pid;        // unused: which ranks share a process is Bootstrap::inThisProcess
  int32_t status;     // clbSuccess, or why this rank failed (then `why`)
  uint64_t ptr;       // in the owner's address space
  char name[64];      // POSIX shared memory object
  char why[192];
};
}  // namespace

clbResult_t agreeOnStatus(DeviceCommContext* comm, clbResult_t mine, const char* what, bool* exchanged) {
  if (exchanged) *exchanged = false;
  struct Status {
    int32_t status;
    char why[252];
  };
  const int n = comm->nranks, me = comm->rank;
  std::vector<Status> all(n);
  memset(all.data(), 0, n * sizeof(Status));
  all[me].status = mine;
  if (mine != clbSuccess) snprintf(all[me].why, sizeof all[me].why, "%s", clbGetLastError());
  CLB_CHECK(comm->boot.allGather(all.data(), sizeof(Status)));
  if (exchanged) *exchanged = true;
  for (int p = 0; p < n; p++)
    if (all[p].status != clbSuccess)
      return p == me ? setError((clbResult_t)all[p].status, "%s", all[p].why)
                     : setError((clbResult_t)all[p].status, "rank %d could not set up %s: %s", p, what, all[p].why);
  return clbSuccess;
}

// Zeroes memory peers are about to write into, and waits until it is done. cuMemsetD8 only
// enqueues on the legacy stream, which nothing orders with a peer's kernels: a peer's first
// writes (its "posted" word, its LL lines, its staged data) could land before the zeroing and be
// wiped. Seen on 2 x H200: ranks in several processes read 0 instead of a broadcast's data.
// A private stream, synchronized here, before the buffer's handle is given to anyone.
clbResult_t zeroNow(const Driver* d, CUdeviceptr p, size_t bytes) {
  CUstream s = nullptr;
  CLB_CU(d, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
  CUresult rc = d->cuMemsetD8Async(p, 0, bytes, s);
  if (rc == CUDA_SUCCESS) rc = d->cuStreamSynchronize(s);
  d->cuStreamDestroy(s);
  if (rc != CUDA_SUCCESS) return cuError(rc, "zeroing device memory (cuMemsetD8Async)");
  return clbSuccess;
}

void NodeMemory::release(SharedBuffer* b) {
  const Driver* d = runtime_.driver();
  for (CUdeviceptr p : b->opened) d->cuIpcCloseMemHandle(p);
  b->opened.clear();
  for (auto& [p, len] : b->hostMaps) {
    d->cuMemHostUnregister(p);
    munmap(p, len);
  }
  b->hostMaps.clear();
  if (b->host) {
    if (b->hostMine) comm_->mem.addHost(-(int64_t)b->bytes);
  } else if (b->mine) {
    runtime_.free(b->mine, b->bytes);
  }
  b->mine = 0;
  b->bytes = 0;
  b->host = false;
  b->hostMine = nullptr;
  b->peers.clear();
  b->hostPeers.clear();
}

clbResult_t NodeMemory::refuseInCapture(CUstream stream, size_t need) const {
  if (!stream) return clbSuccess;
  const Driver* drv = nullptr;
  CLB_CHECK(driver(&drv));
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  CLB_CU(drv, cuStreamIsCapturing, stream, &cap);
  if (cap == CU_STREAM_CAPTURE_STATUS_NONE) return clbSuccess;
  return setError(clbInvalidUsage,
                  "this collective needs set-up that rank %d has not done (%zu bytes of device staging, or the first "
                  "device call), and the stream is being captured into a CUDA graph, where Colibri cannot allocate "
                  "or meet its peers: before capturing, run one collective of the largest size the graph will use "
                  "(up to %zu bytes per rank suffices for any size)",
                  comm_->rank, need, maxHalf());
}

// A shared buffer in pinned host memory: POSIX shared memory this rank creates, that every rank
// maps and registers with CUDA (so its kernels reach it), and that is unlinked once all did.
clbResult_t NodeMemory::allocHost(SharedBuffer* b, size_t bytes, const char* what) {
  const Driver* d = runtime_.driver();
  const int n = comm_->nranks, me = comm_->rank;
  const size_t len = (bytes + 4095) / 4096 * 4096;
  std::vector<HostShmInfo> all(n);
  HostShmInfo& mine = all[me];
  mine.pid = getpid();
  snprintf(mine.name, sizeof mine.name, "%s",
           segmentName(comm_->boot.sessionNonce(), me, "dev" + std::to_string(hostGen_++)).c_str());
  int lock = -1;  // this rank's segment: held until its name is removed (as the shm transport's)
  auto mapShm = [&](const char* name, bool create, void** out) -> clbResult_t {
    char* p = nullptr;
    CLB_CHECK(mapSegment(name, len, create, &p, create ? &lock : nullptr));
    CUresult rc = d->cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (rc != CUDA_SUCCESS) {
      munmap(p, len);
      if (create) unlinkSegment(name, &lock);
      return cuError(rc, "cuMemHostRegister (a device buffer in host memory)");
    }
    b->hostMaps.emplace_back(p, len);
    *out = p;
    return clbSuccess;
  };
  // Each step ends in an exchange of every rank's status, so a failure anywhere fails every rank
  // at the same step (and frees what was made) instead of leaving some waiting or half set up.
  void* own = nullptr;
  clbResult_t rc = mapShm(mine.name, true, &own);
  b->host = true;
  b->bytes = bytes;
  if (rc == clbSuccess) {
    mine.ptr = reinterpret_cast<uint64_t>(own);
    b->hostMine = own;
    comm_->mem.addHost((int64_t)bytes);
    CUresult cr = d->cuMemHostGetDevicePointer(&b->mine, own, 0);
    if (cr != CUDA_SUCCESS) rc = cuError(cr, "cuMemHostGetDevicePointer");
  }
  mine.status = rc;
  if (rc != clbSuccess) snprintf(mine.why, sizeof mine.why, "%s", clbGetLastError());
  clbResult_t ex = comm_->boot.allGather(all.data(), sizeof(HostShmInfo));
  for (int p = 0; p < n && ex == clbSuccess && rc == clbSuccess; p++)
    if (all[p].status != clbSuccess)
      rc = setError((clbResult_t)all[p].status, "rank %d could not set up the %s buffer in host memory: %s", p, what,
                    all[p].why);
  b->peers.assign(n, nullptr);
  b->hostPeers.assign(n, nullptr);
  for (int p = 0; p < n && ex == clbSuccess && rc == clbSuccess; p++) {
    void* at = reinterpret_cast<void*>(all[p].ptr);  // the same address space
    if (!layout_.inProcess[p]) rc = mapShm(all[p].name, false, &at);
    b->hostPeers[p] = static_cast<char*>(at);
    CUdeviceptr dp = 0;
    if (rc == clbSuccess) {
      CUresult cr = d->cuMemHostGetDevicePointer(&dp, at, 0);
      if (cr != CUDA_SUCCESS) rc = cuError(cr, "cuMemHostGetDevicePointer (a peer's buffer in host memory)");
    }
    b->peers[p] = reinterpret_cast<char*>(dp);
  }
  // Every rank mapped every buffer (or failed): the names can go, and all learn the outcome.
  clbResult_t all2 = ex == clbSuccess ? agreeOnStatus(comm_, rc, what) : ex;
  if (lock >= 0) unlinkSegment(mine.name, &lock);
  if (all2 != clbSuccess) {
    release(b);
    return all2;
  }
  CLB_INFO("rank %d: %s buffer %zu bytes in host memory", me, what, bytes);
  return clbSuccess;
}

clbResult_t NodeMemory::ensure(SharedBuffer* b, size_t bytes, CUstream stream, const char* what) {
  const Driver* d = runtime_.driver();
  if (b->mine && bytes <= b->bytes) return clbSuccess;
  CLB_CHECK(refuseInCapture(stream, bytes));
  // Every rank reaches this point at the same call with the same size, unless the ranks make
  // different calls: the sizes are compared first, so that no rank's kernels ever write past the
  // end of a peer's smaller buffer (the kernels compare the calls only once they run). Growing,
  // every rank drains its stream first: the exchange is then also the meeting after which the
  // old buffers go.
  CtxScope scope(d, runtime_.context());
  if (b->mine) CLB_CU(d, cuStreamSynchronize, stream);
  const int n = comm_->nranks;
  std::vector<uint64_t> sizes(n);
  sizes[comm_->rank] = bytes;
  CLB_CHECK(comm_->boot.allGather(sizes.data(), sizeof(uint64_t)));
  for (int p = 0; p < n; p++)
    if (sizes[p] != bytes) {
      comm_->markFailed(clbInvalidUsage);
      return setError(clbInvalidUsage,
                      "rank %d's device call needs a %s buffer of %zu bytes but rank %d's needs %llu: the ranks make "
                      "different calls (every rank must make the same calls in the same order with the same count, "
                      "type, op and root); the communicator cannot go on",
                      comm_->rank, what, bytes, p, (unsigned long long)sizes[p]);
    }
  if (b->mine) release(b);
  if (layout_.viaHost) return allocHost(b, bytes, what);
  CLB_CHECK(runtime_.alloc(bytes, (std::string("the ") + what + " buffer").c_str(), &b->mine));
  b->bytes = bytes;
  CLB_CHECK(zeroNow(d, b->mine, bytes));  // LL lines start with flag 0: no call has that number
  std::vector<StagingInfo> all(n);
  all[comm_->rank].staging = b->mine;
  CLB_CU(d, cuIpcGetMemHandle, &all[comm_->rank].hStaging, b->mine);
  CLB_CHECK(comm_->boot.allGather(all.data(), sizeof(StagingInfo)));
  b->peers.assign(n, nullptr);
  for (int p = 0; p < n; p++) {
    if (layout_.inProcess[p]) {
      b->peers[p] = reinterpret_cast<char*>(all[p].staging);
      continue;
    }
    CUdeviceptr s = 0;
    CLB_CU(d, cuIpcOpenMemHandle, &s, all[p].hStaging, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    b->opened.push_back(s);
    b->peers[p] = reinterpret_cast<char*>(s);
  }
  CLB_INFO("rank %d: %s buffer %zu bytes on GPU %d", comm_->rank, what, bytes, runtime_.ordinal());
  return clbSuccess;
}

clbResult_t NodeMemory::ensureStaging(const CollArgs& a, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  // Two halves, each sized to the call's n x count elements, at least kMinHalf and at most
  // maxHalf(), in steps of kMinHalf; never shrunk.
  size_t want = std::min(std::max(a.count * esz * comm_->nranks, kMinHalf), maxHalf());
  want = (want + kMinHalf - 1) / kMinHalf * kMinHalf;
  return ensure(&staging, std::max(staging.bytes, 2 * want), stream, "staging");
}

clbResult_t NodeMemory::setUpFlags(CUstream stream) {
  CLB_CHECK(ensure(&flagBuf, sizeof(ClbDevFlags), stream, "flags"));
  flags = flagBuf.mine;
  if (flagBuf.host) {
    CLB_CHECK(runtime_.alloc(kOwnWordsBytes, "the block counters", &counters));
    ownCounters = true;
    CLB_CHECK(zeroNow(runtime_.driver(), counters, kOwnWordsBytes));
  } else {
    counters = flags + offsetof(ClbDevFlags, blocks);
  }
  peerFlags.assign(comm_->nranks, nullptr);
  for (int p = 0; p < comm_->nranks; p++) peerFlags[p] = reinterpret_cast<ClbDevFlags*>(flagBuf.peers[p]);
  return clbSuccess;
}

void NodeMemory::releaseAll() {
  release(&staging);
  release(&llBuf);
  release(&flagBuf);
  if (ownCounters) runtime_.free(counters, kOwnWordsBytes);
  counters = 0;
  ownCounters = false;
  flags = 0;
  peerFlags.clear();
}

}  // namespace clb::cuda
