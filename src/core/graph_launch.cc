// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbGraphLaunch (colibri.h), its C entry point: the arguments checked and the communicators taken
// for the call, as every entry point does; the replay between the meetings of the rank threads
// sharing a GPU is the device runtime's (cuda::graphLaunch, device/graph_launch.cc). A build
// without CUDA refuses every call at once, saying so (cuda::checkBuiltWithCuda, device/no_cuda.cc).
#include <memory>
#include <vector>

#include "colibri/colibri.h"
#include "core/comm.h"
#include "base/error.h"
#include "device/runtime.h"

using namespace clb;

extern "C" clbResult_t clbGraphLaunch(void* graphExec, void* stream, const clbComm_t* comms, int ncomms) {
  clearError();
  CLB_CHECK(cuda::checkBuiltWithCuda());
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
  std::vector<DeviceCommContext*> contexts;
  for (int i = 0; i < ncomms; i++) contexts.push_back(comms[i]);
  return cuda::graphLaunch(graphExec, stream, contexts.data(), ncomms);
}
