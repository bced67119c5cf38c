// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The communicator's GPU runtime (DeviceCommContext::gpu): what every device object of a
// communicator (its Device and the paths behind it, PreMulSum's Scaler, point-to-point's
// PeerDevice) takes from one place rather than each on its own: the driver; the GPU its
// collectives run on and that GPU's primary context, retained (bind); the kernel image, loaded
// once per context for the process's life and shared by its communicators; and the device memory
// they hold, allocated and freed through it, so that memStats counts every byte in one place. Made
// at the first device call (gpuRuntime), freed after every object that uses it
// (DeviceCommContext::releaseDevice, releaseCallMemory).
#pragma once

#include <cuda.h>

#include <map>
#include <memory>

#include "device/device_context.h"
#include "device/kernels.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

class GpuRuntime {
 public:
  explicit GpuRuntime(DeviceCommContext* comm) : comm_(comm) {}
  ~GpuRuntime();  // the images (the process's) and the primary context's reference stay
  GpuRuntime(const GpuRuntime&) = delete;
  GpuRuntime& operator=(const GpuRuntime&) = delete;

  // Binds the communicator to GPU `ordinal` at its first call on device buffers (the driver
  // loaded, the GPU's primary context retained); a later call on another GPU is refused, naming
  // both: one communicator per GPU, whatever the call (a collective, a registration, a PreMulSum's
  // or an in-place all-to-all's staging), also when that first call was refused afterwards.
  // (Point-to-point on the GPU runs in its buffers' context and binds nothing.)
  clbResult_t bind(int ordinal);
  bool bound() const { return ordinal_ >= 0; }
  const Driver* driver() const { return d_; }
  CUcontext context() const { return ctx_; }
  CUdevice device() const { return dev_; }
  int ordinal() const { return ordinal_; }

  // The kernel image loaded into `ctx` (a context of any GPU): one per context in the whole
  // process, shared by its communicators and kept for the process's life (gpu_runtime.cc says
  // why). Never inside a graph capture: the callers refuse a first call there before they ask.
  clbResult_t kernels(CUcontext ctx, const Kernels** k);

  // `bytes` of device memory in the current context, counted in the communicator's memStats;
  // `what` names its use in the error (clbOutOfMemory where the GPU has no room).
  clbResult_t alloc(size_t bytes, const char* what, CUdeviceptr* p);
  // Frees what alloc gave (its context current) and uncounts it.
  void free(CUdeviceptr p, size_t bytes);

 private:
  DeviceCommContext* comm_;
  const Driver* d_ = nullptr;
  CUcontext ctx_ = nullptr;  // the bound GPU's primary context (retained)
  CUdevice dev_ = 0;
  int ordinal_ = -1;
  std::map<CUcontext, const Kernels*> images_;  // the process's images this communicator uses
};

// The communicator's GPU runtime, made at the first call that asks (under the call, like every use).
GpuRuntime& gpuRuntime(DeviceCommContext* c);

}  // namespace clb::cuda
