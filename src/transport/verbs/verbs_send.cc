// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs ring channel's send side: staging, credits, parts on the queue pairs, notices, device-mode payloads
// (the protocol is described in verbs_channel.h).
#include <arpa/inet.h>

#include <cstring>

#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/verbs_channel_impl.h"

namespace clb {
namespace verbs {

// The receiver's new slots: every part posted from now on goes there. Never between two parts of
// one message (they would land in different regions): postParts / postDeviceSend defer it.
clbResult_t VerbsChannel::applyAnnounce(const Announce& a) {
  tx_.remoteAddr = a.addr;
  tx_.remoteRkey = a.rkey;
  tx_.remoteSlotBytes = a.slotBytes;
  tx_.remoteEpoch = a.epoch;
  // On every queue pair: data posted after its acknowledgement goes to the new slots.
  for (uint32_t j = 0; j < Q_; j++)
    CLB_CHECK(postZero(link_.sendQp(j), imm(kKindAck, a.epoch), link_.nextInfo().ctlAddr, link_.nextInfo().ctlRkey,
                       "the acknowledgement of new receive slots"));
  return clbSuccess;
}

clbResult_t VerbsChannel::endMessage() {
  tx_.midMessage = false;
  if (!tx_.announceDeferred) return clbSuccess;
  tx_.announceDeferred = false;
  return applyAnnounce(tx_.deferredAnnounce);
}

clbResult_t VerbsChannel::acquireSend(size_t bytes, void** buf) {
  CLB_CHECK(sticky());
  if (header() + bytes > tx_.stride)
    return setError(clbInternalError, "verbs: a message of %zu bytes, but prepare() staged %zu", bytes,
                    tx_.stride > header() ? tx_.stride - header() : 0);
  CLB_CHECK(waitFor([&] { return tx_.seq - tx_.done < K_; }, "a send staging slot (local write completions)", next_));
  *buf = tx_.staging->slot((uint32_t)(tx_.seq % K_)) + header();
  tx_.acquired = true;
  tx_.acquiredBytes = bytes;
  return clbSuccess;
}

clbResult_t VerbsChannel::postSend(const MsgTag& tag) {
  CLB_CHECK(sticky());
  if (!tx_.acquired || tag.bytes > tx_.acquiredBytes)
    return setError(clbInternalError, "verbs: postSend of %llu bytes without a matching acquireSend (%zu)",
                    (unsigned long long)tag.bytes, tx_.acquired ? tx_.acquiredBytes : (size_t)0);
  const uint32_t slot = (uint32_t)(tx_.seq % K_);
  if (o_.device) return postDeviceSend(tag, slot, tx_.staging->slot(slot), tx_.staging->mr->lkey);
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
        const bool credit = tx_.seq < tx_.peerReleased + K_;
        if (tx_.remoteSlotBytes > 0 && tx_.remoteSlotBytes >= slotBytes) return credit;
        if (noticeSent || tx_.remoteSlotBytes == 0 || !credit) return false;
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
  wr.wr_id = kWrNotice << 56 | (tx_.seq & ((1ull << 56) - 1));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm(kKindNotice, (uint32_t)tx_.seq));
  wr.wr.rdma.remote_addr = link_.nextInfo().ctlAddr + kCtlTagIn + (tx_.seq % K_) * sizeof(MsgTag);
  wr.wr.rdma.rkey = link_.nextInfo().ctlRkey;
  return post(link_.sendQp(0), &wr, "the notice of a message larger than the receive slots");
}

clbResult_t VerbsChannel::postParts(const MsgTag& tag, uint32_t slot) {
  char* s = tx_.staging->slot(slot);
  memcpy(s, &tag, sizeof tag);
  const size_t len = sizeof(MsgTag) + tag.bytes;
  CLB_CHECK(waitForCredit(len, s, tx_.staging->mr->lkey));
  tx_.midMessage = true;  // from here to the last part the slots stay where they are
  for (uint32_t j = 0; j < Q_; j++) {
    size_t off, n;
    partOf(len, Q_, j, &off, &n);
    ibv_sge sge{(uint64_t)(uintptr_t)(s + off), (uint32_t)n, tx_.staging->mr->lkey};
    ibv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = kWrData << 56 | (tx_.seq & ((1ull << 56) - 1));
    wr.sg_list = &sge;
    wr.num_sge = n ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(slot << 24 | (uint32_t)(tx_.seq & kLow24));
    wr.wr.rdma.remote_addr = tx_.remoteAddr + (uint64_t)slot * tx_.remoteSlotBytes + off;
    wr.wr.rdma.rkey = tx_.remoteRkey;
    CLB_CHECK(post(link_.sendQp(j), &wr, "the RDMA WRITE of a ring message"));
  }
  tx_.seq++;
  tx_.acquired = false;
  CLB_CHECK(endMessage());
  return progress();
}

// Device mode: the payload (GPU memory) into the receiver's slot, then the tag (host memory) into
// its tag slot with the immediate; one signaled completion covers both (RC completes in order).
clbResult_t VerbsChannel::postDeviceSend(const MsgTag& tag, uint32_t slot, const char* src, uint32_t lkey) {
  char* outTag = static_cast<char*>(ctl_->mem) + kCtlTagOut + (size_t)slot * sizeof(MsgTag);
  memcpy(outTag, &tag, sizeof tag);
  CLB_CHECK(waitForCredit(tag.bytes, outTag, ctl_->mr->lkey));
  tx_.midMessage = true;  // from here to the last part the slots stay where they are
  const uint64_t remote = tx_.remoteAddr + (uint64_t)slot * tx_.remoteSlotBytes;
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
      wr[0].wr_id = kWrPayload << 56 | (tx_.seq & ((1ull << 56) - 1));
      wr[0].sg_list = &data;
      wr[0].num_sge = n ? 1 : 0;
      wr[0].opcode = IBV_WR_RDMA_WRITE;
      wr[0].wr.rdma.remote_addr = remote + off;
      wr[0].wr.rdma.rkey = tx_.remoteRkey;
      wr[0].next = &wr[1];
      wr[1].sg_list = &tagSge;
      wr[1].num_sge = 1;
      wr[1].wr.rdma.remote_addr = link_.nextInfo().ctlAddr + kCtlTagIn + (uint64_t)slot * sizeof(MsgTag);
      wr[1].wr.rdma.rkey = link_.nextInfo().ctlRkey;
    } else {
      wr[0].sg_list = &data;
      wr[0].num_sge = n ? 1 : 0;
      wr[0].wr.rdma.remote_addr = remote + off;
      wr[0].wr.rdma.rkey = tx_.remoteRkey;
    }
    last.wr_id = kWrData << 56 | (tx_.seq & ((1ull << 56) - 1));
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.send_flags = IBV_SEND_SIGNALED;
    last.imm_data = htonl(slot << 24 | (uint32_t)(tx_.seq & kLow24));
    CLB_CHECK(post(link_.sendQp(j), wr, "the RDMA WRITEs of a ring message"));
  }
  CLB_CHECK(endMessage());
  tx_.seq++;
  tx_.acquired = false;
  return progress();
}

