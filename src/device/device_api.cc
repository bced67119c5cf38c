// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The C ABI's device helpers: allocation, copies and streams through the driver API, for callers
// without a CUDA binding of their own; and what the driver says about each GPU (the doctor).
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "device/kernels.h"
#include "base/error.h"

namespace clb::cuda {
namespace {

std::mutex gDirMutex;
std::string gKernelDir;

// The driver's handle of GPU `ordinal`, after checking that it exists.
clbResult_t deviceHandle(const Driver* d, int ordinal, CUdevice* dev) {
  int n = 0;
  CLB_CU(d, cuDeviceGetCount, &n);
  if (ordinal < 0 || ordinal >= n)
    return setError(clbInvalidArgument, "device %d does not exist: this machine has %d GPU(s) (0..%d)", ordinal, n,
                    n - 1);
  CLB_CU(d, cuDeviceGet, dev, ordinal);
  return clbSuccess;
}

// Makes device `ordinal`'s primary context current on this thread.
clbResult_t useDevice(const Driver* d, int ordinal) {
  CUdevice dev;
  CUcontext ctx;
  CLB_CHECK(deviceHandle(d, ordinal, &dev));
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

clbResult_t clbDeviceInfo(int device, clbDeviceInfo_t* info) {
  clearError();
  if (!info) return setError(clbInvalidArgument, "info (output) is NULL");
  memset(info, 0, sizeof *info);
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUdevice dev;
  CLB_CHECK(deviceHandle(d, device, &dev));
  CLB_CU(d, cuDeviceGetName, info->name, static_cast<int>(sizeof info->name), dev);
  CLB_CU(d, cuDeviceGetAttribute, &info->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  CLB_CU(d, cuDeviceGetAttribute, &info->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  int domain = 0, bus = 0, slot = 0;
  CLB_CU(d, cuDeviceGetAttribute, &domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
  CLB_CU(d, cuDeviceGetAttribute, &bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
  CLB_CU(d, cuDeviceGetAttribute, &slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
  snprintf(info->pciBusId, sizeof info->pciBusId, "%04x:%02x:%02x.0", domain & 0xffff, bus & 0xff, slot & 0x1f);
  info->driverVersion = d->version;
  snprintf(info->image, sizeof info->image, "%s", imageFor(info->major, info->minor));
  // Attributes an older driver may not know: unknown (-1) rather than a failure.
  auto flag = [&](CUdevice_attribute a) {
    int v = 0;
    return d->cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? (v != 0) : -1;
  };
  info->gpuDirectRdma = flag(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
  info->dmaBuf = flag(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
  return clbSuccess;
}

clbResult_t clbDeviceCanAccessPeer(int device, int peer, int* canAccess) {
  clearError();
  if (!canAccess) return setError(clbInvalidArgument, "canAccess (output) is NULL");
  *canAccess = 0;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUdevice a, b;
  CLB_CHECK(deviceHandle(d, device, &a));
  CLB_CHECK(deviceHandle(d, peer, &b));
  if (device == peer) {
    *canAccess = 1;
    return clbSuccess;
  }
  CLB_CU(d, cuDeviceCanAccessPeer, canAccess, a, b);
  return clbSuccess;
}

}  // extern "C"
