// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// DeviceCommContext (device_context.h): where its device objects are complete types, so that it
// is made and freed here, in every build.
#include "device/device_context.h"

#ifdef CLB_HAVE_CUDA
#include "device/device.h"
#else
namespace clb::cuda {
class Device {};  // built without CUDA: never created
class Scaler {};
class PeerDevice {};
}  // namespace clb::cuda
#endif

namespace clb {

DeviceCommContext::DeviceCommContext() = default;

DeviceCommContext::~DeviceCommContext() = default;

void DeviceCommContext::releaseDevice() {
  // The opposite of their declaration's order, as members are destroyed.
  scaler.reset();
  peerDevice.reset();
  device.reset();
}

}  // namespace clb
