// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device kernels, one image per compute capability. The build compiles src/kernels/*.cu into
// colibri_kernels_sm80/sm89/sm90/sm100/sm120.cubin and a PTX fallback (colibri_kernels.ptx); at
// load the core reads the device's compute capability, picks the matching image, and hands it to
// the driver (cuModuleLoadData). Why cubins rather than per-CC shared libraries: a cubin needs no
// CUDA runtime, no exported symbol table and no dlopen, weighs ~170 KB, and the driver checks it
// against the device; the function table of the architecture note becomes the kernel names.
#pragma once

#include <cuda.h>

#include <string>

#include "colibri/colibri.h"
#include "kernels/kernel_abi.h"

namespace clb::cuda {

// Image name for compute capability major.minor: "sm80", "sm89", "sm90", "sm100", "sm120", or
// "ptx" (JIT-compiled by the driver) when no cubin fits.
const char* imageFor(int major, int minor);
std::string imageFile(const char* image);  // "colibri_kernels_sm90.cubin" / "colibri_kernels.ptx"
// Where images are looked for: clbSetKernelDir's folder, else COLIBRI_KERNEL_DIR, else the folder
// of libcolibri itself (each also with a colibri-kernels/ subfolder).
std::string defaultKernelDir();

class Kernels {
 public:
  ~Kernels();
  // Loads the image for `device` into the current context (which must belong to that device).
  clbResult_t load(CUdevice device, const std::string& dir);
  const std::string& description() const { return description_; }
  int smCount() const { return smCount_; }
  clbResult_t reduce(const ClbReduceArgs& args, clbDataType_t type, CUstream stream) const;
  // PreMulSum's scaling (clb_scale_<type>) on `stream`, in the caller's current context.
  clbResult_t scale(const ClbScaleArgs& args, clbDataType_t type, CUstream stream) const;
  clbResult_t copy(void* dst, const void* src, size_t bytes, CUstream stream) const;
  clbResult_t function(const char* name, CUfunction* f) const;

 private:
  unsigned grid(unsigned long long items) const;
  CUmodule module_ = nullptr;
  CUfunction reduce_[clbNumTypes] = {};
  CUfunction scale_[clbNumTypes] = {};
  CUfunction copy_ = nullptr;
  int smCount_ = 1;
  std::string description_;
};

}  // namespace clb::cuda
