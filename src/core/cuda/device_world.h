// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device collectives for ranks on one host: each rank owns a staging buffer (two halves, used by
// alternate calls) and a flag block in device memory, shared with the other ranks through CUDA IPC
// (ranks in one process use the pointers directly). A call stages this rank's data and combines
// everyone's, two kernels on the caller's stream, synchronized by flags on the device: the call
// returns at once, and the host never waits (see src/kernels/collective.cu). Messages larger than
// a staging half go in rounds. Staging is sized to the first need (capped), grows when a call
// needs more (a collective step all ranks take at the same call), and is counted in memStats.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "algo/algorithms.h"
#include "core/cuda/driver.h"
#include "core/cuda/kernels.h"

namespace clb::cuda {

// Whether p is device memory (and on which device). Host memory, including pinned, is "host".
clbResult_t classifyPointer(const void* p, bool* isDevice, int* ordinal);
// True once this process has loaded libcuda (a process that never did cannot hold device memory).
bool driverInProcess();

class DeviceWorld {
 public:
  explicit DeviceWorld(clbComm* comm) : comm_(comm) {}
  ~DeviceWorld();
  clbResult_t run(const CollArgs& a, int ordinal, CUstream stream);
  std::string describe() const;

 private:
  clbResult_t ensure(size_t halfBytes, int ordinal, CUstream stream);
  clbResult_t release();
  clbResult_t round(const CollArgs& a, size_t e0, size_t m, CUstream stream);
  clbComm* comm_;
  const Driver* d_ = nullptr;
  Kernels kernels_;
  CUfunction post_ = nullptr, gather_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  int ordinal_ = -1;
  size_t half_ = 0;  // bytes per staging half
  CUdeviceptr staging_ = 0, flags_ = 0;
  unsigned int* hostError_ = nullptr;
  CUdeviceptr hostErrorDev_ = 0;
  std::vector<char*> peerStaging_;
  std::vector<ClbDevFlags*> peerFlags_;
  std::vector<CUdeviceptr> opened_;  // IPC mappings to close
  bool sharedProcess_ = false;  // another rank lives in this process
};

}  // namespace clb::cuda
