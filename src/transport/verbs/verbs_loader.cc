// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Fills the verbs table from libibverbs.so.1 at run time. Exported functions come from dlsym
// (which returns the default symbol version, the one a link against libibverbs would pick);
// the functions that verbs.h defines static inline (post_send, post_recv, poll_cq,
// req_notify_cq, the extended query_port, query_gid_ex) are reproduced here: they call through
// the function pointers the provider installed in the context, as the inline functions do.
#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/config.h"
#include "base/error.h"
#include "transport/verbs/verbs_api.h"

namespace clb {
namespace verbs {
namespace {

// Entry points looked up by name; the inline ones are wrappers below.
struct Symbols {
  int (*queryPortCompat)(ibv_context*, uint8_t, ibv_port_attr*) = nullptr;
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int) = nullptr;
  ibv_mr* (*regMrIova2)(ibv_pd*, void*, size_t, uint64_t, unsigned int) = nullptr;
  int (*queryGidEx)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t) = nullptr;
};
Symbols gSyms;  // the entry points behind the wrappers; written under gSymsMutex
std::mutex gSymsMutex;

int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  // Providers with the extended context answer with the full structure; older ones through the
  // compatible entry point, which fills the leading fields only.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  return gSyms.queryPortCompat(ctx, port, attr);
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  // Optional access flags (relaxed ordering) need the newer entry point, which masks them on
  // kernels that lack them.
  if ((access & IBV_ACCESS_OPTIONAL_RANGE) != 0 && gSyms.regMrIova2)
    return gSyms.regMrIova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
  return gSyms.regMr(pd, addr, length, access & ~IBV_ACCESS_OPTIONAL_RANGE);
}

int queryGidEx(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags) {
  return gSyms.queryGidEx(ctx, port, index, entry, flags, sizeof(*entry));
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return qp->context->ops.post_send(qp, wr, bad); }
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return qp->context->ops.post_recv(qp, wr, bad); }
int pollCq(ibv_cq* cq, int n, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, n, wc); }
int reqNotifyCq(ibv_cq* cq, int solicitedOnly) { return cq->context->ops.req_notify_cq(cq, solicitedOnly); }

const char kInstallHint[] =
    "install rdma-core's user-space library (Debian/Ubuntu: apt-get install libibverbs1 "
    "ibverbs-providers; RHEL/Fedora: dnf install rdma-core libibverbs), or use another transport";

template <typename F>
bool lookup(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

std::mutex gLoadMutex;
bool gLoaded = false;
VerbsApi gApi;

}  // namespace

clbResult_t loadLibibverbsFrom(const char* soname, VerbsApi* api) {
  dlerror();
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return setError(clbUnsupported, "RDMA transport: cannot load %s (%s): %s", soname,
                    why ? why : "unknown dlopen error", kInstallHint);
  }
  VerbsApi t{};
  t.impl = "libibverbs";
  const char* missing = nullptr;
#define CLB_VERBS_REQUIRE(field, sym) \
  if (!missing && !lookup(h, sym, &t.field)) missing = sym
  CLB_VERBS_REQUIRE(getDeviceList, "ibv_get_device_list");
  CLB_VERBS_REQUIRE(freeDeviceList, "ibv_free_device_list");
  CLB_VERBS_REQUIRE(getDeviceName, "ibv_get_device_name");
  CLB_VERBS_REQUIRE(openDevice, "ibv_open_device");
  CLB_VERBS_REQUIRE(closeDevice, "ibv_close_device");
  CLB_VERBS_REQUIRE(queryDevice, "ibv_query_device");
  CLB_VERBS_REQUIRE(queryGid, "ibv_query_gid");
  CLB_VERBS_REQUIRE(getAsyncEvent, "ibv_get_async_event");
  CLB_VERBS_REQUIRE(ackAsyncEvent, "ibv_ack_async_event");
  CLB_VERBS_REQUIRE(allocPd, "ibv_alloc_pd");
  CLB_VERBS_REQUIRE(deallocPd, "ibv_dealloc_pd");
  CLB_VERBS_REQUIRE(deregMr, "ibv_dereg_mr");
  CLB_VERBS_REQUIRE(createCompChannel, "ibv_create_comp_channel");
  CLB_VERBS_REQUIRE(destroyCompChannel, "ibv_destroy_comp_channel");
  CLB_VERBS_REQUIRE(createCq, "ibv_create_cq");
  CLB_VERBS_REQUIRE(destroyCq, "ibv_destroy_cq");
  CLB_VERBS_REQUIRE(getCqEvent, "ibv_get_cq_event");
  CLB_VERBS_REQUIRE(ackCqEvents, "ibv_ack_cq_events");
  CLB_VERBS_REQUIRE(createQp, "ibv_create_qp");
  CLB_VERBS_REQUIRE(modifyQp, "ibv_modify_qp");
  CLB_VERBS_REQUIRE(queryQp, "ibv_query_qp");
  CLB_VERBS_REQUIRE(destroyQp, "ibv_destroy_qp");
  CLB_VERBS_REQUIRE(wcStatusStr, "ibv_wc_status_str");
