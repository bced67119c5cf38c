// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A verbs channel's two links at the verbs level (VerbsLink; the channel and its message protocol
// are verbs_channel.h): the device (opened, or shared with other channels), its protection
// domain, one completion queue, Q reliable-connected queue pairs that send to the next rank and Q
// that receive from the previous one, receives always posted on all of them; what each side tells
// the other (VerbsConnInfo) and the connection made from it (RESET -> INIT -> RTR -> RTS). What
// travels over them, and when, is the channel's.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "colibri/colibri.h"
#include "colibri/net_plugin.h"
#include "transport/verbs/verbs_api.h"

namespace clb {
namespace verbs {

constexpr int kVerbsMaxQps = 8;  // queue pairs per link at most

// What one side of a link tells the other (plain bytes: send it any way).
struct VerbsConnInfo {
  uint32_t magic;    // kVerbsConnMagic
  uint32_t version;  // kVerbsConnVersion
  uint32_t qpn;
  uint32_t psn;       // 24 bits
  uint16_t lid;       // InfiniBand; 0 on RoCE
  uint8_t mtu;        // the port's active MTU (ibv_mtu)
  uint8_t linkLayer;  // IBV_LINK_LAYER_*
  uint32_t slots;     // K: must match the other end
  ibv_gid gid;        // the chosen GID (RoCE v2 on Ethernet)
  uint64_t ctlAddr;   // control block: announces are written here, acks and credits target it
  uint32_t ctlRkey;
  uint32_t flags;    // kVerbsConnDeviceSlots: slots in device memory (both ends must agree)
  uint32_t qpCount;  // queue pairs of this side of the link (qpn is the first)
  uint32_t moreQpns[kVerbsMaxQps - 1];
};
constexpr uint32_t kVerbsConnDeviceSlots = 1;
constexpr uint32_t kVerbsConnMagic = 0x43564231;  // "CVB1"
constexpr uint32_t kVerbsConnVersion = 2;         // 2: several queue pairs per link
static_assert(std::is_trivially_copyable<VerbsConnInfo>::value && sizeof(VerbsConnInfo) == 88,
              "VerbsConnInfo travels as plain bytes");

// Device memory for the slots and staging of a channel in device mode (GPUDirect RDMA), given by
// the core (net_plugin.h, clbNetDeviceMemory_v1_t): alloc gives `bytes` (a multiple of 4 KiB) of
// page-aligned memory and a dma-buf fd of it (registered with ibv_reg_dmabuf_mr, then closed by
// the channel) or -1 (ibv_reg_mr of the address: nvidia-peermem); lookup and exportRange
// (optional) serve sends straight from user buffers (sendFrom).
using DeviceMemory = clbNetDeviceMemory_v1_t;

// An opened device and its protection domain, shared by the channels that use it (a rank's
// point-to-point channels, one per peer, share one): closed when the last of them goes.
struct VerbsDevice {
  const VerbsApi* api = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ~VerbsDevice() {
    if (pd) api->deallocPd(pd);
    if (ctx) api->closeDevice(ctx);
  }
};

struct VerbsOptions {
  const char* deviceName = nullptr;  // NULL: the first device
  uint8_t port = 1;
  int gidIndex = -1;                            // -1: RoCE v2 GID on Ethernet (IPv4-mapped first), 0 on IB
  ibv_mtu maxMtu = IBV_MTU_4096;                // path MTU = min(this, local active, remote active)
  uint8_t trafficClass = 0;                     // GRH traffic class (RoCE, global routes)
  uint8_t timeout = CLB_DEFAULT_VERBS_TIMEOUT;  // local ACK timeout, 4.096 us * 2^timeout
  uint8_t retryCnt = CLB_DEFAULT_VERBS_RETRY_COUNT;
  uint8_t rnrRetry = 7;
  uint8_t minRnrTimer = 12;
  int slots = 8;                         // K receive slots per link (1..64); the ring: pipelineDepth
  int qpsPerConnection = 1;              // RC queue pairs per link (1..8), both ends equal
  int64_t timeoutMs = 30000;             // without a communicator: how long a wait may last
  int64_t stagingCapBytes = 1ll << 32;   // cap on registered bytes (send staging + receive slots)
  int rank = 0, nranks = 2;              // for messages, without a communicator
  const DeviceMemory* device = nullptr;  // device mode (must outlive the channel); NULL: host memory
  // Device mode: registrations of user buffers kept for sendFrom (least recently used dropped).
  size_t userRegMax = 32;  // 0: off (every message copied)
  int64_t userRegCapBytes = 8ll << 30;
  // A point-to-point channel: both of its links go to this rank (-1: the ring's neighbours).
  int peer = -1;
  // The device (and protection domain) to use, opened by another channel; NULL: open one.
  std::shared_ptr<VerbsDevice> sharedDevice;
};

// The work request IDs of the receives the link keeps posted: on a send-side queue pair (credits,
// acknowledgements come in there) and on a receive-side one (data, announcements, notices).
constexpr uint64_t kWrRecvSend = 10, kWrRecvRecv = 11;

class VerbsLink {
 public:
  // `slots`: the channel's K (both ends must agree), `qps`: Q per link; rank, next and prev name
  // the ends in messages.
  VerbsLink(const VerbsApi* api, const VerbsOptions& o, int rank, int next, int prev, uint32_t slots, uint32_t qps);
  ~VerbsLink();  // the completion queue, then the device's reference (destroyQps ran first)
  VerbsLink(const VerbsLink&) = delete;
  VerbsLink& operator=(const VerbsLink&) = delete;

