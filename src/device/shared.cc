// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// DeviceShared (shared.h): the set-up every device path inside a node stands on. At the first
// device call (or registration), a collective step: the kernels, the status block, every rank's
// process and GPU, whether the GPUs reach each other (else every shared buffer goes to host
// memory), the flag blocks, how many blocks a launch may take, whether the ranks sharing this GPU
// and process meet around their launches, and last the watchdog (of a set-up that completed). The
// shared buffers themselves come at the call that first needs each (NodeMemory, node_memory.h).
#include "device/shared.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/dtype.h"
#include "base/error.h"
#include "device/device.h"
#include "device/device_context.h"
#include "device/paths.h"
#include "device/stop.h"
#include "transport/transport.h"

namespace clb::cuda {

struct PeerInfo {  // exchanged once, at set-up
  int32_t pid;     // unused: which ranks share a process is Bootstrap::inThisProcess
  int32_t ordinal;
  CUuuid uuid;
};

DeviceSettings::DeviceSettings(const DeviceConfig& c)
    // The setting's word is the name of the path it forces (CollectivePath::name).
    : forced(c.path == kDevicePathAuto ? nullptr : optionWord("devicePath", c.path)),
      directMin((size_t)c.directMinBytes),
      llMax((size_t)c.llMaxBytes),
      llMaxGiven(c.llMaxGiven),
      gate(c.gate),
      launch(c.launch),
      p2pOff(c.p2pOff),
      checkCalls(c.checkCalls),
      meetOff(c.meetOff),
      warnPercent(c.stuckWarnPercent) {}

bool DeviceSettings::forcedTo(const char* name) const { return forced && !strcmp(forced, name); }

clbResult_t DeviceStatusBlock::setUp(const Driver* d, DeviceCommContext* comm, int64_t warnPercent) {
  if (!host) {  // kept from a set-up that failed later on: not watched yet (watch() comes last)
    CLB_CU(d, cuMemHostAlloc, reinterpret_cast<void**>(&host), sizeof(ClbDevHostStatus), CU_MEMHOSTALLOC_DEVICEMAP);
    memset(host, 0, sizeof(ClbDevHostStatus));
    CLB_CU(d, cuMemHostGetDevicePointer, &dev, host, 0);
  }
  watched.rank = comm->rank;
  watched.nranks = comm->nranks;
  watched.timeoutMs = comm->cfg.timeoutMs;
  watched.warnMs = comm->cfg.timeoutMs * warnPercent / 100;
  watched.status = host;
  return clbSuccess;
}

void DeviceStatusBlock::watch() {
  if (watching) return;
  watchdogAdd(&watched);
  watching = true;
}

void DeviceStatusBlock::unwatch() {
  if (watching) watchdogRemove(&watched);
  watching = false;
}

void DeviceStatusBlock::release(const Driver* d) {
  unwatch();
  if (host) d->cuMemFreeHost(host);
  host = nullptr;
  dev = 0;
}

clbResult_t DeviceStatusBlock::check(const DeviceCommContext* comm) const {
  const volatile ClbDevHostStatus* s = host;
  if ((!s || !s->error) && stopped.load(std::memory_order_acquire)) return setError(stopCode, "%s", stopText.c_str());
  if (!s || !s->error) return clbSuccess;
  std::string text;
  const clbResult_t rc = deviceError(s, comm->rank, comm->nranks, comm->cfg.timeoutMs, &text);
  // A peer whose communicator failed (CLB_DEV_SIG_FAILED): what it told the peers' hosts, when its
  // notice says (the failure's reason: the argument it refused, say).
  PeerNotice n;
  if (s->errorKind == CLB_DEV_ERR_DISAGREE && s->errorPeerSig == CLB_DEV_SIG_FAILED && comm->carrier &&
      comm->carrier->statusNotice(&n) && n.kind == PeerNotice::kFailed && n.origin == s->errorRank && n.reason)
    text += ". Rank " + std::to_string(n.origin) + " said: " + std::string(n.reason).substr(0, 400);
  return setError(rc, "%s", text.c_str());
}

DeviceShared::DeviceShared(DeviceCommContext* comm)
    : comm(comm), runtime(gpuRuntime(comm)), settings(comm->deviceCfg), memory(comm, runtime, layout), launch(comm) {}

DeviceShared::~DeviceShared() = default;

clbResult_t DeviceShared::bindGpu(int gpu) {
  CLB_CHECK(runtime.bind(gpu));
  d = runtime.driver();
  ctx = runtime.context();
  dev = runtime.device();
  ordinal = runtime.ordinal();
  return clbSuccess;
}

clbResult_t DeviceShared::setUp(int gpu, CUstream stream) {
  CLB_CHECK(memory.refuseInCapture(stream, 0));
  // Every rank reaches this point at its first device call, the same call everywhere: collective.
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
  CLB_CHECK(kernels->function("clb_dev_gate", &launch.gateFn));
  CLB_CHECK(status.setUp(d, comm, settings.warnPercent));
  status.watched.tick = [this, drv = d, context = ctx] {
    stopIfAbandoned(drv, context);
    tellPeersOfFailure(drv, context, false);
    hearPeersFailures(drv, context);
  };
  launch.warnMs = status.watched.warnMs;

  std::vector<PeerInfo> all(n);
  PeerInfo& me = all[comm->rank];
  me.pid = getpid();
  me.ordinal = ordinal;
  CLB_CU(d, cuDeviceGetUuid, &me.uuid, dev);
  CLB_CHECK(comm->boot.allGather(all.data(), sizeof(PeerInfo)));
  layout.inProcess.assign(n, 0);
  layout.allInProcess = true;
  layout.sameGpu = 0;
  for (int p = 0; p < n; p++) {
    layout.inProcess[p] = comm->boot.inThisProcess(p);  // equal pids may be processes of two PID namespaces
    layout.allInProcess = layout.allInProcess && layout.inProcess[p];
    if (layout.inProcess[p] && p != comm->rank) layout.sharedProcess = true;
    if (!memcmp(&all[p].uuid, &me.uuid, sizeof(CUuuid))) layout.sameGpu++;
  }
  // Threads of one process meet on the host before they launch, but that orders their launches,
  // not the work their streams hold before the call: a late thread's GEMM is as much in need of
  // whole SMs as a late process's.
  launch.gateWide = settings.gate == kDeviceGateOn || (settings.gate == kDeviceGateAuto && layout.sameGpu > 1);
  CLB_CHECK(decideViaHost(all));
  // Eager launches through prepared graphs where this rank is alone in its process (auto): with
  // rank threads of one process launching at once, graph launches measured slower than ordinary
  // ones on the H200 (4 ranks, 8 B: 14.6-17.5 vs 12.0-14.2 us per call; docs/device.md).
  launch.launcher.useGraphs(settings.launch == kDeviceLaunchGraph ||
                            (settings.launch == kDeviceLaunchAuto && !layout.sharedProcess));
  // The flag blocks: where the peers can reach them (CUDA IPC, the pointer itself, or host memory).
  CLB_CHECK(memory.setUpFlags(stream));
  // Blocks of one launch wait for each other, and every rank sharing this GPU has one launch in
  // flight: together they must fit on the GPU at once (a margin of 4 blocks for other work).
  int perSm = kMaxBlocks;
  for (CUfunction fn : waiting) {
    int fits = 1;
    CLB_CU(d, cuOccupancyMaxActiveBlocksPerMultiprocessor, &fits, fn, kThreads, 0);
    perSm = std::min(perSm, fits);
  }
  const int slots = kernels->smCount() * std::max(1, perSm);
  layout.maxBlocks = (unsigned)std::max(1, std::min(kMaxBlocks, (slots - 4) / layout.sameGpu));
  meetWith(all);
  status.watch();
  CLB_INFO("rank %d: device collectives on GPU %d (%d rank(s) on it, %s); up to %u blocks per call%s; %s", comm->rank,
           ordinal, layout.sameGpu, layout.allInProcess ? "all ranks in this process" : "ranks in several processes",
           layout.maxBlocks, launch.gateWide ? " (wide ones behind the gate)" : "", kernels->description().c_str());
  return clbSuccess;
}

// Ranks sharing this GPU's context (threads of this process) launch together (launch_meet.h).
void DeviceShared::meetWith(const std::vector<PeerInfo>& all) {
  const PeerInfo& me = all[comm->rank];
  std::vector<int> together;
  for (int p = 0; p < comm->nranks; p++)
    if (layout.inProcess[p] && !memcmp(&all[p].uuid, &me.uuid, sizeof(CUuuid))) together.push_back(p);
  if (together.size() > 1 && settings.meetOff) {
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
    launch.meet = LaunchMeet::join(k, together);
  }
}

// Between processes an abort or a death reaches the peers' hosts at once (the notices), but not
// their kernels: the calls returned, and the kernels wait on the GPU for a rank that will not
// come, until the device timeout. So at each round of the watchdog (every 100 ms), and once more
// before a destroy waits for the kernels, when mustStopDevice says so (an abort here or a peer's,
// a death, a failed rank that cannot say how far its device calls go: stop.h), this rank's error
// word gets CLB_DEV_ERR_PEER: its kernels of this communicator end at once, those waiting now (the
// waits' slow path reads it) and every later one (callNumber), with undefined output, and the
// calls and clbCommGetAsyncError say why. A rank that failed on its own (a refusal) and can say
// how far it goes is not one of these: it completes the calls it had launched before
// (docs/semantics.md), so its peers' kernels of those calls must go on; only those of the first
// call it will never make end at once (tellPeersOfFailure). The word is written by a stream memory
// operation on a stream of its own, which needs no SM (the waiting kernels may hold them all);
// nothing waits for it, so the watchdog's round is never held up by it.
void DeviceShared::stopIfAbandoned(const Driver* drv, CUcontext context) {
  if (status.stopped.load(std::memory_order_relaxed) || !memory.ready()) return;
  clbResult_t code = clbSuccess;
  std::string why;
  if (!mustStopDevice(comm, &code, &why)) return;
  CtxScope scope(drv, context);
  CUresult rc = makeStopStream(drv);
  // This rank's copy of its error word (ClbDevCallArgs::counters + 24), which its kernels read:
  // in its flag block, or in device memory of its own when the flags are in host memory.
  if (rc == CUDA_SUCCESS) rc = drv->cuStreamWriteValue32(stopStream_, memory.counters + 24, CLB_DEV_ERR_PEER, 0);
  if (memory.flagBuf.host && memory.flagBuf.hostMine)
    static_cast<volatile ClbDevFlags*>(memory.flagBuf.hostMine)->error = CLB_DEV_ERR_PEER;
  status.stopCode = code;
  status.stopText = why;
  status.stopped.store(true, std::memory_order_release);
  if (rc != CUDA_SUCCESS)
    CLB_WARN("rank %d: %s; but stopping its kernels failed (CUDA error %d): they end at the device timeout", comm->rank,
             why.c_str(), (int)rc);
  else
    CLB_INFO("rank %d: %s", comm->rank, why.c_str());
}

// A rank whose communicator failed (a refusal of its own, an error, a peer's failure: not an
// abort, which stopIfAbandoned handles) launches no device call after it; its peers' kernels of
// that call, the next device call, would wait for it until the device timeout. Once this rank's
// kernels have finished every call it launched, it says which call that is (Transport::
// announceDeviceEnd, in its control block), and each peer's own watchdog writes, into its own flag
// block, this rank's call line for that call with a description no call has (CLB_DEV_SIG_FAILED,
// hearPeersFailures): the peer's kernels compare call lines on the slow path of every wait, as
// they compare every line, and end at once (a disagreement naming this rank: deviceError). Each
// rank writes only into memory of its own, which lives as long as its watchdog looks.
// Not before the kernels are done: until then this rank's count of completed calls does not say
// which call is next, and the line's slot (call parity) may still hold the line of a call in
// progress. Once they are, every peer has started the last of them, so it has finished the call
// before it, the last to read that slot. The kernels' count then equals the kernels launched that
// count a call (LaunchControl::counting, outside captures) and no launch is under way (launching).
// Not after a capture (graphs replay calls the host does not count), a launch that failed (some of
// its kernels may run) or an error of this rank's own kernels (one may have counted a call it did
// not finish): then every device kernel of the communicator ends, this rank's and its peers'
// (endEveryDeviceCall, then stopIfAbandoned at once), unless a peer said first how far it goes
// (this rank's failure follows from that peer's, whose end reaches the others too: an error of
// this rank's kernels that ended at its line, say); while another failed rank has not said yet,
// the next rounds ask again (stop.h bounds the wait). The count is read with an asynchronous
// copy, on a stream of its own, into the status block, and taken at the next round: the watchdog
// waits for nothing. At the latest when a destroy has waited for the kernels (`final`).
void DeviceShared::tellPeersOfFailure(const Driver* drv, CUcontext context, bool final) {
  if (told_ == Told::kDone || !memory.ready() || !status.host || comm->nranks < 2 || !comm->carrier) return;
  if (!comm->failed.load() || comm->aborted.load() || status.stopped.load(std::memory_order_relaxed)) return;
  if (launching.load()) return;  // a launch in progress is counted once it returns: the next round
  auto giveUp = [&](const char* why) {
    const EveryCall said = endEveryDeviceCall(comm, why, final);
    if (said == EveryCall::kLater) return;  // (told_ as it was: the next round decides)
    told_ = Told::kDone;
    if (said == EveryCall::kSaid) return stopIfAbandoned(drv, context);
    CLB_INFO(
        "rank %d: its communicator failed after a peer's and %s; its peers' device calls that wait for it end at "
        "that peer's end, else at the device timeout",
        comm->rank, why);
  };
  if (comm->captured.load(std::memory_order_relaxed)) return giveUp("its calls were captured in a CUDA graph");
  if (launchesUncounted.load()) return giveUp("a launch of its failed");
  CtxScope scope(drv, context);
  if (makeStopStream(drv) != CUDA_SUCCESS) return giveUp("it has no stream to read its count of completed calls");
  const uint64_t launched = launchedCalls.load();
  volatile ClbDevHostStatus* h = status.host;
  // A destroy reads afresh, after its wait for the kernels (a copy the watchdog made may be older).
  if (final && told_ == Told::kReading) {
    drv->cuStreamSynchronize(stopStream_);
    told_ = Told::kNo;
  }
  for (int pass = 0; pass < 2; pass++) {
    if (told_ == Told::kReading) {
      const CUresult q = final ? drv->cuStreamSynchronize(stopStream_) : drv->cuStreamQuery(stopStream_);
      if (q == CUDA_ERROR_NOT_READY) return;
      const uint64_t calls = h->hostCalls;
      if (q != CUDA_SUCCESS) return giveUp("reading its count of completed calls failed");
      if (h->error) return giveUp("its own kernels failed");
      if (calls > launched) return giveUp("its kernels completed calls that its host did not count");
      if (calls == launched) {
        told_ = Told::kDone;
        comm->carrier->announceDeviceEnd(launched + 1);
        CLB_INFO(
            "rank %d: its communicator failed; its peers' device call #%llu, which it will never make, ends "
            "at once",
            comm->rank, (unsigned long long)(launched + 1));
        return;
      }
      if (final) return giveUp("its kernels did not complete every call it launched");
    }
    // (Again:) this rank's completed calls (ClbDevCallArgs::counters + 16) into the status block.
    if (drv->cuMemcpyDtoHAsync(const_cast<unsigned long long*>(&h->hostCalls), memory.counters + 16,
                               sizeof h->hostCalls, stopStream_) != CUDA_SUCCESS)
      return giveUp("reading its count of completed calls failed");
    told_ = Told::kReading;
    if (!final) return;
  }
}

// A peer said which device call it will never make (tellPeersOfFailure): its call line for that
// call, with a description no call has, into this rank's own flag block, so that this rank's
// kernels of that call end at once. Two 8-byte writes, each with the call's flag beside half of
// the description, as a kernel's one 16-byte store is read (kernel_abi.h): a reader that sees the
// flag in both words has both halves. By stream memory operations where the flag block is in
// device memory (no SM needed; nothing waits for them), by the host where it is in host memory.
void DeviceShared::hearPeersFailures(const Driver* drv, CUcontext context) {
  if (!memory.ready() || !comm->carrier || comm->nranks < 2) return;
  if (heard_.empty()) heard_.assign(comm->nranks, 0);
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank || heard_[p]) continue;
    const uint64_t seq = comm->carrier->deviceEnd(p);
    // (Every call: stopIfAbandoned. Told in the boxes: the point-to-point kernels read them.)
    if (seq == 0 || seq == kDeviceEndEvery || seq == kDeviceEndToldInBoxes) continue;
    heard_[p] = 1;
    const uint64_t flag = CLB_DEV_LINE_FLAG(seq), sig = CLB_DEV_SIG_FAILED;
    const uint64_t low = (sig & 0xFFFFFFFFull) | flag << 32, high = (sig >> 32) | flag << 32;
    const size_t at = offsetof(ClbDevFlags, callLine) + ((seq & 1) * CLB_MAX_DEVICE_RANKS + p) * 16;
    if (memory.flagBuf.host) {
      auto* line = reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(memory.flagBuf.hostMine) + at);
      line[0].store(low, std::memory_order_release);
      line[1].store(high, std::memory_order_release);
      continue;
    }
    CtxScope scope(drv, context);
    CUresult rc = makeStopStream(drv);
    if (rc == CUDA_SUCCESS) rc = drv->cuStreamWriteValue64(stopStream_, memory.flagBuf.mine + at, low, 0);
    if (rc == CUDA_SUCCESS) rc = drv->cuStreamWriteValue64(stopStream_, memory.flagBuf.mine + at + 8, high, 0);
    if (rc != CUDA_SUCCESS)
      CLB_WARN(
          "rank %d: rank %d's communicator failed before its device call #%llu, but telling this rank's kernels "
          "failed (CUDA error %d): those waiting for it end at the device timeout",
          comm->rank, p, (unsigned long long)seq, (int)rc);
  }
}

