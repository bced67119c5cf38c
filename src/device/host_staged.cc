// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The host-staged path (HostStagedPath, paths.h): device buffers on ranks that do not share a
// host, when GPUDirect RDMA cannot be had (sockets, or no dma-buf / nvidia-peermem; see
// gpudirect.cc). The device kernels need the peers' memory mapped, which only works inside a
// node; so the data goes through pinned host memory and the host transport: each call waits for
// the stream (the input must be complete before the host reads it), copies the input out, runs
// the host collective, and queues the copy back on the stream. Correct, and said loudly.
#include <cstring>

#include "device/device_context.h"
#include "base/dtype.h"
#include "base/error.h"
#include "device/paths.h"

namespace clb::cuda {

clbResult_t HostStagedPath::trim() {
  if (!stage_[0] && !stage_[1]) return clbSuccess;
  CtxScope scope(s_.d, s_.ctx);  // the frees need the context that allocated them (trim runs on any thread)
  if (stageDone_) s_.d->cuEventSynchronize(stageDone_);  // the last copy back has read the staging
  for (int i = 0; i < 2; i++) {
    if (!stage_[i]) continue;
    s_.d->cuMemFreeHost(stage_[i]);
    s_.comm->mem.addHost(-(int64_t)stageBytes_[i]);
    stage_[i] = nullptr;
    stageBytes_[i] = 0;
  }
  return clbSuccess;
}

void HostStagedPath::release() {
  trim();
  if (stageDone_) {
    CtxScope scope(s_.d, s_.ctx);
    s_.d->cuEventDestroy(stageDone_);
  }
  stageDone_ = nullptr;
}

// In the context (Device::runAcrossHosts), on a stream of this GPU, outside capture.
clbResult_t HostStagedPath::run(const CollArgs& a, CUstream stream, const std::string& whyNotGpuDirect) {
  const int n = s_.comm->nranks, r = s_.comm->rank;
  const size_t esz = clbTypeSize(a.type);
  const size_t bytes[2] = {a.count * esz * (a.desc.coll == kReduceScatter ? n : 1),
                           a.count * esz * (a.desc.coll == kAllGather ? n : 1)};
  const bool hasSend = a.desc.coll != kBroadcast || r == a.root;
  // The previous call's copy back (perhaps on another stream) has finished reading the staging.
  if (!stageDone_) CLB_CU(s_.d, cuEventCreate, &stageDone_, CU_EVENT_DISABLE_TIMING);
  CLB_CU(s_.d, cuEventSynchronize, stageDone_);
  for (int i = 0; i < 2; i++) {
    if (stageBytes_[i] >= bytes[i]) continue;
    if (stage_[i]) {
      s_.d->cuMemFreeHost(stage_[i]);
      s_.comm->mem.addHost(-(int64_t)stageBytes_[i]);
      stage_[i] = nullptr;
      stageBytes_[i] = 0;
    }
    CLB_CU(s_.d, cuMemHostAlloc, &stage_[i], bytes[i], CU_MEMHOSTALLOC_PORTABLE);
    stageBytes_[i] = bytes[i];
    s_.comm->mem.addHost((int64_t)bytes[i]);
  }
  if (!s_.layout.acrossHosts) {
    s_.layout.acrossHosts = true;
    CLB_WARN(
        "rank %d: device buffers between hosts go through pinned host memory over the %s transport, and each "
        "call waits for its stream (no GPUDirect RDMA: %s)",
        r, clbTransportName(s_.comm->transport), whyNotGpuDirect.c_str());
  }
  // The input is complete only when the work queued before this call is.
  CLB_CU(s_.d, cuStreamSynchronize, stream);
  if (hasSend) CLB_CU(s_.d, cuMemcpyDtoH, stage_[0], (CUdeviceptr)a.send, bytes[0]);
  const void* in = hasSend ? stage_[0] : nullptr;
  CLB_CHECK(s_.comm->hostCollective(a.desc.coll, in, stage_[1], a.count, a.type, a.op, a.root));
  // Pinned memory: the copy back is asynchronous on the stream; the next call (or trim) waits for
  // it (stageDone_) before the staging is written again.
  CLB_CU(s_.d, cuMemcpyHtoDAsync, (CUdeviceptr)a.recv, stage_[1], bytes[1], stream);
  CLB_CU(s_.d, cuEventRecord, stageDone_, stream);
  return clbSuccess;
}

}  // namespace clb::cuda
