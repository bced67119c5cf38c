// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator as a stand-in libibverbs.so.1, for tests only (docs/architecture.md,
// "Network plugins"): it exports the ibv_* entry points that the production loader
// (src/transport/verbs/verbs_loader.cc) looks up, over the emulator's table. colibri_tests links
// it, so the name libibverbs.so.1 is taken by it in every test process and the plugin's
// dlopen("libibverbs.so.1") gets it by soname; the Java tests put its folder first on the library
// path. Either way the unchanged production path runs over the emulated NIC. The inline verbs
// calls (post_send, post_recv, poll_cq, req_notify_cq) go through the context's ops, which the
// emulator fills like a provider.
//
// GPU memory (GPUDirect RDMA over the emulator) needs no hook: on a build with cuda.h the
// stand-in reaches it through the CUDA driver itself (deviceCopy below).
//
// The emulator's test hooks are the extra colibri_emu_* symbols below, which the tests call
// through emu_client.h (the structs are the emulator's own, from verbs_emu.h: this is a test
// library, built with the tests, not a product interface).
#include <infiniband/verbs.h>

#include <cerrno>

#include "tests/verbs_emu/emu_client.h"
#include "tests/verbs_emu/verbs_emu.h"
#ifdef CLB_HAVE_CUDA
#include "platform/cuda/driver.h"
#endif

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

using clb::verbs::VerbsApi;
namespace emu = clb::verbs::emu;

namespace {
const VerbsApi& E() { return *emu::api(); }

#ifdef CLB_HAVE_CUDA
// GPU memory: NVIDIA's dma-bufs cannot be mapped, so the emulated NIC reaches registrations of
// them through the driver, in the context that owns the memory (the NIC threads have none). The
// stand-in installs this itself, so tests in any language (the Java GPU tests too) need no hook;
// libcuda is loaded only at the first such copy. The buffers carry SYNC_MEMOPS (gpudirect.cc), so
// a copy is complete when cuMemcpy returns.
int deviceCopy(void* dst, const void* src, size_t bytes) {
  const clb::cuda::Driver* d = nullptr;
  if (clb::cuda::driver(&d) != clbSuccess) return ENODEV;
  // The context of whichever end is device memory (the other may be host memory, which CUDA
  // does not know: cuPointerGetAttributes leaves the context null there instead of failing, so
  // compute-sanitizer sees no API error).
  CUcontext ctx = nullptr;
  CUpointer_attribute what = CU_POINTER_ATTRIBUTE_CONTEXT;
  void* into[] = {&ctx};
  if (d->cuPointerGetAttributes(1, &what, into, (CUdeviceptr)dst) != CUDA_SUCCESS || !ctx)
    d->cuPointerGetAttributes(1, &what, into, (CUdeviceptr)src);
  if (!ctx) return EFAULT;
  clb::cuda::CtxScope scope(d, ctx);
  return d->cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, bytes) == CUDA_SUCCESS ? 0 : EFAULT;
}

__attribute__((constructor)) void installDeviceCopy() { emu::setDeviceCopy(deviceCopy); }
#endif
}  // namespace

#define CLB_STANDIN extern "C" __attribute__((visibility("default")))

