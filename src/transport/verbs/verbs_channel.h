// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs ring channel: a RingChannel over RC queue pairs, driven through a VerbsApi table
// (libibverbs.so.1, or the tests' stand-in of it). One VerbsChannel is one rank's place in the ring: queue pairs
// that send to the next rank ("send side") and queue pairs that receive from the previous rank
// ("receive side"), which its VerbsLink (verbs_link.h) opens and connects; the channel is the
// message protocol over them (below). Its code is in three files by job: verbs_channel.cc (set-up,
// completions, waits), verbs_send.cc (the send side, state in SendState) and verbs_recv.cc (the
// receive side, state in RecvState).
//
// Construction (verbs_connect.cc, for the plugin's connect: the verbs transport's channel and,
// in device mode, GPUDirect's):
//   VerbsChannel::create(api, options, comm-or-null, &ch);
//   give ch->sendSideInfo() to the next rank and ch->recvSideInfo() to the previous rank (any
//   transport: bootstrap, a socket, memory); then
//   ch->connect(nextRanksRecvSideInfo, prevRanksSendSideInfo);   // RESET→INIT→RTR→RTS
//
// Protocol (receiver-owned slots, sender-held credits):
//   - The receiver owns a ring of K slots (K = options.slots, equal on both ends of a link) in
//     memory registered on demand: prepare(maxBytes) registers K slots of
//     sizeof(MsgTag) + maxBytes (rounded up to 4 KiB) when the present ones are smaller, and
//     announces them to the sender: an RDMA WRITE_WITH_IMM of {address, rkey, slot bytes, epoch}
//     into the sender's control block. The sender answers with a zero-length WRITE_WITH_IMM
//     "epoch ack"; every data write after it goes to the new slots (RC ordering), so the receiver
//     frees the old ones once the messages in them are released. trim() announces "no slots".
//   - Message number n goes to slot n % K as one RDMA WRITE_WITH_IMM of [MsgTag | payload] from
//     the sender's registered staging slot n % K. The sender may write message n only when
//     n < released + K, where `released` is the receiver's count of releaseRecv calls.
//   - A message larger than the slots the sender knows of waits for larger ones (the receiver's
//     call announces them in its prepare). Meanwhile its MsgTag goes ahead once as a "notice", an
//     RDMA WRITE_WITH_IMM into tag slot n % K of the receiver's control block, posted on queue
//     pair 0 once message n has a credit (so message n - K, whose tag slot it is, was released).
//     A receiver waiting for message n whose last announced slots are smaller than the notice
//     says returns the noticed tag as message n's (no payload, *buf NULL) and fails the channel:
//     its call prepared less than the sender's, so the ranks disagree on the call, and the
//     caller's tag check names both descriptions at once instead of both ranks waiting until the
//     timeout. A notice the receiver's present slots hold (they grew after the sender looked) is
//     dropped: the message follows.
//   - releaseRecv returns a credit: a zero-length WRITE_WITH_IMM whose immediate carries the
//     cumulative release count (low 30 bits), so lost coalescing never loses credits.
//   - Immediate (32 bits, network order on the wire): bits 31..30 kind (0 data, 1 credit,
//     2 announce, 3 epoch ack); data: bits 29..24 slot index, bits 23..0 message number mod 2^24
//     (both checked by the receiver, then the full MsgTag in the slot against the expectation);
//     credit: cumulative releases mod 2^30; announce / ack: epoch mod 2^30. Toward the receiver
//     kind 1 (credits only travel the other way) is a notice: message number mod 2^30.
//   - Receives (no scatter list) stay posted on both queue pairs at all times.
//   - Device mode (options.device set: GPUDirect RDMA): slots and staging are GPU memory the NIC
//     reads and writes (registered through dma-buf or nvidia-peermem); the host never touches
//     them. The payload goes as an RDMA WRITE into the slot, followed by a WRITE_WITH_IMM of the
//     MsgTag into tag slot n % K of the receiver's control block (host memory), so the receiver
//     checks the tag on the host; RC ordering places the payload before the immediate's
//     completion. acquireSend and waitRecv return device addresses.
//   - No progress thread: completions are polled inside every call, and blocking calls poll until
//     their condition holds, the timeout passes (comm->checkWait with a communicator, else
//     options.timeoutMs), or a completion fails. A failed work completion becomes a sticky error
//     naming the status, what it likely means and what to check.
//   - Several queue pairs per link (options.qpsPerConnection = Q, both ends equal): every message
//     is split into Q parts at 64-byte boundaries (some may be empty), part j written on queue
//     pair j with the same immediate. Each queue pair stays in order, so the receiver counts
//     parts per queue pair and a message is complete when all Q parts are in (messages complete
//     in order). Announcements and credits travel on queue pair 0; the sender acknowledges new
//     slots on every queue pair, and the receiver switches queue pair j to the new slots at its
//     acknowledgement (data after it goes there), retiring the old slots once all Q have.
//     A send staging slot is free when all Q parts of its message completed.
//   - Not thread-safe: one thread drives a channel at a time (as the ring algorithm does).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "colibri/colibri.h"
#include "colibri/net_plugin.h"
#include "transport/channel.h"
#include "transport/verbs/user_regs.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_link.h"