CUresult DeviceShared::makeStopStream(const Driver* drv) {
  return stopStream_ ? CUDA_SUCCESS : drv->cuStreamCreate(&stopStream_, CU_STREAM_NON_BLOCKING);
}

void DeviceShared::release() {
  if (stopStream_) {  // a last round's write into this rank's flag block: done before the block goes
    d->cuStreamSynchronize(stopStream_);
    d->cuStreamDestroy(stopStream_);
  }
  stopStream_ = nullptr;
  launch.launcher.release(d);
  memory.releaseAll();
  status.release(d);
}

// Whether any two ranks' GPUs cannot reach each other's memory (or COLIBRI_DEVICE_P2P=off):
// then every shared buffer goes to host memory. Each rank checks its own GPU against the others,
// and all agree on the answer. GPUs of this process that can reach each other get peer access.
clbResult_t DeviceShared::decideViaHost(const std::vector<PeerInfo>& all) {
  const int n = comm->nranks, me = comm->rank;
  std::vector<int32_t> need(n, 0);
  std::string why = settings.p2pOff ? "COLIBRI_DEVICE_P2P=off" : "";
  for (int p = 0; p < n && !settings.p2pOff; p++) {
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
    if (layout.inProcess[p]) {  // another GPU of this process: enable access to its memory
      CUcontext otherCtx;
      CLB_CU(d, cuDevicePrimaryCtxRetain, &otherCtx, other);
      CUresult rc = d->cuCtxEnablePeerAccess(otherCtx, 0);
      if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return cuError(rc, "cuCtxEnablePeerAccess");
    }
  }
  need[me] = !why.empty();
  CLB_CHECK(comm->boot.allGather(need.data(), sizeof(int32_t)));
  for (int p = 0; p < n; p++) layout.viaHost = layout.viaHost || need[p];
  // Through host memory every LL reader polls n ranks' lines over PCIe, while the copies' cost
  // hardly grows with n: with three or more ranks they overtake LL from about 128 KiB per rank.
  if (layout.viaHost && n >= 3 && !settings.llMaxGiven)
    settings.llMax = std::min(settings.llMax, (size_t)kDefaultViaHostLLMaxBytes);
  if (layout.viaHost)
    CLB_WARN("rank %d: device collectives go through host memory (slower): %s", me,
             why.empty() ? "another rank's GPU has no peer access to some GPU" : why.c_str());
  return clbSuccess;
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
  for (int p = 0; p < comm->nranks; p++) k->flags[p] = memory.peerFlags[p];
  k->host = reinterpret_cast<ClbDevHostStatus*>(status.dev);
  k->counters = reinterpret_cast<unsigned int*>(memory.counters);
  k->timeoutNs = (unsigned long long)comm->cfg.timeoutMs * 1000000ull;
  k->warnNs = (unsigned long long)status.watched.warnMs * 1000000ull;
  k->rank = comm->rank;
  k->nranks = comm->nranks;
  k->replayGuard = launch.replayGuard ? 1 : 0;
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

unsigned DeviceShared::blocksFor(size_t bytes) const {
  return (unsigned)std::min<size_t>(layout.maxBlocks, std::max<size_t>(1, bytes / kBytesPerBlock));
}

}  // namespace clb::cuda
