// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// GpuRuntime (gpu_runtime.h): the communicator's GPU, its kernel images and its device memory.
#include "device/gpu_runtime.h"

#include <mutex>
#include <string>
#include <utility>

#include "base/error.h"

namespace clb::cuda {

namespace {

// The kernel images loaded in this process: one per context and folder, loaded at the first call
// that needs it, shared by every communicator on that context and kept for the process's life.
// The driver keeps the code memory of the most images a context has had loaded at once and does
// not give it back at cuModuleUnload (on an H100: 2 MiB per image loaded eagerly, 2 MiB for four
// loaded lazily that each ran a kernel, and a reload after an unload may take more;
// results/gpu/2026-12-06-h100-kernel-images/): an image per communicator would grow it with the
// communicators of a process, and unloading at a suspend would give nothing back. Keyed by the
// context's ID (cuCtxGetId), which no later context reuses as it may reuse the address; an image
// whose context was destroyed went with it, and is never found again. The table is never freed
// (no unload runs at exit, after the driver may be gone).
std::mutex gImagesMutex;
auto* gImages = new std::map<std::pair<unsigned long long, std::string>, std::unique_ptr<Kernels>>;

}  // namespace

GpuRuntime::~GpuRuntime() {
  // The images stay (gImages). The primary context stays retained: where the application holds no reference of its own
  // (a driver-API program that made it current through clbDeviceAlloc), releasing the last one would destroy the
  // context with the application's memory in it, and a suspend and resume would pay for a new context.
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
    unsigned long long id = 0;
    CLB_CU(d_, cuCtxGetId, ctx, &id);
    const std::string dir = defaultKernelDir();
    std::lock_guard<std::mutex> g(gImagesMutex);
    std::unique_ptr<Kernels>& image = (*gImages)[{id, dir}];
    if (!image) {
      CtxScope scope(d_, ctx);
      CUdevice dev = 0;
      CLB_CU(d_, cuCtxGetDevice, &dev);
      auto loaded = std::make_unique<Kernels>();
      CLB_CHECK(loaded->load(dev, dir));
      image = std::move(loaded);
    }
    it = images_.emplace(ctx, image.get()).first;
  }
  *k = it->second;
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
