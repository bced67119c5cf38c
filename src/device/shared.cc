// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// DeviceShared (shared.h): the set-up every device path inside a node stands on, and the memory
// every rank of the node sees. At the first device call (or registration), a collective step:
// the kernels, the status block, every rank's process and GPU, whether the GPUs reach each other
// (else every shared buffer goes to host memory), the flag blocks, how many blocks a launch may
// take, whether the ranks sharing this GPU and process meet around their launches, the watchdog.
// Then, at the call that first needs one, each shared buffer (flags, LL, staging), grown by a
// collective step all ranks take at the same call.
#include "device/shared.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "device/device_context.h"
#include "base/config.h"
#include "base/dtype.h"
#include "base/error.h"
#include "device/launch_meet.h"
#include "device/device.h"
#include "device/paths.h"
#include "transport/shm/shm.h"

namespace clb::cuda {

struct PeerInfo {  // exchanged once, at set-up
  int32_t pid;     // unused: which ranks share a process is Bootstrap::inThisProcess
  int32_t ordinal;
  CUuuid uuid;
};

namespace {
struct StagingInfo {  // exchanged whenever a shared buffer is (re)allocated in device memory
  uint64_t staging;
  CUipcMemHandle hStaging;
};
struct HostShmInfo {  // ... or in host memory
  int32_t pid;        // unused (see PeerInfo)
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

DeviceShared::DeviceShared(DeviceCommContext* comm) : comm(comm), runtime(gpuRuntime(comm)) {
  // Read at init (base/config.h), where the ranks compared them; a bad value is reported by the
  // first device call.
  const DeviceConfig& c = comm->deviceCfg;
  // The setting's word is the name of the path it forces (CollectivePath::name).
  forced = c.path == kDevicePathAuto ? nullptr : optionWord("devicePath", c.path);
  meetOff = c.meetOff;
  gateSetting = c.gate;
  launchMode = c.launch;
  forceHost = c.p2pOff;
  checkCalls = c.checkCalls;
  warnPercent = c.stuckWarnPercent;
  directMin = (size_t)c.directMinBytes;
  llMax = (size_t)c.llMaxBytes;
  llMaxGiven = c.llMaxGiven;
}

clbResult_t DeviceShared::bindGpu(int gpu) {
  CLB_CHECK(runtime.bind(gpu));
  d = runtime.driver();
  ctx = runtime.context();
  dev = runtime.device();
  ordinal = runtime.ordinal();
  return clbSuccess;
}

DeviceShared::~DeviceShared() = default;

bool DeviceShared::forcedTo(const char* name) const { return forced && !strcmp(forced, name); }

void DeviceShared::releaseShared(SharedBuffer* b) {
  for (CUdeviceptr p : b->opened) d->cuIpcCloseMemHandle(p);
  b->opened.clear();
  for (auto& [p, len] : b->hostMaps) {
    d->cuMemHostUnregister(p);
    munmap(p, len);
  }
  b->hostMaps.clear();
  if (b->host) {
    if (b->hostMine) comm->mem.addHost(-(int64_t)b->bytes);
  } else if (b->mine) {
    runtime.free(b->mine, b->bytes);
  }
  b->mine = 0;
  b->bytes = 0;
  b->host = false;
  b->hostMine = nullptr;
  b->peers.clear();
  b->hostPeers.clear();
}

clbResult_t DeviceShared::refuseInCapture(CUstream stream, size_t need) {
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
                  comm->rank, need, maxHalf());
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

clbResult_t DeviceShared::setUp(int gpu, CUstream stream) {
  CLB_CHECK(refuseInCapture(stream, 0));
  // Every rank reaches this point at its first device call, the same call everywhere: collective.
  CLB_CHECK(driver(&d));
  const int n = comm->nranks;
  if (n > CLB_MAX_DEVICE_RANKS)
    return setError(clbUnsupported, "device collectives support up to %d ranks per node, this communicator has %d",
                    CLB_MAX_DEVICE_RANKS, n);
  if (n > 1 && !comm->carrier->sharesMemory())
    return setError(clbUnsupported,
                    "the device paths inside a node (and buffer registration) need ranks that share memory (transport "
                    "shm), and this communicator's transport is %s: its device collectives go through the host "
                    "transport, without registration",
                    clbTransportName(comm->transport));
  CLB_CHECK(bindGpu(gpu));
  CtxScope scope(d, ctx);
  CLB_CHECK(runtime.kernels(ctx, &kernels));
  // Every path's kernels; those whose blocks wait for each other bound maxBlocks (below).
  std::vector<CUfunction> waiting;
  for (auto& path : paths) {
    CUfunction fn = nullptr;
    CLB_CHECK(path->load(*kernels, &fn));
    if (fn) waiting.push_back(fn);
  }
  CLB_CHECK(kernels->function("clb_dev_gate", &gateFn));
  CLB_CU(d, cuMemHostAlloc, reinterpret_cast<void**>(&hostStatus), sizeof(ClbDevHostStatus), CU_MEMHOSTALLOC_DEVICEMAP);
  memset(hostStatus, 0, sizeof(ClbDevHostStatus));
  CLB_CU(d, cuMemHostGetDevicePointer, &hostStatusDev, hostStatus, 0);

  std::vector<PeerInfo> all(n);
  PeerInfo& me = all[comm->rank];
  me.pid = getpid();
  me.ordinal = ordinal;
  CLB_CU(d, cuDeviceGetUuid, &me.uuid, dev);
  CLB_CHECK(comm->boot.allGather(all.data(), sizeof(PeerInfo)));
  inProcess.assign(n, 0);
  allInProcess = true;
  sameGpu = 0;
  for (int p = 0; p < n; p++) {
    inProcess[p] = comm->boot.inThisProcess(p);  // equal pids may be processes of two PID namespaces
    allInProcess = allInProcess && inProcess[p];
    if (inProcess[p] && p != comm->rank) sharedProcess = true;
    if (!memcmp(&all[p].uuid, &me.uuid, sizeof(CUuuid))) sameGpu++;
  }
  // Threads of one process meet on the host before they launch, but that orders their launches,
  // not the work their streams hold before the call: a late thread's GEMM is as much in need of
  // whole SMs as a late process's.
  gateWide = gateSetting == kDeviceGateOn || (gateSetting == kDeviceGateAuto && sameGpu > 1);
  CLB_CHECK(decideViaHost(all));
  // Eager launches through prepared graphs where this rank is alone in its process (auto): with
  // rank threads of one process launching at once, graph launches measured slower than ordinary
  // ones on the H200 (4 ranks, 8 B: 14.6-17.5 vs 12.0-14.2 us per call; docs/device.md).
  launcher.useGraphs(launchMode == kDeviceLaunchGraph || (launchMode == kDeviceLaunchAuto && !sharedProcess));
  // The flag blocks: where the peers can reach them (CUDA IPC, the pointer itself, or host memory).
  CLB_CHECK(ensureShared(&flagBuf, sizeof(ClbDevFlags), stream, "flags"));
  flags = flagBuf.mine;
  if (flagBuf.host) {
    CLB_CHECK(runtime.alloc(kOwnWordsBytes, "the block counters", &counters));
    ownCounters = true;
    CLB_CHECK(zeroNow(d, counters, kOwnWordsBytes));
  } else {
    counters = flags + offsetof(ClbDevFlags, blocks);
  }
  peerFlags.assign(n, nullptr);
  for (int p = 0; p < n; p++) peerFlags[p] = reinterpret_cast<ClbDevFlags*>(flagBuf.peers[p]);
  // Blocks of one launch wait for each other, and every rank sharing this GPU has one launch in
  // flight: together they must fit on the GPU at once (a margin of 4 blocks for other work).
  int perSm = kMaxBlocks;
  for (CUfunction fn : waiting) {
    int fits = 1;
    CLB_CU(d, cuOccupancyMaxActiveBlocksPerMultiprocessor, &fits, fn, kThreads, 0);
    perSm = std::min(perSm, fits);
  }
  const int slots = kernels->smCount() * std::max(1, perSm);
  maxBlocks = (unsigned)std::max(1, std::min(kMaxBlocks, (slots - 4) / sameGpu));
  // Ranks sharing this GPU's context (threads of this process) launch together (launch_meet.h).
  std::vector<int> together;
  for (int p = 0; p < n; p++)
    if (inProcess[p] && !memcmp(&all[p].uuid, &me.uuid, sizeof(CUuuid))) together.push_back(p);
  if (together.size() > 1 && meetOff) {
    CLB_WARN(
        "rank %d: COLIBRI_DEVICE_MEET=off: the %zu ranks on GPU %d in this process launch without meeting; "
        "an allocation, free or device synchronization on one of their threads between calls can deadlock "
        "them until the timeout (docs/device.md)",
        comm->rank, together.size(), ordinal);
  } else if (together.size() > 1) {
    char key[96];
    snprintf(key, sizeof key, "%016llx-", (unsigned long long)comm->boot.sessionNonce());
    std::string k = key;
    for (unsigned char c : std::string(me.uuid.bytes, sizeof me.uuid.bytes)) {
      snprintf(key, sizeof key, "%02x", c);
      k += key;
    }
    meet = LaunchMeet::join(k, together);
  }
  watched.rank = comm->rank;
  watched.nranks = n;
  watched.timeoutMs = comm->cfg.timeoutMs;
  watched.warnMs = comm->cfg.timeoutMs * warnPercent / 100;
  watched.status = hostStatus;
  watchdogAdd(&watched);
  watching = true;
  CLB_INFO("rank %d: device collectives on GPU %d (%d rank(s) on it, %s); up to %u blocks per call%s; %s", comm->rank,
           ordinal, sameGpu, allInProcess ? "all ranks in this process" : "ranks in several processes", maxBlocks,
           gateWide ? " (wide ones behind the gate)" : "", kernels->description().c_str());
  return clbSuccess;
}

// Whether any two ranks' GPUs cannot reach each other's memory (or COLIBRI_DEVICE_P2P=off):
// then every shared buffer goes to host memory. Each rank checks its own GPU against the others,
// and all agree on the answer. GPUs of this process that can reach each other get peer access.
clbResult_t DeviceShared::decideViaHost(const std::vector<PeerInfo>& all) {
  const int n = comm->nranks, me = comm->rank;
  std::vector<int32_t> need(n, 0);
  std::string why = forceHost ? "COLIBRI_DEVICE_P2P=off" : "";
  for (int p = 0; p < n && !forceHost; p++) {
    if (!memcmp(&all[p].uuid, &all[me].uuid, sizeof(CUuuid))) continue;
    // The peer's GPU as this process numbers it (CUDA_VISIBLE_DEVICES may differ between processes).
    int count = 0, can = 0;
    CUdevice other = -1;
    CLB_CU(d, cuDeviceGetCount, &count);
    for (int g = 0; g < count && other < 0; g++) {
      CUdevice dv;
      CUuuid u;
      if (d->cuDeviceGet(&dv, g) == CUDA_SUCCESS && d->cuDeviceGetUuid(&u, dv) == CUDA_SUCCESS &&
          !memcmp(&u, &all[p].uuid, sizeof u))
        other = dv;
    }
    if (other >= 0) CLB_CU(d, cuDeviceCanAccessPeer, &can, dev, other);
    if (!can) {
      char b[160];
      snprintf(b, sizeof b, "GPU %d cannot access rank %d's GPU%s directly (no peer access)", ordinal, p,
               other < 0 ? " (not visible to this process)" : "");
      why = b;
      break;
    }
    if (inProcess[p]) {  // another GPU of this process: enable access to its memory
      CUcontext otherCtx;
      CLB_CU(d, cuDevicePrimaryCtxRetain, &otherCtx, other);
      CUresult rc = d->cuCtxEnablePeerAccess(otherCtx, 0);
      if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return cuError(rc, "cuCtxEnablePeerAccess");
    }
  }
  need[me] = !why.empty();
  CLB_CHECK(comm->boot.allGather(need.data(), sizeof(int32_t)));
  for (int p = 0; p < n; p++) viaHost = viaHost || need[p];
  // Through host memory every LL reader polls n ranks' lines over PCIe, while the copies' cost
  // hardly grows with n: with three or more ranks they overtake LL from about 128 KiB per rank.
  if (viaHost && n >= 3 && !llMaxGiven) llMax = std::min(llMax, (size_t)kDefaultViaHostLLMaxBytes);
  if (viaHost)
    CLB_WARN("rank %d: device collectives go through host memory (slower): %s", me,
             why.empty() ? "another rank's GPU has no peer access to some GPU" : why.c_str());
  return clbSuccess;
}

// A shared buffer in pinned host memory: POSIX shared memory this rank creates, that every rank
// maps and registers with CUDA (so its kernels reach it), and that is unlinked once all did.
clbResult_t DeviceShared::allocHostShared(SharedBuffer* b, size_t bytes, const char* what) {
  const int n = comm->nranks, me = comm->rank;
  const size_t len = (bytes + 4095) / 4096 * 4096;
  std::vector<HostShmInfo> all(n);
  HostShmInfo& mine = all[me];
  mine.pid = getpid();
  snprintf(mine.name, sizeof mine.name, "%s",
           segmentName(comm->boot.sessionNonce(), me, "dev" + std::to_string(hostGen++)).c_str());
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
    comm->mem.addHost((int64_t)bytes);
    CUresult cr = d->cuMemHostGetDevicePointer(&b->mine, own, 0);
    if (cr != CUDA_SUCCESS) rc = cuError(cr, "cuMemHostGetDevicePointer");
  }
  mine.status = rc;
  if (rc != clbSuccess) snprintf(mine.why, sizeof mine.why, "%s", clbGetLastError());
  clbResult_t ex = comm->boot.allGather(all.data(), sizeof(HostShmInfo));
  for (int p = 0; p < n && ex == clbSuccess && rc == clbSuccess; p++)
    if (all[p].status != clbSuccess)
      rc = setError((clbResult_t)all[p].status, "rank %d could not set up the %s buffer in host memory: %s", p, what,
                    all[p].why);
  b->peers.assign(n, nullptr);
  b->hostPeers.assign(n, nullptr);
  for (int p = 0; p < n && ex == clbSuccess && rc == clbSuccess; p++) {
    void* at = reinterpret_cast<void*>(all[p].ptr);  // the same address space
    if (!inProcess[p]) rc = mapShm(all[p].name, false, &at);
    b->hostPeers[p] = static_cast<char*>(at);
    CUdeviceptr dp = 0;
    if (rc == clbSuccess) {
      CUresult cr = d->cuMemHostGetDevicePointer(&dp, at, 0);
      if (cr != CUDA_SUCCESS) rc = cuError(cr, "cuMemHostGetDevicePointer (a peer's buffer in host memory)");
    }
    b->peers[p] = reinterpret_cast<char*>(dp);
  }
  // Every rank mapped every buffer (or failed): the names can go, and all learn the outcome.
  clbResult_t all2 = ex == clbSuccess ? agreeOnStatus(comm, rc, what) : ex;
  if (lock >= 0) unlinkSegment(mine.name, &lock);
  if (all2 != clbSuccess) {
    releaseShared(b);
    return all2;
  }
  CLB_INFO("rank %d: %s buffer %zu bytes in host memory", me, what, bytes);
  return clbSuccess;
}

clbResult_t DeviceShared::ensureShared(SharedBuffer* b, size_t bytes, CUstream stream, const char* what) {
  if (b->mine && bytes <= b->bytes) return clbSuccess;
  CLB_CHECK(refuseInCapture(stream, bytes));
  // Every rank reaches this point at the same call with the same size, unless the ranks make
  // different calls: the sizes are compared first, so that no rank's kernels ever write past the
  // end of a peer's smaller buffer (the kernels compare the calls only once they run). Growing,
  // every rank drains its stream first: the exchange is then also the meeting after which the
  // old buffers go.
  CtxScope scope(d, ctx);
  if (b->mine) CLB_CU(d, cuStreamSynchronize, stream);
  const int n = comm->nranks;
  std::vector<uint64_t> sizes(n);
  sizes[comm->rank] = bytes;
  CLB_CHECK(comm->boot.allGather(sizes.data(), sizeof(uint64_t)));
  for (int p = 0; p < n; p++)
    if (sizes[p] != bytes) {
      comm->markFailed(clbInvalidUsage);
      return setError(clbInvalidUsage,
                      "rank %d's device call needs a %s buffer of %zu bytes but rank %d's needs %llu: the ranks make "
                      "different calls (every rank must make the same calls in the same order with the same count, "
                      "type, op and root); the communicator cannot go on",
                      comm->rank, what, bytes, p, (unsigned long long)sizes[p]);
    }
  if (b->mine) releaseShared(b);
  if (viaHost) return allocHostShared(b, bytes, what);
  CLB_CHECK(runtime.alloc(bytes, (std::string("the ") + what + " buffer").c_str(), &b->mine));
  b->bytes = bytes;
  CLB_CHECK(zeroNow(d, b->mine, bytes));  // LL lines start with flag 0: no call has that number
  std::vector<StagingInfo> all(n);
  all[comm->rank].staging = b->mine;
  CLB_CU(d, cuIpcGetMemHandle, &all[comm->rank].hStaging, b->mine);
  CLB_CHECK(comm->boot.allGather(all.data(), sizeof(StagingInfo)));
  b->peers.assign(n, nullptr);
  for (int p = 0; p < n; p++) {
    if (inProcess[p]) {
      b->peers[p] = reinterpret_cast<char*>(all[p].staging);
      continue;
    }
    CUdeviceptr s = 0;
    CLB_CU(d, cuIpcOpenMemHandle, &s, all[p].hStaging, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    b->opened.push_back(s);
    b->peers[p] = reinterpret_cast<char*>(s);
  }
  CLB_INFO("rank %d: %s buffer %zu bytes on GPU %d", comm->rank, what, bytes, ordinal);
  return clbSuccess;
}

clbResult_t DeviceShared::ensureStaging(const CollArgs& a, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  // Two halves, each sized to the call's n x count elements, at least kMinHalf and at most
  // maxHalf(), in steps of kMinHalf; never shrunk.
  size_t want = std::min(std::max(a.count * esz * comm->nranks, kMinHalf), maxHalf());
  want = (want + kMinHalf - 1) / kMinHalf * kMinHalf;
  return ensureShared(&staging, std::max(staging.bytes, 2 * want), stream, "staging");
}

clbResult_t checkStreamGpu(const Driver* d, CUstream stream, CUcontext ctx, CUdevice dev, int ordinal, int rank) {
  if (!stream) return clbSuccess;
  CUcontext sctx = nullptr;
  CLB_CU(d, cuStreamGetCtx, stream, &sctx);
  if (sctx == ctx) return clbSuccess;
  CUdevice sdev = -1;
  CLB_CU(d, cuCtxPushCurrent, sctx);
  CUresult rc = d->cuCtxGetDevice(&sdev);
  CUcontext popped;
  d->cuCtxPopCurrent(&popped);
  if (rc != CUDA_SUCCESS) return cuError(rc, "cuCtxGetDevice");
  if (sdev != dev)
    return setError(clbInvalidArgument,
                    "rank %d's stream belongs to GPU %d but its buffers (and communicator) are on GPU %d: create the "
                    "stream on GPU %d",
                    rank, (int)sdev, ordinal, ordinal);
  return clbSuccess;
}

clbResult_t DeviceShared::checkStream(CUstream stream) {
  return checkStreamGpu(d, stream, ctx, dev, ordinal, comm->rank);
}

int deviceCollective(uint32_t coll) {
  switch (coll) {
    case kAllReduce: return CLB_DEV_ALLREDUCE;
    case kAllGather: return CLB_DEV_ALLGATHER;
    case kReduceScatter: return CLB_DEV_REDUCESCATTER;
    case kBroadcast: return CLB_DEV_BROADCAST;
    case kReduce: return CLB_DEV_REDUCE;
    default: return -1;
  }
}

clbResult_t checkDeviceCollective(uint32_t coll) {
  if (deviceCollective(coll) >= 0) return clbSuccess;
  return setError(clbInternalError,
                  "the device runtime has no kernel for %s (code %u): the call's dispatch should not have sent it "
                  "here; please report it",
                  collectiveName(coll), coll);
}

void DeviceShared::common(ClbDevCallArgs* k, const CollArgs& a) const {
  for (int p = 0; p < comm->nranks; p++) k->flags[p] = peerFlags[p];
  k->host = reinterpret_cast<ClbDevHostStatus*>(hostStatusDev);
  k->counters = reinterpret_cast<unsigned int*>(counters);
  k->timeoutNs = (unsigned long long)comm->cfg.timeoutMs * 1000000ull;
  k->warnNs = (unsigned long long)watched.warnMs * 1000000ull;
  k->rank = comm->rank;
  k->nranks = comm->nranks;
  k->replayGuard = replayGuard ? 1 : 0;
  k->in = a.desc.coll == kBroadcast && comm->rank != a.root ? nullptr : a.send;
  k->out = a.desc.coll == kReduce && comm->rank != a.root ? nullptr : a.recv;
  k->type = a.type;
  k->op = a.op;
  k->root = a.root;
  k->count = a.count;
  k->elemSize = (int)clbTypeSize(a.type);
  k->coll = deviceCollective(a.desc.coll);  // known: Device::run refuses the others first
  // The call as the host names it (a.desc: a PreMulSum is not a sum there, whatever op the
  // kernels combine with, and a barrier is an allReduce with root kBarrierRoot).
  const bool rooted = k->coll == CLB_DEV_BROADCAST || k->coll == CLB_DEV_REDUCE;
  const bool reduces = k->coll != CLB_DEV_BROADCAST && k->coll != CLB_DEV_ALLGATHER;
  const int root = rooted ? a.root : a.desc.root == kBarrierRoot ? CLB_DEV_SIG_BARRIER : 0;
  k->sig = CLB_DEV_SIG(k->coll, a.type, reduces ? (int)a.desc.op : 0, root, a.count);
}

clbResult_t DeviceShared::gate(const ClbDevCallArgs& k, unsigned blocks, CUstream stream) {
  if (!gateWide || blocks <= kGateAboveBlocks) return clbSuccess;
  CLB_CHECK(launcher.launch(d, gateFn, 1, 32, stream, &k, sizeof k));
  if (!meeting) return clbSuccess;
  // Every rank decides alike (the same call, so the same blocks): each ends the first meeting and
  // arrives at a second one, and together() ends that after the kernel.
  clbResult_t rc = meet->launched(comm);
  if (rc == clbSuccess) rc = meet->arrive(comm, *meeting, watched.warnMs);
  if (rc != clbSuccess) meeting = nullptr;  // no meeting left open for together() to end
  return rc;
}

unsigned DeviceShared::blocksFor(size_t bytes) const {
  return (unsigned)std::min<size_t>(maxBlocks, std::max<size_t>(1, bytes / kBytesPerBlock));
}

clbResult_t DeviceShared::deviceStatus() const {
  const volatile ClbDevHostStatus* s = hostStatus;
  if (!s || !s->error) return clbSuccess;
  std::string text;
  const clbResult_t rc = deviceError(s, comm->rank, comm->nranks, comm->cfg.timeoutMs, &text);
  return setError(rc, "%s", text.c_str());
}

}  // namespace clb::cuda
