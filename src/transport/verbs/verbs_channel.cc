// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs ring channel; the protocol is described in verbs_channel.h.
#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/verbs_channel_impl.h"

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

}  // namespace

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
  rx_.arrived.assign(K_, Arrived{nullptr, 0, 0, 0});
  tx_.doneQ.assign(Q_, 0);
  rx_.seqQ.assign(Q_, 0);
  rx_.regionQ.assign(Q_, nullptr);
  rx_.slotBytesQ.assign(Q_, 0);
  rx_.ackedQ.assign(Q_, 0);
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
  tx_.staging.reset();
  rx_.regions.clear();
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
      tx_.peerReleased += ((v & kLow30) - (uint32_t)tx_.peerReleased) & kLow30;
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
      if (tx_.midMessage) {  // a full send queue made post() poll between two parts: after the message
        tx_.deferredAnnounce = a;
        tx_.announceDeferred = true;
        return clbSuccess;
      }
      return applyAnnounce(a);
    }
    if (!onSendQp && kind == kKindNotice) {
      // Queue pair 0 keeps order: the notice is for the message whose parts come next on it.
      const uint64_t n = rx_.seqQ[0];
      if (q != 0 || (v & kLow30) != (n & kLow30))
        return fail(setError(clbRemoteError,
                             "verbs: rank %d sent a notice for message %u on queue pair %u; rank %d "
                             "expected message %llu next (protocol error)",
                             peer, v & kLow30, q, rank_, (unsigned long long)(n & kLow30)));
      memcpy(&rx_.noticeTag, static_cast<const char*>(ctl_->mem) + kCtlTagIn + (size_t)(n % K_) * sizeof(MsgTag),
             sizeof rx_.noticeTag);
      rx_.noticeSeq = n;
      rx_.noticed = true;
      return clbSuccess;
    }
    if (!onSendQp && kind == kKindAck) {
      if (!rx_.announcePending || (v & kLow30) != (rx_.epoch & kLow30) || rx_.ackedQ[q] == rx_.epoch)
        return fail(setError(clbRemoteError,
                             "verbs: rank %d acknowledged slot epoch %u on queue pair %u, rank %d "
                             "announced %u%s",
                             peer, v & kLow30, q, rank_, rx_.epoch,
                             rx_.ackedQ[q] == rx_.epoch ? " (acknowledged twice)" : ""));
      rx_.ackedQ[q] = rx_.epoch;
      rx_.regionQ[q] = rx_.pending;
      rx_.slotBytesQ[q] = rx_.pendingSlotBytes;
      if (--rx_.acksPending > 0) return clbSuccess;
      rx_.cur = rx_.pending;
      rx_.curSlotBytes = rx_.pendingSlotBytes;
      rx_.pending = nullptr;
      rx_.announcePending = false;
      collectRetired();
      return clbSuccess;
    }
    if (!onSendQp && kind == kKindData) {
      // Part q of message n: queue pair q delivers its parts in order.
      const uint64_t n = rx_.seqQ[q];
      Region* reg = rx_.regionQ[q];
      uint32_t slot = (v >> 24) & 63, seq = v & kLow24;
      if (seq != (n & kLow24) || slot != n % K_ || n - rx_.released >= K_ || !reg)
        return fail(setError(clbRemoteError,
                             "verbs: rank %d wrote message %u into slot %u (queue pair %u); rank %d "
                             "expected message %llu in slot %llu with %llu of %u slots free%s (protocol error)",
                             peer, seq, slot, q, rank_, (unsigned long long)(n & kLow24), (unsigned long long)(n % K_),
                             (unsigned long long)(K_ - (n - rx_.released)), K_, reg ? "" : ", no slots announced"));
      const bool tagPart = q == 0;  // host mode: the tag starts part 0; device mode: part 0 is the tag
      const bool bad = o_.device ? (tagPart ? wc.byte_len != sizeof(MsgTag) : wc.byte_len > rx_.slotBytesQ[q])
                                 : ((tagPart && wc.byte_len < sizeof(MsgTag)) || wc.byte_len > rx_.slotBytesQ[q]);
      if (bad)
        return fail(setError(clbRemoteError, "verbs: rank %d wrote %u bytes into a %s of %zu bytes (queue pair %u)",
                             peer, wc.byte_len, o_.device && tagPart ? "tag slot" : "slot",
                             o_.device && tagPart ? sizeof(MsgTag) : rx_.slotBytesQ[q], q));
      Arrived& a = rx_.arrived[n % K_];
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
      rx_.seqQ[q]++;
      while (rx_.seq - rx_.released < K_ && rx_.arrived[rx_.seq % K_].parts == Q_) rx_.seq++;
      return clbSuccess;
    }
    return fail(setError(clbRemoteError,
                         "verbs: unexpected immediate 0x%08x from rank %d on the link %s it (protocol "
                         "error: mixed versions?)",
                         v, peer, onSendQp ? "to" : "from"));
  }
  if ((wc.wr_id >> 56) == kWrData) {
    tx_.doneQ[q]++;
    tx_.done = *std::min_element(tx_.doneQ.begin(), tx_.doneQ.end());
  }
  return clbSuccess;
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

clbResult_t VerbsChannel::prepare(size_t maxBytes) {
  CLB_CHECK(sticky());
  CLB_CHECK(progress());
  CLB_CHECK(userRegs_.beginCall());
  size_t need = header() + (maxBytes + 4095) / 4096 * 4096;
  if (tx_.stride < need) {
    CLB_CHECK(waitFor([&] { return tx_.done == tx_.seq; }, "the last ring messages' writes to complete", next_));
    tx_.staging.reset();
    tx_.stride = 0;
    CLB_CHECK(newRegion(K_ * need, IBV_ACCESS_LOCAL_WRITE, o_.device != nullptr, &tx_.staging));
    tx_.staging->stride = need;
    tx_.stride = need;
  }
  size_t have = rx_.announcePending ? rx_.pendingSlotBytes : rx_.curSlotBytes;
  if (have < need) {
    CLB_CHECK(waitFor([&] { return !rx_.announcePending; }, "the previous rank to acknowledge receive slots", prev_));
    std::unique_ptr<Region> r;
    CLB_CHECK(newRegion(K_ * need, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, o_.device != nullptr, &r));
    r->stride = need;
    CLB_CHECK(announce(std::move(r), need));
  }
  return clbSuccess;
}

clbResult_t VerbsChannel::finish() {
  CLB_CHECK(sticky());
  return waitFor([&] { return tx_.done == tx_.seq; }, "the next rank's NIC to acknowledge ring messages", next_);
}

clbResult_t VerbsChannel::trim() {
  CLB_CHECK(finish());
  CLB_CHECK(userRegs_.clear());
  tx_.staging.reset();
  tx_.stride = 0;
  // Receive slots: only when nothing is buffered and no announcement is in flight; they are
  // deregistered when the sender acknowledges (in this or a later call).
  if (rx_.seq == rx_.released && !rx_.holding && !rx_.announcePending && rx_.cur) CLB_CHECK(announce(nullptr, 0));
  CLB_CHECK(progress());
  collectRetired();
  return clbSuccess;
}

}  // namespace verbs
}  // namespace clb
