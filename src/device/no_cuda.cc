// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A libcolibri built without cuda.h: the device runtime's entry points that the core calls
// (runtime.h) and the device helpers of the C ABI exist and say why they cannot work.
#include "colibri/colibri.h"
#include "base/error.h"
#include "device/runtime.h"

using namespace clb;

#ifndef CLB_HAVE_CUDA
namespace {
clbResult_t noCuda() {
  return setError(clbUnsupported, "this libcolibri was built without CUDA (cuda.h was not found at build time)");
}
}  // namespace

namespace clb::cuda {
clbResult_t checkBuiltWithCuda() { return noCuda(); }
bool driverInProcess() { return false; }
clbResult_t classifyPointer(const void*, bool* isDevice, int*) {
  *isDevice = false;  // no device memory without CUDA
  return clbSuccess;
}
clbResult_t readScalar(const void*, size_t, int, uint64_t*) { return noCuda(); }
clbResult_t graphLaunch(void*, void*, DeviceCommContext* const*, int) { return noCuda(); }
}  // namespace clb::cuda

extern "C" {
clbResult_t clbDeviceCount(int*) { return noCuda(); }
clbResult_t clbDeviceAlloc(void**, size_t, int) { return noCuda(); }
clbResult_t clbDeviceFree(void*) { return noCuda(); }
clbResult_t clbMemcpy(void*, const void*, size_t, void*) { return noCuda(); }
clbResult_t clbStreamCreate(void**, int) { return noCuda(); }
clbResult_t clbStreamDestroy(void*) { return noCuda(); }
clbResult_t clbStreamSynchronize(void*) { return noCuda(); }
clbResult_t clbSetKernelDir(const char*) { return clbSuccess; }
clbResult_t clbDeviceInfo(int, clbDeviceInfo_t*) { return noCuda(); }
clbResult_t clbDeviceCanAccessPeer(int, int, int*) { return noCuda(); }
}
#endif
