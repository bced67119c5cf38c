// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "device/device_world.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>

#include <atomic>
#include <unistd.h>

#include <cstring>
#include <cstdlib>
#include <strings.h>

#include "core/comm.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/launch_meet.h"
#include "transport/shm.h"

namespace clb::cuda {

constexpr size_t kMaxHalf = 4u << 20;   // staging per half: 8 MiB per rank at most
constexpr size_t kMinHalf = 64u << 10;
constexpr int kThreads = 512;                  // per block (the kernels' launch bounds)
constexpr int kMaxBlocks = 256;
constexpr size_t kBytesPerBlock = 8u << 10;   // below this per block, fewer blocks
constexpr size_t kTwoShotMin = 256u << 10;       // allReduce, more than 2 ranks: two-shot from here

// Walks the loaded objects in memory (no system call): dlopen(RTLD_NOLOAD) of a library that is
// not loaded searches the library path on every call, which cost ~15 us per host collective.
static int findLibcuda(struct dl_phdr_info* info, size_t, void*) {
  return info->dlpi_name && strstr(info->dlpi_name, "libcuda.so") ? 1 : 0;
}

bool driverInProcess() {
  static std::atomic<bool> loaded{false};
  if (loaded.load(std::memory_order_relaxed)) return true;
  if (dl_iterate_phdr(findLibcuda, nullptr)) loaded = true;
  return loaded;
}

clbResult_t classifyPointer(const void* p, bool* isDevice, int* ordinal) {
  *isDevice = false;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  // One driver call for both answers (this runs twice per collective). Memory CUDA does not know
  // (plain host memory) comes back as type 0 rather than an error.
  unsigned int type = 0;
  int ord = -1;
  CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[2] = {&type, &ord};
  CUresult rc = d->cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)p);
  if (rc != CUDA_SUCCESS) return cuError(rc, "cuPointerGetAttributes");
  if (type != CU_MEMORYTYPE_DEVICE) return clbSuccess;
  *isDevice = true;
  *ordinal = ord;
  return clbSuccess;
}

clbResult_t allocationOf(const Driver* d, const void* p, Allocation* a) {
  *a = Allocation{};
  CUpointer_attribute attrs[6] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                  CU_POINTER_ATTRIBUTE_BUFFER_ID,        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[6] = {&a->base, &a->size, &a->id, &a->type, &a->managed, &a->ordinal};
  CLB_CU(d, cuPointerGetAttributes, 6, attrs, data, (CUdeviceptr)p);
  return clbSuccess;
}

struct PeerInfo {  // exchanged once, at set-up
  int32_t pid;
  int32_t ordinal;
  CUuuid uuid;
};

namespace {
struct StagingInfo {  // exchanged whenever a shared buffer is (re)allocated in device memory
  uint64_t staging;
  CUipcMemHandle hStaging;
};
struct HostShmInfo {  // ... or in host memory
  int32_t pid;
  int32_t status;  // clbSuccess, or why this rank failed (then `why`)
  uint64_t ptr;    // in the owner's address space
  char name[64];   // POSIX shared memory object
  char why[192];
};
}  // namespace

