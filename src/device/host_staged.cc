// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device buffers on ranks that do not share a host: the device kernels need the peers' memory
// mapped, which only works inside a node. Over transport verbs with GPUDirect RDMA the NIC reads
// and writes GPU memory (gpudirect.cc). Otherwise (sockets, or no dma-buf / nvidia-peermem) the
// data goes through pinned host memory and the host transport: each call waits for the stream
// (the input must be complete before the host reads it), copies the input out, runs the host
// collective, and queues the copy back on the stream. Correct, and said loudly.
#include <cstring>

#include "core/comm.h"
#include "device/device_world.h"
#include "core/dtype.h"
#include "core/error.h"

namespace clb::cuda {

clbResult_t DeviceWorld::trimHostStage() {
  CLB_CHECK(trimGpuDirect());
  if (!stage_[0] && !stage_[1]) return clbSuccess;
  CtxScope scope(d_, ctx_);  // the frees need the context that allocated them (trim runs on any thread)
  if (stageDone_) d_->cuEventSynchronize(stageDone_);  // the last copy back has read the staging
  for (int i = 0; i < 2; i++) {
    if (!stage_[i]) continue;
    d_->cuMemFreeHost(stage_[i]);
    comm_->mem.addHost(-(int64_t)stageBytes_[i]);
    stage_[i] = nullptr;
    stageBytes_[i] = 0;
  }
  return clbSuccess;
}

clbResult_t DeviceWorld::runAcrossHosts(const CollArgs& a, int ordinal, CUstream stream) {
  if (!configError_.empty()) return setError(clbInvalidArgument, "%s", configError_.c_str());
  if (ordinal_ >= 0 && ordinal != ordinal_)
    return setError(clbInvalidArgument,
                    "rank %d's buffers are on GPU %d but its communicator works with GPU %d: one "
                    "communicator per GPU", comm_->rank, ordinal, ordinal_);
  CLB_CHECK(driver(&d_));
  if (!ctx_) {
    CLB_CU(d_, cuDeviceGet, &dev_, ordinal);
    CLB_CU(d_, cuDevicePrimaryCtxRetain, &ctx_, dev_);
    ordinal_ = ordinal;
  }
  CtxScope scope(d_, ctx_);
  CLB_CHECK(checkStream(stream));
  if (stream) {
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CLB_CU(d_, cuStreamIsCapturing, stream, &cap);
    if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
      return setError(clbInvalidUsage,
                      "rank %d: this communicator spans hosts, where the host drives every step of a device "
                      "collective (GPUDirect RDMA or host staging) and waits for the stream, which a CUDA graph "
                      "cannot hold: capture collectives of ranks on one host only",
                      comm_->rank);
  }
  if (!gdrDecided_) {  // collective: every rank is in this call
    gdrFailure_ = setUpGpuDirect();
    if (gdrFailure_ != clbSuccess) gdrFailMsg_ = lastError();
    gdrDecided_ = true;
  }
  if (gdrFailure_ != clbSuccess) return setError(gdrFailure_, "%s", gdrFailMsg_.c_str());
  if (gdr_) {
    acrossHosts_ = true;
    return runGpuDirect(a, stream);
  }
  lastGdr_ = false;
  const int n = comm_->nranks, r = comm_->rank;
  const size_t esz = clbTypeSize(a.type);
  const size_t bytes[2] = {a.count * esz * (a.desc.coll == kReduceScatter ? n : 1),
                           a.count * esz * (a.desc.coll == kAllGather ? n : 1)};
  const bool hasSend = a.desc.coll != kBroadcast || r == a.root;
  // The previous call's copy back (perhaps on another stream) has finished reading the staging.
  if (!stageDone_) CLB_CU(d_, cuEventCreate, &stageDone_, CU_EVENT_DISABLE_TIMING);
  CLB_CU(d_, cuEventSynchronize, stageDone_);
  for (int i = 0; i < 2; i++) {
    if (stageBytes_[i] >= bytes[i]) continue;
    if (stage_[i]) {
      d_->cuMemFreeHost(stage_[i]);
      comm_->mem.addHost(-(int64_t)stageBytes_[i]);
      stage_[i] = nullptr;
      stageBytes_[i] = 0;
    }
    CLB_CU(d_, cuMemHostAlloc, &stage_[i], bytes[i], CU_MEMHOSTALLOC_PORTABLE);
    stageBytes_[i] = bytes[i];
    comm_->mem.addHost((int64_t)bytes[i]);
  }
  if (!acrossHosts_) {
    acrossHosts_ = true;
    CLB_WARN("rank %d: device buffers between hosts go through pinned host memory over the %s transport, and each "
             "call waits for its stream (no GPUDirect RDMA: %s)", r, clbTransportName(comm_->transport),
             gdrWhy_.c_str());
  }
  // The input is complete only when the work queued before this call is.
  CLB_CU(d_, cuStreamSynchronize, stream);
  if (hasSend) CLB_CU(d_, cuMemcpyDtoH, stage_[0], (CUdeviceptr)a.send, bytes[0]);
  const void* in = hasSend ? stage_[0] : nullptr;
  CLB_CHECK(hostCollective(comm_, a.desc.coll, in, stage_[1], a.count, a.type, a.op, a.root));
  // Pinned memory: the copy back is asynchronous on the stream; the next call (or trim) waits for
  // it (stageDone_) before the staging is written again.
  CLB_CU(d_, cuMemcpyHtoDAsync, (CUdeviceptr)a.recv, stage_[1], bytes[1], stream);
  CLB_CU(d_, cuEventRecord, stageDone_, stream);
  return clbSuccess;
}

}  // namespace clb::cuda
