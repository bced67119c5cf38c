// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// GpuRuntime (gpu_runtime.h): the communicator's GPU, its kernel images and its device memory.
#include "device/gpu_runtime.h"

#include "base/error.h"

namespace clb::cuda {

GpuRuntime::~GpuRuntime() {
  for (auto& [ctx, image] : images_) {
    CtxScope scope(d_, ctx);  // a module is unloaded from its own context
    image.reset();
  }
  // The primary context stays retained: where the application holds no reference of its own (a
  // driver-API program that made it current through clbDeviceAlloc), releasing the last one
  // would destroy the context with the application's memory in it, and a suspend and resume
  // would pay for a new context.
}

clbResult_t GpuRuntime::bind(int ordinal) {
  if (ordinal_ >= 0) {
    if (ordinal == ordinal_) return clbSuccess;
    return setError(clbInvalidArgument,
                    "rank %d's buffers are on GPU %d but its communicator works with GPU %d: one communicator per "
                    "GPU",
                    comm_->rank, ordinal, ordinal_);
  }
  CLB_CHECK(cuda::driver(&d_));
  CUdevice dev = 0;
  CLB_CU(d_, cuDeviceGet, &dev, ordinal);
  CLB_CU(d_, cuDevicePrimaryCtxRetain, &ctx_, dev);
  dev_ = dev;
  ordinal_ = ordinal;
  return clbSuccess;
}

clbResult_t GpuRuntime::kernels(CUcontext ctx, const Kernels** k) {
  auto it = images_.find(ctx);
  if (it == images_.end()) {
    if (!d_) CLB_CHECK(cuda::driver(&d_));
    CtxScope scope(d_, ctx);
    CUdevice dev = 0;
    CLB_CU(d_, cuCtxGetDevice, &dev);
    auto image = std::make_unique<Kernels>();
    CLB_CHECK(image->load(dev, defaultKernelDir()));
    it = images_.emplace(ctx, std::move(image)).first;
  }
  *k = it->second.get();
  return clbSuccess;
}

clbResult_t GpuRuntime::alloc(size_t bytes, const char* what, CUdeviceptr* p) {
  *p = 0;
  if (!d_) CLB_CHECK(cuda::driver(&d_));
  if (CUresult rc = d_->cuMemAlloc(p, bytes); rc != CUDA_SUCCESS) {
    *p = 0;
    if (rc != CUDA_ERROR_OUT_OF_MEMORY) return cuError(rc, "cuMemAlloc");  // its code, as every driver call's
    return setError(clbOutOfMemory, "rank %d: no %zu bytes of device memory for %s (cuMemAlloc: out of memory)",
                    comm_->rank, bytes, what);
  }
  comm_->mem.addDevice((int64_t)bytes);
  return clbSuccess;
}

void GpuRuntime::free(CUdeviceptr p, size_t bytes) {
  if (!p) return;
  d_->cuMemFree(p);
  comm_->mem.addDevice(-(int64_t)bytes);
}

GpuRuntime& gpuRuntime(DeviceCommContext* c) {
  if (!c->gpu) c->gpu = std::make_unique<GpuRuntime>(c);
  return *c->gpu;
}

}  // namespace clb::cuda