clbResult_t VerbsChannel::sendFrom(const void* src, const MsgTag& tag, bool* sent) {
  *sent = false;
  CLB_CHECK(sticky());
  if (!o_.device || !o_.device->lookup || !o_.device->exportRange || tag.bytes == 0 || tx_.acquired) return clbSuccess;
  if (tag.bytes > tx_.stride)
    return setError(clbInternalError, "verbs: a message of %llu bytes, but prepare() staged %zu",
                    (unsigned long long)tag.bytes, tx_.stride);
  ibv_mr* mr = nullptr;
  CLB_CHECK(userRegs_.find(src, tag.bytes, &mr));
  if (!mr) return clbSuccess;
  // The message still takes its turn: tag slot n % K, and the staging slot stays unused.
  CLB_CHECK(waitFor([&] { return tx_.seq - tx_.done < K_; }, "a send slot (local write completions)", next_));
  CLB_CHECK(postDeviceSend(tag, (uint32_t)(tx_.seq % K_), static_cast<const char*>(src), mr->lkey));
  *sent = true;
  return clbSuccess;
}

clbResult_t VerbsChannel::trySend(size_t bytes, void** buf) {
  *buf = nullptr;
  CLB_CHECK(sticky());
  if (header() + bytes > tx_.stride)
    return setError(clbInternalError, "verbs: a message of %zu bytes, but prepare() staged %zu", bytes,
                    tx_.stride > header() ? tx_.stride - header() : 0);
  CLB_CHECK(progress());
  const size_t len = header() + bytes;
  if (tx_.seq - tx_.done >= K_ || tx_.remoteSlotBytes == 0 || tx_.remoteSlotBytes < len ||
      tx_.seq >= tx_.peerReleased + K_)
    return clbSuccess;
  *buf = tx_.staging->slot((uint32_t)(tx_.seq % K_)) + header();
  tx_.acquired = true;
  tx_.acquiredBytes = bytes;
  return clbSuccess;
}

}  // namespace verbs
}  // namespace clb
