// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "platform/cuda/driver.h"

#include <dlfcn.h>

#include <mutex>

#include "base/error.h"

namespace clb::cuda {
namespace {

// cuda.h #defines many plain names to versioned ones (cuMemAlloc -> cuMemAlloc_v2): stringizing
// the macro-expanded name gives the symbol libcuda really exports.
#define CLB_STR2(x) #x
#define CLB_STR(x) CLB_STR2(x)

Driver gDriver;
clbResult_t gResult = clbSuccess;
std::string gError;

void loadOnce() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    gResult = clbUnsupported;
    gError = std::string("no CUDA driver: cannot load libcuda.so.1 (") + dlerror() +
             "). Device buffers need an NVIDIA GPU and its driver; the host path works without them";
    return;
  }
#define CLB_CU_FN(name)                                                                              \
  gDriver.name = reinterpret_cast<decltype(gDriver.name)>(dlsym(lib, CLB_STR(name)));                \
  if (!gDriver.name) {                                                                               \
    gResult = clbUnsupported;                                                                        \
    gError = "the CUDA driver lacks " CLB_STR(name) ": update the NVIDIA driver (CUDA 12 or newer)"; \
    return;                                                                                          \
  }
#include "platform/cuda/driver_functions.inc"
#undef CLB_CU_FN
  gDriver.cuStreamGetCaptureInfo_v2 =
      reinterpret_cast<decltype(gDriver.cuStreamGetCaptureInfo_v2)>(dlsym(lib, "cuStreamGetCaptureInfo_v2"));
  if (!gDriver.cuStreamGetCaptureInfo_v2) {
    gResult = clbUnsupported;
    gError = "the CUDA driver lacks cuStreamGetCaptureInfo_v2: update the NVIDIA driver (CUDA 12 or newer)";
    return;
  }
  CUresult rc = gDriver.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = "?";
    gDriver.cuGetErrorName(rc, &name);
    gResult = clbUnsupported;
    gError = std::string("cuInit failed (") + name +
             "): no usable GPU (check nvidia-smi, CUDA_VISIBLE_DEVICES, and the container's GPU access)";
    return;
  }
  gDriver.cuDriverGetVersion(&gDriver.version);
}

}  // namespace

clbResult_t driver(const Driver** out) {
  static std::once_flag once;
  std::call_once(once, loadOnce);
  if (gResult != clbSuccess) return setError(gResult, "%s", gError.c_str());
  *out = &gDriver;
  return clbSuccess;
}

clbResult_t cuError(CUresult rc, const char* call) {
  const char* name = "?";
  const char* text = "";
  if (gDriver.cuGetErrorName) gDriver.cuGetErrorName(rc, &name);
  if (gDriver.cuGetErrorString) gDriver.cuGetErrorString(rc, &text);
  clbResult_t r = rc == CUDA_ERROR_OUT_OF_MEMORY   ? clbOutOfMemory
                  : rc == CUDA_ERROR_INVALID_VALUE ? clbInvalidArgument
                                                   : clbSystemError;
  return setError(r, "%s failed: %s (%s)", call, name, text);
}

}  // namespace clb::cuda
