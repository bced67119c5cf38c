// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the device paths share: one DeviceShared per communicator, held by its Device (device.h),
// reached by every path (paths.h) through a reference. It holds the GPU and its context, the
// kernels and their launcher, the device settings, where the ranks are, the memory every rank of
// the node sees (flag blocks, the LL buffer, the staging) and the status block the kernels report
// into. Set up once, at the first device call inside a node or the first registration (setUp, a
// collective step); a call between hosts takes only the context (and GPUDirect loads the kernels).
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algo/algorithms.h"
#include "base/error.h"
#include "device/launch_meet.h"
#include "device/device_context.h"
#include "device/gpu_runtime.h"
#include "device/kernels.h"
#include "device/launcher.h"
#include "device/watchdog.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

constexpr size_t kMaxHalf = 4u << 20;  // staging per half: 8 MiB per rank at most
// Through host memory (pinned, the copies path) the halves grow to 8 MiB: rounds of more than
// 4 MiB measured faster there for large messages (copyRoundBytes, hostcopy.cc).
constexpr size_t kMaxHalfViaHost = 8u << 20;
constexpr size_t kMinHalf = 64u << 10;
constexpr int kThreads = 512;  // per block (the kernels' launch bounds)
constexpr int kMaxBlocks = 256;
constexpr size_t kBytesPerBlock = 8u << 10;  // below this per block, fewer blocks
// A kernel of at most this many blocks launches without the gate (DeviceShared::gateWide): while it
// waits it holds at most two SMs' worth of a whole-SM kernel's room (a gate warp holds one), which
// a late rank's work that runs in waves gets past; the small calls' LL kernel (1 block) keeps its
// latency.
constexpr unsigned kGateAboveBlocks = 2;

// After a step every rank takes: every rank's status exchanged, the first failure returned on
// every rank (its own message on the failing rank, "rank p could not set up <what>" elsewhere).
// *exchanged (optional): whether the exchange itself worked (false: the result is its failure,
// and the ranks may not agree on anything).
clbResult_t agreeOnStatus(DeviceCommContext* comm, clbResult_t mine, const char* what, bool* exchanged = nullptr);

// Device memory every rank of the node sees: this rank's allocation and every rank's, mapped
// (CUDA IPC across processes, the pointer itself inside one). Allocated on demand, grown by a
// collective step all ranks take at the same call, counted in memStats.
// Between GPUs without peer access the buffers live in pinned host memory instead (POSIX shared
// memory mapped into every rank's process and registered with CUDA), which every GPU reaches.
struct SharedBuffer {
  CUdeviceptr mine = 0;
  size_t bytes = 0;
  std::vector<char*> peers;
  std::vector<CUdeviceptr> opened;                 // IPC mappings to close
  bool host = false;                               // in host memory (viaHost)
  void* hostMine = nullptr;                        // ... this rank's, as the host sees it
  std::vector<char*> hostPeers;                    // ... every rank's, as this process's host sees it
  std::vector<std::pair<void*, size_t>> hostMaps;  // host mappings to unregister and unmap
};

struct PeerInfo;       // what ranks tell each other at set-up
class CollectivePath;  // paths.h

// Zeroes device memory peers are about to write into (the collectives' shared buffers, the
// point-to-point boxes), on a private stream, and waits until it is done (shared.cc says why).
clbResult_t zeroNow(const Driver* d, CUdeviceptr p, size_t bytes);

// The kernels' code (CLB_DEV_*) of a collective, or -1 for one that has no device kernel;
// checkDeviceCollective says so as an error, which every entry of the device runtime returns
// before anything of the call is built.
int deviceCollective(uint32_t coll);
clbResult_t checkDeviceCollective(uint32_t coll);

struct DeviceShared {
  explicit DeviceShared(DeviceCommContext* comm);  // the settings, as read at init (comm->deviceCfg)
  ~DeviceShared();                                 // where CollectivePath is complete (shared.cc)

