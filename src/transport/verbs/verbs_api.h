// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs function table. Everything the RDMA transport calls in libibverbs goes through one
// VerbsApi: filled from libibverbs.so.1 with dlopen/dlsym at run time (verbs_loader.cc: nothing
// links -libverbs, so libraries load where rdma-core is absent). The tests' verbs emulator
// (src/tests/verbs_emu/) implements the same entries over Unix sockets and exports them as a
// stand-in libibverbs.so.1, so that the transport runs in CI without an RDMA device; nothing here
// knows which library it loaded. The entries take and return the real <infiniband/verbs.h> types
// and follow libibverbs' conventions exactly:
//   - calls returning a pointer return NULL and set errno on failure;
//   - calls returning int return 0 or a positive errno value (modifyQp, postSend, ...), except
//     getCqEvent and getAsyncEvent, which return -1 and set errno;
//   - pollCq returns the number of completions (>= 0) or a negative value on failure;
//   - postSend / postRecv set *bad_wr to the first work request that was not posted.
// Objects (ibv_qp, ibv_mr, ibv_cq...) carry their usual public fields (qp_num, lkey, rkey, ...).
//
// What the transport needs, in the order it uses it: device list and name; open the device; query
// the device, port (state, active MTU, link layer, LID) and GID table; a protection domain; memory
// regions (host memory, or GPU memory through dma-buf); completion queues with an optional
// completion channel; RC queue pairs moved RESET→INIT→RTR→RTS with ibv_modify_qp; RDMA WRITE and
// WRITE_WITH_IMM (receiver-granted credits travel as immediates or as small writes); receives
// posted for the immediates; completions polled.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "colibri/colibri.h"

namespace clb {
namespace verbs {

struct VerbsApi {
  // Which implementation filled the table: "libibverbs" from the loader ("emulator" inside the
  // tests' stand-in library, whose own table it is).
  const char* impl;

  // Devices.
  ibv_device** (*getDeviceList)(int* numDevices);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  int (*queryPort)(ibv_context* context, uint8_t portNum, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t portNum, int index, ibv_gid* gid);
  // GID entry with its type (IB, RoCE v1, RoCE v2): what automatic RoCE v2 GID selection needs.
  // NULL when libibverbs is older than rdma-core v32; ENODATA for an empty table entry.
  int (*queryGidEx)(ibv_context* context, uint32_t portNum, uint32_t index, ibv_gid_entry* entry, uint32_t flags);
  // Asynchronous events (port up/down, CQ overrun, QP errors found by the responder). Blocks
  // unless context->async_fd was made non-blocking; every event must be acknowledged.
  int (*getAsyncEvent)(ibv_context* context, ibv_async_event* event);
  void (*ackAsyncEvent)(ibv_async_event* event);

  // Protection domains and memory regions.
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  // Registers [offset, offset + length) of a dma-buf file descriptor, addressed through `iova`.
  // NULL entry when libibverbs is older than rdma-core v34; the call fails with EOPNOTSUPP (or
  // EPROTONOSUPPORT) where the kernel or driver cannot do it: callers fall back.
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
  int (*deregMr)(ibv_mr* mr);

  // Completion queues; the channel is optional (pass NULL to createCq to poll only).
  ibv_comp_channel* (*createCompChannel)(ibv_context* context);
  int (*destroyCompChannel)(ibv_comp_channel* channel);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int compVector);
  int (*destroyCq)(ibv_cq* cq);
  int (*reqNotifyCq)(ibv_cq* cq, int solicitedOnly);
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(ibv_cq* cq, unsigned int nevents);

  // Queue pairs.
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* initAttr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int attrMask);
  int (*queryQp)(ibv_qp* qp, ibv_qp_attr* attr, int attrMask, ibv_qp_init_attr* initAttr);
  int (*destroyQp)(ibv_qp* qp);

  // Data path (static inline in verbs.h: the loader calls through the context's ops, as they do).
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** badWr);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** badWr);
  int (*pollCq)(ibv_cq* cq, int numEntries, ibv_wc* wc);

  // The library's name for a completion status ("remote access error", ...).
  const char* (*wcStatusStr)(ibv_wc_status status);
};

// The real libibverbs, loaded once per process (thread-safe). clbUnsupported with a message
// naming the package to install when libibverbs.so.1 is missing or lacks a required entry.
clbResult_t loadLibibverbs(const VerbsApi** api);
// Loads `soname` into `api` (no caching; tests use it with a library that does not exist). The
// handle stays open for the life of the process on success.
clbResult_t loadLibibverbsFrom(const char* soname, VerbsApi* api);

// ibv_get_device_list with the environment's failures turned into messages that name the fix:
// no kernel RDMA support (ENOSYS), no permission, zero devices (clbUnsupported). On success
// `*list` holds `*count` > 0 devices; release it with api.freeDeviceList.
clbResult_t listDevices(const VerbsApi& api, ibv_device*** list, int* count);

// The port's attributes (it must be ACTIVE) and the GID this rank's queue pairs use on it: index
// `gidIndexAsked`, or where that is -1 on Ethernet the best RoCE v2 GID (IPv4-mapped first), on
// InfiniBand index 0 (the LID addresses the port). The messages name the device, the port and
// the fix (an interface without an IP address, COLIBRI_VERBS_GID_INDEX).
clbResult_t portAddress(const VerbsApi& api, ibv_context* ctx, const std::string& devName, uint8_t port,
                        int gidIndexAsked, ibv_port_attr* attr, int* gidIndex, ibv_gid* gid);

// What a failed completion most likely means for an RC connection and what to check, e.g. for
// IBV_WC_RETRY_EXC_ERR "the peer did not acknowledge: it died, or the connection was set up
// with a wrong GID, QP number, PSN or path MTU". Never NULL.
const char* wcStatusHint(ibv_wc_status status);

// Names for logs and messages.
const char* qpStateName(ibv_qp_state state);
const char* portStateName(ibv_port_state state);
int mtuBytes(ibv_mtu mtu);  // IBV_MTU_1024 → 1024; 0 for a value that is not an ibv_mtu

}  // namespace verbs
}  // namespace clb
