// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The communicator's device objects as the core uses them (runtime.h): made at the first call that
// needs each, used by the collectives, the barrier on a stream and point-to-point batches, read by
// the status queries, freed by suspend and destroy. The core holds none of them itself, and no CUDA
// type or CLB_HAVE_CUDA test is in it (scripts/check-layers.sh); a build without CUDA has
// no_cuda.cc's versions instead.
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "base/dtype.h"
#include "base/error.h"
#include "device/device.h"
#include "device/gpu_runtime.h"
#include "device/runtime.h"
#include "transport/transport.h"

namespace clb::cuda {

clbResult_t bufferMemory(const void* send, const void* recv, void* stream, bool* onDevice, int* ordinal) {
  *onDevice = false;
  // No buffer (a call that moves nothing: counts of 0): nothing to ask, and the stream has no work
  // to order, whatever it is.
  if (!send && !recv) return clbSuccess;
  // Device memory is only possible once this process loaded the CUDA driver, so host-only
  // processes never pay for the question.
  if (!stream && !driverInProcess()) return clbSuccess;
  bool recvDev = false, sendDev = false;
  int ro = -1, so = -1;
  const void* first = recv ? recv : send;
  if (first) CLB_CHECK(classifyPointer(first, &recvDev, &ro));
  if (recv && send && send != recv)
    CLB_CHECK(classifyPointer(send, &sendDev, &so));
  else
    sendDev = recvDev, so = ro;  // in place (or one buffer): one question
  if (sendDev != recvDev)
    return setError(clbInvalidArgument,
                    "send is %s memory but recv is %s memory: pass both on the GPU or both on the host",
                    sendDev ? "device" : "host", recvDev ? "device" : "host");
  if (recvDev && so != ro)
    return setError(clbInvalidArgument, "send is on GPU %d but recv on GPU %d: pass buffers of one GPU", so, ro);
  if (!recvDev && stream)
    return setError(clbInvalidArgument,
                    "a CUDA stream was given but the buffers are host memory: pass device buffers, or stream 0 "
                    "(NULL) for host buffers");
  *onDevice = recvDev;
  *ordinal = ro;
  return clbSuccess;
}

clbResult_t runCollective(DeviceCommContext* c, CollArgs a, const PreMul& pm, int ordinal, void* streamPtr) {
  const CUstream stream = static_cast<CUstream>(streamPtr);
  const uint32_t coll = a.desc.coll;
  // PreMulSum: the scaling kernel on the stream, ahead of the collective's: into recv where recv
  // is all the call writes (element-wise, so in place is safe), else (reduceScatter; a reduce's
  // other ranks, whose recv the call leaves alone) into the Scaler's scratch.
  Scaler* scaler = nullptr;
  if (pm.on) {
    if (!c->scaler) c->scaler = std::make_unique<Scaler>(c);
    scaler = c->scaler.get();
    const size_t elems = coll == kReduceScatter ? a.count * c->nranks : a.count;
    const bool scratch = (coll == kReduceScatter && c->nranks > 1) || (coll == kReduce && c->rank != a.root);
    void* dst = nullptr;
    // Every rank of a reduce asks for the same scratch, the root too (which scales into recv):
    // inside a capture a scratch too small is refused, and so on every rank alike. A reduce of
    // one rank has only its root, which needs none.
    const size_t want = scratch || (coll == kReduce && c->nranks > 1) ? elems * clbTypeSize(a.type) : 0;
    CLB_CHECK(scaler->begin(ordinal, stream, want, &dst));
    if (!scratch) dst = a.recv;
    if (clbResult_t rc = scaler->scale(dst, a.send, elems, pm, stream)) {
      scaler->end(stream);
      return rc;
    }
    a.send = dst;
  }
  if (!c->device) c->device = std::make_unique<Device>(c);
  a.desc.algo = clbAlgoDirect;
  // Ranks that do not share a host (or memory: a socket or verbs transport) cannot map each
  // other's device memory: through pinned host memory and the host transport.
  clbResult_t rc = c->nranks > 1 && !c->carrier->sharesMemory() ? c->device->runAcrossHosts(a, ordinal, stream)
                                                                : c->device->run(a, ordinal, stream);
  if (scaler) scaler->end(stream);
  // Refusals before anything moved leave the communicator usable.
  if (rc != clbSuccess && rc != clbInvalidArgument && rc != clbUnsupported && rc != clbInvalidUsage) c->markFailed(rc);
  return rc;
}

clbResult_t barrierScratch(DeviceCommContext* c, void* stream, void** scratch) {
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUcontext ctx = nullptr;
  CLB_CU(d, cuStreamGetCtx, static_cast<CUstream>(stream), &ctx);
  if (!c->barrierScratch) {
    CtxScope scope(d, ctx);
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    d->cuStreamIsCapturing(static_cast<CUstream>(stream), &capturing);
    if (capturing != CU_STREAM_CAPTURE_STATUS_NONE)
      return setError(clbInvalidUsage,
                      "rank %d: the first clbBarrier on a stream was called inside a CUDA graph "
                      "capture: call it once before capturing (it allocates its 4 bytes of device memory then)",
                      c->rank);
    CUdeviceptr p = 0;
    GpuRuntime& rt = gpuRuntime(c);
    CLB_CHECK(rt.alloc(sizeof(int32_t), "clbBarrier's int", &p));
    if (CUresult r = d->cuMemsetD8(p, 0, sizeof(int32_t)); r != CUDA_SUCCESS) {
      rt.free(p, sizeof(int32_t));
      return setError(clbSystemError, "rank %d: clbBarrier: cuMemsetD8 of its 4 bytes failed (CUresult %d)", c->rank,
                      (int)r);
    }
    c->barrierScratch = reinterpret_cast<void*>(p);
    c->barrierContext = ctx;
  } else if (ctx != c->barrierContext) {
    return setError(clbInvalidUsage,
                    "rank %d: clbBarrier on a stream of another CUDA context than this "
                    "communicator's first barrier: a communicator's device calls use one GPU (its primary "
                    "context)",
                    c->rank);
  }
  *scratch = c->barrierScratch;
  return clbSuccess;
}

clbResult_t deviceStatus(DeviceCommContext* c) {
  // The device objects stay while this reads them (clbCommSuspend frees them under the lock).
  std::shared_lock<std::shared_mutex> objects(c->deviceObjects);
  if (const unsigned int e = c->peerDevice ? c->peerDevice->launchError() : 0; e == CLB_P2P_ERROR_MISMATCH) {
    setError(clbRemoteError,
             "rank %d: a point-to-point operation on device memory met its peer's of another call, "
             "count or type (a send and its receive must have the same count and type, in the same order, within "
             "calls of the same kind; every rank of a gather, scatter or reduce must pass the same root, count and "
             "type): nothing moved into that receive, and the communicator cannot go on",
             c->rank);
    c->markFailed(clbRemoteError);
    return clbRemoteError;
  } else if (e == CLB_P2P_ERROR_PEER_ENDED) {
    // The peer's own words where its notice carries them (the first failure any peer announced).
    const int p = c->peerDevice->endedPeer();
    PeerNotice n;
    char said[300] = "";
    if (c->carrier && c->carrier->statusNotice(&n) && n.kind == PeerNotice::kFailed && n.origin == p && n.reason)
      snprintf(said, sizeof said, ". Rank %d said: %.236s", p, n.reason);
    char whom[32] = "a peer";
    if (p >= 0) snprintf(whom, sizeof whom, "rank %d", p);
    setError(clbRemoteError,
             "rank %d: a point-to-point operation on device memory waited for %s, whose communicator failed "
             "before it launched the matching send or receive (or could not tell how far its calls go): that "
             "operation's output is undefined, and the communicator cannot go on%s",
             c->rank, whom, said);
    c->markFailed(clbRemoteError);
    return clbRemoteError;
  } else if (e) {
    setError(clbTimeout,
             "rank %d: a point-to-point kernel waited past the timeout (%lld ms) for a peer: its output "
             "is undefined, and the communicator cannot go on",
             c->rank, (long long)c->cfg.timeoutMs);
    c->markFailed(clbTimeout);
    return clbTimeout;
  }
  if (Device* d = c->deviceReady.load(std::memory_order_acquire)) {
    clbResult_t rc = d->deviceStatus();
    if (rc != clbSuccess) {
      c->markFailed(rc);
      return rc;
    }
  }
  return clbSuccess;
}

void releaseCallMemory(DeviceCommContext* c, bool peers) {
  std::unique_lock<std::shared_mutex> objects(c->deviceObjects);
  c->device.reset();  // waits for this rank's kernels (its context synchronized) ...
  c->scaler.reset();  // ... so the scaling kernels' scratch is free to go
  // (... and where there were no device collectives, the point-to-point kernels are waited for
  // here, while the watchdog's rounds still end them where they must.)
  if (c->peerDevice) c->peerDevice->drain();
  // The watchdog's round of point-to-point reads the transport's notices: out of its sight before
  // a destroy lets the transport go (the next point-to-point call after a suspend watches again),
  // then its round once more on this thread, while what it says through the transport still
  // reaches the peers. Not before the wait above: until then its rounds end this rank's
  // point-to-point kernels where they must (a peer's abort, say), which the wait waits for.
  if (c->peerDevice) {
    c->peerDevice->unwatch();
    c->peerDevice->lastRound();
  }
  if (peers) c->peerDevice.reset();
  if (c->barrierScratch) {
    const Driver* d = nullptr;
    if (driver(&d) == clbSuccess) {
      CtxScope scope(d, static_cast<CUcontext>(c->barrierContext));
      c->gpu->free((CUdeviceptr)c->barrierScratch, sizeof(int32_t));  // made barrierScratch (gpuRuntime)
    }
    c->barrierScratch = nullptr;
    c->barrierContext = nullptr;
  }
  // Last: the others took their kernels and memory from it. Point-to-point, when kept, still does.
  if (peers) c->gpu.reset();
}

clbResult_t trimCallMemory(DeviceCommContext* c) {
  if (c->device) CLB_CHECK(c->device->trimHostStage());
  if (c->scaler) CLB_CHECK(c->scaler->trim());
  return clbSuccess;
}

size_t registrationCount(DeviceCommContext* c) { return c->device ? c->device->registrations().count() : 0; }

std::string describe(DeviceCommContext* c) {
  std::shared_lock<std::shared_mutex> objects(c->deviceObjects);  // clbCommSuspend may free them meanwhile
  std::string dev =
      c->device ? c->device->describe() : "device: not used yet (set up at the first collective on device memory)\n";
  if (c->peerDeviceMemory)
    dev +=
        "point-to-point on device buffers between hosts: channels in GPU memory, " + c->peerDeviceMemory->name + "\n";
  else if (!c->peerDeviceMemoryWhy.empty())
    dev += "point-to-point on device buffers between hosts: through host memory (" + c->peerDeviceMemoryWhy + ")\n";
  return dev;
}

clbResult_t registerBuffer(DeviceCommContext* c, void* buff, size_t bytes, void** handle) {
  if (!c->device) c->device = std::make_unique<Device>(c);
  return c->device->registerBuffer(buff, bytes, handle);
}

clbResult_t deregisterBuffer(DeviceCommContext* c, void* handle, bool* taken) {
  *taken = c->device != nullptr;
  return c->device ? c->device->deregisterBuffer(handle) : clbSuccess;  // collective: NULL is refused on every rank
}

clbResult_t beginStaging(DeviceCommContext* c, const void* first, size_t bytes, void* stream, char** scratch) {
  // A group's device operations on one communicator take one stream (PeerDevice refuses others).
  bool onDevice = false;
  int ordinal = -1;
  CLB_CHECK(classifyPointer(first, &onDevice, &ordinal));
  if (!c->scaler) c->scaler = std::make_unique<Scaler>(c);
  return c->scaler->begin(ordinal, static_cast<CUstream>(stream), bytes, reinterpret_cast<void**>(scratch));
}

clbResult_t stageInput(DeviceCommContext* c, void* dst, const PeerOp& o, void* stream) {
  if (o.scale.on) return c->scaler->scale(dst, o.src, o.count, o.scale, static_cast<CUstream>(stream));
  return c->scaler->copy(dst, o.src, o.count * clbTypeSize(o.type), static_cast<CUstream>(stream));
}

void endStaging(DeviceCommContext* c, void* stream) {
  if (c->scaler) c->scaler->end(static_cast<CUstream>(stream));
}

clbResult_t runPeerOps(DeviceCommContext* c, std::vector<PeerOp>& ops,
                       const std::function<clbResult_t(std::vector<PeerOp>&)>& runHost) {
  // On the GPU where the pairs allow (ranks on one GPU), the rest through host memory. An
  // announcement goes the way its pair goes: in the kernel beside the data (the peer's kernel
  // compares its call signature, so a rank that disagrees on the root fails at once on both
  // sides of the pair), or between the hosts after the staged data, carrying no data.
  if (!c->peerDevice) c->peerDevice = std::make_unique<PeerDevice>(c);
  std::vector<PeerOp> rest;
  clbResult_t rc = c->peerDevice->run(ops, &rest);
  std::vector<PeerOp> announce, data;
  std::vector<int> at(rest.size(), -1);  // rest[i]'s place in data (what waits for it moves with it)
  for (size_t i = 0; i < rest.size(); i++) {
    if (rest[i].announce) {
      announce.push_back(rest[i]);
      continue;
    }
    at[i] = (int)data.size();
    data.push_back(rest[i]);
    if (data.back().after >= 0) data.back().after = at[data.back().after];
  }
  rest.swap(data);
  if (rc == clbSuccess && !rest.empty()) rc = runPeerOpsStaged(c, rest, runHost);
  if (rc == clbSuccess && !announce.empty()) rc = runHost(announce);
  return rc;
}

}  // namespace clb::cuda
