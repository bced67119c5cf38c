// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The ring channel: an ordered stream of messages to the next rank and from the previous rank.
// Algorithms never see which transport carries it. Each message carries a tag (which collective,
// which step) that the receiver checks before touching its own buffers, so mismatched calls across
// ranks end in an error instead of corrupted memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "colibri/net_plugin.h"
#include "bootstrap/comm_context.h"

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

// The messages between this rank and one peer: an ordered stream each way, for the calls made of
// point-to-point messages (clbSend / clbRecv, all-to-all, gather, scatter, reduce). The transport
// makes one at the first such call with that peer, and only then. Nothing here blocks: a batch of
// sends and receives to many peers (algo/p2p.cc) moves on whichever can, so no order of the calls
// inside a group waits in a circle. Messages carry a MsgTag like the ring's; a message may be
// shorter than the operation (the sender slices by its maxMessageBytes).
class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  // The largest payload of one message (at least 4 KiB).
  virtual size_t maxMessageBytes() const = 0;
  // Room for the next outgoing message of up to `bytes` (<= maxMessageBytes): *room bytes (at
  // least 4 KiB, or `bytes`; less where staging is near its cap), or *buf null when there is none
  // now (the receiver has not consumed enough yet).
  virtual clbResult_t trySend(size_t bytes, void** buf, size_t* room) = 0;
  virtual clbResult_t postSend(const MsgTag& tag) = 0;
  // The next incoming message and its tag (the caller checks it), or *buf null when none arrived.
  virtual clbResult_t tryRecv(const MsgTag** tag, const void** buf) = 0;
  virtual clbResult_t releaseRecv() = 0;
  // Moves queued writes on where the transport queues them; *sent: every posted message has left
  // this rank's queue (then a later call need not run for the peer to get it).
  virtual clbResult_t progress(bool* sent) {
    *sent = true;
    return clbSuccess;
  }
  // Whether the buffer of the message being sent (trySend to postSend) or read (tryRecv to
  // releaseRecv) is GPU memory: a channel in device mode (GPUDirect RDMA) gives device addresses,
  // which the batch reaches through CommContext::peerDeviceMemory.
  virtual bool sendOnDevice() const { return false; }
  virtual bool recvOnDevice() const { return false; }
  // Whether the peer closed its side (it destroyed its communicator, or exited): what it sent
  // before may still be read, but nothing more goes to it.
  virtual bool closedByPeer() const { return false; }
};

// GPU memory for the point-to-point channels between hosts in device mode (GPUDirect RDMA), made
// by the device layer at a communicator's first point-to-point call on device buffers over a
// network plugin that has such channels (device/gpudirect.cc): the hooks the plugin registers
// memory with, and how the host reaches that memory. Shared by the channels that use it (and
// kept alive by them: their slots go back through it).
struct PeerDeviceMemory {
  clbNetDeviceMemory_v1_t nic{};
  // `bytes` from src to dst, either of which may be GPU memory, complete when it returns;
  // `stream`: the operation's (device buffers), else null.
  clbResult_t (*copy)(void* self, void* dst, const void* src, size_t bytes, void* stream) = nullptr;
  // A message arrived in GPU memory and is about to be read: what makes the NIC's writes visible
  // to the copy (a flush, on GPUs that need one).
  clbResult_t (*arrived)(void* self) = nullptr;
  void* self = nullptr;
  std::shared_ptr<void> owner;  // what `self` points into
  std::string name;             // for transportInfo: "GPUDirect RDMA through dma-buf (GPU 0)"
};

// Compares a received tag with the expected one; on mismatch a message naming both ranks' calls.
clbResult_t checkTag(const MsgTag& got, const MsgTag& expect, int fromRank, int myRank);

}  // namespace clb