CLB_STANDIN ibv_device** ibv_get_device_list(int* n) { return E().getDeviceList(n); }
CLB_STANDIN void ibv_free_device_list(ibv_device** l) { E().freeDeviceList(l); }
CLB_STANDIN const char* ibv_get_device_name(ibv_device* d) { return E().getDeviceName(d); }
CLB_STANDIN ibv_context* ibv_open_device(ibv_device* d) { return E().openDevice(d); }
CLB_STANDIN int ibv_close_device(ibv_context* c) { return E().closeDevice(c); }
CLB_STANDIN int ibv_query_device(ibv_context* c, ibv_device_attr* a) { return E().queryDevice(c, a); }
// The compatible entry point: the loader passes a whole ibv_port_attr (zeroed), as libibverbs'
// inline wrapper does for providers without the extended context.
CLB_STANDIN int ibv_query_port(ibv_context* c, uint8_t port, _compat_ibv_port_attr* a) {
  return E().queryPort(c, port, reinterpret_cast<ibv_port_attr*>(a));
}
CLB_STANDIN int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  return E().queryGid(c, port, index, gid);
}
CLB_STANDIN int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t flags,
                                  size_t) {
  return E().queryGidEx(c, port, index, e, flags);
}
CLB_STANDIN int ibv_get_async_event(ibv_context* c, ibv_async_event* e) { return E().getAsyncEvent(c, e); }
CLB_STANDIN void ibv_ack_async_event(ibv_async_event* e) { E().ackAsyncEvent(e); }
CLB_STANDIN ibv_pd* ibv_alloc_pd(ibv_context* c) { return E().allocPd(c); }
CLB_STANDIN int ibv_dealloc_pd(ibv_pd* pd) { return E().deallocPd(pd); }
CLB_STANDIN ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return E().regMr(pd, addr, len, access);
}
CLB_STANDIN ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  return E().regDmabufMr(pd, offset, len, iova, fd, access);
}
CLB_STANDIN int ibv_dereg_mr(ibv_mr* mr) { return E().deregMr(mr); }
CLB_STANDIN ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) { return E().createCompChannel(c); }
CLB_STANDIN int ibv_destroy_comp_channel(ibv_comp_channel* ch) { return E().destroyCompChannel(ch); }
CLB_STANDIN ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* ctx, ibv_comp_channel* ch, int vec) {
  return E().createCq(c, cqe, ctx, ch, vec);
}
CLB_STANDIN int ibv_destroy_cq(ibv_cq* cq) { return E().destroyCq(cq); }
CLB_STANDIN int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** ctx) { return E().getCqEvent(ch, cq, ctx); }
CLB_STANDIN void ibv_ack_cq_events(ibv_cq* cq, unsigned int n) { E().ackCqEvents(cq, n); }
CLB_STANDIN ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) { return E().createQp(pd, a); }
CLB_STANDIN int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) { return E().modifyQp(qp, a, mask); }
CLB_STANDIN int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* a, int mask, ibv_qp_init_attr* ia) {
  return E().queryQp(qp, a, mask, ia);
}
CLB_STANDIN int ibv_destroy_qp(ibv_qp* qp) { return E().destroyQp(qp); }
CLB_STANDIN const char* ibv_wc_status_str(ibv_wc_status s) { return E().wcStatusStr(s); }

// Test hooks (the emulator's verbs_emu.h, by C names).
CLB_STANDIN void colibri_emu_config(emu::Config* out) { *out = emu::config(); }
CLB_STANDIN void colibri_emu_configure(const emu::Config* c) { emu::configure(*c); }
CLB_STANDIN void colibri_emu_reset_config(void) { emu::resetConfig(); }
CLB_STANDIN int colibri_emu_is_emulated(ibv_context* c) { return emu::isEmulated(c) ? 1 : 0; }
CLB_STANDIN uint32_t colibri_emu_node_id(ibv_context* c) { return emu::nodeId(c); }
CLB_STANDIN int colibri_emu_set_port_state(ibv_context* c, int up) { return emu::setPortState(c, up != 0); }
CLB_STANDIN int colibri_emu_drop_packets(ibv_qp* qp, int count) { return emu::dropPackets(qp, count); }
CLB_STANDIN int colibri_emu_query_stats(ibv_qp* qp, emu::QpStats* out) { return emu::queryStats(qp, out); }
CLB_STANDIN void colibri_emu_set_device_copy(emu::DeviceCopy copy) { emu::setDeviceCopy(copy); }
CLB_STANDIN emu::DeviceCopy colibri_emu_device_copy(void) { return emu::deviceCopy(); }
CLB_STANDIN int colibri_emu_live_qps(ibv_qp** out, int max) { return emu::liveQps(out, max); }
CLB_STANDIN const VerbsApi* colibri_emu_api(void) { return emu::api(); }