namespace clb {
namespace verbs {

// A user buffer a device-mode channel may send from without a copy: the registrable range holding
// it (page aligned), and the identity of the allocation behind it (CUDA's buffer ID: freeing and
// allocating again at the same address gives another). The plugin interface's type.
using UserRange = clbNetUserRange_v1_t;

class VerbsChannel : public RingChannel {
 public:
  // Opens its link (VerbsLink: the device, PD, CQ, the RC queue pairs in INIT) and the control
  // block. `host` (copied; its ctx must outlive the channel) is the communicator's side of the
  // plugin interface: rank, ranks, timeout, staging cap, checkWait for waits and account for
  // memoryStats. It may be NULL (tests): then options.timeoutMs/rank/nranks/stagingCapBytes
  // apply and memory is counted only in registeredBytes().
  static clbResult_t create(const VerbsApi* api, const VerbsOptions& options, const clbNetHost_v1_t* host,
                            std::unique_ptr<VerbsChannel>* out);
  ~VerbsChannel() override;

  const VerbsConnInfo& sendSideInfo() const { return link_.sendInfo(); }  // for the next rank
  const VerbsConnInfo& recvSideInfo() const { return link_.recvInfo(); }  // for the previous rank
  // `next`: the next rank's recvSideInfo; `prev`: the previous rank's sendSideInfo.
  clbResult_t connect(const VerbsConnInfo& next, const VerbsConnInfo& prev);

  // Device mode: registers one page of device memory and lets it go, so that a set-up failure
  // (no dma-buf support, nvidia-peermem missing) shows at init rather than at the first message;
  // with maxBytes, all that prepare(maxBytes) will hold (staging and receive slots) at once.
  clbResult_t checkDeviceMemory(size_t maxBytes = 0);

  const char* name() const override { return "verbs"; }
  clbResult_t prepare(size_t maxBytes) override;
  clbResult_t acquireSend(size_t bytes, void** buf) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t waitRecv(const MsgTag& expect, const void** buf) override;  // waitRecvTag + checkTag
  // The next incoming message and the tag it came with, not compared with anything (the plugin
  // entry: the core compares). Holds the message until releaseRecv.
  clbResult_t waitRecvTag(MsgTag* got, const void** buf);
  // The oldest message that arrived whole (rx_.seq > rx_.released), checked and held.
  clbResult_t takeArrived(MsgTag* got, const void** buf);
  clbResult_t releaseRecv() override;
  // Non-blocking forms, for point-to-point (the core's PeerChannel): space for the next message
  // of `bytes` (within what prepare staged), or *buf NULL while the receiver has no free slot for
  // it (or has not announced its slots yet); the next arrived message and its tag, or *buf NULL
  // when none has arrived. Both move completions on first.
  clbResult_t trySend(size_t bytes, void** buf);
  clbResult_t tryRecvTag(MsgTag* got, const void** buf);
  // The device this channel uses, for other channels to share (VerbsOptions::sharedDevice).
  std::shared_ptr<VerbsDevice> device() const { return link_.device(); }
  clbResult_t finish() override;
  clbResult_t trim() override;
  // Device mode: the payload straight from user memory when its allocation is (or can be)
  // registered (UserRegs, user_regs.h: by allocation, bounded by userRegMax / userRegCapBytes);
  // *sent false otherwise.
  clbResult_t sendFrom(const void* src, const MsgTag& tag, bool* sent) override;

  using UserRegStats = UserRegs::Stats;
  UserRegStats userRegStats() const { return userRegs_.stats(); }
  // New bounds for the user registrations, applied at once (least recently used dropped).
  clbResult_t setUserRegLimits(size_t maxRegs, int64_t capBytes) { return userRegs_.setLimits(maxRegs, capBytes); }

  // Introspection (tests, logs).
  int64_t registeredBytes() const { return registered_.load(); }  // host and device
  bool deviceMode() const { return o_.device != nullptr; }
  // Host memory the provider holds for the two queue pairs and the completion queue, estimated
  // from their depths (64 bytes per send entry and completion, 32 per receive entry, as mlx5
  // allocates them), counted in the communicator's host bytes next to the registered bytes.
  int64_t queueBytes() const { return link_.queueBytes(); }
  ibv_qp* sendQp(int j = 0) const { return link_.sendQp((uint32_t)j); }
  ibv_qp* recvQp(int j = 0) const { return link_.recvQp((uint32_t)j); }
  int qpCount() const { return (int)Q_; }
  ibv_context* context() const { return link_.context(); }
  ibv_mtu pathMtu() const { return link_.pathMtu(); }
  int gidIndex() const { return link_.gidIndex(); }

  struct Region;  // registered memory (slots, staging)
  // What the receiver announces into the sender's control block.
  struct Announce {
    uint64_t addr;
    uint64_t slotBytes;
    uint32_t rkey;
    uint32_t epoch;
  };

