// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "core/cuda/device_world.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <unistd.h>

#include <cstring>

#include "core/comm.h"
#include "core/dtype.h"
#include "core/error.h"

namespace clb::cuda {

constexpr size_t kMaxHalf = 4u << 20;   // staging per half: 8 MiB per rank at most
constexpr size_t kMinHalf = 64u << 10;

// Walks the loaded objects in memory (no system call): dlopen(RTLD_NOLOAD) of a library that is
// not loaded searches the library path on every call, which cost ~15 us per host collective.
static int findLibcuda(struct dl_phdr_info* info, size_t, void*) {
  return info->dlpi_name && strstr(info->dlpi_name, "libcuda.so") ? 1 : 0;
}

bool driverInProcess() {
  static std::atomic<bool> loaded{false};
  if (loaded.load(std::memory_order_relaxed)) return true;
  if (dl_iterate_phdr(findLibcuda, nullptr)) loaded = true;
  return loaded;
}

clbResult_t classifyPointer(const void* p, bool* isDevice, int* ordinal) {
  *isDevice = false;
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  unsigned int type = 0;
  CUresult rc = d->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p);
  if (rc == CUDA_ERROR_INVALID_VALUE) return clbSuccess;  // not known to CUDA: plain host memory
  if (rc != CUDA_SUCCESS) return cuError(rc, "cuPointerGetAttribute");
  if (type != CU_MEMORYTYPE_DEVICE) return clbSuccess;
  int ord = -1;
  rc = d->cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p);
  if (rc != CUDA_SUCCESS) return cuError(rc, "cuPointerGetAttribute(DEVICE_ORDINAL)");
  *isDevice = true;
  *ordinal = ord;
  return clbSuccess;
}

namespace {
struct Exchange {
  int32_t pid;
  int32_t ordinal;
  uint64_t staging, flags;
  CUipcMemHandle hStaging, hFlags;
};
}  // namespace

DeviceWorld::~DeviceWorld() { release(); }

clbResult_t DeviceWorld::release() {
  if (!d_) return clbSuccess;
  // This rank's kernels may still run: wait for the context (the streams they ran on may be gone).
  if (staging_ && ctx_) {
    CUcontext prev = nullptr;
    d_->cuCtxGetCurrent(&prev);
    d_->cuCtxSetCurrent(ctx_);
    d_->cuCtxSynchronize();
    d_->cuCtxSetCurrent(prev);
  }
  // Peers may still read this rank's staging: wait (bounded) until they said they are done.
  if (flags_ && !comm_->failed && !comm_->aborted) {
    ClbDevFlags f;
    int64_t deadline = nowMs() + std::min<int64_t>(comm_->cfg.timeoutMs, 5000);
    for (;;) {
      if (d_->cuMemcpyDtoH(&f, flags_, sizeof f) != CUDA_SUCCESS) break;
      bool all = true;
      for (int p = 0; p < comm_->nranks; p++) all = all && f.done[p] >= f.calls;
      if (all || nowMs() > deadline) break;
      usleep(200);
    }
  }
  for (CUdeviceptr p : opened_) d_->cuIpcCloseMemHandle(p);
  opened_.clear();
  if (staging_) d_->cuMemFree(staging_);
  if (flags_) d_->cuMemFree(flags_);
  if (hostError_) d_->cuMemFreeHost(hostError_);
  if (staging_ || flags_) comm_->mem.addDevice(-(int64_t)(2 * half_ + sizeof(ClbDevFlags)));
  staging_ = flags_ = 0;
  hostError_ = nullptr;
  half_ = 0;
  return clbSuccess;
}

