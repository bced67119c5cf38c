// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// PreMulSum on device buffers: the scaling kernel's launches and the device scratch of the
// communicator (Scaler, device.h says how the scratch is shared by streams and captures).
#include <cstring>

#include "device/device_context.h"
#include "base/dtype.h"
#include "base/error.h"
#include "device/device.h"
#include "device/gpu_runtime.h"

namespace clb::cuda {

namespace {

// The scratch in steps of 2 MiB (the driver's own granularity for larger allocations), so that
// counts that creep up reallocate rarely.
constexpr size_t kScratchStep = 2u << 20;

clbResult_t capturing(const Driver* d, CUstream stream, bool* on) {
  *on = false;
  if (!stream) return clbSuccess;  // the legacy stream cannot be captured
  CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
  CLB_CU(d, cuStreamIsCapturing, stream, &cap);
  *on = cap != CU_STREAM_CAPTURE_STATUS_NONE;
  return clbSuccess;
}

}  // namespace

Scaler::Scaler(DeviceCommContext* c) : c_(c), rt_(gpuRuntime(c)) {}

Scaler::~Scaler() {
  if (!d_ || !ctx_) return;
  CtxScope scope(d_, ctx_);
  // The communicator's destroy synchronized the context first (Device::release) where it had
  // one; the event covers a communicator that never set the rest up.
  if (used_) d_->cuEventSynchronize(lastUse_);
  rt_.free(scratch_, bytes_);
  for (auto [p, bytes] : retired_) rt_.free(p, bytes);
  if (lastUse_) d_->cuEventDestroy(lastUse_);
}

clbResult_t Scaler::begin(int ordinal, CUstream stream, size_t bytes, void** scratch) {
  *scratch = nullptr;
  capturing_ = scratchCall_ = false;
  CLB_CHECK(rt_.bind(ordinal));  // one GPU per communicator
  d_ = rt_.driver();
  bool inCapture = false;
  CLB_CHECK(capturing(d_, stream, &inCapture));
  auto refuse = [&](const char* what, size_t need) {
    return setError(clbInvalidUsage,
                    "rank %d: this call on device buffers (a PreMulSum operation, or an all-to-all in place) needs "
                    "%s (%zu bytes), and its "
                    "stream is being captured into a CUDA graph, where Colibri cannot load kernels or allocate: make "
                    "one such call outside the capture first, with the largest count the graph will use (it sets "
                    "this up, and later calls inside captures reuse it)",
                    c_->rank, what, need);
  };
  if (!kernels_) {
    if (inCapture) return refuse("the scaling kernels loaded (the first such call of this communicator)", bytes);
    ctx_ = rt_.context();
    dev_ = rt_.device();
    ordinal_ = rt_.ordinal();
    CtxScope scope(d_, ctx_);
    const Kernels* k = nullptr;
    CLB_CHECK(rt_.kernels(ctx_, &k));
    CLB_CU(d_, cuEventCreate, &lastUse_, CU_EVENT_DISABLE_TIMING);
    kernels_ = k;
  }
  CtxScope scope(d_, ctx_);
  CLB_CHECK(checkStreamGpu(d_, stream, ctx_, dev_, ordinal_, c_->rank));
  if (bytes > bytes_) {
    if (inCapture) return refuse("more device scratch than it holds", bytes);
    // What the last call queued may still read the old scratch.
    if (used_) CLB_CU(d_, cuEventSynchronize, lastUse_);
    if (scratch_ && captured_) {
      retired_.emplace_back(scratch_, bytes_);  // a graph may replay into it: kept until destroy
    } else {
      rt_.free(scratch_, bytes_);
    }
    scratch_ = 0;
    bytes_ = 0;
    captured_ = false;
    const size_t want = (bytes + kScratchStep - 1) / kScratchStep * kScratchStep;
    CLB_CHECK(
        rt_.alloc(want, "the scaled input of a PreMulSum or the copied input of an all-to-all in place", &scratch_));
    bytes_ = want;
  }
  if (bytes > 0) {
    // The previous user of the scratch on another stream finishes with it before this stream writes it.
    if (!inCapture && used_ && lastStream_ != stream) CLB_CU(d_, cuStreamWaitEvent, stream, lastUse_, 0);
    if (inCapture) captured_ = true;
    *scratch = reinterpret_cast<void*>(scratch_);
  }
  capturing_ = inCapture;
  if (inCapture) {  // clbCommSuspend is refused while the graph exists
    c_->captured.store(true, std::memory_order_relaxed);
    CLB_CHECK(holdWhileGraphLives(d_, stream, c_->capturedCallHolds));
  }
  scratchCall_ = bytes > 0;
  return clbSuccess;
}

// A device-residence scalar is read by the kernel: it must be memory the GPU can read (device or
// managed memory, pinned host memory; plain host memory only where the GPU reaches pageable memory).
clbResult_t Scaler::checkScalar(const PreMul& pm) {
  if (pm.residence != clbScalarDevice) return clbSuccess;
  unsigned int type = 0;
  CUpointer_attribute attrs[1] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  void* data[1] = {&type};
  CLB_CU(d_, cuPointerGetAttributes, 1, attrs, data, (CUdeviceptr)pm.ptr);
  if (type != 0) return clbSuccess;
  int pageable = 0;
  CLB_CU(d_, cuDeviceGetAttribute, &pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev_);
  if (pageable) return clbSuccess;
  return setError(clbInvalidArgument,
                  "rank %d: the scalar of op %d (%p, residence clbScalarDevice) is host memory the GPU cannot read, "
                  "and the call's buffers are device memory, where a kernel reads the scalar when it runs: put the "
                  "scalar in device memory (or pinned host memory), or make the op with clbScalarHostImmediate",
                  c_->rank, pm.handle, pm.ptr);
}

clbResult_t Scaler::scale(void* dst, const void* src, size_t n, const PreMul& pm, CUstream stream) {
  if (n == 0) return clbSuccess;
  CtxScope scope(d_, ctx_);
  CLB_CHECK(checkScalar(pm));
  ClbScaleArgs a{};
  a.dst = dst;
  a.src = src;
  a.scalar = pm.residence == clbScalarDevice ? pm.ptr : nullptr;
  a.value = pm.value;
  a.n = n;
  return kernels_->scale(a, pm.type, stream);
}

clbResult_t Scaler::copy(void* dst, const void* src, size_t bytes, CUstream stream) {
  if (bytes == 0) return clbSuccess;
  CtxScope scope(d_, ctx_);
  CLB_CU(d_, cuMemcpyDtoDAsync, (CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream);
  return clbSuccess;
}

void Scaler::end(CUstream stream) {
  if (!scratchCall_ || capturing_) return;
  CtxScope scope(d_, ctx_);
  if (d_->cuEventRecord(lastUse_, stream) == CUDA_SUCCESS) {
    lastStream_ = stream;
    used_ = true;
  } else {
    // Nothing says when the scratch is free any more: the next user waits for the whole context.
    d_->cuCtxSynchronize();
    used_ = false;
  }
  scratchCall_ = false;
}

clbResult_t Scaler::trim() {
  if (!scratch_ || captured_) return clbSuccess;
  CtxScope scope(d_, ctx_);
  if (used_) CLB_CU(d_, cuEventSynchronize, lastUse_);
  rt_.free(scratch_, bytes_);
  scratch_ = 0;
  bytes_ = 0;
  return clbSuccess;
}

clbResult_t readScalar(const void* p, size_t bytes, int ordinal, uint64_t* out) {
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CLB_CU(d, cuDeviceGet, &dev, ordinal);
  CLB_CU(d, cuDevicePrimaryCtxRetain, &ctx, dev);
  CUresult rc;
  {
    CtxScope scope(d, ctx);
    rc = d->cuMemcpyDtoH(out, (CUdeviceptr)p, bytes);
  }
  d->cuDevicePrimaryCtxRelease(dev);
  if (rc != CUDA_SUCCESS) return cuError(rc, "cuMemcpyDtoH");
  return clbSuccess;
}

}  // namespace clb::cuda
