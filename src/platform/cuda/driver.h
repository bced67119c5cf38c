// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The CUDA driver API, reached at run time: libcuda.so.1 is dlopen'ed on first need and its entry
// points are looked up by name, so libcolibri.so has no link-time dependency on it and loads on
// machines without a GPU (the host path never touches this). cuda.h is used for types only.
#pragma once

#include <cuda.h>

#include <string>

#include "colibri/colibri.h"

namespace clb::cuda {

struct Driver {
  int version = 0;  // cuDriverGetVersion, e.g. 13000
#define CLB_CU_FN(name) decltype(&::name) name = nullptr;
#include "platform/cuda/driver_functions.inc"
#undef CLB_CU_FN
  // The graph a stream is capturing into (the registrations a captured call uses are held by it):
  // the CUDA 11.3 signature, which cuda.h declares only for the driver's own build.
  CUresult (*cuStreamGetCaptureInfo_v2)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**,
                                        size_t*) = nullptr;
};

// The driver, loaded and initialized once per process. Without libcuda or a device: clbUnsupported
// with a message that says what is missing.
clbResult_t driver(const Driver** out);
// clbSystemError-style message for a failed driver call ("cuModuleLoadData: CUDA_ERROR_...").
clbResult_t cuError(CUresult rc, const char* call);

// Switches to a context and back (the caller's current context is left as found).
class CtxScope {
 public:
  CtxScope(const Driver* d, CUcontext ctx) : d_(d) {
    d_->cuCtxGetCurrent(&prev_);
    if (prev_ != ctx) {
      d_->cuCtxSetCurrent(ctx);
      switched_ = true;
    }
  }
  ~CtxScope() {
    if (switched_) d_->cuCtxSetCurrent(prev_);
  }
  CtxScope(const CtxScope&) = delete;
  CtxScope& operator=(const CtxScope&) = delete;

 private:
  const Driver* d_;
  CUcontext prev_ = nullptr;
  bool switched_ = false;
};

}  // namespace clb::cuda

#define CLB_CU(drv, call, ...)                                                      \
  do {                                                                              \
    CUresult clb_cu_rc_ = (drv)->call(__VA_ARGS__);                                 \
    if (clb_cu_rc_ != CUDA_SUCCESS) return ::clb::cuda::cuError(clb_cu_rc_, #call); \
  } while (0)