#undef CLB_VERBS_REQUIRE
  Symbols syms;
  if (!missing && !lookup(h, "ibv_query_port", &syms.queryPortCompat)) missing = "ibv_query_port";
  if (!missing && !lookup(h, "ibv_reg_mr", &syms.regMr)) missing = "ibv_reg_mr";
  if (missing) {
    dlclose(h);
    return setError(clbUnsupported, "RDMA transport: %s has no %s (a libibverbs older than rdma-core v17?): %s", soname,
                    missing, kInstallHint);
  }
  lookup(h, "ibv_reg_mr_iova2", &syms.regMrIova2);   // rdma-core v29
  lookup(h, "_ibv_query_gid_ex", &syms.queryGidEx);  // rdma-core v32
  lookup(h, "ibv_reg_dmabuf_mr", &t.regDmabufMr);    // rdma-core v34
  {
    // One set per process: the wrappers do not know which table called them. Every successful load
    // resolves libibverbs' own entry points, so a later load writes the same values.
    std::lock_guard<std::mutex> lock(gSymsMutex);
    gSyms = syms;
  }
  t.queryPort = queryPort;
  t.regMr = regMr;
  t.queryGidEx = syms.queryGidEx ? queryGidEx : nullptr;
  t.postSend = postSend;
  t.postRecv = postRecv;
  t.pollCq = pollCq;
  t.reqNotifyCq = reqNotifyCq;
  *api = t;
  return clbSuccess;
}

clbResult_t loadLibibverbs(const VerbsApi** api) {
  std::lock_guard<std::mutex> lock(gLoadMutex);
  if (!gLoaded) {
    CLB_CHECK(loadLibibverbsFrom("libibverbs.so.1", &gApi));
    gLoaded = true;
  }
  *api = &gApi;
  return clbSuccess;
}

clbResult_t listDevices(const VerbsApi& api, ibv_device*** list, int* count) {
  *list = nullptr;
  *count = 0;
  int n = 0;
  errno = 0;
  ibv_device** l = api.getDeviceList(&n);
  if (!l) {
    int e = errno;
    if (e == ENOSYS)
      return setError(clbUnsupported,
                      "RDMA transport (%s): ibv_get_device_list failed with ENOSYS: this kernel has no "
                      "RDMA support loaded (/sys/class/infiniband_verbs is missing). Load the verbs "
                      "module and your NIC's RDMA driver (e.g. `modprobe ib_uverbs mlx5_ib`); in a "
                      "container, run it on a host that has them and pass /dev/infiniband through",
                      api.impl);
    if (e == EPERM || e == EACCES)
      return setSysError(e,
                         "RDMA transport (%s): no permission to list RDMA devices (check access "
                         "to /dev/infiniband/uverbs*, or the container's device permissions)",
                         api.impl);
    return setSysError(e ? e : EIO, "RDMA transport (%s): ibv_get_device_list failed", api.impl);
  }
  if (n <= 0) {
    api.freeDeviceList(l);
    return setError(clbUnsupported,
                    "RDMA transport (%s): no RDMA device found. The kernel has RDMA support, but no "
                    "device is visible: check `ibv_devices`, that the NIC's RDMA driver is loaded "
                    "(e.g. mlx5_ib), that the user-space provider for it is installed (ibverbs-providers "
                    "/ rdma-core), and in a container that /dev/infiniband is passed through",
                    api.impl);
  }
  *list = l;
  *count = n;
  return clbSuccess;
}

