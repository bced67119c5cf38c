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
clbResult_t bufferMemory(const void* send, const void* recv, void* stream, bool* onDevice, int*) {
  *onDevice = false;                      // every buffer is host memory
  if (!send && !recv) return clbSuccess;  // a call that moves nothing: the stream orders no work
  if (stream)
    return setError(clbUnsupported,
                    "a CUDA stream was given, but this libcolibri was built without CUDA: pass NULL for host buffers");
  return clbSuccess;
}
// Never reached: bufferMemory says host, so no call comes here with device buffers.
clbResult_t runCollective(DeviceCommContext*, CollArgs, const PreMul&, int, void*) { return noCuda(); }
clbResult_t barrierScratch(DeviceCommContext*, void*, void**) {
  return setError(clbUnsupported,
                  "clbBarrier on a stream: this libcolibri was built without CUDA; pass stream NULL for a barrier "
                  "of the calling threads");
}
clbResult_t deviceStatus(DeviceCommContext*) { return clbSuccess; }
void releaseCallMemory(DeviceCommContext*, bool) {}
clbResult_t trimCallMemory(DeviceCommContext*) { return clbSuccess; }
size_t registrationCount(DeviceCommContext*) { return 0; }
std::string describe(DeviceCommContext*) { return "device: none (built without CUDA)\n"; }
clbResult_t registerBuffer(DeviceCommContext*, void*, size_t, void**) {
  return setError(clbUnsupported, "this libcolibri was built without CUDA: there is no device memory to register");
}
clbResult_t deregisterBuffer(DeviceCommContext*, void*, bool* taken) {
  *taken = false;  // no registration can exist
  return clbSuccess;
}
clbResult_t beginStaging(DeviceCommContext*, const void*, size_t, void*, char**) { return noCuda(); }
clbResult_t stageInput(DeviceCommContext*, void*, const PeerOp&, void*) { return noCuda(); }
void endStaging(DeviceCommContext*, void*) {}
clbResult_t runPeerOps(DeviceCommContext*, std::vector<PeerOp>&,
                       const std::function<clbResult_t(std::vector<PeerOp>&)>&) {
  return noCuda();
}
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