clbResult_t DeviceWorld::ensure(size_t need, int ordinal, CUstream stream) {
  if (ordinal_ >= 0 && ordinal != ordinal_)
    return setError(clbInvalidArgument,
                    "rank %d's buffers are on GPU %d but its communicator works with GPU %d: one "
                    "communicator per GPU", comm_->rank, ordinal, ordinal_);
  size_t want = std::min(std::max(need, kMinHalf), kMaxHalf);
  want = (want + kMinHalf - 1) / kMinHalf * kMinHalf;
  if (staging_ && want <= half_) return clbSuccess;
  // Setting up or growing allocates and meets the peers: impossible inside CUDA graph capture.
  if (stream) {
    const Driver* drv = nullptr;
    CLB_CHECK(driver(&drv));
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    CLB_CU(drv, cuStreamIsCapturing, stream, &cap);
    if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
      return setError(clbInvalidUsage,
                      "this collective needs %zu bytes of device staging that rank %d has not set up, and the stream "
                      "is being captured into a CUDA graph, where Colibri cannot allocate or meet its peers: before "
                      "capturing, run one collective of the largest size the graph will use (up to %zu bytes per "
                      "rank suffices for any size)", need, comm_->rank, kMaxHalf);
  }
  // Every rank reaches this point at the same call (same sizes everywhere), so this is collective.
  if (!d_) {
    CLB_CHECK(driver(&d_));
    if (comm_->nranks > CLB_MAX_DEVICE_RANKS)
      return setError(clbUnsupported, "device collectives support up to %d ranks per node, this communicator has %d",
                      CLB_MAX_DEVICE_RANKS, comm_->nranks);
    if (comm_->nranks > 1 && !comm_->shm)
      return setError(clbUnsupported,
                      "device buffers need every rank on one host for now (RDMA between nodes is coming); "
                      "this communicator spans hosts");
    CLB_CU(d_, cuDeviceGet, &dev_, ordinal);
    CUcontext cur = nullptr;
    d_->cuCtxGetCurrent(&cur);
    CLB_CU(d_, cuDevicePrimaryCtxRetain, &ctx_, dev_);
    if (!cur) CLB_CU(d_, cuCtxSetCurrent, ctx_);
    ordinal_ = ordinal;
    CLB_CHECK(kernels_.load(dev_, defaultKernelDir()));
    CLB_CHECK(kernels_.function("clb_dev_post", &post_));
    CLB_CHECK(kernels_.function("clb_dev_gather", &gather_));
  }
  if (staging_) {
    // Growing: every rank drains its stream, then all meet, then the old buffers go.
    CLB_CU(d_, cuStreamSynchronize, stream);
    CLB_CHECK(comm_->boot.barrier());
    CLB_CHECK(release());
  }
  CLB_CU(d_, cuMemAlloc, &staging_, 2 * want);
  CLB_CU(d_, cuMemAlloc, &flags_, sizeof(ClbDevFlags));
  half_ = want;
  comm_->mem.addDevice((int64_t)(2 * half_ + sizeof(ClbDevFlags)));
  CLB_CU(d_, cuMemsetD8, flags_, 0, sizeof(ClbDevFlags));
  CLB_CU(d_, cuMemHostAlloc, reinterpret_cast<void**>(&hostError_), sizeof(unsigned int), CU_MEMHOSTALLOC_DEVICEMAP);
  *hostError_ = 0;
  CLB_CU(d_, cuMemHostGetDevicePointer, &hostErrorDev_, hostError_, 0);

  const int n = comm_->nranks;
  std::vector<Exchange> all(n);
  Exchange& me = all[comm_->rank];
  me.pid = getpid();
  me.ordinal = ordinal_;
  me.staging = staging_;
  me.flags = flags_;
  CLB_CU(d_, cuIpcGetMemHandle, &me.hStaging, staging_);
  CLB_CU(d_, cuIpcGetMemHandle, &me.hFlags, flags_);
  CLB_CHECK(comm_->boot.allGather(all.data(), sizeof(Exchange)));
  peerStaging_.assign(n, nullptr);
  peerFlags_.assign(n, nullptr);
  for (int p = 0; p < n; p++) {
    if (all[p].ordinal != ordinal_) {
      CUdevice other;
      int can = 0;
      CLB_CU(d_, cuDeviceGet, &other, all[p].ordinal);
      CLB_CU(d_, cuDeviceCanAccessPeer, &can, dev_, other);
      if (!can)
        return setError(clbUnsupported, "GPU %d cannot access GPU %d directly (no P2P): the staged path through "
                        "host memory is not implemented yet", ordinal_, all[p].ordinal);
    }
    if (all[p].pid == me.pid) {  // same process: same address space
      if (p != comm_->rank) sharedProcess_ = true;
      if (all[p].ordinal != ordinal_) {  // another GPU of this process: its memory needs peer access
        CUdevice other;
        CUcontext otherCtx;
        CLB_CU(d_, cuDeviceGet, &other, all[p].ordinal);
        CLB_CU(d_, cuDevicePrimaryCtxRetain, &otherCtx, other);
        CUresult rc = d_->cuCtxEnablePeerAccess(otherCtx, 0);
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return cuError(rc, "cuCtxEnablePeerAccess");
      }
      peerStaging_[p] = reinterpret_cast<char*>(all[p].staging);
      peerFlags_[p] = reinterpret_cast<ClbDevFlags*>(all[p].flags);
      continue;
    }
    CUdeviceptr s = 0, f = 0;
    CLB_CU(d_, cuIpcOpenMemHandle, &s, all[p].hStaging, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    opened_.push_back(s);
    CLB_CU(d_, cuIpcOpenMemHandle, &f, all[p].hFlags, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    opened_.push_back(f);
    peerStaging_[p] = reinterpret_cast<char*>(s);
    peerFlags_[p] = reinterpret_cast<ClbDevFlags*>(f);
  }
  CLB_INFO("rank %d: device staging 2 x %zu bytes on GPU %d; %s", comm_->rank, half_, ordinal_,
           kernels_.description().c_str());
  return clbSuccess;
}

clbResult_t DeviceWorld::round(const CollArgs& a, size_t e0, size_t m, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = comm_->nranks, r = comm_->rank;
  ClbDevCallArgs k{};
  k.half = half_;
  for (int p = 0; p < n; p++) {
    k.staging[p] = peerStaging_[p];
    k.flags[p] = peerFlags_[p];
  }
  k.hostError = reinterpret_cast<unsigned int*>(hostErrorDev_);
  k.timeoutNs = (unsigned long long)comm_->cfg.timeoutMs * 1000000ull;
  k.rank = r;
  k.nranks = n;
  k.type = a.type;
  k.op = a.op;
  k.root = a.root;
  k.inSlices = 1;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  switch (a.desc.coll) {
    case kAllReduce:
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.mode = 0;
      k.out = out + e0 * esz;
      k.count = m;
      break;
    case kReduceScatter:  // stage every destination's slice of this round, back to back
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.inStride = a.count * esz;
      k.inSlices = n;
      k.mode = 0;
      k.srcOffset = (size_t)r * m * esz;
      k.out = out + e0 * esz;
      k.count = m;
      break;
    case kAllGather:
      k.in = in + e0 * esz;
      k.inBytes = m * esz;
      k.mode = 1;
      k.out = out + e0 * esz;
      k.outStride = a.count * esz;
      k.count = m * esz;
      break;
    case kBroadcast:
      k.in = r == a.root ? in + e0 * esz : nullptr;
      k.inBytes = r == a.root ? m * esz : 0;
      k.mode = 2;
      k.out = out + e0 * esz;
      k.count = m * esz;
      break;
  }
  size_t bytes = std::max<size_t>(k.inBytes * k.inSlices, m * esz);
  // Enough blocks to stream large messages, few enough that every rank sharing a GPU keeps its
  // waiting kernels resident (a waiting block must never keep another rank's kernel off the GPU).
  // 512-thread blocks: 4 resident per SM. Every rank's post and gather may be resident at once
  // (ranks sharing the GPU), with a margin.
  const size_t slots = (size_t)kernels_.smCount() * 4;
  const size_t cap = std::max<size_t>(1, std::min<size_t>(256, (slots > 16 ? slots - 16 : 1) / (2 * (size_t)n)));
  unsigned blocks = (unsigned)std::min<size_t>(cap, std::max<size_t>(1, bytes / (32 << 10)));
  void* params[] = {&k};
  CLB_CU(d_, cuLaunchKernel, post_, blocks, 1, 1, 512, 1, 1, 0, stream, params, nullptr);
  CLB_CU(d_, cuLaunchKernel, gather_, blocks, 1, 1, 512, 1, 1, 0, stream, params, nullptr);
  return clbSuccess;
}

clbResult_t DeviceWorld::run(const CollArgs& a, int ordinal, CUstream stream) {
  const size_t esz = clbTypeSize(a.type);
  const int n = comm_->nranks;
  // Bytes this rank stages per element of a round.
  const size_t perElem = a.desc.coll == kReduceScatter ? esz * n : esz;
  const size_t total = a.count * perElem;
  CLB_CHECK(ensure(total, ordinal, stream));
  if (*hostError_)
    return setError(clbTimeout,
                    "a device wait of an earlier collective on rank %d timed out after %lld ms (a peer died, "
                    "hung, or made different calls); destroy the communicator", comm_->rank,
                    (long long)comm_->cfg.timeoutMs);
  if (sharedProcess_ && !stream)
    return setError(clbInvalidUsage,
                    "rank %d shares its process with other ranks of this communicator, and they would all use the "
                    "default stream (0), where each rank's kernels wait behind the others': give every rank its "
                    "own stream", comm_->rank);
  CUcontext cur = nullptr;
  d_->cuCtxGetCurrent(&cur);
  if (!cur) CLB_CU(d_, cuCtxSetCurrent, ctx_);
  const size_t perRound = half_ / perElem;
  for (size_t e0 = 0; e0 < a.count; e0 += perRound)
    CLB_CHECK(round(a, e0, std::min(perRound, a.count - e0), stream));
  return clbSuccess;
}

std::string DeviceWorld::describe() const {
  if (!d_) return "device: not used yet (set up at the first collective on device memory)\n";
  char b[512];
  snprintf(b, sizeof b, "device: GPU %d, staging 2 x %zu bytes, kernels %s\n", ordinal_, half_,
           kernels_.description().c_str());
  return b;
}

}  // namespace clb::cuda
