// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The device layer as the communicator holds it (clbComm::device): one Device per communicator,
// made at the first call on device memory. It picks each call's path and hands the call to it
// (paths.h, one class and one file per path): inside a node LL, direct or staged, each rank's
// kernels on the caller's stream, synchronized by flags on the device, so that the call returns
// at once and the host never waits (see src/kernels/collective.cu); between hosts GPUDirect RDMA
// or staging through pinned host memory, host-driven. Registered buffers let the direct path work
// between processes. What the paths share (context, kernels, launcher, flags, LL buffer, staging,
// host status) is one DeviceShared (shared.h). docs/architecture.md ("Device paths") has the map.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

#include "algo/algorithms.h"
#include "algo/p2p.h"
#include "device/paths.h"
#include "device/shared.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

// Whether p is device memory (and on which device). Host memory, including pinned, is "host".
clbResult_t classifyPointer(const void* p, bool* isDevice, int* ordinal);
// The allocation holding p, in one driver call: its range, CUDA's buffer ID (another when it was
// freed and something else took its address), its memory type, whether it is managed, and its
// GPU. Memory CUDA does not know comes back as type 0.
struct Allocation {
  CUdeviceptr base = 0;
  size_t size = 0;
  unsigned long long id = 0;
  unsigned int type = 0;
  unsigned int managed = 0;
  int ordinal = -1;
};
clbResult_t allocationOf(const Driver* d, const void* p, Allocation* a);
// True once this process has loaded libcuda (a process that never did cannot hold device memory).
bool driverInProcess();

// Point-to-point operations (algo/p2p.h) some of which are on device memory, from the host: the
// streams synchronized, each device range copied to a host shadow, run(shadowed ops), the ranges
// written copied back (p2p_staged.cc). Refused inside a CUDA graph capture.
clbResult_t runPeerOpsStaged(clbComm* c, std::vector<PeerOp>& ops,
                             const std::function<clbResult_t(std::vector<PeerOp>&)>& run);

class Device {
 public:
  explicit Device(clbComm* comm);
  ~Device();
  // Ranks on one host: LL, direct or staged (see run() for the pick).
  clbResult_t run(const CollArgs& a, int ordinal, CUstream stream);
  // Ranks on several hosts (no shared memory between them): GPUDirect RDMA over verbs where every
  // rank can, else the buffers go through pinned host memory and the host transport (sockets,
  // verbs), the stream synchronized at each call.
  clbResult_t runAcrossHosts(const CollArgs& a, int ordinal, CUstream stream);
  // Gives the pinned host buffers of runAcrossHosts back (local), and the GPUDirect channel's slots
  // and staging (their release reaches the peers in this or a later call; see VerbsChannel::trim).
  clbResult_t trimHostStage();
  // clbCommRegister / clbCommDeregister (collective; see colibri.h).
  // A registration may set the device path up (the first device step of the communicator): the
  // async query then watches it from here on, as after a first collective.
  clbResult_t registerBuffer(void* buff, size_t bytes, void** handle) {
    const clbResult_t rc = regs_.registerBuffer(buff, bytes, handle);
    markReady();
    return rc;
  }
  clbResult_t deregisterBuffer(void* handle) { return regs_.deregisterBuffer(handle); }
  std::string describe() const;
  // clbCommGetAsyncError's device part: clbTimeout with the call, collective and ranks when a
  // device wait of this rank ran out of time, else clbSuccess. Any thread, once set up.
  clbResult_t deviceStatus() const { return s_.deviceStatus(); }
  // The path the last call took ("ll", "staged" or "direct").
  const char* lastPath() const { return lastPath_ == DevicePath::kLL ? "ll" : lastPath_ == DevicePath::kDirect ? "direct" : "staged"; }

 private:
  // Once set up, the communicator's async query reads this device's status (clbComm::deviceReady).
  void markReady();
  clbResult_t release();
  DeviceShared s_;
  LLPath ll_{s_};
  DirectPath direct_{s_};
  StagedPath staged_{s_};
  Registrations regs_{s_};
  GpuDirectPath gpuDirect_{s_};
  HostStagedPath hostStaged_{s_};
  DevicePath lastPath_ = DevicePath::kAuto;
  bool lastZeroCopy_ = false;
};

}  // namespace clb::cuda
