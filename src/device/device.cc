// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device (device.h): which path a call takes, set-up and release, describe(); and what the
// communicator asks of any pointer (classifyPointer, allocationOf, driverInProcess).
#include "device/device.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "device/device_context.h"
#include "base/dtype.h"
#include "base/error.h"
#include "device/stop.h"

namespace clb::cuda {

// Walks the loaded objects in memory (no system call): dlopen(RTLD_NOLOAD) of a library that is
// not loaded searches the library path on every call, which cost ~15 us per host collective.
static int findLibcuda(struct dl_phdr_info* info, size_t, void*) {
  return info->dlpi_name && strstr(info->dlpi_name, "libcuda.so") ? 1 : 0;
}

clbResult_t checkBuiltWithCuda() { return clbSuccess; }

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

const char* protocolName(Protocol p) { return p == Protocol::kLines ? "lines" : "simple"; }

const char* algorithmName(Algorithm a) {
  switch (a) {  // no default: a new algorithm without its word is a compiler warning (-Wswitch)
    case Algorithm::kPush: return "push";
    case Algorithm::kInPlace: return "in place";
    case Algorithm::kStaged: return "staged";
    case Algorithm::kCopyEngines: return "copy engines";
  }
  return "?";
}

// The registry: a new path is a line here (paths.h).
std::vector<std::unique_ptr<CollectivePath>> collectivePaths(DeviceShared& s) {
  std::vector<std::unique_ptr<CollectivePath>> paths;
  paths.push_back(std::make_unique<LLPath>(s));        // lines: push
  paths.push_back(std::make_unique<DirectPath>(s));    // simple: in place
  paths.push_back(std::make_unique<HostCopyPath>(s));  // simple: copy engines (no peer access)
  paths.push_back(std::make_unique<StagedPath>(s));    // simple: staged rounds
  return paths;
}

Device::Device(DeviceCommContext* comm) : s_(comm) {
  s_.paths = collectivePaths(s_);
  for (auto& p : s_.paths)
    if (s_.settings.forcedTo(p->name())) forced_ = p.get();
  if (!forced_) s_.settings.forced = nullptr;  // a word no path has (init refuses one): auto
}

Device::~Device() { release(); }

clbResult_t Device::release() {
  s_.comm->deviceReady.store(nullptr);
  s_.launch.meet.reset();
  gpuDirect_.release();
  if (s_.d) hostStaged_.release();
  if (!s_.d) {
    s_.status.unwatch();
    return clbSuccess;
  }
  CtxScope scope(s_.d, s_.ctx);  // destroy may run on any thread: frees and closes need this context
  if (!s_.ready()) {             // a set-up that failed half-way may have made the status block
    s_.status.release(s_.d);
    return clbSuccess;
  }
  // This rank's kernels may still run: wait for the context (the streams they ran on may be gone).
  // The watchdog still looks meanwhile: its rounds end them when the communicator is aborted, a peer
  // aborts or dies, or a peer says which call it will never make (DeviceShared's tick), also after
  // this wait began, as a peer that destroys at the first error it hears of needs.
  s_.d->cuCtxSynchronize();
  s_.status.unwatch();  // waits for a round in progress: from here on this thread alone
  // A failed communicator: the peers' kernels of the call it will never make end now, if the
  // watchdog did not end them yet.
  s_.tellPeersOfFailure(s_.d, s_.ctx, true);
  graceForEveryDeviceCall(s_.comm);  // (when it said every call ends: stop.h)
  // Peers may still read this rank's staging or buffers: wait (bounded) until they said they are done.
  // Not where some never will: this rank's kernels were stopped, or one of them failed (a call a
  // peer never made, a timeout) and may have counted its call all the same.
  const bool kernelsFailed = s_.status.stopped.load() || (s_.status.host && s_.status.host->error);
  if (!s_.comm->failed && !s_.comm->aborted && !kernelsFailed) {
    const SharedBuffer& flags = s_.memory.flagBuf;
    ClbDevFlags f;
    int64_t deadline = nowMs() + std::min<int64_t>(s_.comm->cfg.timeoutMs, 5000);
    for (;;) {
      if (flags.host)
        memcpy(&f, flags.hostMine, sizeof f);  // pinned host memory, this rank's view
      else if (s_.d->cuMemcpyDtoH(&f, flags.mine, sizeof f) != CUDA_SUCCESS)
        break;
      bool all = true;
      for (int p = 0; p < s_.comm->nranks; p++) all = all && f.done[p] >= f.calls;
      if (all || nowMs() > deadline) break;
      usleep(200);
    }
  }
  regs_.release();
  for (auto& p : s_.paths) p->release();
  s_.release();
  return clbSuccess;
}

void Device::markReady() {
  if (s_.ready()) s_.comm->deviceReady.store(this, std::memory_order_release);
}

clbResult_t Device::run(const CollArgs& a, int ordinal, CUstream stream) {
  CLB_CHECK(checkDeviceCollective(a.desc.coll));
  CLB_CHECK(s_.bindGpu(ordinal));
  if (s_.comm->nranks == 1) return runOneRank(a, stream);
  if (!s_.ready()) {
    CLB_CHECK(s_.setUp(ordinal, stream));
    markReady();
  }
  CLB_CHECK(s_.status.check(s_.comm));
  if (s_.layout.sharedProcess && !stream)
    return setError(clbInvalidUsage,
                    "rank %d shares its process with other ranks of this communicator, and they would all use the "
                    "default stream (0), where each rank's kernels wait behind the others': give every rank its "
                    "own stream",
                    s_.comm->rank);
  CLB_CHECK(s_.checkStream(stream));
  // A captured call's replays use the device objects, which clbCommSuspend would free: its graph
  // holds the communicator's count of captured calls until it is destroyed, and the suspend is
  // refused until then. A call captured where other ranks of this process share the GPU runs only
  // in a replay through clbGraphLaunch (its kernels check ClbDevFlags::replayPermit). One query
  // (the default stream cannot be captured).
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  if (stream) CLB_CU(s_.d, cuStreamIsCapturing, stream, &cap);
  if (cap != CU_STREAM_CAPTURE_STATUS_NONE) {
    s_.comm->captured.store(true, std::memory_order_relaxed);
    CLB_CHECK(holdWhileGraphLives(s_.d, stream, s_.comm->capturedCallHolds));
  }
  s_.launch.capturing = cap != CU_STREAM_CAPTURE_STATUS_NONE;
  s_.launch.replayGuard = s_.launch.meet && s_.launch.capturing;
  const int n = s_.comm->nranks;
  // Every rank decides alike, from what all ranks agree on (collective, count, type, placement).
  CallShape shape;
  shape.perDest = a.count * clbTypeSize(a.type);  // bytes a rank sends to each rank
  shape.msg = shape.perDest * (a.desc.coll == kAllGather || a.desc.coll == kReduceScatter ? n : 1);
  shape.windowed = isWindowed(forced_, s_, !regs_.empty(), shape, a.desc.coll);
  CollectivePath* path = choosePath(s_.paths, forced_, s_.settings.llMax, shape);
  // Ranks in several processes read each other's buffers in place when every rank's are
  // registered: a call that would stage on the device (not forced to) asks. Both that and the
  // check of every call need every rank's word on this call (over the host), so both are decided
  // alike everywhere: registrations are made and dropped by collective steps (a registration kept
  // only where every rank mapped it; a deregistration meets every rank), so every rank holds as
  // many at any call. (Not a reduce: its other ranks have no recv buffer to register; it stages.)
  const bool zeroCopy = asksForRegistered(*path, forced_, s_, !regs_.empty(), shape, a.desc.coll);
  // The kernel's arguments that the agreement completes (the peers' buffers); built only then, as
  // they cost an eager call time.
  ClbDevCallArgs k{};
  bool given = false;
  if (n > 1 && (zeroCopy || s_.settings.checkCalls)) {
    s_.common(&k, a);
    CLB_CHECK(regs_.agreeCall(a, zeroCopy, cap != CU_STREAM_CAPTURE_STATUS_NONE ? stream : nullptr, &k, &given));
    if (given) {
      shape.registered = true;
      path = choosePath(s_.paths, forced_, s_.settings.llMax, shape);
    }
  }
  lastPath_ = path->name();
  lastChosen_ = path;
  lastZeroCopy_ = given;
  lastWindowed_ = shape.windowed && !given;
  // The buffers the paths set up ahead and the chosen one needs, then (everything that meets the
  // peers over the host done) only launches.
  for (auto& p : s_.paths) CLB_CHECK(p->ahead(stream));
  CLB_CHECK(path->prepare(a, stream));
  // What the kernels will count (DeviceShared::tellPeersOfFailure): a captured call counts at its
  // replays instead, and a launch that failed part-way may count or not. Under way (`launching`)
  // the watchdog does not judge; and once the communicator failed (another thread may fail it:
  // clbCommFail) nothing more is launched, so a failure it judged stays judged.
  s_.launching.store(true);
  if (s_.comm->failed.load() || s_.comm->aborted.load()) {
    s_.launching.store(false);
    const bool aborted = s_.comm->aborted.load();
    return setError(aborted ? clbAborted : clbInvalidUsage,
                    "rank %d: the communicator %s by another thread while this call was being made: nothing was "
                    "launched; destroy the communicator",
                    s_.comm->rank, aborted ? "was aborted" : "failed");
  }
  const uint64_t before = s_.launch.counting;
  const clbResult_t rc = path->run(a, stream, s_.settings.checkCalls || given ? &k : nullptr);
  if (rc != clbSuccess)
    s_.launchesUncounted.store(true);
  else if (cap == CU_STREAM_CAPTURE_STATUS_NONE)
    s_.launchedCalls.fetch_add(s_.launch.counting - before);
  s_.launching.store(false);
  return rc;
}

bool isWindowed(const CollectivePath* forced, const DeviceShared& s, bool registrations, const CallShape& c,
                uint32_t coll) {
  if (!registrations || s.layout.allInProcess || s.layout.viaHost || c.perDest == 0 || c.perDest > s.settings.llMax ||
      (coll != kAllReduce && coll != kAllGather && coll != kReduceScatter))
    return false;
  // Forced direct only: under auto LL is faster at every size this takes (CallShape::windowed).
  return forced && forced->algorithm() == Algorithm::kInPlace;
}

bool asksForRegistered(const CollectivePath& path, const CollectivePath* forced, const DeviceShared& s,
                       bool registrations, const CallShape& c, uint32_t coll) {
  return registrations && path.algorithm() == Algorithm::kStaged && &path != forced && !s.layout.allInProcess &&
         !s.layout.viaHost && c.msg >= s.settings.directMin && coll != kReduce;
}

CollectivePath* choosePath(const std::vector<std::unique_ptr<CollectivePath>>& paths, CollectivePath* forced,
                           size_t llMax, const CallShape& c) {
  const Protocol protocol = c.perDest <= llMax && !c.windowed && (!forced || forced->protocol() == Protocol::kLines)
                                ? Protocol::kLines
                                : Protocol::kSimple;
  // The forced path first where it takes the call, whatever its place in the registry.
  if (forced && forced->protocol() == protocol && forced->takes(c)) return forced;
  for (auto& p : paths)
    if (p->protocol() == protocol && p->takes(c)) return p.get();
  return paths.back().get();  // the registry ends with a path that takes every call
}

// Every collective of one rank is a copy of its input: a reduction of one input (avg divides by
// 1; a PreMulSum's scaling already wrote recv, as a.send), an all-gather or reduce-scatter of one
// block, a broadcast from itself. So in place nothing runs, else one copy on the stream, which a
// capture records like any work. No kernels, flags or buffers: the communicator holds no device
// memory, and nothing a suspend would free.
clbResult_t Device::runOneRank(const CollArgs& a, CUstream stream) {
  CtxScope scope(s_.d, s_.ctx);
  CLB_CHECK(s_.checkStream(stream));
  lastPath_ = "one rank";
  lastChosen_ = nullptr;
  lastZeroCopy_ = false;
  lastWindowed_ = false;
  if (a.send == a.recv) return clbSuccess;
  CLB_CU(s_.d, cuMemcpyAsync, reinterpret_cast<CUdeviceptr>(a.recv), reinterpret_cast<CUdeviceptr>(a.send),
         a.count * clbTypeSize(a.type), stream);
  return clbSuccess;
}

clbResult_t Device::runAcrossHosts(const CollArgs& a, int ordinal, CUstream stream) {
  CLB_CHECK(checkDeviceCollective(a.desc.coll));
  CLB_CHECK(s_.bindGpu(ordinal));
  CtxScope scope(s_.d, s_.ctx);
  CLB_CHECK(s_.checkStream(stream));
  if (stream) {
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CLB_CU(s_.d, cuStreamIsCapturing, stream, &cap);
    if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
      return setError(clbInvalidUsage,
                      "rank %d: this communicator spans hosts, where the host drives every step of a device "
                      "collective (GPUDirect RDMA or host staging) and waits for the stream, which a CUDA graph "
                      "cannot hold: capture collectives of ranks on one host only",
                      s_.comm->rank);
  }
  if (clbResult_t rc = gpuDirect_.decide(); rc != clbSuccess) return rc;
  if (gpuDirect_.ready()) {
    s_.layout.acrossHosts = true;
    return gpuDirect_.run(a, stream);
  }
  return hostStaged_.run(a, stream, gpuDirect_.why());
}

clbResult_t Device::graphArrive(uint64_t seq) {
  if (!s_.launch.meet) return clbSuccess;
  OpDesc call{};
  call.seq = seq;
  call.coll = kCallGraphLaunch;
  call.root = -1;
  clbResult_t rc = s_.launch.meet->arrive(s_.comm, call, s_.status.watched.warnMs);
  // Ranks that differ here (one replays a graph while another makes a call) are out of step for
  // good, as for the calls (LaunchControl::together).
  if (rc == clbInvalidUsage) s_.comm->markFailed(rc);
  return rc;
}

clbResult_t Device::graphLaunched() { return s_.launch.meet ? s_.launch.meet->launched(s_.comm) : clbSuccess; }

clbResult_t Device::graphPermit(CUstream stream, unsigned int value) {
  if (!s_.launch.meet) return clbSuccess;
  CtxScope scope(s_.d, s_.ctx);
  CLB_CU(s_.d, cuStreamWriteValue32, stream, s_.memory.permitWord(), value, 0);
  return clbSuccess;
}

clbResult_t Device::trimHostStage() {
  CLB_CHECK(gpuDirect_.trim());
  return hostStaged_.trim();
}

std::string Device::lastKind() const {
  if (!lastChosen_) return "";
  return std::string(" (") + protocolName(lastChosen_->protocol()) + " protocol, " +
         algorithmName(lastChosen_->algorithm()) + ")";
}

std::string Device::describe() const {
  if (!s_.d) return "device: not used yet (set up at the first collective on device memory)\n";
  if (s_.comm->nranks == 1)
    return "device: GPU " + std::to_string(s_.ordinal) +
           ", one rank: a collective is a copy of its input at most (no kernels, no device memory)\n";
  if (s_.layout.acrossHosts)
    return "device: GPU " + std::to_string(s_.ordinal) + ", ranks on several hosts: device buffers through " +
           gpuDirect_.info() + "; " + std::to_string(hostStaged_.bytes()) +
           " bytes of pinned host staging; each call waits for its stream\n";
  // Bound to a GPU, but no call set the paths up (refused before the set-up).
  if (!s_.ready()) return "device: GPU " + std::to_string(s_.ordinal) + ", not set up yet (no call got that far)\n";
  std::string notes;  // what the paths hold of their own
  for (auto& p : s_.paths) notes += p->note();
  char b[1024];
  snprintf(b, sizeof b,
           "device: GPU %d, %d rank(s) on it, %s%s; LL up to %zu bytes per rank, then %s; last call %s%s%s; "
           "%zu registration(s), %zu peer allocation(s) mapped; LL buffer %zu bytes, staging %zu bytes%s; kernels %s; "
           "eager launches %s (%zu prepared)\n",
           s_.ordinal, s_.layout.sameGpu,
           s_.layout.allInProcess ? "every rank in this process" : "ranks in several processes",
           s_.layout.viaHost ? ", flags, LL and staging in host memory (no peer access between some GPUs)" : "",
           s_.settings.llMax,
           !s_.layout.viaHost               ? (s_.layout.allInProcess ? "direct (peers' buffers read in place)"
                                                                      : "direct on registered buffers (zero copy), else staged")
           : s_.settings.forcedTo("staged") ? "staged (COLIBRI_DEVICE_PATH=staged)"
                                            : "copies (the copy engines through the staging)",
           lastPath(),
           lastZeroCopy_   ? " (zero copy through registered buffers)"
           : lastWindowed_ ? " (windows: the peers' send buffers read where they lie when all are in one, else copies)"
                           : "",
           lastKind().c_str(), regs_.count(), regs_.mapped(), s_.memory.llBuf.bytes, s_.memory.staging.bytes,
           notes.c_str(), s_.kernels ? s_.kernels->description().c_str() : "not loaded",
           s_.launch.launcher.usesGraphs() ? "replay graphs" : "are ordinary", s_.launch.launcher.graphs());
  return b;
}

}  // namespace clb::cuda