  // Once (collective): kernels (every path's, from the image), flags, peers.
  clbResult_t setUp(int gpu, CUstream stream);
  // The communicator's GPU (GpuRuntime::bind: refused for another GPU than the first call's), and
  // d, ctx, dev and ordinal set from it; every call binds first.
  clbResult_t bindGpu(int gpu);
  clbResult_t ensureShared(SharedBuffer* b, size_t bytes, CUstream stream, const char* what);
  // The staging for call `a` (the staged and copies paths size it alike), grown when it needs more.
  clbResult_t ensureStaging(const CollArgs& a, CUstream stream);
  size_t maxHalf() const { return viaHost ? kMaxHalfViaHost : kMaxHalf; }        // the largest half
  clbResult_t allocHostShared(SharedBuffer* b, size_t bytes, const char* what);  // viaHost
  clbResult_t decideViaHost(const std::vector<PeerInfo>& all);                   // collective
  void releaseShared(SharedBuffer* b);
  clbResult_t refuseInCapture(CUstream stream, size_t need);  // set-up is impossible in capture
  clbResult_t checkStream(CUstream stream);
  // What every path passes alike; a.desc.coll is one deviceCollective knows (checked before).
  void common(ClbDevCallArgs* k, const CollArgs& a) const;
  unsigned blocksFor(size_t bytes) const;
  // Before a launch of `blocks` blocks with parameters `k` on `stream`: the gate (gateWide) where
  // that is more than kGateAboveBlocks. Inside together(), the gate and the kernel after it are
  // launched in two meetings: every sharing rank's gate is queued before any rank's kernel, which
  // waits on its stream for its gate, so that streams sharing a hardware queue never hold a gate
  // behind a kernel that waits for it.
  clbResult_t gate(const ClbDevCallArgs& k, unsigned blocks, CUstream stream);
  // clbCommGetAsyncError's device part (Device::deviceStatus).
  clbResult_t deviceStatus() const;
  // Runs `launch` (this rank's kernels of call `a`) between the two meetings of the ranks that
  // share this GPU and process (src/device/launch_meet.h); just runs it when no other rank does.
  template <class F>
  clbResult_t together(const CollArgs& a, F&& launch);

