// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "device/kernels.h"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "colibri_kernel_images.h"  // generated from COLIBRI_KERNEL_ARCHS (src/CMakeLists.txt)
#include "platform/cuda/driver.h"
#include "base/dtype.h"
#include "base/error.h"

namespace clb::cuda {

const char* imageFor(int major, int minor) { return kernel_images::nameFor(major, minor); }

std::string imageFile(const char* image) { return kernel_images::fileOf(image); }

std::string kernelDirOverride();  // device_api.cc: clbSetKernelDir

std::string defaultKernelDir() {
  if (std::string o = kernelDirOverride(); !o.empty()) return o;
  if (const char* d = getenv("COLIBRI_KERNEL_DIR"); d && *d) return d;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&defaultKernelDir), &info) && info.dli_fname) {
    std::string f = info.dli_fname;
    size_t slash = f.rfind('/');
    if (slash != std::string::npos) return f.substr(0, slash);
  }
  return ".";
}

static bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

Kernels::~Kernels() {
  const Driver* d = nullptr;
  if (module_ && driver(&d) == clbSuccess) d->cuModuleUnload(module_);
}

clbResult_t Kernels::load(CUdevice device, const std::string& dir) {
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  int major = 0, minor = 0;
  CLB_CU(d, cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  CLB_CU(d, cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  CLB_CU(d, cuDeviceGetAttribute, &smCount_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  const char* image = imageFor(major, minor);
  std::string data, path;
  for (const std::string& base : {dir, dir + "/colibri-kernels"}) {
    path = base + "/" + imageFile(image);
    if (readFile(path, &data)) break;
    data.clear();
  }
  if (data.empty())
    return setError(clbUnsupported,
                    "no kernel image %s for compute capability %d.%d in %s (or its colibri-kernels/): put "
                    "io.colibri:colibri-cuda on the classpath, or point COLIBRI_KERNEL_DIR at the folder",
                    imageFile(image).c_str(), major, minor, dir.c_str());
  if (std::string(image) == "ptx") data.push_back('\0');
  CUresult rc = d->cuModuleLoadData(&module_, data.data());
  if (rc != CUDA_SUCCESS) {
    module_ = nullptr;
    CLB_CHECK(cuError(rc, "cuModuleLoadData"));
  }
  // The image's contract with this library (kernels/kernel_abi.h), as a kernel name.
  CUfunction abi = nullptr;
  const std::string abiName = "clb_kernel_abi_v" + std::to_string(CLB_KERNEL_ABI_VERSION);
  if (d->cuModuleGetFunction(&abi, module_, abiName.c_str()) != CUDA_SUCCESS) {
    d->cuModuleUnload(module_);
    module_ = nullptr;
    return setError(clbUnsupported,
                    "the kernel image %s was not built for kernel ABI %d (it has no %s): it is from another Colibri "
                    "version; use the colibri-cuda jar of the same version, or point COLIBRI_KERNEL_DIR at the "
                    "kernels built with this library",
                    path.c_str(), CLB_KERNEL_ABI_VERSION, abiName.c_str());
  }
  for (int t = 0; t < clbNumTypes; t++) {
    std::string name = std::string("clb_reduce_") + typeName(t);
    CLB_CU(d, cuModuleGetFunction, &reduce_[t], module_, name.c_str());
    name = std::string("clb_scale_") + typeName(t);
    CLB_CU(d, cuModuleGetFunction, &scale_[t], module_, name.c_str());
  }
  CLB_CU(d, cuModuleGetFunction, &copy_, module_, "clb_copy");
  char buf[256];
  snprintf(buf, sizeof buf, "%s (%s for compute capability %d.%d, %zu bytes) from %s", imageFile(image).c_str(),
           std::string(image) == "ptx" ? "PTX, JIT-compiled by the driver" : "native code", major, minor, data.size(),
           path.c_str());
  description_ = buf;
  CLB_INFO("kernels: %s", description_.c_str());
  return clbSuccess;
}

unsigned Kernels::grid(unsigned long long items) const {
  unsigned long long blocks = (items + 511) / 512;
  unsigned long long cap = (unsigned long long)smCount_ * 4;
  if (blocks > cap) blocks = cap;
  return blocks == 0 ? 1 : (unsigned)blocks;
}

clbResult_t Kernels::reduce(const ClbReduceArgs& args, clbDataType_t type, CUstream stream) const {
  if (!module_) return setError(clbInvalidUsage, "kernels not loaded");
  if (args.k < 1 || args.k > CLB_MAX_KERNEL_SRCS)
    return setError(clbInternalError, "reduce kernel with %d inputs (1..%d)", args.k, CLB_MAX_KERNEL_SRCS);
  if (args.n == 0) return clbSuccess;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  void* params[] = {const_cast<ClbReduceArgs*>(&args)};
  CLB_CU(d, cuLaunchKernel, reduce_[type], grid(args.n), 1, 1, 512, 1, 1, 0, stream, params, nullptr);
  return clbSuccess;
}

clbResult_t Kernels::scale(const ClbScaleArgs& args, clbDataType_t type, CUstream stream) const {
  if (!module_) return setError(clbInvalidUsage, "kernels not loaded");
  if (args.n == 0) return clbSuccess;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  void* params[] = {const_cast<ClbScaleArgs*>(&args)};
  // A thread per 16 bytes (the kernel's vector step), as for the copy.
  const unsigned long long perVector = 16 / clbTypeSize(type);
  CLB_CU(d, cuLaunchKernel, scale_[type], grid((args.n + perVector - 1) / perVector), 1, 1, 512, 1, 1, 0, stream,
         params, nullptr);
  return clbSuccess;
}

clbResult_t Kernels::function(const char* name, CUfunction* f) const {
  if (!module_) return setError(clbInvalidUsage, "kernels not loaded");
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CLB_CU(d, cuModuleGetFunction, f, module_, name);
  return clbSuccess;
}

clbResult_t Kernels::copy(void* dst, const void* src, size_t bytes, CUstream stream) const {
  if (!module_) return setError(clbInvalidUsage, "kernels not loaded");
  if (bytes == 0) return clbSuccess;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  unsigned long long n = bytes;
  void* params[] = {&dst, const_cast<void**>(&src), &n};
  CLB_CU(d, cuLaunchKernel, copy_, grid((bytes + 15) / 16), 1, 1, 512, 1, 1, 0, stream, params, nullptr);
  return clbSuccess;
}

}  // namespace clb::cuda
