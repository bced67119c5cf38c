// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the device paths share: one DeviceShared per communicator, held by its Device (device.h),
// reached by every path (paths.h) through a reference. Each of its parts has one job:
//   settings  what COLIBRI_DEVICE_* say (read at init, where the ranks compared them);
//   layout    where the ranks are (processes, GPUs, peer access), found by setUp;
//   memory    the buffers every rank of the node sees (node_memory.h);
//   launch    how kernels are launched: launcher, gate, meetings (launch_control.h);
//   status    the block the kernels report into, which the watchdog reads (watchdog.h);
// and it holds the GPU (through the runtime), the kernels and the paths. Set up once, at the first
// device call inside a node or the first registration (setUp, a collective step); a call between
// hosts takes only the context (and GPUDirect loads the kernels).
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algo/algorithms.h"
#include "base/error.h"
#include "base/config.h"
#include "device/device_context.h"
#include "device/gpu_runtime.h"
#include "device/kernels.h"
#include "device/launch_control.h"
#include "device/node_memory.h"
#include "device/watchdog.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

struct PeerInfo;       // what ranks tell each other at set-up
class CollectivePath;  // paths.h

// The kernels' code (CLB_DEV_*) of a collective, or -1 for one that has no device kernel;
// checkDeviceCollective says so as an error, which every entry of the device runtime returns
// before anything of the call is built.
int deviceCollective(uint32_t coll);
clbResult_t checkDeviceCollective(uint32_t coll);

// What the device settings say (comm->deviceCfg, read at init where the ranks compared them; a
// bad value is reported by the first device call).
struct DeviceSettings {
  explicit DeviceSettings(const DeviceConfig& c);
  // COLIBRI_DEVICE_PATH: the name of the path it forces (a CollectivePath's name), or nullptr (auto).
  const char* forced = nullptr;
  bool automatic() const { return forced == nullptr; }
  bool forcedTo(const char* name) const;
  size_t directMin = 0;      // auto: direct from this message size on (bytes)
  size_t llMax = 0;          // auto: LL up to this many bytes per destination (lowered through host memory)
  bool llMaxGiven = false;   // ... other than the default (then never lowered)
  int gate = 0;              // COLIBRI_DEVICE_GATE (DeviceGateSetting, base/config.h)
  int launch = 0;            // COLIBRI_DEVICE_LAUNCH (DeviceLaunchSetting, base/config.h)
  bool p2pOff = false;       // COLIBRI_DEVICE_P2P=off: shared buffers in host memory
  bool checkCalls = false;   // COLIBRI_DEVICE_CHECK_CALLS=1: every call compared across ranks
  bool meetOff = false;      // COLIBRI_DEVICE_MEET=off: ranks of one process launch without meeting
  int64_t warnPercent = 50;  // COLIBRI_STUCK_WARN_PERCENT of the timeout: say a wait is long
};

// The status block the kernels report into (mapped pinned host memory), watched by the watchdog.
struct DeviceStatusBlock {
  // The block (made once, kept by a set-up that fails later) and what the watchdog is to know.
  clbResult_t setUp(const Driver* d, DeviceCommContext* comm, int64_t warnPercent);
  void watch();                   // in the watchdog's sight: the last step of a set-up that completed
  void unwatch();                 // out of the watchdog's sight (once the kernels were waited for)
  void release(const Driver* d);  // unwatched, then freed
  // clbCommGetAsyncError's device part (Device::deviceStatus): what the kernels reported, else
  // why the host stopped them (stopIfAbandoned).
  clbResult_t check(const DeviceCommContext* comm) const;
  // The host stopped this rank's kernels (CLB_DEV_ERR_PEER, DeviceShared::stopIfAbandoned):
  // `stopCode` and `stopText` say why, written before `stopped` and read after it.
  std::atomic<bool> stopped{false};
  clbResult_t stopCode = clbSuccess;
  std::string stopText;
  ClbDevHostStatus* host = nullptr;
  CUdeviceptr dev = 0;  // ... as the kernels reach it
  Watched watched;      // what the watchdog looks at (registered once set up)
  bool watching = false;
};

