// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbGraphLaunch (colibri.h), its device part (the C entry point, which checks the arguments and
// takes the communicators, is core/graph_launch.cc): a replay of a CUDA graph holding device
// calls, between the launch meetings of the rank threads that share the GPU (device/launch_meet.h),
// as an eager call is.
//
// Why: the kernels of a replayed call wait on the GPU for the peers' kernels of the same call. A
// rank thread that replays while another is still capturing, instantiating or uploading its
// graph, or frees device memory (each a context-wide synchronization, which waits for the first
// thread's waiting kernels), would hold both until the timeout. Eager calls meet on the host
// before they launch; a replay through here does the same, so a server may capture lazily (a
// graph per batch size) and let its allocator free memory between replays. Such ranks' captured
// kernels run only inside a launch through here: the launch sets a permit word of each met rank
// on the stream before the graph and clears it after, and a kernel that finds it clear (a plain
// cudaGraphLaunch) fails the communicator at once, naming the cause, on every rank.
#include <memory>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "device/device_context.h"
#include "base/error.h"
#include "device/device.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

clbResult_t graphLaunch(void* graphExec, void* stream, DeviceCommContext* const* comms, int ncomms) {
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  // Every meeting first (in the order given, the same on every rank thread), then the launch.
  std::vector<DeviceCommContext*> met;
  for (int i = 0; i < ncomms; i++) {
    DeviceCommContext* c = comms[i];
    cuda::Device* dev = c->device.get();
    if (!dev || !dev->graphMeets()) continue;
    const clbResult_t rc = dev->graphArrive(c->seq.load());
    if (rc != clbSuccess) {
      const std::string why = lastError();
      for (DeviceCommContext* m : met) m->device->graphLaunched();  // they wait for this rank otherwise
      return setError(rc, "%s", why.c_str());
    }
    met.push_back(c);
  }
  // The permit each met rank's captured kernels check, set around the graph in stream order: a
  // plain cuGraphLaunch of such a graph finds it clear and fails at once (docs/device.md).
  const CUstream s = static_cast<CUstream>(stream);
  clbResult_t rc = clbSuccess;
  for (DeviceCommContext* m : met)
    if (rc == clbSuccess) rc = m->device->graphPermit(s, 1);
  if (rc == clbSuccess) {
    const CUresult r = d->cuGraphLaunch(static_cast<CUgraphExec>(graphExec), s);
    if (r != CUDA_SUCCESS) rc = cuError(r, "cuGraphLaunch");
  }
  for (DeviceCommContext* m : met)
    if (clbResult_t off = m->device->graphPermit(s, 0); rc == clbSuccess) rc = off;
  const std::string why = rc == clbSuccess ? std::string() : lastError();
  clbResult_t left = clbSuccess;
  for (DeviceCommContext* m : met) {
    const clbResult_t l = m->device->graphLaunched();
    if (left == clbSuccess) left = l;
  }
  if (rc != clbSuccess) {
    // The peers met this rank and launched theirs: their kernels wait for calls this rank never
    // launched, so each communicator is failed (the peers are told) rather than left to time out.
    for (int i = 0; i < ncomms; i++) {
      setError(rc, "%s", why.c_str());
      comms[i]->markFailed(rc);
    }
    return setError(rc, "%s", why.c_str());
  }
  return left;
}

}  // namespace clb::cuda
