// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The GPUDirect path (GpuDirectPath, paths.h): device buffers between hosts over transport verbs
// with GPUDirect RDMA, through a second verbs ring channel in device mode, whose receive slots
// and send staging are GPU memory registered with the NIC (dma-buf through
// cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr, else nvidia-peermem with ibv_reg_mr on the
// device address). The host ring algorithm drives it (src/algo/ring.cc) with
// the buffers reached through kernels on the caller's stream instead of memcpy and host loops:
// the NIC reads the reduced chunk straight from GPU memory, no host copy either way.
//
// Set up at the first device collective between hosts (a collective step every rank takes at
// that call): every rank picks how to register (COLIBRI_VERBS_GPU_MEMORY=auto|dmabuf|peermem|host),
// registers one page to prove it, and all ranks learn whether all can. If one cannot, auto falls
// back to pinned host memory with a WARN that names the rank and the reason; a forced mode fails.
//
// The host still drives every step (no proxy thread): the call waits for the stream, and each
// message waits for the kernel that filled it. So calls are synchronous and cannot be captured
// into CUDA graphs, like the host-staged path; the bytes just never cross host memory.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include <unistd.h>

#include "algo/algorithms.h"
#include "device/device_context.h"
#include "base/error.h"
#include "device/device.h"
#include "transport/channel.h"

#include "transport/net/net_plugin.h"
#include "transport/transport.h"

