// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// DeviceCommContext (device_context.h): where its device objects are complete types, so that it
// is made and freed here, in every build.
#include "device/device_context.h"

#include "device/runtime.h"

#ifdef CLB_HAVE_CUDA
#include "device/device.h"
#include "device/gpu_runtime.h"
#else
namespace clb::cuda {
class GpuRuntime {};  // built without CUDA: never created
class Device {};
class Scaler {};
class PeerDevice {};
}  // namespace clb::cuda
#endif

namespace clb {

DeviceCommContext::DeviceCommContext() = default;

DeviceCommContext::~DeviceCommContext() = default;

void DeviceCommContext::releaseDevice() { cuda::releaseCallMemory(this, true); }

}  // namespace clb
