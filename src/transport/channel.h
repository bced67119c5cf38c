// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The ring channel: an ordered stream of messages to the next rank and from the previous rank.
// Algorithms never see which transport carries it. Each message carries a tag (which collective,
// which step) that the receiver checks before touching its own buffers, so mismatched calls across
// ranks end in an error instead of corrupted memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/comm.h"

namespace clb {

struct MsgTag {
  OpDesc op;
  uint64_t index;  // message number within the collective
  uint64_t bytes;
};

class RingChannel {
 public:
  virtual ~RingChannel() = default;
  virtual const char* name() const = 0;
  // Called once per collective before any message: staging sized for messages of up to `maxBytes`.
  virtual clbResult_t prepare(size_t maxBytes) = 0;
  // Space for the next outgoing message (valid until post).
  virtual clbResult_t acquireSend(size_t bytes, void** buf) = 0;
  virtual clbResult_t postSend(const MsgTag& tag) = 0;
  // The next incoming message, checked against `expect`; valid until releaseRecv.
  virtual clbResult_t waitRecv(const MsgTag& expect, const void** buf) = 0;
  virtual clbResult_t releaseRecv() = 0;
  // End of a collective: everything posted is on its way (nothing depends on later calls).
  virtual clbResult_t finish() = 0;
  // Gives back staging memory; waits until peers consumed what was sent.
  virtual clbResult_t trim() = 0;
  // The next outgoing message straight from `src` (no copy into staging) where the transport
  // can (device memory over GPUDirect RDMA); *sent false: use acquireSend. `src` must stay
  // unchanged until the receiver consumed the message (the ring only writes it after a message
  // that causally follows), and the call's stream work must be complete before.
  virtual clbResult_t sendFrom(const void* src, const MsgTag& tag, bool* sent) {
    (void)src;
    (void)tag;
    *sent = false;
    return clbSuccess;
  }
};

// Compares a received tag with the expected one; on mismatch a message naming both ranks' calls.
clbResult_t checkTag(const MsgTag& got, const MsgTag& expect, int fromRank, int myRank);

}  // namespace clb
