// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point operations on device buffers from the host (device.h, runPeerOpsStaged), for
// the pairs the GPU kernels do not take (several GPUs or hosts). Over the verbs transport with
// channels in GPU memory (GPUDirect RDMA, c->peerDeviceMemory) sends and receives stay in place:
// the batch copies each message between the buffer and the channel's slot. Otherwise each stream the operations name is
// synchronized (their input is then final), every device range an operation reads is copied to
// a host shadow, the host batch runs on the shadows, and every range an operation writes is copied
// back before the call returns. Ranges that are the same memory share one shadow (a reduce in
// place reads and writes one). Not capturable: the host runs it.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "device/device_context.h"
#include "base/dtype.h"
#include "device/device.h"

namespace clb::cuda {
namespace {

struct Shadow {
  std::vector<char> host;
  CUstream stream = nullptr;  // of the (first) operation on the range: the copies go in its order
  bool download = false;      // an operation reads it: device -> host first
  bool upload = false;        // an operation writes it: host -> device after
};

}  // namespace

clbResult_t runPeerOpsStaged(DeviceCommContext* c, std::vector<PeerOp>& ops,
                             const std::function<clbResult_t(std::vector<PeerOp>&)>& run) {
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  std::set<CUstream> streams;
  const void* anyDevice = nullptr;
  for (const PeerOp& o : ops)
    if (o.onDevice) {
      streams.insert(static_cast<CUstream>(o.stream));
      // Not from an empty operation: its address may be one past its buffer's end.
      if (!anyDevice && o.count) anyDevice = o.src ? o.src : o.dst;
    }
  if (!anyDevice) return run(ops);  // nothing moves between device and host
  // Kept in place (not shadowed): sends and receives to other ranks, whose messages the batch
  // copies between the buffer and the channel's slots (PeerDeviceMemory), made at the first batch
  // that has one (a forced COLIBRI_VERBS_GPU_MEMORY that cannot work fails that batch).
  auto candidate = [c](const PeerOp& o) {
    return o.onDevice && o.count && (o.kind == PeerOp::kSend || o.kind == PeerOp::kRecv) && o.peer != c->rank &&
           !o.preMulSum && !o.copyAside && !o.scale.on;
  };
  if (std::any_of(ops.begin(), ops.end(), candidate)) CLB_CHECK(peerDeviceMemoryFor(c, anyDevice));
  auto inPlace = [&](const PeerOp& o) {
    return c->peerDeviceMemory && candidate(o) && peerDeviceMemoryReaches(c, o.src ? o.src : o.dst);
  };
  // The copies run in the buffers' context (one GPU: the calls checked that).
  CUcontext ctx = nullptr;
  CLB_CU(d, cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)anyDevice);
  CtxScope scope(d, ctx);
  for (CUstream s : streams) {
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    if (s && d->cuStreamIsCapturing(s, &capturing) == CUDA_SUCCESS && capturing != CU_STREAM_CAPTURE_STATUS_NONE)
      return setError(clbInvalidUsage,
                      "rank %d: %s on device buffers runs from the host in this version (through host memory), so it "
                      "cannot be captured in a CUDA graph: call it outside the capture",
                      c->rank, collectiveName(ops.front().call));
    CLB_CU(d, cuStreamSynchronize, s);
  }
  // One shadow per device range, shared by the operations on the same range.
  std::map<std::pair<uintptr_t, size_t>, Shadow> shadows;
  auto shadowOf = [&](const void* p, size_t bytes, bool reads, void* stream) -> char* {
    auto [it, made] = shadows.try_emplace({reinterpret_cast<uintptr_t>(p), bytes});
    Shadow& s = it->second;
    if (made) s.stream = static_cast<CUstream>(stream);
    s.host.resize(bytes);
    (reads ? s.download : s.upload) = true;
    return s.host.data();
  };
  std::vector<PeerOp> staged = ops;
  int shadowedPeer = -1;  // a peer of an operation that goes through a host copy (for the warning)
  for (PeerOp& o : staged) {
    if (!o.onDevice || o.count == 0 || inPlace(o)) continue;
    const size_t bytes = o.count * clbTypeSize(o.type);
    if (o.src) o.src = shadowOf(o.src, bytes, true, o.stream);
    if (o.dst) o.dst = shadowOf(o.dst, bytes, false, o.stream);
    o.onDevice = false;  // host memory now
    if (o.kind != PeerOp::kCopy && o.peer != c->rank && shadowedPeer < 0) shadowedPeer = o.peer;
  }
  // Once per communicator, as the collectives warn of their host staging: the first batch whose
  // messages to a peer go through host copies of the device buffers.
  if (shadowedPeer >= 0 && !c->peerStagedWarned) {
    c->peerStagedWarned = true;
    const std::string why = c->peerDeviceMemory
                                ? "a reduce, a PreMulSum, an in-place all-to-all or another GPU's buffer"
                            : c->peerDeviceMemoryWhy.empty() ? "no GPU path for the pair"
                                                             : c->peerDeviceMemoryWhy;
    CLB_WARN(
        "rank %d: point-to-point on device buffers with rank %d (and any other peer the GPU kernels do not "
        "reach) goes through host copies of the buffers (%s): each such call waits for its streams and cannot "
        "be captured in a CUDA graph",
        c->rank, shadowedPeer, why.c_str());
  }
  int64_t held = 0;
  for (auto& [range, s] : shadows) held += (int64_t)s.host.size();
  c->mem.addHost(held);  // while the call runs: its peak shows it (not staging: outside its cap)
  c->transientHost += held;
  struct Release {
    DeviceCommContext* c;
    int64_t n;
    ~Release() {
      c->mem.addHost(-n);
      c->transientHost -= n;
    }
  } release{c, held};
  // The copies go on the operations' streams, each then synchronized: a synchronous copy would run
  // on the legacy stream, which is not ordered with non-blocking streams, and from pageable memory
  // to the GPU it may return before the data arrived (work the caller queues next on its stream
  // could read the buffer before).
  auto drain = [&] {
    for (CUstream s : streams) CLB_CU(d, cuStreamSynchronize, s);
    return clbSuccess;
  };
  for (auto& [range, s] : shadows)
    if (s.download) CLB_CU(d, cuMemcpyDtoHAsync, s.host.data(), (CUdeviceptr)range.first, range.second, s.stream);
  CLB_CHECK(drain());
  CLB_CHECK(run(staged));
  for (auto& [range, s] : shadows)
    if (s.upload) CLB_CU(d, cuMemcpyHtoDAsync, (CUdeviceptr)range.first, s.host.data(), range.second, s.stream);
  return drain();
}

}  // namespace clb::cuda