namespace clb::cuda {

struct GpuDirectPath::GpuDirect {
  clbNetDeviceMemory_v1_t memory{};
  const Driver* d = nullptr;
  CUcontext ctx = nullptr;
  bool dmabuf = false;  // else nvidia-peermem
  bool flush = false;   // writes need cuFlushGPUDirectRDMAWrites before a kernel reads them
  std::unique_ptr<NetRingChannel> ring;
  std::string describe;
  std::mutex mu;
  std::map<void*, std::pair<CUdeviceptr, size_t>> bases;  // address handed out -> allocation, bytes beyond the ask
  DeviceCommContext* comm = nullptr;  // counts the alignment bytes (the channel counts what it asked for)
  int ordinal = -1;                   // the communicator's GPU
  // Point-to-point's (PeerDeviceMemory): the primary context retained for as long as a channel
  // holds slots in it (channels may outlive the device path), and a stream of its own for the
  // copies of host-buffer operations to and from slots in GPU memory.
  bool retained = false;
  CUdevice dev = 0;
  CUstream own = nullptr;
  ~GpuDirect() {
    ring.reset();  // its regions give their memory back through the members above
    if (own) {
      CtxScope scope(d, ctx);
      d->cuStreamDestroy(own);
    }
    if (retained) d->cuDevicePrimaryCtxRelease(dev);
  }
};

namespace {

clbResult_t gdrAlloc(void* self, size_t bytes, void** mem, int* fd) {
  auto* g = static_cast<GpuDirectPath::GpuDirect*>(self);
  const Driver* d = g->d;
  CtxScope scope(d, g->ctx);
  *fd = -1;
  // Registrations and dma-buf exports take ranges aligned to the host page (4 KiB, 64 KiB on
  // some aarch64 hosts); cuMemAlloc aligns small allocations to 512 bytes only, so one page more
  // is allocated and the range starts aligned. Not zeroed: nothing reads a slot or the staging
  // before it is written.
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t span = (bytes + page - 1) / page * page;
  CUdeviceptr base = 0;
  CLB_CU(d, cuMemAlloc, &base, span + page);
  const CUdeviceptr p = (base + page - 1) / page * page;
  auto fail = [&](clbResult_t rc) {
    d->cuMemFree(base);
    return rc;
  };
  // The NIC reads and writes this memory outside CUDA's streams: copies into it must complete
  // before the host posts (CUDA's guidance for GPUDirect RDMA buffers).
  unsigned int one = 1;
  CUresult rc = d->cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);
  if (rc != CUDA_SUCCESS) return fail(cuError(rc, "cuPointerSetAttribute(SYNC_MEMOPS)"));
  if (g->dmabuf) {
    rc = d->cuMemGetHandleForAddressRange(fd, p, span, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (rc != CUDA_SUCCESS) {
      *fd = -1;
      return fail(cuError(rc, "cuMemGetHandleForAddressRange(DMA_BUF_FD)"));
    }
  }
  *mem = reinterpret_cast<void*>(p);
  std::lock_guard<std::mutex> lock(g->mu);
  const size_t extra = span + page - bytes;
  g->bases[*mem] = {base, extra};
  g->comm->mem.addDevice((int64_t)extra);
  return clbSuccess;
}

void gdrRelease(void* self, void* mem, size_t) {
  auto* g = static_cast<GpuDirectPath::GpuDirect*>(self);
  std::pair<CUdeviceptr, size_t> b;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    auto it = g->bases.find(mem);
    if (it == g->bases.end()) return;
    b = it->second;
    g->bases.erase(it);
  }
  CtxScope scope(g->d, g->ctx);
  g->d->cuMemFree(b.first);
  g->comm->mem.addDevice(-(int64_t)b.second);
}

// A user buffer the NIC may read without a copy: the page-aligned part of its allocation (the
// whole of it for allocations of whole pages, as caching allocators make them), and the
// allocation's ID, which changes when it is freed and another takes its address.
clbResult_t gdrLookup(void* self, const void* p, size_t len, clbNetUserRange_v1_t* r, int* found) {
  auto* g = static_cast<GpuDirectPath::GpuDirect*>(self);
  const Driver* d = g->d;
  *found = 0;
  // Plain device memory of this communicator's GPU only: managed memory may live in host pages
  // (a registration would pin those), and another GPU's memory is another NIC path.
  Allocation al;
  if (allocationOf(d, p, &al) != clbSuccess || al.type != CU_MEMORYTYPE_DEVICE || al.managed ||
      al.ordinal != g->ordinal) {
    clearError();
    return clbSuccess;  // copied
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const CUdeviceptr lo = (al.base + page - 1) / page * page, hi = (al.base + al.size) / page * page;
  if (hi <= lo || (CUdeviceptr)p < lo || (CUdeviceptr)p + len > hi) return clbSuccess;
  *r = clbNetUserRange_v1_t{reinterpret_cast<void*>(lo), (size_t)(hi - lo), al.id};
  *found = 1;
  return clbSuccess;
}

clbResult_t gdrExport(void* self, void* base, size_t bytes, int* fd) {
  auto* g = static_cast<GpuDirectPath::GpuDirect*>(self);
  *fd = -1;
  CtxScope scope(g->d, g->ctx);
  // As for Colibri's own buffers: memory the NIC reads gets synchronous memory operations, so a
  // cuMemcpy into it has landed when it returns.
  unsigned int one = 1;
  CLB_CU(g->d, cuPointerSetAttribute, &one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, (CUdeviceptr)base);
  if (!g->dmabuf) return clbSuccess;  // nvidia-peermem: the address itself
  CLB_CU(g->d, cuMemGetHandleForAddressRange, fd, (CUdeviceptr)base, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  return clbSuccess;
}

// The ring's buffer operations as kernels on the caller's stream.
class DeviceRingMemory : public RingMemory {
 public:
  DeviceRingMemory(const Driver* d, const Kernels& k, CUstream s, int nranks, bool flush)
      : d_(d), k_(k), s_(s), nranks_(nranks), flush_(flush) {}
  clbResult_t copy(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return clbSuccess;
    CLB_CU(d_, cuMemcpyDtoDAsync, (CUdeviceptr)dst, (CUdeviceptr)src, bytes, s_);
    pending_ = true;
    return clbSuccess;
  }
  clbResult_t reduce(void* dst, const void* recvd, const void* mine, size_t n, clbDataType_t type, clbRedOp_t op,
                     int divideBy) override {
    ClbReduceArgs r{};
    r.dst = dst;
    r.srcs[0] = recvd;  // the host ring's order: received, then own (reducePair)
    r.srcs[1] = mine;
    r.k = 2;
    r.op = op;
    r.nranks = divideBy > 0 ? divideBy : nranks_;
    r.divide = divideBy > 0;
    r.n = n;
    CLB_CHECK(k_.reduce(r, type, s_));
    pending_ = true;
    return clbSuccess;
  }
  clbResult_t arrived() override {
    if (flush_)
      CLB_CU(d_, cuFlushGPUDirectRDMAWrites, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
             CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
    return clbSuccess;
  }
  clbResult_t settle() override {
    if (!pending_) return clbSuccess;
    pending_ = false;
    CLB_CU(d_, cuStreamSynchronize, s_);
    return clbSuccess;
  }

 private:
  const Driver* d_;
  const Kernels& k_;
  CUstream s_;
  int nranks_;
  bool flush_;
  bool pending_ = false;
};

}  // namespace

namespace {

// This rank's way to register GPU memory of `dev` with the verbs NIC: dma-buf where the plugin's
// libibverbs and the driver can, else nvidia-peermem (`mode`: COLIBRI_VERBS_GPU_MEMORY, auto,
// dmabuf or peermem), and whether the NIC's writes need a flush before the GPU reads them.
// *out is made even on failure (clbUnsupported saying why), for the collective agreement.
clbResult_t makeGpuDirect(const Driver* d, CUcontext ctx, CUdevice dev, int ordinal, DeviceCommContext* c,
                          const std::string& mode, const clbNetPlugin_v1_t** pluginOut,
                          std::unique_ptr<GpuDirectPath::GpuDirect>* out) {
  std::unique_ptr<GpuDirectPath::GpuDirect> g(new GpuDirectPath::GpuDirect);
  g->d = d;
  g->ctx = ctx;
  g->comm = c;
  g->ordinal = ordinal;
  g->dev = dev;
  // The NIC side is the network plugin of the communicator's transport (libcolibri_verbs.so for
  // verbs), which says what its library can register.
  const clbNetPlugin_v1_t* plugin = c->carrier ? c->carrier->netPlugin() : nullptr;
  clbResult_t rc =
      plugin ? clbSuccess : setError(clbInternalError, "rank %d: the transport has no network plugin", c->rank);
  clbNetDeviceSupport_v1_t support{};
  if (rc == clbSuccess) rc = plugin->deviceSupport(&support);
  const bool nicDmabuf = support.dmabuf != 0, nicPeermem = support.peermem != 0;
  int dmabufAttr = 0;
  if (d->cuMemGetHandleForAddressRange)
    d->cuDeviceGetAttribute(&dmabufAttr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
  const bool canDmabuf = nicDmabuf && dmabufAttr == 1;
  if (mode != "peermem" && canDmabuf) {
    g->dmabuf = true;
  } else if (mode != "dmabuf" && nicPeermem) {
    g->dmabuf = false;
  } else {
    const std::string why =
        std::string(!nicDmabuf        ? "libibverbs cannot register dma-bufs (rdma-core < 34)"
                    : dmabufAttr != 1 ? "the GPU driver does not export dma-bufs (needs the open kernel module and "
                                        "Linux 5.12+)"
                                      : "dma-buf not chosen") +
        (mode == "dmabuf" ? "" : " and nvidia_peermem is not loaded");
    if (rc == clbSuccess) rc = setError(clbUnsupported, "rank %d: no GPUDirect RDMA: %s", c->rank, why.c_str());
  }
  g->memory = clbNetDeviceMemory_v1_t{gdrAlloc,  gdrRelease, g.get(), g->dmabuf ? "dma-buf" : "nvidia-peermem",
                                      gdrLookup, gdrExport};
  // GPUs whose RDMA writes are not ordered for the owner need a flush before the GPU reads them.
  int ordering = 0, flushOptions = 0;
  d->cuDeviceGetAttribute(&ordering, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, dev);
  d->cuDeviceGetAttribute(&flushOptions, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, dev);
  g->flush = ordering < CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
  if (rc == clbSuccess && g->flush &&
      !((flushOptions & CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST) && d->cuFlushGPUDirectRDMAWrites))
    rc = setError(clbUnsupported,
                  "rank %d: GPU %d does not order RDMA writes for its own kernels and cannot flush "
                  "them (cuFlushGPUDirectRDMAWrites): kernels could read chunks before they land",
                  c->rank, ordinal);
  *pluginOut = plugin;
  *out = std::move(g);
  return rc;
}

clbResult_t checkGpuMemoryMode(const std::string& mode) {
  if (mode != "auto" && mode != "dmabuf" && mode != "peermem" && mode != "host")
    return setError(clbInvalidArgument, "COLIBRI_VERBS_GPU_MEMORY='%s' is not one of auto, dmabuf, peermem, host",
                    mode.c_str());
  return clbSuccess;
}

}  // namespace

clbResult_t GpuDirectPath::setUp() {
  if (!s_.comm->carrier || !s_.comm->carrier->netPlugin()) {
    why_ = std::string("the transport is ") + clbTransportName(s_.comm->transport) +
           ", which has no network plugin (transport verbs has)";
    return clbSuccess;
  }
  const std::string mode = s_.comm->deviceCfg.gpuMemoryText;  // COLIBRI_VERBS_GPU_MEMORY, read at init
  CLB_CHECK(checkGpuMemoryMode(mode));
  if (mode == "host") {
    why_ = "COLIBRI_VERBS_GPU_MEMORY=host";
    return clbSuccess;  // every rank sees the same variable (a launcher sets it for all)
  }
  std::unique_ptr<GpuDirect> g;
  const clbNetPlugin_v1_t* plugin = nullptr;
  clbResult_t rc = makeGpuDirect(s_.d, s_.ctx, s_.dev, s_.ordinal, s_.comm, mode, &plugin, &g);
  if (rc == clbSuccess) rc = s_.runtime.kernels(s_.ctx, &s_.kernels);  // for the reductions
  // Every rank learns whether every rank could (a failed rank stays in the exchanges). Only a
  // failure every rank knows of is a fallback: if an exchange itself fails, the ranks may not
  // agree, and the communicator is broken.
  bool exchanged = false;
  rc = agreeOnStatus(s_.comm, rc, "GPUDirect RDMA", &exchanged);
  if (!exchanged) return rc;
  if (rc == clbSuccess) {
    rc = connectNetChannel(s_.comm, plugin, &g->memory, &g->ring, &g->describe);
    rc = agreeOnStatus(s_.comm, rc, "the GPUDirect RDMA channel", &exchanged);
    if (!exchanged) return rc;
  }
  if (rc != clbSuccess) {
    if (mode != "auto") return setError(rc, "%s (COLIBRI_VERBS_GPU_MEMORY=%s)", lastError().c_str(), mode.c_str());
    why_ = lastError();
    CLB_WARN("rank %d: device buffers between hosts go through pinned host memory, not GPUDirect RDMA: %s",
             s_.comm->rank, why_.c_str());
    clearError();
    return clbSuccess;
  }
  CLB_INFO("rank %d: device buffers between hosts: GPUDirect RDMA through %s (GPU %d)%s", s_.comm->rank, g->memory.name,
           s_.ordinal, g->flush ? ", RDMA writes flushed before kernels read them" : "");
  gdr_ = g.release();
  return clbSuccess;
}

clbResult_t GpuDirectPath::run(const CollArgs& a, CUstream stream) {
  DeviceRingMemory mem(s_.d, *s_.kernels, stream, s_.comm->nranks, gdr_->flush);
  // The input is complete only when the work queued before this call is: an event on the stream
  // (on a blocking stream it also follows the legacy default stream's work, as a kernel there
  // would: the NIC may read the caller's buffer directly). The ring then syncs the stream before
  // each message it posts, so the output is written when the call returns.
  if (!inputReady_) CLB_CU(s_.d, cuEventCreate, &inputReady_, CU_EVENT_DISABLE_TIMING);
  CLB_CU(s_.d, cuEventRecord, inputReady_, stream);
  CLB_CU(s_.d, cuEventSynchronize, inputReady_);
  clbResult_t rc = ringRunOn(s_.comm, *gdr_->ring, mem, a);
  if (rc != clbSuccess) s_.comm->markFailed(rc);  // midway: the peers' state is unknown
  return rc;
}

clbResult_t GpuDirectPath::trim() { return gdr_ ? gdr_->ring->trim() : clbSuccess; }

void GpuDirectPath::release() {
  if (inputReady_) {
    CtxScope scope(s_.d, s_.ctx);
    s_.d->cuEventDestroy(inputReady_);
    inputReady_ = nullptr;
  }
  if (!gdr_) return;
  if (!s_.comm->failed && !s_.comm->aborted) gdr_->ring->finish();
  delete gdr_;
  gdr_ = nullptr;
}

std::string GpuDirectPath::info() const {
  if (gdr_) {
    std::string s = std::string("GPUDirect RDMA through ") + gdr_->memory.name + " (" + gdr_->describe + ")";
    clbNetStats_v1_t st{};
    if (gdr_->ring->plugin()->stats(gdr_->ring->handle(), &st) == clbSuccess) {
      char b[256];
      snprintf(b, sizeof b,
               ", sent from user buffers without a copy: %llu allocation(s) registered (%lld bytes), "
               "%llu hit(s)",
               (unsigned long long)st.userRegs, (long long)st.userRegBytes, (unsigned long long)st.userRegHits);
      s += b;
    }
    return s;
  }
  return "pinned host memory (" + (why_.empty() ? std::string("not decided yet") : why_) + ")";
}

clbResult_t GpuDirectPath::decide() {
  if (!decided_) {  // collective: every rank is in this call
    failure_ = setUp();
    if (failure_ != clbSuccess) failMsg_ = lastError();
    decided_ = true;
  }
  if (failure_ != clbSuccess) return setError(failure_, "%s", failMsg_.c_str());
  return clbSuccess;
}

namespace {

// PeerDeviceMemory's copy: on the operation's stream (ordered with the caller's work, not with
// the legacy stream's), else on the provider's own; synchronized, so the bytes are in place (and
// a slot may be posted or released) when it returns. Unified addressing tells host from device.
clbResult_t gdrCopy(void* self, void* dst, const void* src, size_t bytes, void* stream) {
  auto* g = static_cast<GpuDirectPath::GpuDirect*>(self);
  CtxScope scope(g->d, g->ctx);
  CUstream s = static_cast<CUstream>(stream);
  if (!s) {
    if (!g->own) CLB_CU(g->d, cuStreamCreate, &g->own, CU_STREAM_NON_BLOCKING);
    s = g->own;
  }
  CLB_CU(g->d, cuMemcpyAsync, (CUdeviceptr)dst, (CUdeviceptr)src, bytes, s);
  CLB_CU(g->d, cuStreamSynchronize, s);
  return clbSuccess;
}

clbResult_t gdrArrived(void* self) {
  auto* g = static_cast<GpuDirectPath::GpuDirect*>(self);
  if (!g->flush) return clbSuccess;
  CtxScope scope(g->d, g->ctx);
  CLB_CU(g->d, cuFlushGPUDirectRDMAWrites, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
         CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
  return clbSuccess;
}

}  // namespace

clbResult_t peerDeviceMemoryFor(DeviceCommContext* c, const void* anyDevice) {
  if (c->peerDeviceMemory || !c->peerDeviceMemoryWhy.empty()) return clbSuccess;  // decided
  auto fallBack = [c](const std::string& why) {
    c->peerDeviceMemoryWhy = why;
    return clbSuccess;
  };
  const clbNetPlugin_v1_t* plugin = c->carrier ? c->carrier->netPlugin() : nullptr;
  if (!plugin)
    return fallBack(std::string("the transport is ") + clbTransportName(c->transport) +
                    ", which has no network plugin (transport verbs has)");
  const std::string mode = c->deviceCfg.gpuMemoryText;  // COLIBRI_VERBS_GPU_MEMORY
  CLB_CHECK(checkGpuMemoryMode(mode));
  if (mode == "host") return fallBack("COLIBRI_VERBS_GPU_MEMORY=host");
  if (!netPluginHasDevicePeers(plugin))
    return fallBack(std::string("the ") + plugin->name +
                    " plugin has no point-to-point channels in GPU memory (an older plugin library)");
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  Allocation al;
  CLB_CHECK(allocationOf(d, anyDevice, &al));
  CUdevice dev = 0;
  CLB_CU(d, cuDeviceGet, &dev, al.ordinal);
  // The primary context, retained for the provider's life: the channels' slots live in it and
  // may be freed after the device path let go of its own reference.
  CUcontext ctx = nullptr;
  CLB_CU(d, cuDevicePrimaryCtxRetain, &ctx, dev);
  std::unique_ptr<GpuDirectPath::GpuDirect> g;
  clbResult_t rc = makeGpuDirect(d, ctx, dev, al.ordinal, c, mode, &plugin, &g);
  g->retained = true;  // released with g, whatever happens next
  if (rc != clbSuccess) {
    if (mode != "auto") return setError(rc, "%s (COLIBRI_VERBS_GPU_MEMORY=%s)", lastError().c_str(), mode.c_str());
    CLB_WARN(
        "rank %d: point-to-point on device buffers between hosts goes through host memory, not GPUDirect RDMA: "
        "%s",
        c->rank, lastError().c_str());
    const std::string why = lastError();
    clearError();
    return fallBack(why);
  }
  auto m = std::make_shared<PeerDeviceMemory>();
  m->nic = g->memory;
  m->copy = gdrCopy;
  m->arrived = gdrArrived;
  m->self = g.get();
  m->name = std::string("GPUDirect RDMA through ") + g->memory.name + " (GPU " + std::to_string(al.ordinal) + ")" +
            (g->flush ? ", writes flushed before they are read" : "");
  m->owner = std::shared_ptr<GpuDirectPath::GpuDirect>(g.release());
  CLB_INFO("rank %d: point-to-point on device buffers between hosts: %s", c->rank, m->name.c_str());
  c->peerDeviceMemory = std::move(m);
  return clbSuccess;
}

bool peerDeviceMemoryReaches(const DeviceCommContext* c, const void* p) {
  if (!c->peerDeviceMemory) return false;
  auto* g = static_cast<const GpuDirectPath::GpuDirect*>(c->peerDeviceMemory->self);
  Allocation al;
  if (allocationOf(g->d, p, &al) != clbSuccess) {
    clearError();
    return false;
  }
  return al.type == CU_MEMORYTYPE_DEVICE && al.ordinal == g->ordinal;
}

}  // namespace clb::cuda