clbResult_t agreeOnStatus(clbComm* comm, clbResult_t mine, const char* what, bool* exchanged) {
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

DeviceWorld::DeviceWorld(clbComm* comm) : comm_(comm) {
  // Read at init (core/config.h), where the ranks compared them; a bad value is reported by the
  // first device call.
  const DeviceConfig& c = comm->deviceCfg;
  configError_ = c.error;
  path_ = c.path == kDevicePathLL       ? DevicePath::kLL
          : c.path == kDevicePathStaged ? DevicePath::kStaged
          : c.path == kDevicePathDirect ? DevicePath::kDirect
                                        : DevicePath::kAuto;
  meetOff_ = c.meetOff;
  launchMode_ = c.launch;
  forceHost_ = c.p2pOff;
  checkCalls_ = c.checkCalls;
  warnPercent_ = c.stuckWarnPercent;
  directMin_ = (size_t)c.directMinBytes;
  llMax_ = (size_t)c.llMaxBytes;
}

DeviceWorld::~DeviceWorld() { release(); }

void DeviceWorld::releaseShared(SharedBuffer* b) {
  for (CUdeviceptr p : b->opened) d_->cuIpcCloseMemHandle(p);
  b->opened.clear();
  for (auto& [p, len] : b->hostMaps) {
    d_->cuMemHostUnregister(p);
    munmap(p, len);
  }
  b->hostMaps.clear();
  if (b->host) {
    if (b->hostMine) comm_->mem.addHost(-(int64_t)b->bytes);
  } else if (b->mine) {
    d_->cuMemFree(b->mine);
    comm_->mem.addDevice(-(int64_t)b->bytes);
  }
  b->mine = 0;
  b->bytes = 0;
  b->host = false;
  b->hostMine = nullptr;
  b->peers.clear();
}

clbResult_t DeviceWorld::release() {
  if (watching_) watchdogRemove(&watched_);
  watching_ = false;
  comm_->deviceReady.store(nullptr);
  meet_.reset();
  releaseGpuDirect();
  if (d_) {
    trimHostStage();
    if (stageDone_) {
      CtxScope scope(d_, ctx_);
      d_->cuEventDestroy(stageDone_);
    }
    stageDone_ = nullptr;
  }
  if (!d_ || !flags_) return clbSuccess;
  CtxScope scope(d_, ctx_);  // destroy may run on any thread: frees and closes need this context
  // This rank's kernels may still run: wait for the context (the streams they ran on may be gone).
  d_->cuCtxSynchronize();
  // Peers may still read this rank's staging or buffers: wait (bounded) until they said they are done.
  if (!comm_->failed && !comm_->aborted) {
    ClbDevFlags f;
    int64_t deadline = nowMs() + std::min<int64_t>(comm_->cfg.timeoutMs, 5000);
    for (;;) {
      if (flagBuf_.host) memcpy(&f, flagBuf_.hostMine, sizeof f);  // pinned host memory, this rank's view
      else if (d_->cuMemcpyDtoH(&f, flags_, sizeof f) != CUDA_SUCCESS) break;
      bool all = true;
      for (int p = 0; p < comm_->nranks; p++) all = all && f.done[p] >= f.calls;
      if (all || nowMs() > deadline) break;
      usleep(200);
    }
  }
  launcher_.release(d_);
  for (auto& reg : regs_) unmap(reg.get(), true);
  regs_.clear();
  for (CUdeviceptr p : closeLater_) d_->cuIpcCloseMemHandle(p);
  closeLater_.clear();
  releaseShared(&staging_);
  releaseShared(&llBuf_);
  releaseShared(&flagBuf_);
  if (hostStatus_) d_->cuMemFreeHost(hostStatus_);
  flags_ = 0;
  hostStatus_ = nullptr;
  return clbSuccess;
}

clbResult_t DeviceWorld::refuseInCapture(CUstream stream, size_t need) {
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
                  "(up to %zu bytes per rank suffices for any size)", comm_->rank, need, kMaxHalf);
}