 private:
  VerbsChannel(const VerbsApi* api, const VerbsOptions& o, const clbNetHost_v1_t* host);
  clbResult_t open();
  clbResult_t postParts(const MsgTag& tag, uint32_t slot);
  clbResult_t waitForCredit(size_t slotBytes, const char* tagSrc, uint32_t tagLkey);
  clbResult_t postNotice(const char* tagSrc, uint32_t tagLkey);
  bool noticeUnfit() const;
  clbResult_t takeNotice(MsgTag* out, const void** buf);
  clbResult_t progress();
  clbResult_t handleWc(const ibv_wc& wc);
  template <class Pred>
  clbResult_t waitFor(Pred pred, const char* what, int peer);
  clbResult_t post(ibv_qp* qp, ibv_send_wr* wr, const char* what);
  clbResult_t postZero(ibv_qp* qp, uint32_t imm, uint64_t ctlAddr, uint32_t ctlRkey, const char* what);
  clbResult_t postRecvs(ibv_qp* qp, int n);
  clbResult_t newRegion(size_t bytes, int access, bool device, std::unique_ptr<Region>* out);
  void account(int64_t delta, bool device);
  size_t header() const { return o_.device ? 0 : sizeof(MsgTag); }  // tag bytes before a slot's payload
  clbResult_t fail(clbResult_t rc);                                 // records the thread's last error as the channel's
  clbResult_t sticky() const;
  clbResult_t announce(std::unique_ptr<Region> slots, size_t slotBytes);
  clbResult_t postDeviceSend(const MsgTag& tag, uint32_t slot, const char* src, uint32_t lkey);
  clbResult_t applyAnnounce(const Announce& a);
  clbResult_t endMessage();  // the last part is posted: a deferred announcement applies now
  void collectRetired();

  const VerbsApi* api_;
  VerbsOptions o_;
  clbNetHost_v1_t host_{};
  bool hasHost_ = false;
  int rank_, next_, prev_;
  uint32_t K_;
  uint32_t Q_;  // queue pairs per link

  // The device, protection domain, completion queue and queue pairs, and their connection
  // (verbs_link.h). Declared before the regions, so that it outlives their registrations.
  VerbsLink link_;

  std::unique_ptr<Region> ctl_;  // control block: [announce in | announce out]
  std::atomic<int64_t> registered_{0};

  UserRegs userRegs_;  // device mode: registrations of the user buffers sent from in place

  // The send side's state: its staging, what was posted and completed, the credits and the slots
  // the receiver last announced (acknowledged).
  struct SendState {
    std::unique_ptr<Region> staging;  // K slots of `stride`
    size_t stride = 0;
    uint64_t seq = 0;             // messages posted
    uint64_t done = 0;            // messages whose every part's write completed locally
    std::vector<uint64_t> doneQ;  // per send queue pair: parts completed
    uint64_t peerReleased = 0;    // receiver's releases seen (credits = peerReleased + K)
    uint64_t remoteAddr = 0;      // receiver's current slots (acked epoch)
    uint32_t remoteRkey = 0;
    uint64_t remoteSlotBytes = 0;
    uint32_t remoteEpoch = 0;
    bool midMessage = false;        // some parts of a message posted, not all
    bool announceDeferred = false;  // an announcement arrived meanwhile
    Announce deferredAnnounce{};
    bool acquired = false;
    size_t acquiredBytes = 0;
  };
  // A message of the receive side, whole or in part: its slot and how much of it is in.
  struct Arrived {
    Region* region;
    uint32_t slot;
    uint32_t bytes;  // over the parts in so far
    uint32_t parts;  // Q: complete
  };
  // The receive side's state: the slot regions (current, announced, retiring), which message is in
  // which slot, per queue pair how far its parts and acknowledgements are, and a pending notice.
  struct RecvState {
    std::vector<std::unique_ptr<Region>> regions;  // current, pending and retiring slot regions
    Region* cur = nullptr;                         // where the sender writes now (acked)
    Region* pending = nullptr;                     // announced, not acked yet
    bool announcePending = false;
    uint32_t epoch = 0;  // last announced
    size_t curSlotBytes = 0, pendingSlotBytes = 0;
    std::vector<Arrived> arrived;  // ring of K, indexed by message number % K
    uint64_t seq = 0;              // messages arrived (all parts)
    std::vector<uint64_t> seqQ;    // per receive queue pair: parts arrived (its message number)
    std::vector<Region*> regionQ;  // per receive queue pair: the slots its data goes to now
    std::vector<size_t> slotBytesQ;
    std::vector<uint32_t> ackedQ;  // per receive queue pair: the last epoch it acknowledged
    uint32_t acksPending = 0;      // queue pairs that have not acknowledged the pending epoch
    uint64_t released = 0;         // messages released
    bool noticed = false;          // a notice came: message noticeSeq will be noticeTag.bytes long
    uint64_t noticeSeq = 0;
    MsgTag noticeTag{};
    bool holding = false;  // waitRecv returned, releaseRecv not yet called
  };
  SendState tx_;
  RecvState rx_;

  bool inProgress_ = false;
  clbResult_t failed_ = clbSuccess;
  ibv_wc_status failedStatus_ = IBV_WC_SUCCESS;
  std::string failMsg_;
};

}  // namespace verbs
}  // namespace clb
