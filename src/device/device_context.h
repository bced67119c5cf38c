// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the device runtime (src/device) sees of the communicator: all the layers below see
// (clb::CommContext: rank, size, configuration, bootstrap, memory accounts, transport, the wait's
// checks), and the communicator's state that the device runtime reads or writes: its device
// settings, its failure marks, its device objects, and the two things the core does for it (mark
// the communicator failed, run a collective on host buffers). The communicator (core/comm.h,
// clbComm) is one; the device runtime takes a DeviceCommContext, never a clbComm, so that it does
// not depend on the layer above it (scripts/check-layers.sh).
//
// This header and device_context.cc are in every build (the device objects are complete types
// only where the device runtime is built: device_context.cc frees them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>

#include "base/config.h"
#include "bootstrap/comm_context.h"
#include "colibri/colibri.h"

namespace clb {

namespace cuda {
class GpuRuntime;
class Device;
class PeerDevice;
class Scaler;
}  // namespace cuda

struct DeviceCommContext : CommContext {
  DeviceCommContext();
  ~DeviceCommContext() override;

  DeviceConfig deviceCfg;  // the device path's settings, read at init
  std::atomic<bool> aborted{false};
  std::atomic<bool> failed{false};  // a collective failed midway: the communicator is unusable
  // The GPU, its kernel images and its device memory, which every device object below takes from
  // it (device/gpu_runtime.h): made at the first device call, freed after all of them.
  std::unique_ptr<cuda::GpuRuntime> gpu;
  std::unique_ptr<cuda::Device> device;          // set up at the first call on device memory
  std::unique_ptr<cuda::PeerDevice> peerDevice;  // point-to-point on the GPU, at its first device call
  std::string peerDeviceMemoryWhy;               // why peerDeviceMemory could not be had
  bool peerStagedWarned = false;  // the warning that device point-to-point goes through host copies (once)
  std::atomic<cuda::Device*> deviceReady{nullptr};  // `device`, once set up (read by other threads)
  // PreMulSum (core/premul.h) on device buffers, under the call like every use: the scaling
  // kernels and the device scratch (device.h), made at the first such call (on host buffers the
  // core's clbComm::preMulHost). clbCommTrim and clbCommDestroy free them.
  std::unique_ptr<cuda::Scaler> scaler;
  // clbBarrier on a stream: one int32 of device memory, made at the first in the stream's context
  // (under the call, like every use; comm_device.cc).
  void* barrierScratch = nullptr;
  void* barrierContext = nullptr;  // its CUcontext
  // A call on device memory was captured in a CUDA graph (set by the device runtime): replays move
  // the device objects' counts on without the host. Cleared by clbCommSuspend, which frees those
  // objects once no such graph exists.
  std::atomic<bool> captured{false};
  // Calls captured in CUDA graphs that still exist (the graphs or their instantiations): each
  // captured call holds one until its graph goes (cuda::holdWhileGraphLives). A replay uses the
  // device objects, so clbCommSuspend, which frees them, is refused while any is held. Shared with
  // the graphs' user objects, which may outlive the communicator.
  std::shared_ptr<std::atomic<int>> capturedCallHolds = std::make_shared<std::atomic<int>>(0);
  // This rank failed and cannot tell its peers which of its device calls complete, so every device
  // kernel of the communicator ends, its own and its peers' (device/stop.h, endEveryDeviceCall):
  // when it said so (nowMs; 0: it did not).
  std::atomic<int64_t> deviceEndsEveryAtMs{0};
  // ... and when it first waited to say so for another failed rank to say how far it goes (0: not).
  std::atomic<int64_t> deviceEndLaterSinceMs{0};
  // Held shared by the status queries from any thread (clbCommGetAsyncError) while they read the
  // device objects, and exclusively by clbCommSuspend while it frees them.
  std::shared_mutex deviceObjects;

  // The communicator cannot go on; `code` and the thread's last error say why (the first call wins).
  virtual void markFailed(clbResult_t code = clbInternalError) = 0;
  // A collective on host buffers for the library's own use (exchanges of the device path, its
  // staging between hosts: core/collectives.cc): the checks and algorithm of the public calls,
  // without asking the driver what the buffers are and without touching the caller-visible
  // lastAlgorithm.
  virtual clbResult_t hostCollective(uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                                     clbRedOp_t op, int root) = 0;

  // Frees the device objects, all of them (cuda::releaseCallMemory with its peers: the device
  // paths, the scaler, point-to-point on the GPU, the barrier's int, then the GPU runtime they took
  // their kernels and memory from). The communicator's destructor calls it first, while the whole communicator is
  // alive.
  void releaseDevice();
};

}  // namespace clb
