// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The device runtime's entry points that the core calls in every build (no CUDA type in them): in
// a build with the device runtime they are its own (device.cc, scale.cc, graph_launch.cc and
// comm_device.cc, where the communicator's device objects are made, used and freed); in one without
// CUDA (no_cuda.cc) they say that there is no CUDA, so that the core calls them without testing
// CLB_HAVE_CUDA itself (scripts/check-layers.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algo/algorithms.h"
#include "algo/p2p.h"
#include "base/call.h"
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

// The communicator's device objects (comm_device.cc): the device runtime (`device`), PreMulSum's
// scaling kernels and scratch (`scaler`), point-to-point on the GPU (`peerDevice`) and the barrier's
// int, each made at the first call that needs it and freed by releaseCallMemory.

// Whether a call's buffers are device memory (*ordinal: the GPU): both must agree, device buffers
// on one GPU, and a stream needs device buffers. Either may be NULL (a call that has one). A
// process that never loaded the CUDA driver has no device memory and is not asked. Without CUDA:
// host, and a stream is refused (clbUnsupported).
clbResult_t bufferMemory(const void* send, const void* recv, void* stream, bool* onDevice, int* ordinal);
// A collective on device buffers, its arguments checked and its call held by the core: a
// PreMulSum's scaling kernel (pm.on) ahead of it on `stream`, then the device path inside a node
// or pinned host memory and the host transport between hosts. A failure midway fails the
// communicator; refusals before anything moved leave it usable.
clbResult_t runCollective(DeviceCommContext* c, CollArgs a, const PreMul& pm, int ordinal, void* stream);
// clbBarrier on a stream: the communicator's int32 of device memory in the stream's context, made
// at the first such barrier (refused inside a graph capture, and on a stream of another context).
clbResult_t barrierScratch(DeviceCommContext* c, void* stream, void** scratch);
// What the device objects say without a call (clbCommGetAsyncError): a point-to-point kernel that
// met another call or timed out, a device call that failed; the communicator is then failed.
clbResult_t deviceStatus(DeviceCommContext* c);
// Gives back the device memory the calls set up (the device paths, PreMulSum's scratch, the
// barrier's int, and with `peers` point-to-point on the GPU and the GPU runtime with its kernel
// images), under the lock the status queries take. clbCommSuspend, clbCommDestroy and the
// communicator's destructor (DeviceCommContext::releaseDevice).
void releaseCallMemory(DeviceCommContext* c, bool peers);
// clbCommTrim's device part: the host staging between hosts and PreMulSum's device scratch.
clbResult_t trimCallMemory(DeviceCommContext* c);
// How many buffers this rank holds registered (clbCommRegister); 0 without a device runtime.
size_t registrationCount(DeviceCommContext* c);
// clbCommInfo's device lines.
std::string describe(DeviceCommContext* c);
// clbCommRegister / clbCommDeregister (collective). Deregister sets *taken false where this
// communicator never made its device runtime (no registration can exist: the core says so).
clbResult_t registerBuffer(DeviceCommContext* c, void* buff, size_t bytes, void** handle);
clbResult_t deregisterBuffer(DeviceCommContext* c, void* handle, bool* taken);

// A point-to-point batch's inputs on device buffers that are staged before anything moves (a
// PreMulSum reduce's scaled input, an in-place all-to-all's copy): beginStaging gives the scratch
// of `bytes` for the batch's `stream` (`first`: a staged input, for its GPU), stageInput scales or
// copies o's input into `dst`, and endStaging follows the batch's launch (what read the scratch is
// queued).
clbResult_t beginStaging(DeviceCommContext* c, const void* first, size_t bytes, void* stream, char** scratch);
clbResult_t stageInput(DeviceCommContext* c, void* dst, const PeerOp& o, void* stream);
void endStaging(DeviceCommContext* c, void* stream);
// A point-to-point batch with operations on device memory: on the GPU where the pairs allow, the
// rest staged through host memory and moved by `runHost` (the core's host batch), announcements last.
clbResult_t runPeerOps(DeviceCommContext* c, std::vector<PeerOp>& ops,
                       const std::function<clbResult_t(std::vector<PeerOp>&)>& runHost);

}  // namespace clb::cuda
