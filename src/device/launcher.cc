// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "device/launcher.h"

#include <cstring>

#include "base/error.h"

namespace clb::cuda {

namespace {
CUDA_KERNEL_NODE_PARAMS nodeParams(CUfunction fn, unsigned blocks, unsigned threads, void** params) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = fn;
  p.gridDimX = blocks;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = threads;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  return p;
}
}  // namespace

clbResult_t GraphLauncher::launch(const Driver* d, CUfunction fn, unsigned blocks, unsigned threads, CUstream stream,
                                  const void* arg, size_t argBytes) {
  void* params[] = {const_cast<void*>(arg)};
  auto plain = [&] {
    CLB_CU(d, cuLaunchKernel, fn, blocks, 1, 1, threads, 1, 1, 0, stream, params, nullptr);
    return clbSuccess;
  };
  if (!graphs_) return plain();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d->cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return plain();  // the user's capture records an ordinary launch
  const CUDA_KERNEL_NODE_PARAMS p = nodeParams(fn, blocks, threads, params);
  // Refused where an ordinary launch may pass (another thread's global-mode capture, say).
  auto captureRefused = [](CUresult rc) {
    return rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
           rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  };
  for (Entry& e : entries_) {
    if (e.stream != stream || e.fn != fn) continue;
    const bool same = e.blocks == blocks && e.threads == threads && e.arg.size() == argBytes &&
                      memcmp(e.arg.data(), arg, argBytes) == 0;
    if (!same) {
      // The parameters are copied: they concern this launch and the later ones, not those queued.
      CUresult rc = d->cuGraphExecKernelNodeSetParams(e.exec, e.node, &p);
      if (rc != CUDA_SUCCESS) {
        // Nothing was launched: the ordinary way still can. What the node holds is unknown now,
        // so the next launch sets it again.
        e.arg.clear();
        const char* name = "?";
        d->cuGetErrorName(rc, &name);
        CLB_DEBUG("cuGraphExecKernelNodeSetParams failed (%s): an ordinary launch instead", name);
        return plain();
      }
      e.blocks = blocks;
      e.threads = threads;
      e.arg.assign(static_cast<const char*>(arg), static_cast<const char*>(arg) + argBytes);
    }
    CUresult rc = d->cuGraphLaunch(e.exec, stream);
    if (rc == CUDA_SUCCESS) return clbSuccess;
    if (captureRefused(rc)) return plain();  // a launch that did not happen
    return cuError(rc, "cuGraphLaunch");
  }
  if (entries_.size() >= kMaxEntries) return plain();
  Entry e{stream,  fn,
          nullptr, nullptr,
          nullptr, blocks,
          threads, std::vector<char>(static_cast<const char*>(arg), static_cast<const char*>(arg) + argBytes)};
  CUresult rc = d->cuGraphCreate(&e.graph, 0);
  if (rc == CUDA_SUCCESS) rc = d->cuGraphAddKernelNode(&e.node, e.graph, nullptr, 0, &p);
  if (rc == CUDA_SUCCESS) rc = d->cuGraphInstantiateWithFlags(&e.exec, e.graph, 0);
  if (rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    // Another thread captures in global mode, which forbids this now: prepared at a later call.
    if (e.graph) d->cuGraphDestroy(e.graph);
    return plain();
  }
  if (rc != CUDA_SUCCESS) {
    // Graphs cannot be made here: every launch from now on is an ordinary one.
    const char* name = "?";
    d->cuGetErrorName(rc, &name);
    CLB_INFO("device launches without graphs: preparing one failed (%s)", name);
    if (e.graph) d->cuGraphDestroy(e.graph);
    graphs_ = false;
    return plain();
  }
  entries_.push_back(std::move(e));
  count_.store(entries_.size(), std::memory_order_relaxed);
  rc = d->cuGraphLaunch(entries_.back().exec, stream);
  if (rc == CUDA_SUCCESS) return clbSuccess;
  if (captureRefused(rc)) return plain();
  return cuError(rc, "cuGraphLaunch");
}

void GraphLauncher::release(const Driver* d) {
  for (Entry& e : entries_) {
    d->cuGraphExecDestroy(e.exec);
    d->cuGraphDestroy(e.graph);
  }
  entries_.clear();
  count_.store(0, std::memory_order_relaxed);
}

}  // namespace clb::cuda
