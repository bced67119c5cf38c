// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs ring channel; the protocol is described in verbs_channel.h.
#include "transport/verbs/verbs_channel.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <unistd.h>

#include "base/error.h"
#include "bootstrap/net.h"

namespace clb {
namespace verbs {

namespace {

constexpr uint32_t kKindData = 0, kKindCredit = 1, kKindAnnounce = 2, kKindAck = 3;
// Toward the receiver kind 1 is a notice (credits only travel the other way): the sender's next
// message does not fit the slots it knows of; its tag is in tag slot n % K of the control block.
constexpr uint32_t kKindNotice = 1;
constexpr uint32_t kLow30 = 0x3FFFFFFFu, kLow24 = 0xFFFFFFu;
constexpr uint64_t kWrData = 1, kWrCredit = 2, kWrAnnounce = 3, kWrAck = 4, kWrPayload = 5, kWrNotice = 6;
constexpr size_t kCtlBytes = 4096, kCtlOut = 256;
// The control block also holds K tags in, written by the previous rank (device mode: every
// message's tag; both modes: the tag of a notice), and in device mode K tags out (the source of
// this rank's tag writes), 64 slots at most.
constexpr size_t kCtlTagIn = 512, kCtlTagOut = kCtlTagIn + 64 * sizeof(MsgTag);
constexpr size_t kCtlBytesDevice = (kCtlTagOut + 64 * sizeof(MsgTag) + 4095) / 4096 * 4096;

uint32_t imm(uint32_t kind, uint32_t low) { return kind << 30 | (low & kLow30); }

// The ranks a channel's links go to: its peer's (a point-to-point channel), else the ring's neighbours.
int ranksOf(const VerbsOptions& o, const clbNetHost_v1_t* host) { return std::max(1, host ? host->nranks : o.nranks); }
int peerNext(const VerbsOptions& o, const clbNetHost_v1_t* host) {
  const int rank = host ? host->rank : o.rank;
  return o.peer >= 0 ? o.peer : (rank + 1) % ranksOf(o, host);
}
int peerPrev(const VerbsOptions& o, const clbNetHost_v1_t* host) {
  const int rank = host ? host->rank : o.rank, n = ranksOf(o, host);
  return o.peer >= 0 ? o.peer : (rank + n - 1) % n;
}

// Part j of a message of `total` bytes split over q queue pairs: 64-byte aligned pieces, the
// last ones possibly empty. q == 1: the whole message.
void partOf(size_t total, uint32_t q, uint32_t j, size_t* off, size_t* len) {
  size_t per = ((total + q - 1) / q + 63) / 64 * 64;
  *off = std::min((size_t)j * per, total);
  *len = std::min(per, total - *off);
}

const char* wrWhat(uint64_t wrId) {
  switch (wrId >> 56) {
    case kWrData: return "the RDMA WRITE of a ring message";
    case kWrPayload: return "the RDMA WRITE of a ring message's payload (GPU memory)";
    case kWrCredit: return "returning a credit (RDMA WRITE_WITH_IMM)";
    case kWrAnnounce: return "announcing receive slots (RDMA WRITE_WITH_IMM)";
    case kWrAck: return "acknowledging new receive slots (RDMA WRITE_WITH_IMM)";
    case kWrNotice: return "the notice of a message larger than the receive slots (RDMA WRITE_WITH_IMM)";
    default: return "a posted receive";
  }
}

}  // namespace

static_assert(sizeof(MsgTag) <= 64, "host mode: the tag fits in part 0 of a message (parts are 64-byte multiples)");
static_assert(kCtlTagIn + 64 * sizeof(MsgTag) <= kCtlBytes, "host mode: the tags of notices fit in the control block");

struct VerbsChannel::Region {
  VerbsChannel* owner = nullptr;
  void* mem = nullptr;
  size_t bytes = 0;
  ibv_mr* mr = nullptr;
  size_t stride = 0;  // slot bytes (slot regions and staging)
  uint32_t refs = 0;  // arrived messages not yet released
  bool device = false;
  ~Region() {
    if (mr) owner->api_->deregMr(mr);  // before the memory goes
    if (device) {
      if (mem) owner->o_.device->release(owner->o_.device->self, mem, bytes);
    } else {
      free(mem);
    }
    owner->account(-(int64_t)bytes, device);
  }
  char* slot(uint32_t i) const { return static_cast<char*>(mem) + (size_t)i * stride; }
};

VerbsChannel::VerbsChannel(const VerbsApi* api, const VerbsOptions& o, const clbNetHost_v1_t* host)
    : api_(api),
      o_(o),
      link_(api, o_, host ? host->rank : o.rank, peerNext(o, host), peerPrev(o, host), (uint32_t)o.slots,
            (uint32_t)o.qpsPerConnection),
      userRegs_(api, o.device, o.userRegMax, o.userRegCapBytes, host ? host->rank : o.rank,
                [this] { return finish(); }) {
  if (host) host_ = *host, hasHost_ = true;
  rank_ = host ? host->rank : o.rank;
  next_ = peerNext(o, host);
  prev_ = peerPrev(o, host);
  if (host) o_.timeoutMs = host->timeoutMs, o_.stagingCapBytes = host->stagingCapBytes;
  K_ = (uint32_t)o.slots;
  Q_ = (uint32_t)o.qpsPerConnection;
}

clbResult_t VerbsChannel::create(const VerbsApi* api, const VerbsOptions& options, const clbNetHost_v1_t* host,
                                 std::unique_ptr<VerbsChannel>* out) {
  out->reset();
  if (!api) return setError(clbInvalidArgument, "verbs channel: no VerbsApi table");
  if (options.slots < 1 || options.slots > 64)
    return setError(clbInvalidArgument, "verbs channel: %d receive slots asked; 1..64 are possible", options.slots);
  if (options.qpsPerConnection < 1 || options.qpsPerConnection > kVerbsMaxQps)
    return setError(clbInvalidArgument, "verbs channel: %d queue pairs per link asked; 1..%d are possible",
                    options.qpsPerConnection, kVerbsMaxQps);
  std::unique_ptr<VerbsChannel> ch(new VerbsChannel(api, options, host));
  CLB_CHECK(ch->open());
  *out = std::move(ch);
  return clbSuccess;
}

void VerbsChannel::account(int64_t delta, bool device) {
  registered_ += delta;
  if (hasHost_ && host_.account) host_.account(host_.ctx, device ? 0 : delta, device ? delta : 0);
}

clbResult_t VerbsChannel::newRegion(size_t bytes, int access, bool device, std::unique_ptr<Region>* out) {
  if (registered_.load() + (int64_t)bytes > o_.stagingCapBytes)
    return setError(clbOutOfMemory,
                    "rank %d: verbs: registering %zu more bytes would exceed the staging cap of %lld bytes (%lld "
                    "registered): raise stagingCapBytes (COLIBRI_STAGING_CAP_BYTES) or lower chunkBytes",
                    rank_, bytes, (long long)o_.stagingCapBytes, (long long)registered_.load());
  std::unique_ptr<Region> r(new Region);
  r->owner = this;
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  if (device) {
    int fd = -1;
    r->device = true;
    CLB_CHECK(o_.device->alloc(o_.device->self, rounded, &r->mem, &fd));
    r->bytes = rounded;
    account((int64_t)rounded, true);
    if (fd >= 0) {
      r->mr = api_->regDmabufMr ? api_->regDmabufMr(link_.pd(), 0, rounded, (uint64_t)(uintptr_t)r->mem, fd, access)
                                : nullptr;
      int e = api_->regDmabufMr ? errno : EOPNOTSUPP;
      close(fd);  // the registration holds the dma-buf
      if (!r->mr)
        return setSysError(e,
                           "verbs (%s): ibv_reg_dmabuf_mr of %zu bytes of GPU memory failed (GPUDirect RDMA "
                           "through dma-buf): run `colibri doctor`; COLIBRI_VERBS_GPU_MEMORY=host stages device "
                           "buffers through host memory instead",
                           api_->impl, rounded);
    } else {
      r->mr = api_->regMr(link_.pd(), r->mem, rounded, access);
      if (!r->mr)
        return setSysError(errno,
                           "verbs (%s): ibv_reg_mr of %zu bytes of GPU memory failed (GPUDirect RDMA "
                           "through nvidia-peermem): is the nvidia_peermem module loaded? (`colibri doctor`); "
                           "COLIBRI_VERBS_GPU_MEMORY=host stages device buffers through host memory instead",
                           api_->impl, rounded);
    }
    *out = std::move(r);
    return clbSuccess;
  }
  r->mem = aligned_alloc(4096, rounded);
  if (!r->mem) return setError(clbOutOfMemory, "verbs: cannot allocate %zu bytes of staging", rounded);
  memset(r->mem, 0, rounded);
  r->bytes = rounded;
  account((int64_t)rounded, false);
  r->mr = api_->regMr(link_.pd(), r->mem, rounded, access);
  if (!r->mr) {
    int e = errno;
    if (e == ENOMEM)
      return setSysError(e,
                         "verbs (%s): ibv_reg_mr of %zu bytes failed: the locked-memory limit RLIMIT_MEMLOCK "
                         "is too low. Fix: `ulimit -l unlimited` in the launching shell (as root for the hard "
                         "limit: `* - memlock unlimited` in /etc/security/limits.conf), systemd "
                         "LimitMEMLOCK=infinity, containers --ulimit memlock=-1",
                         api_->impl, rounded);
    return setSysError(e, "verbs (%s): ibv_reg_mr of %zu bytes failed", api_->impl, rounded);
  }
  *out = std::move(r);
  return clbSuccess;
}

clbResult_t VerbsChannel::open() {
  CLB_CHECK(link_.open());
  userRegs_.setPd(link_.pd());
  if (hasHost_ && host_.account) host_.account(host_.ctx, link_.queueBytes(), 0);
  CLB_CHECK(newRegion(o_.device ? kCtlBytesDevice : kCtlBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, false,
                      &ctl_));
  link_.setControlBlock((uint64_t)(uintptr_t)ctl_->mem, ctl_->mr->rkey, o_.device ? kVerbsConnDeviceSlots : 0);
  arrived_.assign(K_, Arrived{nullptr, 0, 0, 0});
  sendDoneQ_.assign(Q_, 0);
  recvSeqQ_.assign(Q_, 0);
  regionQ_.assign(Q_, nullptr);
  slotBytesQ_.assign(Q_, 0);
  ackedQ_.assign(Q_, 0);
  return clbSuccess;
}

clbResult_t VerbsChannel::checkDeviceMemory(size_t maxBytes) {
  if (!o_.device) return setError(clbInvalidUsage, "verbs: checkDeviceMemory on a channel of host memory");
  if (maxBytes == 0) {
    std::unique_ptr<Region> r;
    return newRegion(4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true, &r);
  }
  // What prepare(maxBytes) will hold: the send staging and the receive slots, both at once.
  const size_t need = K_ * (header() + (maxBytes + 4095) / 4096 * 4096);
  std::unique_ptr<Region> staging, slots;
  CLB_CHECK(newRegion(need, IBV_ACCESS_LOCAL_WRITE, true, &staging));
  return newRegion(need, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true, &slots);
}

VerbsChannel::~VerbsChannel() {
  link_.destroyQps();
  userRegs_.deregisterAll();  // after the queue pairs: nothing reads them any more
  staging_.reset();
  regions_.clear();
  ctl_.reset();
  if (hasHost_ && host_.account) host_.account(host_.ctx, -link_.queueBytes(), 0);
  // link_ (a member declared before the regions) then destroys the completion queue and lets go of
  // the protection domain and the device.
}

clbResult_t VerbsChannel::connect(const VerbsConnInfo& next, const VerbsConnInfo& prev) {
  return link_.connect(next, prev);
}

clbResult_t VerbsChannel::postRecvs(ibv_qp* qp, int n) {
  const clbResult_t rc = link_.postRecvs(qp, n);
  return rc == clbSuccess ? rc : fail(rc);
}

clbResult_t VerbsChannel::fail(clbResult_t rc) {
  if (failed_ == clbSuccess) {
    failed_ = rc;
    failMsg_ = lastError();
  }
  return rc;
}

clbResult_t VerbsChannel::sticky() const {
  if (failed_ != clbSuccess) return setError(failed_, "%s", failMsg_.c_str());
  if (!link_.connected()) return setError(clbInvalidUsage, "verbs: the channel is used before connect()");
  return clbSuccess;
}

clbResult_t VerbsChannel::post(ibv_qp* qp, ibv_send_wr* wr, const char* what) {
  int64_t start = nowMs();
  for (;;) {
    ibv_send_wr* bad = nullptr;
    int rc = api_->postSend(qp, wr, &bad);
    if (rc == 0) return clbSuccess;
    if (bad) wr = bad;                                     // those before it were posted (a chain): go on from there
    if (rc == ENOMEM && nowMs() - start < o_.timeoutMs) {  // send queue full: completions free it
      if (!inProgress_) CLB_CHECK(progress());
      std::this_thread::yield();
      continue;
    }
    return fail(setSysError(rc, "verbs: posting %s to rank %d failed (queue pair state or a full send queue)", what,
                            link_.peerOf(qp)));
  }
}

clbResult_t VerbsChannel::postZero(ibv_qp* qp, uint32_t immHost, uint64_t addr, uint32_t rkey, const char* what) {
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  uint32_t kind = immHost >> 30;
  wr.wr_id = (kind == kKindCredit ? kWrCredit : kWrAck) << 56;
  wr.num_sge = 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(immHost);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  return post(qp, &wr, what);
}

clbResult_t VerbsChannel::announce(std::unique_ptr<Region> slots, size_t slotBytes) {
  epoch_++;
  Announce* a = reinterpret_cast<Announce*>(static_cast<char*>(ctl_->mem) + kCtlOut);
  a->addr = slots ? (uint64_t)(uintptr_t)slots->mem : 0;
  a->slotBytes = slotBytes;
  a->rkey = slots ? slots->mr->rkey : 0;
  a->epoch = epoch_;
  pendingSlots_ = slots.get();
  pendingSlotBytes_ = slotBytes;
  if (slots) regions_.push_back(std::move(slots));
  announcePending_ = true;
  acksPending_ = Q_;
  ibv_sge sge{(uint64_t)(uintptr_t)a, (uint32_t)sizeof *a, ctl_->mr->lkey};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = kWrAnnounce << 56 | epoch_;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm(kKindAnnounce, epoch_));
  wr.wr.rdma.remote_addr = link_.prevInfo().ctlAddr;
  wr.wr.rdma.rkey = link_.prevInfo().ctlRkey;
  return post(link_.recvQp(0), &wr, "the receive-slot announcement");
}

void VerbsChannel::collectRetired() {
  regions_.erase(std::remove_if(regions_.begin(), regions_.end(),
                                [&](const std::unique_ptr<Region>& r) {
                                  return r.get() != curSlots_ && r.get() != pendingSlots_ && r->refs == 0 &&
                                         std::find(regionQ_.begin(), regionQ_.end(), r.get()) == regionQ_.end();
                                }),
                 regions_.end());
}

clbResult_t VerbsChannel::handleWc(const ibv_wc& wc) {
  uint32_t q = 0;  // which queue pair of its side
  bool onSendQp = false;
  for (uint32_t j = 0; j < Q_; j++) {
    if (link_.sendQp(j)->qp_num == wc.qp_num) onSendQp = true, q = j;
    if (link_.recvQp(j)->qp_num == wc.qp_num) q = j;
  }
  const int peer = onSendQp ? next_ : prev_;
  if (wc.status != IBV_WC_SUCCESS) {
    // The first real error explains the flushes that follow it; keep it.
    if (failed_ != clbSuccess && (failedStatus_ != IBV_WC_WR_FLUSH_ERR || wc.status == IBV_WC_WR_FLUSH_ERR))
      return sticky();
    const char* str = api_->wcStatusStr ? api_->wcStatusStr(wc.status) : "?";
    clbResult_t rc =
        (wc.status == IBV_WC_LOC_LEN_ERR || wc.status == IBV_WC_LOC_QP_OP_ERR || wc.status == IBV_WC_LOC_PROT_ERR)
            ? clbInternalError
            : clbRemoteError;
    setError(rc,
             "verbs (%s): %s on the link %s rank %d (rank %d's side) failed with %s (status %d, vendor error "
             "0x%x): %s",
             api_->impl, wrWhat(wc.wr_id), onSendQp ? "to" : "from", peer, rank_, str, (int)wc.status, wc.vendor_err,
             wcStatusHint(wc.status));
    failed_ = rc;
    failMsg_ = lastError();
    failedStatus_ = wc.status;
    return rc;
  }
  if (wc.opcode & IBV_WC_RECV) {
    CLB_CHECK(postRecvs(onSendQp ? link_.sendQp(q) : link_.recvQp(q), 1));
    if (!(wc.wc_flags & IBV_WC_WITH_IMM))
      return fail(setError(clbRemoteError,
                           "verbs: rank %d sent a message without immediate data to rank %d: not "
                           "a Colibri verbs peer of this version?",
                           peer, rank_));
    uint32_t v = ntohl(wc.imm_data), kind = v >> 30;
    if (onSendQp && kind == kKindCredit) {
      peerReleased_ += ((v & kLow30) - (uint32_t)peerReleased_) & kLow30;
      return clbSuccess;
    }
    if (onSendQp && kind == kKindAnnounce) {
      Announce a;
      memcpy(&a, ctl_->mem, sizeof a);
      if (a.epoch != (v & kLow30) || wc.byte_len != sizeof a)
        return fail(setError(clbRemoteError,
                             "verbs: slot announcement from rank %d is inconsistent (epoch %u, "
                             "immediate says %u, %u bytes)",
                             peer, a.epoch, v & kLow30, wc.byte_len));
      if (midMessage_) {  // a full send queue made post() poll between two parts: after the message
        deferredAnnounce_ = a;
        announceDeferred_ = true;
        return clbSuccess;
      }
      return applyAnnounce(a);
    }
    if (!onSendQp && kind == kKindNotice) {
      // Queue pair 0 keeps order: the notice is for the message whose parts come next on it.
      const uint64_t n = recvSeqQ_[0];
      if (q != 0 || (v & kLow30) != (n & kLow30))
        return fail(setError(clbRemoteError,
                             "verbs: rank %d sent a notice for message %u on queue pair %u; rank %d "
                             "expected message %llu next (protocol error)",
                             peer, v & kLow30, q, rank_, (unsigned long long)(n & kLow30)));
      memcpy(&noticeTag_, static_cast<const char*>(ctl_->mem) + kCtlTagIn + (size_t)(n % K_) * sizeof(MsgTag),
             sizeof noticeTag_);
      noticeSeq_ = n;
      noticed_ = true;
      return clbSuccess;
    }
    if (!onSendQp && kind == kKindAck) {
      if (!announcePending_ || (v & kLow30) != (epoch_ & kLow30) || ackedQ_[q] == epoch_)
        return fail(setError(clbRemoteError,
                             "verbs: rank %d acknowledged slot epoch %u on queue pair %u, rank %d "
                             "announced %u%s",
                             peer, v & kLow30, q, rank_, epoch_, ackedQ_[q] == epoch_ ? " (acknowledged twice)" : ""));
      ackedQ_[q] = epoch_;
      regionQ_[q] = pendingSlots_;
      slotBytesQ_[q] = pendingSlotBytes_;
      if (--acksPending_ > 0) return clbSuccess;
      curSlots_ = pendingSlots_;
      curSlotBytes_ = pendingSlotBytes_;
      pendingSlots_ = nullptr;
      announcePending_ = false;
      collectRetired();
      return clbSuccess;
    }
    if (!onSendQp && kind == kKindData) {
      // Part q of message n: queue pair q delivers its parts in order.
      const uint64_t n = recvSeqQ_[q];
      Region* reg = regionQ_[q];
      uint32_t slot = (v >> 24) & 63, seq = v & kLow24;
      if (seq != (n & kLow24) || slot != n % K_ || n - recvReleased_ >= K_ || !reg)
        return fail(setError(clbRemoteError,
                             "verbs: rank %d wrote message %u into slot %u (queue pair %u); rank %d "
                             "expected message %llu in slot %llu with %llu of %u slots free%s (protocol error)",
                             peer, seq, slot, q, rank_, (unsigned long long)(n & kLow24), (unsigned long long)(n % K_),
                             (unsigned long long)(K_ - (n - recvReleased_)), K_, reg ? "" : ", no slots announced"));
      const bool tagPart = q == 0;  // host mode: the tag starts part 0; device mode: part 0 is the tag
      const bool bad = o_.device ? (tagPart ? wc.byte_len != sizeof(MsgTag) : wc.byte_len > slotBytesQ_[q])
                                 : ((tagPart && wc.byte_len < sizeof(MsgTag)) || wc.byte_len > slotBytesQ_[q]);
      if (bad)
        return fail(setError(clbRemoteError, "verbs: rank %d wrote %u bytes into a %s of %zu bytes (queue pair %u)",
                             peer, wc.byte_len, o_.device && tagPart ? "tag slot" : "slot",
                             o_.device && tagPart ? sizeof(MsgTag) : slotBytesQ_[q], q));
      Arrived& a = arrived_[n % K_];
      if (a.parts == 0) {
        a = Arrived{reg, slot, 0, 0};
        reg->refs++;
      } else if (a.region != reg) {
        return fail(setError(clbRemoteError,
                             "verbs: the parts of message %llu from rank %d landed in different slot "
                             "regions (protocol error)",
                             (unsigned long long)n, peer));
      }
      a.bytes += wc.byte_len;
      a.parts++;
      recvSeqQ_[q]++;
      while (recvSeq_ - recvReleased_ < K_ && arrived_[recvSeq_ % K_].parts == Q_) recvSeq_++;
      return clbSuccess;
    }
    return fail(setError(clbRemoteError,
                         "verbs: unexpected immediate 0x%08x from rank %d on the link %s it (protocol "
                         "error: mixed versions?)",
                         v, peer, onSendQp ? "to" : "from"));
  }
  if ((wc.wr_id >> 56) == kWrData) {
    sendDoneQ_[q]++;
    sendDone_ = *std::min_element(sendDoneQ_.begin(), sendDoneQ_.end());
  }
  return clbSuccess;
}

// The receiver's new slots: every part posted from now on goes there. Never between two parts of
// one message (they would land in different regions): postParts / postDeviceSend defer it.
clbResult_t VerbsChannel::applyAnnounce(const Announce& a) {
  remoteAddr_ = a.addr;
  remoteRkey_ = a.rkey;
  remoteSlotBytes_ = a.slotBytes;
  remoteEpoch_ = a.epoch;
  // On every queue pair: data posted after its acknowledgement goes to the new slots.
  for (uint32_t j = 0; j < Q_; j++)
    CLB_CHECK(postZero(link_.sendQp(j), imm(kKindAck, a.epoch), link_.nextInfo().ctlAddr, link_.nextInfo().ctlRkey,
                       "the acknowledgement of new receive slots"));
  return clbSuccess;
}

clbResult_t VerbsChannel::endMessage() {
  midMessage_ = false;
  if (!announceDeferred_) return clbSuccess;
  announceDeferred_ = false;
  return applyAnnounce(deferredAnnounce_);
}

clbResult_t VerbsChannel::progress() {
  if (inProgress_) return clbSuccess;
  inProgress_ = true;
  clbResult_t rc = clbSuccess;
  for (;;) {
    ibv_wc wc[32];
    int n = api_->pollCq(link_.cq(), 32, wc);
    if (n < 0) {
      rc = fail(setError(clbSystemError,
                         "verbs: ibv_poll_cq failed (%d): the completion queue overran or the "
                         "device failed",
                         n));
      break;
    }
    for (int i = 0; i < n; i++) {
      clbResult_t r = handleWc(wc[i]);
      if (r != clbSuccess && rc == clbSuccess) rc = r;
    }
    if (n < 32) break;
  }
  inProgress_ = false;
  if (rc != clbSuccess || failed_ != clbSuccess) return sticky();
  return clbSuccess;
}

template <class Pred>
clbResult_t VerbsChannel::waitFor(Pred pred, const char* what, int peer) {
  const int64_t start = nowMs();
  for (uint64_t spins = 0;; spins++) {
    CLB_CHECK(progress());
    if (pred()) return clbSuccess;
    if (hasHost_) {
      if ((spins & 63) == 63) {
        clbResult_t rc = host_.checkWait(host_.ctx, start, what, peer);
        if (rc != clbSuccess) return fail(rc);
      }
    } else if (nowMs() - start > o_.timeoutMs) {
      return fail(setError(clbTimeout,
                           "rank %d waited %lld ms for %s (rank %d, over verbs/%s) without progress: "
                           "is rank %d alive and in the same collective? Raise the timeout (COLIBRI_TIMEOUT_MS) if "
                           "it is only slow",
                           rank_, (long long)(nowMs() - start), what, peer, api_->impl, peer));
    }
    if (spins < 256)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

clbResult_t VerbsChannel::prepare(size_t maxBytes) {
  CLB_CHECK(sticky());
  CLB_CHECK(progress());
  CLB_CHECK(userRegs_.beginCall());
  size_t need = header() + (maxBytes + 4095) / 4096 * 4096;
  if (stagingStride_ < need) {
    CLB_CHECK(waitFor([&] { return sendDone_ == sendSeq_; }, "the last ring messages' writes to complete", next_));
    staging_.reset();
    stagingStride_ = 0;
    CLB_CHECK(newRegion(K_ * need, IBV_ACCESS_LOCAL_WRITE, o_.device != nullptr, &staging_));
    staging_->stride = need;
    stagingStride_ = need;
  }
  size_t have = announcePending_ ? pendingSlotBytes_ : curSlotBytes_;
  if (have < need) {
    CLB_CHECK(waitFor([&] { return !announcePending_; }, "the previous rank to acknowledge receive slots", prev_));
    std::unique_ptr<Region> r;
    CLB_CHECK(newRegion(K_ * need, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, o_.device != nullptr, &r));
    r->stride = need;
    CLB_CHECK(announce(std::move(r), need));
  }
  return clbSuccess;
}

clbResult_t VerbsChannel::acquireSend(size_t bytes, void** buf) {
  CLB_CHECK(sticky());
  if (header() + bytes > stagingStride_)
    return setError(clbInternalError, "verbs: a message of %zu bytes, but prepare() staged %zu", bytes,
                    stagingStride_ > header() ? stagingStride_ - header() : 0);
  CLB_CHECK(waitFor([&] { return sendSeq_ - sendDone_ < K_; }, "a send staging slot (local write completions)", next_));
  *buf = staging_->slot((uint32_t)(sendSeq_ % K_)) + header();
  acquired_ = true;
  acquiredBytes_ = bytes;
  return clbSuccess;
}

clbResult_t VerbsChannel::postSend(const MsgTag& tag) {
  CLB_CHECK(sticky());
  if (!acquired_ || tag.bytes > acquiredBytes_)
    return setError(clbInternalError, "verbs: postSend of %llu bytes without a matching acquireSend (%zu)",
                    (unsigned long long)tag.bytes, acquired_ ? acquiredBytes_ : (size_t)0);
  const uint32_t slot = (uint32_t)(sendSeq_ % K_);
  if (o_.device) return postDeviceSend(tag, slot, staging_->slot(slot), staging_->mr->lkey);
  return postParts(tag, slot);
}

// Until the next rank has announced slots of at least `slotBytes` (announced at all, even for an
// empty payload: the tag still takes a slot) and a slot is free for the next message. While the
// slots it announced are smaller, the message's tag (at tagSrc, registered with tagLkey) goes
// ahead once as a notice, so that a receiver whose call prepared less sees the disagreement at
// once (noticeUnfit) instead of both waiting until the timeout.
clbResult_t VerbsChannel::waitForCredit(size_t slotBytes, const char* tagSrc, uint32_t tagLkey) {
  bool noticeSent = false;
  clbResult_t noticeRc = clbSuccess;
  CLB_CHECK(waitFor(
      [&] {
        const bool credit = sendSeq_ < peerReleased_ + K_;
        if (remoteSlotBytes_ > 0 && remoteSlotBytes_ >= slotBytes) return credit;
        if (noticeSent || remoteSlotBytes_ == 0 || !credit) return false;
        noticeSent = true;  // with a credit: tag slot n % K of the receiver is free (message n - K released)
        noticeRc = postNotice(tagSrc, tagLkey);
        return noticeRc != clbSuccess;
      },
      "a free receive slot (credit) from the next rank", next_));
  return noticeRc;
}

clbResult_t VerbsChannel::postNotice(const char* tagSrc, uint32_t tagLkey) {
  ibv_sge sge{(uint64_t)(uintptr_t)tagSrc, (uint32_t)sizeof(MsgTag), tagLkey};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = kWrNotice << 56 | (sendSeq_ & ((1ull << 56) - 1));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm(kKindNotice, (uint32_t)sendSeq_));
  wr.wr.rdma.remote_addr = link_.nextInfo().ctlAddr + kCtlTagIn + (sendSeq_ % K_) * sizeof(MsgTag);
  wr.wr.rdma.rkey = link_.nextInfo().ctlRkey;
  return post(link_.sendQp(0), &wr, "the notice of a message larger than the receive slots");
}

clbResult_t VerbsChannel::postParts(const MsgTag& tag, uint32_t slot) {
  char* s = staging_->slot(slot);
  memcpy(s, &tag, sizeof tag);
  const size_t len = sizeof(MsgTag) + tag.bytes;
  CLB_CHECK(waitForCredit(len, s, staging_->mr->lkey));
  midMessage_ = true;  // from here to the last part the slots stay where they are
  for (uint32_t j = 0; j < Q_; j++) {
    size_t off, n;
    partOf(len, Q_, j, &off, &n);
    ibv_sge sge{(uint64_t)(uintptr_t)(s + off), (uint32_t)n, staging_->mr->lkey};
    ibv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = kWrData << 56 | (sendSeq_ & ((1ull << 56) - 1));
    wr.sg_list = &sge;
    wr.num_sge = n ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(slot << 24 | (uint32_t)(sendSeq_ & kLow24));
    wr.wr.rdma.remote_addr = remoteAddr_ + (uint64_t)slot * remoteSlotBytes_ + off;
    wr.wr.rdma.rkey = remoteRkey_;
    CLB_CHECK(post(link_.sendQp(j), &wr, "the RDMA WRITE of a ring message"));
  }
  sendSeq_++;
  acquired_ = false;
  CLB_CHECK(endMessage());
  return progress();
}

// Device mode: the payload (GPU memory) into the receiver's slot, then the tag (host memory) into
// its tag slot with the immediate; one signaled completion covers both (RC completes in order).
clbResult_t VerbsChannel::postDeviceSend(const MsgTag& tag, uint32_t slot, const char* src, uint32_t lkey) {
  char* outTag = static_cast<char*>(ctl_->mem) + kCtlTagOut + (size_t)slot * sizeof(MsgTag);
  memcpy(outTag, &tag, sizeof tag);
  CLB_CHECK(waitForCredit(tag.bytes, outTag, ctl_->mr->lkey));
  midMessage_ = true;  // from here to the last part the slots stay where they are
  const uint64_t remote = remoteAddr_ + (uint64_t)slot * remoteSlotBytes_;
  for (uint32_t j = 0; j < Q_; j++) {
    size_t off, n;
    partOf(tag.bytes, Q_, j, &off, &n);
    ibv_sge data{(uint64_t)(uintptr_t)(src + off), (uint32_t)n, lkey};
    ibv_sge tagSge{(uint64_t)(uintptr_t)outTag, (uint32_t)sizeof(MsgTag), ctl_->mr->lkey};
    ibv_send_wr wr[2];
    memset(wr, 0, sizeof wr);
    // Queue pair 0: its payload part into the slot, then the tag with the immediate; the others:
    // their part with the immediate.
    ibv_send_wr& last = j == 0 ? wr[1] : wr[0];
    if (j == 0) {
      wr[0].wr_id = kWrPayload << 56 | (sendSeq_ & ((1ull << 56) - 1));
      wr[0].sg_list = &data;
      wr[0].num_sge = n ? 1 : 0;
      wr[0].opcode = IBV_WR_RDMA_WRITE;
      wr[0].wr.rdma.remote_addr = remote + off;
      wr[0].wr.rdma.rkey = remoteRkey_;
      wr[0].next = &wr[1];
      wr[1].sg_list = &tagSge;
      wr[1].num_sge = 1;
      wr[1].wr.rdma.remote_addr = link_.nextInfo().ctlAddr + kCtlTagIn + (uint64_t)slot * sizeof(MsgTag);
      wr[1].wr.rdma.rkey = link_.nextInfo().ctlRkey;
    } else {
      wr[0].sg_list = &data;
      wr[0].num_sge = n ? 1 : 0;
      wr[0].wr.rdma.remote_addr = remote + off;
      wr[0].wr.rdma.rkey = remoteRkey_;
    }
    last.wr_id = kWrData << 56 | (sendSeq_ & ((1ull << 56) - 1));
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.send_flags = IBV_SEND_SIGNALED;
    last.imm_data = htonl(slot << 24 | (uint32_t)(sendSeq_ & kLow24));
    CLB_CHECK(post(link_.sendQp(j), wr, "the RDMA WRITEs of a ring message"));
  }
  CLB_CHECK(endMessage());
  sendSeq_++;
  acquired_ = false;
  return progress();
}

clbResult_t VerbsChannel::sendFrom(const void* src, const MsgTag& tag, bool* sent) {
  *sent = false;
  CLB_CHECK(sticky());
  if (!o_.device || !o_.device->lookup || !o_.device->exportRange || tag.bytes == 0 || acquired_) return clbSuccess;
  if (tag.bytes > stagingStride_)
    return setError(clbInternalError, "verbs: a message of %llu bytes, but prepare() staged %zu",
                    (unsigned long long)tag.bytes, stagingStride_);
  ibv_mr* mr = nullptr;
  CLB_CHECK(userRegs_.find(src, tag.bytes, &mr));
  if (!mr) return clbSuccess;
  // The message still takes its turn: tag slot n % K, and the staging slot stays unused.
  CLB_CHECK(waitFor([&] { return sendSeq_ - sendDone_ < K_; }, "a send slot (local write completions)", next_));
  CLB_CHECK(postDeviceSend(tag, (uint32_t)(sendSeq_ % K_), static_cast<const char*>(src), mr->lkey));
  *sent = true;
  return clbSuccess;
}

clbResult_t VerbsChannel::waitRecv(const MsgTag& expect, const void** buf) {
  MsgTag got;
  CLB_CHECK(waitRecvTag(&got, buf));
  clbResult_t rc = checkTag(got, expect, prev_, rank_);
  if (rc != clbSuccess) holding_ = false;          // as before: a mismatch holds nothing
  if (rc == clbSuccess && !*buf) return sticky();  // a notice never matches (see takeNotice)
  return rc;
}

clbResult_t VerbsChannel::waitRecvTag(MsgTag* out, const void** buf) {
  CLB_CHECK(sticky());
  CLB_CHECK(waitFor([&] { return recvSeq_ > recvReleased_ || noticeUnfit(); }, "a ring message from the previous rank",
                    prev_));
  if (recvSeq_ > recvReleased_) return takeArrived(out, buf);
  return takeNotice(out, buf);
}

// The previous rank's next message is larger than the slots this rank announced last, which its
// present call prepared (a message is awaited only inside a call, after its prepare): the ranks
// disagree on the call. A notice the present slots hold (they grew after the sender looked) is
// no disagreement: the message follows.
bool VerbsChannel::noticeUnfit() const {
  return noticed_ && noticeSeq_ == recvReleased_ &&
         header() + noticeTag_.bytes > (announcePending_ ? pendingSlotBytes_ : curSlotBytes_);
}

// The noticed tag, for the caller to compare with what it expects (which fails: it expects no more
// than its call prepared for), with no message (*buf NULL, nothing held). The channel fails: the
// sender waits for slots that never come, and its ring is out of step.
clbResult_t VerbsChannel::takeNotice(MsgTag* out, const void** buf) {
  *out = noticeTag_;
  *buf = nullptr;
  const size_t slotBytes = announcePending_ ? pendingSlotBytes_ : curSlotBytes_;
  setError(clbRemoteError,
           "verbs: rank %d's message %llu is %llu bytes, more than the %zu bytes of the receive "
           "slots that rank %d's call prepared: the ranks disagree on the call",
           prev_, (unsigned long long)noticeTag_.index, (unsigned long long)noticeTag_.bytes,
           slotBytes > header() ? slotBytes - header() : (size_t)0, rank_);
  failed_ = clbRemoteError;
  failMsg_ = lastError();
  return clbSuccess;
}

clbResult_t VerbsChannel::takeArrived(MsgTag* out, const void** buf) {
  const Arrived& a = arrived_[recvReleased_ % K_];
  const char* s = a.region->slot(a.slot);
  MsgTag& got = *out;
  if (o_.device) {
    memcpy(&got, static_cast<const char*>(ctl_->mem) + kCtlTagIn + (size_t)a.slot * sizeof(MsgTag), sizeof got);
    size_t off0, len0;  // queue pair 0's payload part came without an immediate of its own
    partOf(got.bytes, Q_, 0, &off0, &len0);
    if (got.bytes > a.region->stride || a.bytes != sizeof(MsgTag) + got.bytes - len0)
      return fail(setError(clbRemoteError,
                           "verbs: rank %d sent a message of %llu bytes (%u bytes in its parts) into "
                           "a slot of %zu bytes",
                           prev_, (unsigned long long)got.bytes, a.bytes, a.region->stride));
    *buf = s;
    holding_ = true;
    return clbSuccess;
  }
  memcpy(&got, s, sizeof got);
  if (a.bytes != sizeof(MsgTag) + got.bytes)
    return fail(setError(clbRemoteError, "verbs: rank %d wrote %u bytes for a message whose tag says %llu + %zu", prev_,
                         a.bytes, (unsigned long long)got.bytes, sizeof(MsgTag)));
  *buf = s + sizeof(MsgTag);
  holding_ = true;
  return clbSuccess;
}

clbResult_t VerbsChannel::releaseRecv() {
  // A point-to-point channel that failed still lets go of what it delivered (tryRecvTag), without
  // a credit: the peer is gone or the link is broken, and the next try says so.
  if (o_.peer < 0 || !holding_) CLB_CHECK(sticky());
  if (!holding_) return setError(clbInternalError, "verbs: releaseRecv without waitRecv");
  holding_ = false;
  Arrived& a = arrived_[recvReleased_ % K_];
  a.region->refs--;
  a.region = nullptr;
  a.parts = 0;
  recvReleased_++;
  collectRetired();
  if (failed_ != clbSuccess) return clbSuccess;  // a point-to-point channel's (above): no credit
  CLB_CHECK(postZero(link_.recvQp(0), imm(kKindCredit, (uint32_t)recvReleased_), link_.prevInfo().ctlAddr,
                     link_.prevInfo().ctlRkey, "a credit"));
  return progress();
}

clbResult_t VerbsChannel::trySend(size_t bytes, void** buf) {
  *buf = nullptr;
  CLB_CHECK(sticky());
  if (header() + bytes > stagingStride_)
    return setError(clbInternalError, "verbs: a message of %zu bytes, but prepare() staged %zu", bytes,
                    stagingStride_ > header() ? stagingStride_ - header() : 0);
  CLB_CHECK(progress());
  const size_t len = header() + bytes;
  if (sendSeq_ - sendDone_ >= K_ || remoteSlotBytes_ == 0 || remoteSlotBytes_ < len || sendSeq_ >= peerReleased_ + K_)
    return clbSuccess;
  *buf = staging_->slot((uint32_t)(sendSeq_ % K_)) + header();
  acquired_ = true;
  acquiredBytes_ = bytes;
  return clbSuccess;
}

clbResult_t VerbsChannel::tryRecvTag(MsgTag* got, const void** buf) {
  *buf = nullptr;
  // What arrived whole is delivered even after the channel failed (a peer that destroyed its side
  // once its last messages were acknowledged turns this rank's next credit into an error).
  if (recvSeq_ == recvReleased_) CLB_CHECK(progress());
  if (recvSeq_ == recvReleased_) return sticky();
  if (holding_) return setError(clbInternalError, "verbs: tryRecv while holding a message");
  return takeArrived(got, buf);
}

clbResult_t VerbsChannel::finish() {
  CLB_CHECK(sticky());
  return waitFor([&] { return sendDone_ == sendSeq_; }, "the next rank's NIC to acknowledge ring messages", next_);
}

clbResult_t VerbsChannel::trim() {
  CLB_CHECK(finish());
  CLB_CHECK(userRegs_.clear());
  staging_.reset();
  stagingStride_ = 0;
  // Receive slots: only when nothing is buffered and no announcement is in flight; they are
  // deregistered when the sender acknowledges (in this or a later call).
  if (recvSeq_ == recvReleased_ && !holding_ && !announcePending_ && curSlots_) CLB_CHECK(announce(nullptr, 0));
  CLB_CHECK(progress());
  collectRetired();
  return clbSuccess;
}

}  // namespace verbs
}  // namespace clb
