// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbGraphLaunch (colibri.h): a replay of a CUDA graph holding device calls, between the launch
// meetings of the rank threads that share the GPU (core/launch_meet.h), as an eager call is.
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
#include "core/comm.h"
#include "base/error.h"
#include "device/device.h"
#include "platform/cuda/driver.h"

using namespace clb;

extern "C" clbResult_t clbGraphLaunch(void* graphExec, void* stream, const clbComm_t* comms, int ncomms) {
  clearError();
  constexpr int kMostComms = 64;
  if (!graphExec)
    return setError(clbInvalidArgument,
                    "graphExec is NULL: pass the instantiated graph (CUgraphExec / cudaGraphExec_t)");
  if (ncomms < 0 || ncomms > kMostComms)
    return setError(clbInvalidArgument, "ncomms=%d is not in 0..%d (the communicators whose calls the graph holds)",
                    ncomms, kMostComms);
  if (ncomms > 0 && !comms) return setError(clbInvalidArgument, "comms is NULL with ncomms=%d", ncomms);
  for (int i = 0; i < ncomms; i++) {
    if (clbResult_t rc = checkComm(comms[i]); rc != clbSuccess)
      return setError(rc, "comms[%d]: %s", i, lastError().c_str());
    for (int j = 0; j < i; j++)
      if (comms[j] == comms[i])
        return setError(clbInvalidArgument, "comms[%d] and comms[%d] are the same communicator: name each once", j, i);
  }
  std::vector<std::unique_ptr<CallScope>> scopes;
  for (int i = 0; i < ncomms; i++) {
    scopes.push_back(std::make_unique<CallScope>(comms[i], kCallGraphLaunch));
    CLB_CHECK(scopes.back()->result());
    CLB_CHECK(comms[i]->asyncStatus());
  }
  const cuda::Driver* d = nullptr;
  CLB_CHECK(cuda::driver(&d));
  // Every meeting first (in the order given, the same on every rank thread), then the launch.
  std::vector<clbComm_t> met;
  for (int i = 0; i < ncomms; i++) {
    clbComm* c = comms[i];
    cuda::Device* dev = c->device.get();
    if (!dev || !dev->graphMeets()) continue;
    const clbResult_t rc = dev->graphArrive(c->seq.load());
    if (rc != clbSuccess) {
      const std::string why = lastError();
      for (clbComm_t m : met) m->device->graphLaunched();  // they wait for this rank otherwise
      return setError(rc, "%s", why.c_str());
    }
    met.push_back(c);
  }
  // The permit each met rank's captured kernels check, set around the graph in stream order: a
  // plain cuGraphLaunch of such a graph finds it clear and fails at once (docs/device.md).
  const CUstream s = static_cast<CUstream>(stream);
  clbResult_t rc = clbSuccess;
  for (clbComm_t m : met)
    if (rc == clbSuccess) rc = m->device->graphPermit(s, 1);
  if (rc == clbSuccess) {
    const CUresult r = d->cuGraphLaunch(static_cast<CUgraphExec>(graphExec), s);
    if (r != CUDA_SUCCESS) rc = cuda::cuError(r, "cuGraphLaunch");
  }
  for (clbComm_t m : met)
    if (clbResult_t off = m->device->graphPermit(s, 0); rc == clbSuccess) rc = off;
  const std::string why = rc == clbSuccess ? std::string() : lastError();
  clbResult_t left = clbSuccess;
  for (clbComm_t m : met) {
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