struct DeviceShared {
  explicit DeviceShared(DeviceCommContext* comm);
  ~DeviceShared();  // where CollectivePath is complete (shared.cc)

  // Once (collective): kernels (every path's, from the image), status block, layout, flags.
  clbResult_t setUp(int gpu, CUstream stream);
  bool ready() const { return memory.ready(); }
  // The communicator's GPU (GpuRuntime::bind: refused for another GPU than the first call's), and
  // d, ctx, dev and ordinal set from it; every call binds first.
  clbResult_t bindGpu(int gpu);
  clbResult_t checkStream(CUstream stream);
  // What every path passes alike; a.desc.coll is one deviceCollective knows (checked before).
  void common(ClbDevCallArgs* k, const CollArgs& a) const;
  unsigned blocksFor(size_t bytes) const;
  // Everything set up given back (local), after the paths released theirs (Device::release).
  void release();
  // This rank's kernels of the communicator end at once when mustStopDevice says so (stop.h: an
  // abort here or a peer's, a death, a failed rank that cannot tell how far its calls go): the
  // watchdog's round, status.watched.tick, and Device::release before it waits for the kernels;
  // shared.cc says why not for a peer that failed on its own and told how far it goes.
  void stopIfAbandoned(const Driver* drv, CUcontext context);
  // This rank's communicator failed (not aborted): once its kernels finished every call it
  // launched, it tells the peers which device call it will never make (Transport::
  // announceDeviceEnd). The watchdog's round (without waiting for anything), and Device::release
  // once the kernels are done (`final`). shared.cc says when it cannot (then every call ends).
  void tellPeersOfFailure(const Driver* drv, CUcontext context, bool final);
  // A peer told so: this rank's kernels of that call end at once (its call line, one no call has:
  // CLB_DEV_SIG_FAILED, written into this rank's own flag block). The watchdog's round, and
  // Device::release before it waits for the kernels.
  void hearPeersFailures(const Driver* drv, CUcontext context);

  DeviceCommContext* comm;
  GpuRuntime& runtime;  // the GPU, the kernel image and the device memory (gpu_runtime.h)
  const Driver* d = nullptr;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  int ordinal = -1;
  const Kernels* kernels = nullptr;  // the runtime's image in ctx (setUp, or GPUDirect's set-up)
  // The collective paths (the registry, collectivePaths in device.cc), in the order auto prefers
  // them within a protocol: made by the Device, their kernels loaded by setUp.
  std::vector<std::unique_ptr<CollectivePath>> paths;
  DeviceSettings settings;
  NodeLayout layout;
  NodeMemory memory;
  LaunchControl launch;
  DeviceStatusBlock status;
  // The kernels launched outside a capture since the set-up that count a call when they complete
  // (LaunchControl::counting, added by Device::run), whether a launch is under way (not counted
  // yet), and whether the count may be wrong (a launch that failed: some of its kernels may run):
  // what tellPeersOfFailure compares with this rank's completed calls.
  std::atomic<uint64_t> launchedCalls{0};
  std::atomic<bool> launching{false};
  std::atomic<bool> launchesUncounted{false};

 private:
  clbResult_t decideViaHost(const std::vector<PeerInfo>& all);  // collective
  void meetWith(const std::vector<PeerInfo>& all);              // launch.meet, for ranks sharing this GPU's context
  // stopIfAbandoned's, tellPeersOfFailure's and hearPeersFailures' (made at first use by
  // makeStopStream, destroyed by release).
  CUstream stopStream_ = nullptr;
  CUresult makeStopStream(const Driver* drv);
  // tellPeersOfFailure's progress (the watchdog's thread, then Device::release's once unwatched).
  enum class Told { kNo, kReading, kDone } told_ = Told::kNo;
  std::vector<char> heard_;  // hearPeersFailures: [p] rank p's failure line written
};

}  // namespace clb::cuda
