// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the verbs channel's three files share (verbs_channel.cc: set-up, completions, waits;
// verbs_send.cc: the send side; verbs_recv.cc: the receive side), and nothing else includes: the
// immediates and work request ids on the wire, the control block's layout, how a message splits
// over the queue pairs, a registered region, and the wait every blocking call makes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "bootstrap/net.h"
#include "transport/verbs/verbs_channel.h"

namespace clb {
namespace verbs {

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

inline uint32_t imm(uint32_t kind, uint32_t low) { return kind << 30 | (low & kLow30); }

// Part j of a message of `total` bytes split over q queue pairs: 64-byte aligned pieces, the
// last ones possibly empty. q == 1: the whole message.
inline void partOf(size_t total, uint32_t q, uint32_t j, size_t* off, size_t* len) {
  size_t per = ((total + q - 1) / q + 63) / 64 * 64;
  *off = std::min((size_t)j * per, total);
  *len = std::min(per, total - *off);
}

inline const char* wrWhat(uint64_t wrId) {
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

}  // namespace verbs
}  // namespace clb