// Zeroes memory peers are about to write into, and waits until it is done. cuMemsetD8 only
// enqueues on the legacy stream, which nothing orders with a peer's kernels: a peer's first
// writes (its "posted" word, its LL lines, its staged data) could land before the zeroing and be
// wiped. Seen on 2 x H200: ranks in several processes read 0 instead of a broadcast's data.
// A private stream, synchronized here, before the buffer's handle is given to anyone.
clbResult_t DeviceWorld::zeroNow(CUdeviceptr p, size_t bytes) {
  CUstream s = nullptr;
  CLB_CU(d_, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
  CUresult rc = d_->cuMemsetD8Async(p, 0, bytes, s);
  if (rc == CUDA_SUCCESS) rc = d_->cuStreamSynchronize(s);
  d_->cuStreamDestroy(s);
  if (rc != CUDA_SUCCESS) return cuError(rc, "zeroing device memory (cuMemsetD8Async)");
  return clbSuccess;
}

clbResult_t DeviceWorld::setUp(int ordinal, CUstream stream) {
  CLB_CHECK(refuseInCapture(stream, 0));
  // Every rank reaches this point at its first device call, the same call everywhere: collective.
  CLB_CHECK(driver(&d_));
  const int n = comm_->nranks;
  if (n > CLB_MAX_DEVICE_RANKS)
    return setError(clbUnsupported, "device collectives support up to %d ranks per node, this communicator has %d",
                    CLB_MAX_DEVICE_RANKS, n);
  if (n > 1 && !comm_->shm)
    return setError(clbUnsupported,
                    "device buffers need every rank on one host for now (RDMA between nodes is coming); "
                    "this communicator spans hosts");
  CLB_CU(d_, cuDeviceGet, &dev_, ordinal);
  CLB_CU(d_, cuDevicePrimaryCtxRetain, &ctx_, dev_);
  CtxScope scope(d_, ctx_);
  ordinal_ = ordinal;
  CLB_CHECK(kernels_.load(dev_, defaultKernelDir()));
  CLB_CHECK(kernels_.function("clb_dev_staged", &staged_));
  CLB_CHECK(kernels_.function("clb_dev_direct", &direct_));
  CLB_CHECK(kernels_.function("clb_dev_ll", &ll_));
  CLB_CU(d_, cuMemHostAlloc, reinterpret_cast<void**>(&hostStatus_), sizeof(ClbDevHostStatus),
         CU_MEMHOSTALLOC_DEVICEMAP);
  memset(hostStatus_, 0, sizeof(ClbDevHostStatus));
  CLB_CU(d_, cuMemHostGetDevicePointer, &hostStatusDev_, hostStatus_, 0);

  std::vector<PeerInfo> all(n);
  PeerInfo& me = all[comm_->rank];
  me.pid = getpid();
  me.ordinal = ordinal_;
  CLB_CU(d_, cuDeviceGetUuid, &me.uuid, dev_);
  CLB_CHECK(comm_->boot.allGather(all.data(), sizeof(PeerInfo)));
  peerPid_.assign(n, 0);
  allInProcess_ = true;
  sameGpu_ = 0;
  for (int p = 0; p < n; p++) {
    peerPid_[p] = all[p].pid;
    allInProcess_ = allInProcess_ && all[p].pid == me.pid;
    if (all[p].pid == me.pid && p != comm_->rank) sharedProcess_ = true;
    if (!memcmp(&all[p].uuid, &me.uuid, sizeof(CUuuid))) sameGpu_++;
  }
  CLB_CHECK(decideViaHost(all));
  // Eager launches through prepared graphs where this rank is alone in its process (auto): with
  // rank threads of one process launching at once, graph launches measured slower than ordinary
  // ones on the H200 (4 ranks, 8 B: 14.6-17.5 vs 12.0-14.2 us per call; docs/device.md).
  launcher_.useGraphs(launchMode_ == kDeviceLaunchGraph || (launchMode_ == kDeviceLaunchAuto && !sharedProcess_));
  // The flag blocks: where the peers can reach them (CUDA IPC, the pointer itself, or host memory).
  CLB_CHECK(ensureShared(&flagBuf_, sizeof(ClbDevFlags), stream, "flags"));
  flags_ = flagBuf_.mine;
  peerFlags_.assign(n, nullptr);
  for (int p = 0; p < n; p++) peerFlags_[p] = reinterpret_cast<ClbDevFlags*>(flagBuf_.peers[p]);
  // Blocks of one launch wait for each other, and every rank sharing this GPU has one launch in
  // flight: together they must fit on the GPU at once (a margin of 4 blocks for other work).
  int perSm = 1, perSm2 = 1;
  CLB_CU(d_, cuOccupancyMaxActiveBlocksPerMultiprocessor, &perSm, staged_, kThreads, 0);
  CLB_CU(d_, cuOccupancyMaxActiveBlocksPerMultiprocessor, &perSm2, direct_, kThreads, 0);
  perSm = std::min(perSm, perSm2);
  CLB_CU(d_, cuOccupancyMaxActiveBlocksPerMultiprocessor, &perSm2, ll_, kThreads, 0);
  const int slots = kernels_.smCount() * std::max(1, std::min(perSm, perSm2));
  maxBlocks_ = (unsigned)std::max(1, std::min(kMaxBlocks, (slots - 4) / sameGpu_));
  // Ranks sharing this GPU's context (threads of this process) launch together (launch_meet.h).
  std::vector<int> together;
  for (int p = 0; p < n; p++)
    if (all[p].pid == me.pid && !memcmp(&all[p].uuid, &me.uuid, sizeof(CUuuid))) together.push_back(p);
  if (together.size() > 1 && meetOff_) {
    CLB_WARN("rank %d: COLIBRI_DEVICE_MEET=off: the %zu ranks on GPU %d in this process launch without meeting; "
             "an allocation, free or device synchronization on one of their threads between calls can deadlock "
             "them until the timeout (docs/device.md)", comm_->rank, together.size(), ordinal_);
  } else if (together.size() > 1) {
    char key[96];
    snprintf(key, sizeof key, "%016llx-", (unsigned long long)comm_->boot.sessionNonce());
    std::string k = key;
    for (unsigned char c : std::string(me.uuid.bytes, sizeof me.uuid.bytes)) {
      snprintf(key, sizeof key, "%02x", c);
      k += key;
    }
    meet_ = LaunchMeet::join(k, together);
  }
  watched_.rank = comm_->rank;
  watched_.nranks = n;
  watched_.timeoutMs = comm_->cfg.timeoutMs;
  watched_.warnMs = comm_->cfg.timeoutMs * warnPercent_ / 100;
  watched_.status = hostStatus_;
  watchdogAdd(&watched_);
  watching_ = true;
  CLB_INFO("rank %d: device collectives on GPU %d (%d rank(s) on it, %s); up to %u blocks per call; %s",
           comm_->rank, ordinal_, sameGpu_, allInProcess_ ? "all ranks in this process" : "ranks in several processes",
           maxBlocks_, kernels_.description().c_str());
  return clbSuccess;
}

// Whether any two ranks' GPUs cannot reach each other's memory (or COLIBRI_DEVICE_P2P=off):
// then every shared buffer goes to host memory. Each rank checks its own GPU against the others,
// and all agree on the answer. GPUs of this process that can reach each other get peer access.
clbResult_t DeviceWorld::decideViaHost(const std::vector<PeerInfo>& all) {
  const int n = comm_->nranks, me = comm_->rank;
  std::vector<int32_t> need(n, 0);
  std::string why = forceHost_ ? "COLIBRI_DEVICE_P2P=off" : "";
  for (int p = 0; p < n && !forceHost_; p++) {
    if (!memcmp(&all[p].uuid, &all[me].uuid, sizeof(CUuuid))) continue;
    // The peer's GPU as this process numbers it (CUDA_VISIBLE_DEVICES may differ between processes).
    int count = 0, can = 0;
    CUdevice other = -1;
    CLB_CU(d_, cuDeviceGetCount, &count);
    for (int g = 0; g < count && other < 0; g++) {
      CUdevice dv;
      CUuuid u;
      if (d_->cuDeviceGet(&dv, g) == CUDA_SUCCESS && d_->cuDeviceGetUuid(&u, dv) == CUDA_SUCCESS &&
          !memcmp(&u, &all[p].uuid, sizeof u))
        other = dv;
    }
    if (other >= 0) CLB_CU(d_, cuDeviceCanAccessPeer, &can, dev_, other);
    if (!can) {
      char b[160];
      snprintf(b, sizeof b, "GPU %d cannot access rank %d's GPU%s directly (no peer access)", ordinal_, p,
               other < 0 ? " (not visible to this process)" : "");
      why = b;
      break;
    }
    if (all[p].pid == all[me].pid) {  // another GPU of this process: enable access to its memory
      CUcontext otherCtx;
      CLB_CU(d_, cuDevicePrimaryCtxRetain, &otherCtx, other);
      CUresult rc = d_->cuCtxEnablePeerAccess(otherCtx, 0);
      if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return cuError(rc, "cuCtxEnablePeerAccess");
    }
  }
  need[me] = !why.empty();
  CLB_CHECK(comm_->boot.allGather(need.data(), sizeof(int32_t)));
  for (int p = 0; p < n; p++) viaHost_ = viaHost_ || need[p];
  if (viaHost_)
    CLB_WARN("rank %d: device collectives go through host memory (slower): %s", me,
             why.empty() ? "another rank's GPU has no peer access to some GPU" : why.c_str());
  return clbSuccess;
}

// A shared buffer in pinned host memory: POSIX shared memory this rank creates, that every rank
// maps and registers with CUDA (so its kernels reach it), and that is unlinked once all did.
clbResult_t DeviceWorld::allocHostShared(SharedBuffer* b, size_t bytes, const char* what) {
  const int n = comm_->nranks, me = comm_->rank;
  const size_t len = (bytes + 4095) / 4096 * 4096;
  std::vector<HostShmInfo> all(n);
  HostShmInfo& mine = all[me];
  mine.pid = getpid();
  snprintf(mine.name, sizeof mine.name, "/clb-%d-%016llx-dev-r%d-%llu", (int)mine.pid,
           (unsigned long long)comm_->boot.sessionNonce(), me, (unsigned long long)hostGen_++);
  auto mapShm = [&](const char* name, bool create, void** out) -> clbResult_t {
    char* p = nullptr;
    CLB_CHECK(mapSegment(name, len, create, &p));  // the name as the shm transport's: swept if we die
    CUresult rc = d_->cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (rc != CUDA_SUCCESS) {
      munmap(p, len);
      if (create) shm_unlink(name);
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
    CUresult cr = d_->cuMemHostGetDevicePointer(&b->mine, own, 0);
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
  for (int p = 0; p < n && ex == clbSuccess && rc == clbSuccess; p++) {
    void* at = reinterpret_cast<void*>(all[p].ptr);  // the same address space
    if (all[p].pid != mine.pid) rc = mapShm(all[p].name, false, &at);
    CUdeviceptr dp = 0;
    if (rc == clbSuccess) {
      CUresult cr = d_->cuMemHostGetDevicePointer(&dp, at, 0);
      if (cr != CUDA_SUCCESS) rc = cuError(cr, "cuMemHostGetDevicePointer (a peer's buffer in host memory)");
    }
    b->peers[p] = reinterpret_cast<char*>(dp);
  }
  // Every rank mapped every buffer (or failed): the names can go, and all learn the outcome.
  clbResult_t all2 = ex == clbSuccess ? agreeOnStatus(comm_, rc, what) : ex;
  if (own) shm_unlink(mine.name);
  if (all2 != clbSuccess) {
    releaseShared(b);
    return all2;
  }
  CLB_INFO("rank %d: %s buffer %zu bytes in host memory", me, what, bytes);
  return clbSuccess;
}

clbResult_t DeviceWorld::ensureShared(SharedBuffer* b, size_t bytes, CUstream stream, const char* what) {
  if (b->mine && bytes <= b->bytes) return clbSuccess;
  CLB_CHECK(refuseInCapture(stream, bytes));
  // Every rank reaches this point at the same call (same sizes everywhere), so this is collective.
  CtxScope scope(d_, ctx_);
  if (b->mine) {
    // Growing: every rank drains its stream, then all meet, then the old buffers go.
    CLB_CU(d_, cuStreamSynchronize, stream);
    CLB_CHECK(comm_->boot.barrier());
    releaseShared(b);
  }
  if (viaHost_) return allocHostShared(b, bytes, what);
  CLB_CU(d_, cuMemAlloc, &b->mine, bytes);
  b->bytes = bytes;
  comm_->mem.addDevice((int64_t)bytes);
  CLB_CHECK(zeroNow(b->mine, bytes));  // LL lines start with flag 0: no call has that number
  const int n = comm_->nranks;
  std::vector<StagingInfo> all(n);
  all[comm_->rank].staging = b->mine;
  CLB_CU(d_, cuIpcGetMemHandle, &all[comm_->rank].hStaging, b->mine);
  CLB_CHECK(comm_->boot.allGather(all.data(), sizeof(StagingInfo)));
  b->peers.assign(n, nullptr);
  for (int p = 0; p < n; p++) {
    if (peerPid_[p] == getpid()) {
      b->peers[p] = reinterpret_cast<char*>(all[p].staging);
      continue;
    }
    CUdeviceptr s = 0;
    CLB_CU(d_, cuIpcOpenMemHandle, &s, all[p].hStaging, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    b->opened.push_back(s);
    b->peers[p] = reinterpret_cast<char*>(s);
  }
  CLB_INFO("rank %d: %s buffer %zu bytes on GPU %d", comm_->rank, what, bytes, ordinal_);
  return clbSuccess;
}

// A stream of another GPU than the communicator's would run kernels that cannot see this rank's
// set-up: refuse it by name rather than fail inside the launch.
clbResult_t DeviceWorld::checkStream(CUstream stream) {
  if (!stream) return clbSuccess;
  CUcontext sctx = nullptr;
  CLB_CU(d_, cuStreamGetCtx, stream, &sctx);
  if (sctx == ctx_) return clbSuccess;
  CUdevice sdev = -1;
  CLB_CU(d_, cuCtxPushCurrent, sctx);
  CUresult rc = d_->cuCtxGetDevice(&sdev);
  CUcontext popped;
  d_->cuCtxPopCurrent(&popped);
  if (rc != CUDA_SUCCESS) return cuError(rc, "cuCtxGetDevice");
  if (sdev != dev_)
    return setError(clbInvalidArgument,
                    "rank %d's stream belongs to GPU %d but its buffers (and communicator) are on GPU %d: create the "
                    "stream on GPU %d", comm_->rank, (int)sdev, ordinal_, ordinal_);
  return clbSuccess;
}

void DeviceWorld::common(ClbDevCallArgs* k, const CollArgs& a) const {
  for (int p = 0; p < comm_->nranks; p++) k->flags[p] = peerFlags_[p];
  k->host = reinterpret_cast<ClbDevHostStatus*>(hostStatusDev_);
  k->timeoutNs = (unsigned long long)comm_->cfg.timeoutMs * 1000000ull;
  k->warnNs = (unsigned long long)watched_.warnMs * 1000000ull;
  k->rank = comm_->rank;
  k->nranks = comm_->nranks;
  k->in = a.desc.coll == kBroadcast && comm_->rank != a.root ? nullptr : a.send;
  k->out = a.recv;
  k->type = a.type;
  k->op = a.op;
  k->root = a.root;
  k->count = a.count;
  k->elemSize = (int)clbTypeSize(a.type);
  switch (a.desc.coll) {
    case kAllReduce: k->coll = CLB_DEV_ALLREDUCE; break;
    case kAllGather: k->coll = CLB_DEV_ALLGATHER; break;
    case kReduceScatter: k->coll = CLB_DEV_REDUCESCATTER; break;
    default: k->coll = CLB_DEV_BROADCAST; break;
  }
}

size_t DeviceWorld::slotBytes() const { return staging_.bytes / 2 / comm_->nranks / 16 * 16; }

unsigned DeviceWorld::blocksFor(size_t bytes) const {
  return (unsigned)std::min<size_t>(maxBlocks_, std::max<size_t>(1, bytes / kBytesPerBlock));
}

clbResult_t DeviceWorld::staged(const CollArgs& a, size_t e0, size_t m, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = comm_->nranks, r = comm_->rank;
  ClbDevCallArgs k{};
  common(&k, a);  // in, out and count are this round's, below
  k.half = staging_.bytes / 2;
  k.slot = slotBytes();
  for (int p = 0; p < n; p++) k.staging[p] = staging_.peers[p];
  k.inSlices = 1;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  switch (a.desc.coll) {
    case kAllReduce:
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.mode = 0;
      k.out = out + e0 * esz;
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
  }
  const size_t bytes = std::max<size_t>(k.inBytes * n, m * esz * (k.mode == 1 ? n : 1));
  return launcher_.launch(d_, staged_, blocksFor(bytes), kThreads, stream, &k, sizeof k);
}

// `k` holds common()'s fields, and the peers' buffers when the host gave them (registered).
clbResult_t DeviceWorld::direct(const CollArgs& a, CUstream stream, ClbDevCallArgs k) {
  const size_t esz = clbTypeSize(a.type);
  const int n = comm_->nranks;
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
  return launcher_.launch(d_, direct_, blocksFor(bytes), kThreads, stream, &k, sizeof k);
}

clbResult_t DeviceWorld::run(const CollArgs& a, int ordinal, CUstream stream) {
  if (ordinal_ >= 0 && ordinal != ordinal_)
    return setError(clbInvalidArgument,
                    "rank %d's buffers are on GPU %d but its communicator works with GPU %d: one "
                    "communicator per GPU", comm_->rank, ordinal, ordinal_);
  if (!configError_.empty()) return setError(clbInvalidArgument, "%s", configError_.c_str());
  if (!flags_) {
    CLB_CHECK(setUp(ordinal, stream));
    comm_->deviceReady.store(this, std::memory_order_release);
  }
  CLB_CHECK(deviceStatus());
  if (sharedProcess_ && !stream)
    return setError(clbInvalidUsage,
                    "rank %d shares its process with other ranks of this communicator, and they would all use the "
                    "default stream (0), where each rank's kernels wait behind the others': give every rank its "
                    "own stream", comm_->rank);
  CLB_CHECK(checkStream(stream));
  const size_t esz = clbTypeSize(a.type);
  const int n = comm_->nranks;
  // Every rank decides alike, from what all ranks agree on (collective, count, type, placement).
  const size_t perDest = a.count * esz;                 // bytes a rank sends to each rank
  const size_t msg = perDest * (a.desc.coll == kAllGather || a.desc.coll == kReduceScatter ? n : 1);
  DevicePath path = DevicePath::kStaged;
  const bool readPeers = allInProcess_ && !viaHost_;  // peers' buffers readable in place
  if (path_ == DevicePath::kLL && perDest <= llMax_) path = DevicePath::kLL;
  else if (path_ == DevicePath::kDirect && readPeers) path = DevicePath::kDirect;
  else if (path_ == DevicePath::kAuto) {
    if (perDest <= llMax_) path = DevicePath::kLL;
    else if (readPeers && msg >= directMin_) path = DevicePath::kDirect;
  }
  // The direct kernel's arguments, which the call agreement below may complete; built only when
  // needed (the LL kernel builds its own), as they cost an eager call time.
  ClbDevCallArgs k;
  bool built = false;
  auto args = [&]() -> ClbDevCallArgs& {
    if (!built) {
      k = ClbDevCallArgs{};
      common(&k, a);
      built = true;
    }
    return k;
  };
  // Ranks in several processes read each other's buffers in place when every rank's are registered.
  // Both need every rank's word on this call (over the host), so both are decided alike everywhere:
  // registrations are made and dropped by collective steps (a registration kept only where every
  // rank mapped it; a deregistration meets every rank), so every rank holds as many at any call.
  const bool zeroCopy = path == DevicePath::kStaged && path_ != DevicePath::kStaged && !allInProcess_ && !viaHost_ &&
                        !regs_.empty() && msg >= directMin_;
  if (n > 1 && (zeroCopy || checkCalls_)) {
    bool given = false;
    CLB_CHECK(agreeCall(a, zeroCopy, &args(), &given));
    if (given) path = DevicePath::kDirect;
  }
  lastPath_ = path;
  lastZeroCopy_ = path == DevicePath::kDirect && !allInProcess_;
  // The LL buffer is set up whole at the first call of any size, so that after one call every
  // size up to llMax_ can be captured in a CUDA graph. Two halves (call parity) of one slot per
  // rank; a slot holds 16-byte lines of 8 data bytes.
  auto llBytes = [n](size_t perRank) { return 2 * (size_t)n * (((perRank + 7) / 8 * 16 + 4095) / 4096 * 4096); };
  if (!llBuf_.mine && llMax_ > 0 && (path_ == DevicePath::kAuto || path_ == DevicePath::kLL)) CLB_CHECK(ensureShared(&llBuf_, llBytes(llMax_), stream, "LL"));
  if (path == DevicePath::kLL) CLB_CHECK(ensureShared(&llBuf_, std::max(llBuf_.bytes, llBytes(perDest)), stream, "LL"));
  if (path == DevicePath::kStaged) {
    // A staging half holds one slot per rank; a round moves at most a slot's worth of elements.
    size_t want = std::min(std::max(a.count * esz * n, kMinHalf), kMaxHalf);
    want = (want + kMinHalf - 1) / kMinHalf * kMinHalf;
    CLB_CHECK(ensureShared(&staging_, std::max(staging_.bytes, 2 * want), stream, "staging"));
  }
  // Everything above that meets the peers over the host is done: now only launches.
  if (path == DevicePath::kLL) return together(a, [&] { CtxScope scope(d_, ctx_); return ll(a, stream); });
  if (path == DevicePath::kDirect)
    return together(a, [&] { CtxScope scope(d_, ctx_); return direct(a, stream, args()); });
  // Staged rounds meet one by one: two rounds of one rank in a row could otherwise share a
  // hardware queue with a peer's, the second waiting for the first, which waits for the peer's
  // first, queued behind them.
  const size_t perRound = slotBytes() / esz;
  for (size_t e0 = 0; e0 < a.count; e0 += perRound)
    CLB_CHECK(together(a, [&] {
      CtxScope scope(d_, ctx_);
      return staged(a, e0, std::min(perRound, a.count - e0), stream);
    }));
  return clbSuccess;
}

template <class F>
clbResult_t DeviceWorld::together(const CollArgs& a, F&& launch) {
  if (!meet_) return launch();
  clbResult_t rc = meet_->arrive(comm_, a.desc, watched_.warnMs);
  if (rc != clbSuccess) {
    // Calls that differ are refused alike by every rank here (ranks elsewhere launched and wait,
    // and the ranks' calls may be out of step for good, one having been refused alone before):
    // the communicator cannot go on. Other failures mark it failed in run()'s caller.
    if (rc == clbInvalidUsage) comm_->markFailed(rc);
    return rc;
  }
  rc = launch();
  const std::string why = rc == clbSuccess ? std::string() : lastError();
  clbResult_t left = meet_->launched(comm_);
  if (rc != clbSuccess) return setError(rc, "%s", why.c_str());
  return left;
}

clbResult_t DeviceWorld::deviceStatus() const {
  const volatile ClbDevHostStatus* s = hostStatus_;
  if (!s || !s->error) return clbSuccess;
  std::atomic_thread_fence(std::memory_order_acquire);  // the fields the kernel wrote before `error`
  const unsigned long long call = s->errorCall;
  char ranks[128];
  return setError(clbTimeout,
                  "a device wait of rank %d's device call #%llu (%s) timed out after %lld ms waiting for rank(s) %s "
                  "(a peer died, hung, or made different calls): the output of that call and of every later one on "
                  "this communicator is undefined; destroy the communicator", comm_->rank, call,
                  collName(s->errorColl), (long long)comm_->cfg.timeoutMs,
                  ranksTimedOutFor(s, comm_->nranks, call, ranks, sizeof ranks));
}

clbResult_t DeviceWorld::ll(const CollArgs& a, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = comm_->nranks;
  ClbDevCallArgs k{};
  common(&k, a);
  for (int p = 0; p < n; p++) k.staging[p] = llBuf_.peers[p];
  k.half = llBuf_.bytes / 2;
  k.slot = k.half / n;
  const size_t lines = (a.count * esz + 7) / 8;
  const unsigned blocks = (unsigned)std::min<size_t>(maxBlocks_, std::max<size_t>(1, (lines + kThreads - 1) / kThreads));
  return launcher_.launch(d_, ll_, blocks, kThreads, stream, &k, sizeof k);
}

std::string DeviceWorld::describe() const {
  if (!d_) return "device: not used yet (set up at the first collective on device memory)\n";
  if (acrossHosts_)
    return "device: GPU " + std::to_string(ordinal_) + ", ranks on several hosts: device buffers through " +
           gpuDirectInfo() + "; " + std::to_string(stageBytes_[0] + stageBytes_[1]) +
           " bytes of pinned host staging; each call waits for its stream\n";
  char b[1024];
  snprintf(b, sizeof b,
           "device: GPU %d, %d rank(s) on it, %s%s; LL up to %zu bytes per rank, then %s; last call %s%s; "
           "%zu registration(s), %zu peer allocation(s) mapped; LL buffer %zu bytes, staging %zu bytes; kernels %s; "
           "eager launches %s (%zu prepared)\n",
           ordinal_, sameGpu_, allInProcess_ ? "every rank in this process" : "ranks in several processes",
           viaHost_ ? ", flags, LL and staging in host memory (no peer access between some GPUs)" : "", llMax_,
           viaHost_ ? "staged" : allInProcess_ ? "direct (peers' buffers read in place)"
                                               : "direct on registered buffers (zero copy), else staged",
           lastPath(), lastZeroCopy_ ? " (zero copy through registered buffers)" : "", regs_.size(),
           mappings_.size(), llBuf_.bytes, staging_.bytes, kernels_.description().c_str(),
           launcher_.usesGraphs() ? "replay graphs" : "are ordinary", launcher_.graphs());
  return b;
}

}  // namespace clb::cuda
