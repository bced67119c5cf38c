// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A verbs channel's two links at the verbs level (verbs_link.h).
#include "transport/verbs/verbs_link.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "base/error.h"

namespace clb {
namespace verbs {

namespace {
constexpr uint32_t kLow24 = 0xFFFFFFu;
}  // namespace

VerbsLink::VerbsLink(const VerbsApi* api, const VerbsOptions& o, int rank, int next, int prev, uint32_t slots,
                     uint32_t qps)
    : api_(api), o_(o), rank_(rank), next_(next), prev_(prev), K_(slots), Q_(qps) {}

VerbsLink::~VerbsLink() {
  destroyQps();
  if (cq_) api_->destroyCq(cq_);
  dev_.reset();  // the protection domain and the device, unless another channel still uses them
}

void VerbsLink::destroyQps() {
  for (ibv_qp*& q : sendQps_)
    if (q) api_->destroyQp(q), q = nullptr;
  for (ibv_qp*& q : recvQps_)
    if (q) api_->destroyQp(q), q = nullptr;
}

void VerbsLink::setControlBlock(uint64_t addr, uint32_t rkey, uint32_t flags) {
  for (VerbsConnInfo* i : {&sendInfo_, &recvInfo_}) {
    i->ctlAddr = addr;
    i->ctlRkey = rkey;
    i->flags = flags;
  }
}

clbResult_t VerbsLink::open() {
  if (o_.sharedDevice) {
    dev_ = o_.sharedDevice;
    ctx_ = dev_->ctx;
    pd_ = dev_->pd;
  }
  ibv_device** list = nullptr;
  int n = 0;
  CLB_CHECK(listDevices(*api_, &list, &n));
  ibv_device* dev = nullptr;
  for (int i = 0; i < n && !dev; i++)
    if (!o_.deviceName || strcmp(api_->getDeviceName(list[i]), o_.deviceName) == 0) dev = list[i];
  if (!dev) {
    api_->freeDeviceList(list);
    return setError(clbInvalidArgument, "verbs: no RDMA device named \"%s\" (%d devices; see `ibv_devices`)",
                    o_.deviceName, n);
  }
  std::string devName = api_->getDeviceName(dev);
  if (!dev_) {
    dev_ = std::make_shared<VerbsDevice>();
    dev_->api = api_;
    ctx_ = dev_->ctx = api_->openDevice(dev);
  }
  int e = errno;
  api_->freeDeviceList(list);
  if (!ctx_) return setSysError(e, "verbs (%s): ibv_open_device(%s) failed", api_->impl, devName.c_str());
  ibv_port_attr pa;
  ibv_gid gid;
  CLB_CHECK(portAddress(*api_, ctx_, devName, o_.port, o_.gidIndex, &pa, &gidIndex_, &gid));

  if (!pd_) pd_ = dev_->pd = api_->allocPd(ctx_);
  if (!pd_) return setSysError(errno, "verbs: ibv_alloc_pd(%s) failed", devName.c_str());
  sqDepth_ = 4 * (int)K_ + 64;
  rqDepth_ = 2 * (int)K_ + 32;
  const int cqe = (int)Q_ * 2 * (sqDepth_ + rqDepth_) + 16;
  cq_ = api_->createCq(ctx_, cqe, nullptr, nullptr, 0);
  if (!cq_) return setSysError(errno, "verbs: ibv_create_cq(%s) failed", devName.c_str());
  sendQps_.assign(Q_, nullptr);
  recvQps_.assign(Q_, nullptr);
  std::vector<ibv_qp**> all;
  for (uint32_t j = 0; j < Q_; j++) all.push_back(&sendQps_[j]), all.push_back(&recvQps_[j]);
  for (ibv_qp** q : all) {
    ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = (uint32_t)sqDepth_;
    ia.cap.max_recv_wr = (uint32_t)rqDepth_;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    *q = api_->createQp(pd_, &ia);
    if (!*q)
      return setSysError(errno, "verbs: ibv_create_qp(RC, %d send / %d receive entries) on %s failed", sqDepth_,
                         rqDepth_, devName.c_str());
    ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = o_.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    const int rc = api_->modifyQp(*q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) return setSysError(rc, "verbs: moving a queue pair to INIT on %s failed", devName.c_str());
    CLB_CHECK(postRecvs(*q, rqDepth_));
  }
  queueBytes_ = 2 * (int64_t)Q_ * ((int64_t)sqDepth_ * 64 + (int64_t)rqDepth_ * 32) + (int64_t)cqe * 64;
  // Starting packet sequence numbers: any will do, different from a previous connection's. From
  // getrandom() (glibc 2.25), not std::random_device, whose static libstdc++ would call
  // arc4random and need glibc 2.36 (scripts/check-glibc.sh).
  uint32_t psns[2] = {0, 0};
  if (getrandom(psns, sizeof psns, GRND_NONBLOCK) != (ssize_t)sizeof psns) {
    psns[0] = (uint32_t)std::chrono::steady_clock::now().time_since_epoch().count();
    psns[1] = psns[0] * 2654435761u;
  }
  for (VerbsConnInfo* i : {&sendInfo_, &recvInfo_}) {
    memset(i, 0, sizeof *i);
    i->magic = kVerbsConnMagic;
    i->version = kVerbsConnVersion;
    const std::vector<ibv_qp*>& qps = i == &sendInfo_ ? sendQps_ : recvQps_;
    i->qpn = qps[0]->qp_num;
    i->qpCount = Q_;
    for (uint32_t j = 1; j < Q_; j++) i->moreQpns[j - 1] = qps[j]->qp_num;
    i->psn = psns[i == &sendInfo_ ? 0 : 1] & kLow24;
    i->lid = pa.lid;
    i->mtu = (uint8_t)pa.active_mtu;
    i->linkLayer = pa.link_layer;
    i->slots = K_;
    i->gid = gid;
  }
  return clbSuccess;
}

clbResult_t VerbsLink::postRecvs(ibv_qp* qp, int n) {
  for (int i = 0; i < n; i++) {
    ibv_recv_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = isSendQp(qp) ? kWrRecvSend : kWrRecvRecv;
    ibv_recv_wr* bad = nullptr;
    int rc = api_->postRecv(qp, &wr, &bad);
    if (rc)
      return setSysError(rc, "verbs: ibv_post_recv on the link %s rank %d failed", isSendQp(qp) ? "to" : "from",
                         isSendQp(qp) ? next_ : prev_);
  }
  return clbSuccess;
}

bool VerbsLink::isSendQp(const ibv_qp* qp) const {
  return std::find(sendQps_.begin(), sendQps_.end(), qp) != sendQps_.end();
}

clbResult_t VerbsLink::connectQp(ibv_qp* qp, const VerbsConnInfo& local, const VerbsConnInfo& r, uint32_t remoteQpn,
                                 const char* which) {
  int peer = isSendQp(qp) ? next_ : prev_;
  if (r.magic != kVerbsConnMagic || r.version != kVerbsConnVersion)
    return setError(clbInvalidArgument,
                    "verbs: the connection info from rank %d (%s) is not a Colibri verbs "
                    "endpoint of version %u (magic 0x%x, version %u): mixed Colibri versions?",
                    peer, which, kVerbsConnVersion, r.magic, r.version);
  if (r.slots != K_)
    return setError(clbInvalidArgument,
                    "verbs: rank %d uses %u receive slots per link, rank %d uses %u: "
                    "every rank must use the same slot count (slots = pipelineDepth, at least 2: set pipelineDepth / "
                    "COLIBRI_PIPELINE_DEPTH the same on every rank)",
                    peer, r.slots, rank_, K_);
  if (r.qpCount != Q_)
    return setError(clbInvalidArgument,
                    "verbs: rank %d uses %u queue pairs per link, rank %d uses %u: set "
                    "verbsQpsPerConnection / COLIBRI_VERBS_QPS_PER_CONNECTION the same on every rank",
                    peer, r.qpCount, rank_, Q_);
  if ((r.flags & kVerbsConnDeviceSlots) != (local.flags & kVerbsConnDeviceSlots))
    return setError(clbInvalidArgument,
                    "verbs: rank %d's channel carries %s memory, rank %d's %s memory: both "
                    "ends of a link must be set up alike (mixed Colibri versions?)",
                    peer, (r.flags & kVerbsConnDeviceSlots) ? "device" : "host", rank_, o_.device ? "device" : "host");
  if (r.linkLayer != local.linkLayer)
    return setError(clbInvalidArgument, "verbs: rank %d is on %s, rank %d on %s: one fabric must connect them", peer,
                    r.linkLayer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet (RoCE)", rank_,
                    local.linkLayer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet (RoCE)");
  ibv_mtu mtu = (ibv_mtu)std::min({(int)o_.maxMtu, (int)local.mtu, (int)r.mtu});
  pathMtu_ = mtu;
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = remoteQpn;
  a.rq_psn = r.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = o_.minRnrTimer;
  a.ah_attr.port_num = o_.port;
  a.ah_attr.dlid = r.lid;
  if (local.linkLayer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = r.gid;
    a.ah_attr.grh.sgid_index = (uint8_t)gidIndex_;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = o_.trafficClass;
  }
  int rc = api_->modifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc)
    return setSysError(rc,
                       "verbs: moving the queue pair %s rank %d to RTR failed (remote QP %u, path MTU %d, GID "
                       "index %d): check the exchanged connection info and the GID index",
                       which, peer, remoteQpn, mtuBytes(mtu), gidIndex_);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = local.psn;
  a.timeout = o_.timeout;
  a.retry_cnt = o_.retryCnt;
  a.rnr_retry = o_.rnrRetry;
  a.max_rd_atomic = 1;
  rc = api_->modifyQp(
      qp, &a,
      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) return setSysError(rc, "verbs: moving the queue pair %s rank %d to RTS failed", which, peer);
  return clbSuccess;
}

clbResult_t VerbsLink::connect(const VerbsConnInfo& next, const VerbsConnInfo& prev) {
  if (connected_) return setError(clbInvalidUsage, "verbs: the channel is already connected");
  auto qpn = [](const VerbsConnInfo& i, uint32_t j) { return j == 0 ? i.qpn : i.moreQpns[j - 1]; };
  if (next.qpCount > (uint32_t)kVerbsMaxQps || prev.qpCount > (uint32_t)kVerbsMaxQps)
    return setError(clbInvalidArgument, "verbs: a peer announced %u queue pairs per link (at most %d)",
                    std::max(next.qpCount, prev.qpCount), kVerbsMaxQps);
  for (uint32_t j = 0; j < Q_; j++) {
    CLB_CHECK(connectQp(sendQps_[j], sendInfo_, next, qpn(next, j), "to"));
    CLB_CHECK(connectQp(recvQps_[j], recvInfo_, prev, qpn(prev, j), "from"));
  }
  nextInfo_ = next;
  prevInfo_ = prev;
  connected_ = true;
  return clbSuccess;
}

}  // namespace verbs
}  // namespace clb
