// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The C ABI's device helpers: allocation, copies and streams through the driver API, for callers
// without a CUDA binding of their own.
#include <mutex>
#include <string>

#include "colibri/colibri.h"
#include "core/cuda/driver.h"
#include "core/cuda/kernels.h"
#include "core/error.h"

namespace clb::cuda {
namespace {

std::mutex gDirMutex;
std::string gKernelDir;

// Makes device `ordinal`'s primary context current on this thread.
clbResult_t useDevice(const Driver* d, int ordinal) {
  int n = 0;
  CLB_CU(d, cuDeviceGetCount, &n);
  if (ordinal < 0 || ordinal >= n)
    return setError(clbInvalidArgument, "device %d does not exist: this machine has %d GPU(s) (0..%d)", ordinal, n, n - 1);
  CUdevice dev;
  CUcontext ctx;
  CLB_CU(d, cuDeviceGet, &dev, ordinal);
  CLB_CU(d, cuDevicePrimaryCtxRetain, &ctx, dev);
  CLB_CU(d, cuCtxSetCurrent, ctx);
  return clbSuccess;
}

}  // namespace

std::string kernelDirOverride() {
  std::lock_guard<std::mutex> g(gDirMutex);
  return gKernelDir;
}

}  // namespace clb::cuda

using namespace clb;
using namespace clb::cuda;

extern "C" {

clbResult_t clbDeviceCount(int* count) {
  clearError();
  if (!count) return setError(clbInvalidArgument, "count (output) is NULL");
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CU(d, cuDeviceGetCount, count);
  return clbSuccess;
}

clbResult_t clbDeviceAlloc(void** ptr, size_t bytes, int device) {
  clearError();
  if (!ptr) return setError(clbInvalidArgument, "ptr (output) is NULL");
  *ptr = nullptr;
  if (bytes == 0) return setError(clbInvalidArgument, "cannot allocate 0 bytes of device memory");
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CHECK(useDevice(d, device));
  CUdeviceptr p = 0;
  CLB_CU(d, cuMemAlloc, &p, bytes);
  *ptr = reinterpret_cast<void*>(p);
  return clbSuccess;
}

clbResult_t clbDeviceFree(void* ptr) {
  clearError();
  if (!ptr) return clbSuccess;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CU(d, cuMemFree, reinterpret_cast<CUdeviceptr>(ptr));
  return clbSuccess;
}

clbResult_t clbMemcpy(void* dst, const void* src, size_t bytes, void* stream) {
  clearError();
  if (bytes == 0) return clbSuccess;
  if (!dst || !src) return setError(clbInvalidArgument, "%s is NULL", dst ? "src" : "dst");
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  // Unified addressing: the driver tells host from device by the addresses.
  if (stream)
    CLB_CU(d, cuMemcpyAsync, reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
           static_cast<CUstream>(stream));
  else
    CLB_CU(d, cuMemcpy, reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes);
  return clbSuccess;
}

clbResult_t clbStreamCreate(void** stream, int device) {
  clearError();
  if (!stream) return setError(clbInvalidArgument, "stream (output) is NULL");
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CHECK(useDevice(d, device));
  CUstream s = nullptr;
  CLB_CU(d, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
  *stream = s;
  return clbSuccess;
}

clbResult_t clbStreamDestroy(void* stream) {
  clearError();
  if (!stream) return clbSuccess;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CU(d, cuStreamDestroy, static_cast<CUstream>(stream));
  return clbSuccess;
}

clbResult_t clbStreamSynchronize(void* stream) {
  clearError();
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CU(d, cuStreamSynchronize, static_cast<CUstream>(stream));
  return clbSuccess;
}

clbResult_t clbSetKernelDir(const char* dir) {
  clearError();
  std::lock_guard<std::mutex> g(gDirMutex);
  gKernelDir = dir ? dir : "";
  return clbSuccess;
}

}  // extern "C"