  DeviceCommContext* comm;
  GpuRuntime& runtime;  // the GPU, the kernel image and the device memory (gpu_runtime.h)
  const Driver* d = nullptr;
  const Kernels* kernels = nullptr;  // the runtime's image in ctx (setUp, or GPUDirect's set-up)
  // The collective paths (the registry, collectivePaths in device.cc), in the order auto prefers
  // them within a protocol: made by the Device, their kernels loaded by setUp.
  std::vector<std::unique_ptr<CollectivePath>> paths;
  CUfunction gateFn = nullptr;  // clb_dev_gate (gateWide)
  GraphLauncher launcher;       // eager launches: prepared graphs or ordinary (set up in setUp)
  int launchMode = 0;           // COLIBRI_DEVICE_LAUNCH (DeviceLaunchSetting, base/config.h)
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  int ordinal = -1;
  // COLIBRI_DEVICE_PATH: the name of the path it forces (a CollectivePath's name), or nullptr (auto).
  const char* forced = nullptr;
  bool automatic() const { return forced == nullptr; }
  bool forcedTo(const char* name) const;
  size_t directMin = 0;     // auto: direct from this message size on (bytes)
  size_t llMax = 0;         // auto: LL up to this many bytes per destination
  bool llMaxGiven = false;  // ... other than the default (else lowered through host memory)
  int sameGpu = 1;          // ranks sharing this GPU, this one included
  unsigned maxBlocks = 1;   // per launch: every sharing rank's kernel stays resident
  // Another rank shares this GPU (or COLIBRI_DEVICE_GATE=on; never with =off): a
  // kernel of more than kGateAboveBlocks blocks waits behind clb_dev_gate until every rank is in
  // its call (gate()), so that waiting ranks never hold the SMs a late rank's own work needs.
  bool gateWide = false;
  int gateSetting = 0;    // COLIBRI_DEVICE_GATE (DeviceGateSetting, base/config.h)
  SharedBuffer staging;   // staged path: two halves (call parity), a slot per rank in each
  SharedBuffer llBuf;     // LL path: two halves, a slot of 16-byte lines per rank in each
  SharedBuffer flagBuf;   // every rank's ClbDevFlags
  CUdeviceptr flags = 0;  // this rank's (flagBuf.mine): set up once this is set
  // This rank's block counters (ClbDevCallArgs::counters): in its flag block, or, with the flags
  // in host memory, in device memory of their own (ownCounters), so no kernel needs a host atomic.
  CUdeviceptr counters = 0;
  bool ownCounters = false;
  // The counters' own device memory: the 16 bytes of ClbDevFlags::blocks, then the copy of calls
  // and error that this rank's kernels read at the start of a call (ClbDevCallArgs::counters).
  static constexpr size_t kOwnWordsBytes = sizeof(ClbDevFlags::blocks) + 16;
  bool viaHost = false;                    // some GPUs cannot reach each other: shared buffers in host memory
  bool forceHost = false;                  // COLIBRI_DEVICE_P2P=off
  bool checkCalls = false;                 // COLIBRI_DEVICE_CHECK_CALLS=1: every call compared across ranks
  uint64_t hostGen = 0;                    // host-shared buffers made so far (names them)
  ClbDevHostStatus* hostStatus = nullptr;  // mapped pinned host memory the kernels report into
  CUdeviceptr hostStatusDev = 0;
  int64_t warnPercent = 50;  // COLIBRI_STUCK_WARN_PERCENT of the timeout: say a wait is long
  Watched watched;           // what the watchdog looks at (registered once set up)
  bool watching = false;
  std::shared_ptr<LaunchMeet> meet;  // the ranks sharing this GPU and process, when there are others
  const OpDesc* meeting = nullptr;   // the call of the meeting together() holds open, if any
  // The call being launched is captured while `meet` exists (Device::run): its kernels check
  // clbGraphLaunch's permit (ClbDevCallArgs::replayGuard).
  bool replayGuard = false;
  // Where the permit is (ClbDevFlags::replayPermit, beside this rank's calls and error).
  CUdeviceptr permitWord() const { return counters + 16 + 12; }
  bool meetOff = false;  // COLIBRI_DEVICE_MEET=off: they launch without meeting
  std::vector<ClbDevFlags*> peerFlags;
  std::vector<char> inProcess;  // [p]: rank p lives in this process (Bootstrap::inThisProcess: not by pid alone)
  bool sharedProcess = false;   // another rank lives in this process
  bool allInProcess = false;    // every rank lives in this process: the direct path is possible
  bool acrossHosts = false;     // Device::runAcrossHosts was used (host staging tells it once, by a warning)
};

template <class F>
clbResult_t DeviceShared::together(const CollArgs& a, F&& launch) {
  if (!meet) return launch();
  clbResult_t rc = meet->arrive(comm, a.desc, watched.warnMs);
  if (rc != clbSuccess) {
    // Calls that differ are refused alike by every rank here (ranks elsewhere launched and wait,
    // and the ranks' calls may be out of step for good, one having been refused alone before):
    // the communicator cannot go on. Other failures mark it failed in run()'s caller.
    if (rc == clbInvalidUsage) comm->markFailed(rc);
    return rc;
  }
  meeting = &a.desc;
  rc = launch();
  const bool open = meeting != nullptr;  // gate() closes it when its second arrival fails
  meeting = nullptr;
  const std::string why = rc == clbSuccess ? std::string() : lastError();
  clbResult_t left = open ? meet->launched(comm) : clbSuccess;
  if (rc != clbSuccess) return setError(rc, "%s", why.c_str());
  return left;
}

}  // namespace clb::cuda
