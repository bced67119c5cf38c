// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator: the VerbsApi table implemented without RDMA hardware, so that the verbs
// transport runs (and its failure handling is tested) in CI. It models RC queue pairs the way a
// transport sees them on a real NIC; docs in verbs_emu.cc's header comment, summarised here:
//
//  - One device, "colibri_emu0", one port (ACTIVE, active MTU 4096 unless configured), link layer
//    Ethernet (RoCE: GID index 0 fe80:: link-local of type RoCE v1, index 1 ::ffff:10.x.y.z of type
//    RoCE v2) or InfiniBand (a LID; GID index 0 fe80::).
//  - Every ibv_open_device context is one emulated node (its own LID/GID, port state, and "NIC"
//    thread), so two contexts in one process behave like two hosts. A node's address is claimed by
//    binding the abstract Unix socket "colibri-verbs-emu-v1:<node>", which makes LIDs, GIDs and QP
//    numbers unique among all processes of the host; peers connect by exchanging
//    {qpn, psn, lid, gid, mtu} exactly as with real hardware.
//  - ibv_modify_qp checks the required and allowed attribute masks of every RC transition, value
//    ranges, path MTU <= active MTU, and for RoCE is_global with a valid GID index (EINVAL).
//  - RDMA WRITE, WRITE_WITH_IMM, SEND and SEND_WITH_IMM between queue pairs in one process or in
//    different processes: rkey/bounds/access checks (REM_ACCESS_ERR), receives consumed by
//    immediates and sends, RNR NAK and retries, timeouts and retries for lost packets, PSN
//    checking, completions in order, flush errors in the error state, CQ overrun.
//
// Knobs (read when the emulator is first used, unless configure() is called):
//   COLIBRI_VERBS_EMU_LINK_LAYER    eth (default) | ib
//   COLIBRI_VERBS_EMU_MTU           256 | 512 | 1024 | 2048 | 4096 (default): the port's active MTU
//   COLIBRI_VERBS_EMU_DEVICES       1 (default) | 0: no device (ibv_get_device_list returns none)
//   COLIBRI_VERBS_EMU_NO_KERNEL     1: ibv_get_device_list fails with ENOSYS, as without ib_uverbs
//   COLIBRI_VERBS_EMU_DMABUF        1 (default) | 0: ibv_reg_dmabuf_mr fails with EOPNOTSUPP
//   COLIBRI_VERBS_EMU_MEMLOCK_BYTES registered bytes per process above which ibv_reg_mr fails with
//                                   ENOMEM, like RLIMIT_MEMLOCK (default 0: no limit)
//   COLIBRI_VERBS_EMU_PORT_DOWN     1: ports start DOWN
//   COLIBRI_VERBS_EMU_ROCE_V2       1 (default) | 0: no RoCE v2 GID (an interface without an IP address)
//   COLIBRI_VERBS_EMU_DROP_EVERY    N: every N-th request packet a node sends is lost (0: none)
//   COLIBRI_VERBS_EMU_MIN_TIMEOUT_MS floor of the retransmission timeout (default 20): emulated
//                                   acknowledgements take scheduler time, not microseconds
//
// Set in code only: setDeviceCopy(), how the emulated NIC reaches dma-buf registrations whose fd
// cannot be mapped (GPU memory). Without it they fail with mmap's errno; with it (on a GPU host,
// cuMemcpy) they are read and written through the copy function, addressed by their iova.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/verbs/verbs_api.h"

namespace clb {
namespace verbs {
namespace emu {

struct Config {
  uint8_t linkLayer = IBV_LINK_LAYER_ETHERNET;  // or IBV_LINK_LAYER_INFINIBAND
  ibv_mtu activeMtu = IBV_MTU_4096;
  int numDevices = 1;            // 0 or 1
  bool noKernelSupport = false;  // getDeviceList: NULL with errno ENOSYS
  bool dmabufSupported = true;   // false: regDmabufMr fails with EOPNOTSUPP
  uint64_t memlockBytes = 0;     // 0: unlimited
  bool portDown = false;         // state of the port when a context is opened
  bool roceV2 = true;            // false: a RoCE port's GID table has only its RoCE v1 link-local GID
  uint32_t dropEvery = 0;        // every N-th request packet of a node is lost
  uint32_t minTimeoutMs = 20;    // floor of the local ACK timeout
};

// The emulator's table (process-wide, never NULL).
const VerbsApi* api();

// The configuration: from the environment until configure() is called. Contexts take a copy when
// opened; device-list knobs apply at the next getDeviceList call.
Config config();
void configure(const Config& cfg);
Config configFromEnv();
// Back to the environment's configuration.
void resetConfig();

// Whether an object belongs to the emulator (e.g. a transport refusing to mix implementations).
bool isEmulated(ibv_context* context);
// The node number behind the context's LID and GIDs (unique on the host while it is open).
uint32_t nodeId(ibv_context* context);

// Faults, for tests. All return 0 or an errno value (EINVAL for a non-emulator object).
// Port state of the context's port: DOWN drops everything the node sends and receives (queue
// pairs time out: IBV_WC_RETRY_EXC_ERR), query_port says DOWN, an async event is raised.
int setPortState(ibv_context* context, bool up);
// Loses the next `count` request packets that `qp` sends (-1: all of them until called with 0).
int dropPackets(ibv_qp* qp, int count);

struct QpStats {
  uint64_t packetsSent = 0;  // request packets, retransmissions included
  uint64_t retransmits = 0;  // packets sent again after a timeout, sequence NAK or RNR NAK
  uint64_t timeouts = 0;     // local ACK timeouts
  uint64_t rnrNaks = 0;      // RNR NAKs received (as requester)
  uint64_t seqNaks = 0;      // sequence NAKs received: the responder saw a gap (fast retransmit)
  uint64_t dropped = 0;      // request packets lost by injected faults or port down
  uint64_t rejected = 0;     // packets addressed to this QP that it dropped (state, source, PSN)
};
int queryStats(ibv_qp* qp, QpStats* stats);
// The queue pairs of the process's open contexts that are not destroyed (any order): up to `max`
// of them into `out`; returns how many there are.
int liveQps(ibv_qp** out, int max);

// How the emulated NIC reaches memory registered with regDmabufMr whose fd cannot be mapped
// (GPU memory: NVIDIA's dma-bufs do not support mmap). With a copy function set, such a
// registration is accepted and [iova, iova + length) is read and written through it: dst and src
// are iova addresses of the registration or host pointers (on a GPU host: cuMemcpy, whose
// unified addressing takes both). Returns 0 or an errno value. NULL (the default): such
// registrations fail with mmap's errno, as before. Process-wide; called on the NIC threads, so
// it must be thread-safe, and it must not be cleared while such registrations carry traffic
// (their copies then fail with EFAULT).
using DeviceCopy = int (*)(void* dst, const void* src, size_t bytes);
void setDeviceCopy(DeviceCopy copy);
DeviceCopy deviceCopy();  // the one set now

}  // namespace emu
}  // namespace verbs
}  // namespace clb