  // Opens the device (or takes o.sharedDevice's), finds the port's address, allocates the
  // protection domain (unless shared), the completion queue and the queue pairs (moved to INIT,
  // receives posted), and fills both sides' VerbsConnInfo but for the control block's fields
  // (setControlBlock).
  clbResult_t open();
  // The channel's control block (where the peers' announcements, credits and tags land) and
  // kVerbsConnDeviceSlots where its slots are device memory: into both sides' info.
  void setControlBlock(uint64_t addr, uint32_t rkey, uint32_t flags);
  // `next`: the next rank's receive-side info; `prev`: the previous rank's send-side info. Checks
  // that both ends were set up alike (a message naming what differs), then RTR and RTS.
  clbResult_t connect(const VerbsConnInfo& next, const VerbsConnInfo& prev);
  // Destroys the queue pairs: before the memory registered for their work goes.
  void destroyQps();
  // Posts n receives without a scatter list on `qp` (one of this link's).
  clbResult_t postRecvs(ibv_qp* qp, int n);
  bool isSendQp(const ibv_qp* qp) const;
  int peerOf(const ibv_qp* qp) const { return isSendQp(qp) ? next_ : prev_; }

  const VerbsConnInfo& sendInfo() const { return sendInfo_; }  // for the next rank
  const VerbsConnInfo& recvInfo() const { return recvInfo_; }  // for the previous rank
  const VerbsConnInfo& nextInfo() const { return nextInfo_; }  // the next rank's (connected)
  const VerbsConnInfo& prevInfo() const { return prevInfo_; }  // the previous rank's (connected)
  bool connected() const { return connected_; }
  ibv_qp* sendQp(uint32_t j) const { return sendQps_[j]; }
  ibv_qp* recvQp(uint32_t j) const { return recvQps_[j]; }
  ibv_cq* cq() const { return cq_; }
  ibv_pd* pd() const { return pd_; }
  ibv_context* context() const { return ctx_; }
  std::shared_ptr<VerbsDevice> device() const { return dev_; }
  ibv_mtu pathMtu() const { return pathMtu_; }
  int gidIndex() const { return gidIndex_; }
  // Host memory the provider holds for the queue pairs and the completion queue, estimated from
  // their depths (64 bytes per send entry and completion, 32 per receive entry, as mlx5 allocates
  // them); known once open.
  int64_t queueBytes() const { return queueBytes_; }

 private:
  clbResult_t connectQp(ibv_qp* qp, const VerbsConnInfo& local, const VerbsConnInfo& remote, uint32_t remoteQpn,
                        const char* which);

  const VerbsApi* api_;
  const VerbsOptions& o_;  // the channel's
  int rank_, next_, prev_;
  uint32_t K_, Q_;
  std::shared_ptr<VerbsDevice> dev_;  // ctx_ and pd_, perhaps shared with other channels
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> sendQps_, recvQps_;  // Q each: to the next rank, from the previous rank
  int sqDepth_ = 0, rqDepth_ = 0;
  int64_t queueBytes_ = 0;
  int gidIndex_ = 0;
  ibv_mtu pathMtu_ = IBV_MTU_1024;
  VerbsConnInfo sendInfo_{}, recvInfo_{};
  VerbsConnInfo nextInfo_{}, prevInfo_{};
  bool connected_ = false;
};

}  // namespace verbs
}  // namespace clb
