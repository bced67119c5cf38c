// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs ring channel's receive side: slot announcements, arrived messages, notices, releases (the protocol is
// described in verbs_channel.h).
#include <arpa/inet.h>

#include <cstring>

#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/verbs_channel_impl.h"

namespace clb {
namespace verbs {

clbResult_t VerbsChannel::announce(std::unique_ptr<Region> slots, size_t slotBytes) {
  rx_.epoch++;
  Announce* a = reinterpret_cast<Announce*>(static_cast<char*>(ctl_->mem) + kCtlOut);
  a->addr = slots ? (uint64_t)(uintptr_t)slots->mem : 0;
  a->slotBytes = slotBytes;
  a->rkey = slots ? slots->mr->rkey : 0;
  a->epoch = rx_.epoch;
  rx_.pending = slots.get();
  rx_.pendingSlotBytes = slotBytes;
  if (slots) rx_.regions.push_back(std::move(slots));
  rx_.announcePending = true;
  rx_.acksPending = Q_;
  ibv_sge sge{(uint64_t)(uintptr_t)a, (uint32_t)sizeof *a, ctl_->mr->lkey};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = kWrAnnounce << 56 | rx_.epoch;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm(kKindAnnounce, rx_.epoch));
  wr.wr.rdma.remote_addr = link_.prevInfo().ctlAddr;
  wr.wr.rdma.rkey = link_.prevInfo().ctlRkey;
  return post(link_.recvQp(0), &wr, "the receive-slot announcement");
}

void VerbsChannel::collectRetired() {
  rx_.regions.erase(std::remove_if(rx_.regions.begin(), rx_.regions.end(),
                                   [&](const std::unique_ptr<Region>& r) {
                                     return r.get() != rx_.cur && r.get() != rx_.pending && r->refs == 0 &&
                                            std::find(rx_.regionQ.begin(), rx_.regionQ.end(), r.get()) ==
                                                rx_.regionQ.end();
                                   }),
                    rx_.regions.end());
}

clbResult_t VerbsChannel::waitRecv(const MsgTag& expect, const void** buf) {
  MsgTag got;
  CLB_CHECK(waitRecvTag(&got, buf));
  clbResult_t rc = checkTag(got, expect, prev_, rank_);
  if (rc != clbSuccess) rx_.holding = false;       // as before: a mismatch holds nothing
  if (rc == clbSuccess && !*buf) return sticky();  // a notice never matches (see takeNotice)
  return rc;
}

clbResult_t VerbsChannel::waitRecvTag(MsgTag* out, const void** buf) {
  CLB_CHECK(sticky());
  CLB_CHECK(
      waitFor([&] { return rx_.seq > rx_.released || noticeUnfit(); }, "a ring message from the previous rank", prev_));
  if (rx_.seq > rx_.released) return takeArrived(out, buf);
  return takeNotice(out, buf);
}

// The previous rank's next message is larger than the slots this rank announced last, which its
// present call prepared (a message is awaited only inside a call, after its prepare): the ranks
// disagree on the call. A notice the present slots hold (they grew after the sender looked) is
// no disagreement: the message follows.
bool VerbsChannel::noticeUnfit() const {
  return rx_.noticed && rx_.noticeSeq == rx_.released &&
         header() + rx_.noticeTag.bytes > (rx_.announcePending ? rx_.pendingSlotBytes : rx_.curSlotBytes);
}

// The noticed tag, for the caller to compare with what it expects (which fails: it expects no more
// than its call prepared for), with no message (*buf NULL, nothing held). The channel fails: the
// sender waits for slots that never come, and its ring is out of step.
clbResult_t VerbsChannel::takeNotice(MsgTag* out, const void** buf) {
  *out = rx_.noticeTag;
  *buf = nullptr;
  const size_t slotBytes = rx_.announcePending ? rx_.pendingSlotBytes : rx_.curSlotBytes;
  setError(clbRemoteError,
           "verbs: rank %d's message %llu is %llu bytes, more than the %zu bytes of the receive "
           "slots that rank %d's call prepared: the ranks disagree on the call",
           prev_, (unsigned long long)rx_.noticeTag.index, (unsigned long long)rx_.noticeTag.bytes,
           slotBytes > header() ? slotBytes - header() : (size_t)0, rank_);
  failed_ = clbRemoteError;
  failMsg_ = lastError();
  return clbSuccess;
}

clbResult_t VerbsChannel::takeArrived(MsgTag* out, const void** buf) {
  const Arrived& a = rx_.arrived[rx_.released % K_];
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
    rx_.holding = true;
    return clbSuccess;
  }
  memcpy(&got, s, sizeof got);
  if (a.bytes != sizeof(MsgTag) + got.bytes)
    return fail(setError(clbRemoteError, "verbs: rank %d wrote %u bytes for a message whose tag says %llu + %zu", prev_,
                         a.bytes, (unsigned long long)got.bytes, sizeof(MsgTag)));
  *buf = s + sizeof(MsgTag);
  rx_.holding = true;
  return clbSuccess;
}

clbResult_t VerbsChannel::releaseRecv() {
  // A point-to-point channel that failed still lets go of what it delivered (tryRecvTag), without
  // a credit: the peer is gone or the link is broken, and the next try says so.
  if (o_.peer < 0 || !rx_.holding) CLB_CHECK(sticky());
  if (!rx_.holding) return setError(clbInternalError, "verbs: releaseRecv without waitRecv");
  rx_.holding = false;
  Arrived& a = rx_.arrived[rx_.released % K_];
  a.region->refs--;
  a.region = nullptr;
  a.parts = 0;
  rx_.released++;
  collectRetired();
  if (failed_ != clbSuccess) return clbSuccess;  // a point-to-point channel's (above): no credit
  CLB_CHECK(postZero(link_.recvQp(0), imm(kKindCredit, (uint32_t)rx_.released), link_.prevInfo().ctlAddr,
                     link_.prevInfo().ctlRkey, "a credit"));
  return progress();
}

clbResult_t VerbsChannel::tryRecvTag(MsgTag* got, const void** buf) {
  *buf = nullptr;
  // What arrived whole is delivered even after the channel failed (a peer that destroyed its side
  // once its last messages were acknowledged turns this rank's next credit into an error).
  if (rx_.seq == rx_.released) CLB_CHECK(progress());
  if (rx_.seq == rx_.released) return sticky();
  if (rx_.holding) return setError(clbInternalError, "verbs: tryRecv while holding a message");
  return takeArrived(got, buf);
}

}  // namespace verbs
}  // namespace clb
