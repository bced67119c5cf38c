// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The device runtime's entry points that the core calls in every build (no CUDA type in them): in
// a build with the device runtime they are its own (device.cc, scale.cc, graph_launch.cc); in one
// without CUDA (no_cuda.cc) they say that there is no CUDA, so that the core calls them without
// testing CLB_HAVE_CUDA itself (scripts/check-layers.sh).
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/colibri.h"
#include "device/device_context.h"

namespace clb::cuda {

// clbSuccess where this build has the device runtime; without CUDA clbUnsupported, saying so.
clbResult_t checkBuiltWithCuda();
// True once this process has loaded libcuda (a process that never did cannot hold device memory).
// Without CUDA: false.
bool driverInProcess();
// Whether p is device memory (and on which device). Host memory, including pinned, is "host".
// Without CUDA: host (never asked: driverInProcess() is false).
clbResult_t classifyPointer(const void* p, bool* isDevice, int* ordinal);
// Copies one scalar of `bytes` from device memory on GPU `ordinal` to *out (a host call's
// PreMulSum whose scalar lies in device memory).
clbResult_t readScalar(const void* p, size_t bytes, int ordinal, uint64_t* out);
// clbGraphLaunch's device part (graph_launch.cc), once core/graph_launch.cc checked its arguments
// and took the communicators `comms` (their async status clean): the ranks of each that share its
// GPU and process meet, the graph `graphExec` is launched on `stream` with their permits set
// around it, and they meet again. A failure after the meeting fails every one of `comms`.
clbResult_t graphLaunch(void* graphExec, void* stream, DeviceCommContext* const* comms, int ncomms);

}  // namespace clb::cuda