const char* wcStatusHint(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_WR_FLUSH_ERR:
      return "flushed: the queue pair was already in the error state because of an earlier failure "
             "(look for the first failed completion)";
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer did not acknowledge within timeout x retry count: it died or its port is "
             "down, or the connection was set up with a wrong GID/LID, QP number, PSN or path MTU";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer had no receive posted (receiver not ready) for longer than the RNR retries: "
             "a flow-control bug (a write with immediate sent without a credit)";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer refused the RDMA access: wrong rkey, address range outside its memory "
             "region, or the region/QP lacks remote-write access";
    case IBV_WC_REM_INV_REQ_ERR:
      return "the peer found the request invalid (message longer than its receive buffer, or an "
             "operation its QP does not allow)";
    case IBV_WC_LOC_PROT_ERR:
      return "a local buffer is not inside a registered memory region of this protection domain "
             "(wrong lkey or range, or the region was deregistered)";
    case IBV_WC_LOC_LEN_ERR:
      return "the received message is longer than the posted receive buffers, or a send exceeds "
             "the port's maximum message size";
    case IBV_WC_LOC_QP_OP_ERR: return "the work request is not valid for this queue pair";
    case IBV_WC_REM_OP_ERR: return "the peer could not complete the operation";
    case IBV_WC_GENERAL_ERR: return "a device error";
    default: return "an uncommon completion error (see the NIC's documentation of the vendor error)";
  }
}

const char* qpStateName(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "UNKNOWN";
  }
}

const char* portStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "UNKNOWN";
  }
}

int mtuBytes(ibv_mtu mtu) {
  if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) return 0;
  return 128 << (int)mtu;
}

clbResult_t portAddress(const VerbsApi& api, ibv_context* ctx, const std::string& devName, uint8_t port,
                        int gidIndexAsked, ibv_port_attr* attr, int* gidIndex, ibv_gid* gidOut) {
  ibv_port_attr& pa = *attr;
  memset(&pa, 0, sizeof pa);
  int rc = api.queryPort(ctx, port, &pa);
  if (rc) return setSysError(rc, "verbs: ibv_query_port(%s, port %d) failed", devName.c_str(), port);
  if (pa.state != IBV_PORT_ACTIVE)
    return setError(clbUnsupported,
                    "verbs: port %d of %s is %s, not ACTIVE: check the cable / switch and "
                    "`ibv_devinfo -d %s`",
                    port, devName.c_str(), portStateName(pa.state), devName.c_str());
  // The GID: RoCE v2 (IPv4-mapped first) on Ethernet unless overridden; IB uses the LID.
  *gidIndex = gidIndexAsked >= 0 ? gidIndexAsked : 0;
  if (pa.link_layer == IBV_LINK_LAYER_ETHERNET && gidIndexAsked < 0) {
    int best = -1, bestScore = -1;
    for (int i = 0; i < pa.gid_tbl_len; i++) {
      ibv_gid g;
      int type = -1;
      if (api.queryGidEx) {
        ibv_gid_entry ge;
        if (api.queryGidEx(ctx, port, (uint32_t)i, &ge, 0) != 0) continue;
        g = ge.gid;
        type = (int)ge.gid_type;
      } else if (api.queryGid(ctx, port, i, &g) != 0) {
        continue;
      }
      static const ibv_gid zero = {};
      if (memcmp(&g, &zero, sizeof g) == 0) continue;
      bool v4 = g.raw[10] == 0xff && g.raw[11] == 0xff;
      int score = (type == IBV_GID_TYPE_ROCE_V2 ? 2 : type < 0 ? 1 : 0) * 2 + (v4 ? 1 : 0);
      if (score > bestScore) best = i, bestScore = score;
    }
    if (best < 0 || (api.queryGidEx && bestScore < 4))
      return setError(clbUnsupported,
                      "verbs: port %d of %s has no RoCE v2 GID: give the interface an IP address, "
                      "or set COLIBRI_VERBS_GID_INDEX (option verbsGidIndex) to the index of a RoCE v2 GID "
                      "(`show_gids` lists them)",
                      port, devName.c_str());
    *gidIndex = best;
  }
  ibv_gid& gid = *gidOut;
  memset(&gid, 0, sizeof gid);
  rc = api.queryGid(ctx, port, *gidIndex, &gid);
  static const ibv_gid kZeroGid = {};
  if (gidIndexAsked >= 0 &&
      (rc || (pa.link_layer == IBV_LINK_LAYER_ETHERNET && memcmp(&gid, &kZeroGid, sizeof gid) == 0)))
    return setError(clbInvalidArgument,
                    "verbs: GID index %d of %s port %d %s (the table has %d entries): set "
                    "COLIBRI_VERBS_GID_INDEX to the index of a RoCE v2 GID (`show_gids` lists them; option "
                    "verbsGidIndex), or unset it (-1) to choose one automatically",
                    *gidIndex, devName.c_str(), port, rc ? "cannot be queried" : "is empty", pa.gid_tbl_len);
  if (rc)
    return setSysError(rc, "verbs: ibv_query_gid(%s, port %d, index %d) failed", devName.c_str(), port, *gidIndex);
  return clbSuccess;
}

}  // namespace verbs
}  // namespace clb
