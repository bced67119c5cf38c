// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ring channel over the bootstrap's TCP ring connections: the universal fallback (any hosts).
// Under COLIBRI_TLS=all those connections, and so this channel's data, run over TLS.
// Sends are copied into staging slots and written without blocking; receives are read eagerly
// into staging slots, so a rank never blocks in send while its peer blocks in send.
// LinkTransport (below) is the transport around it, and around the verbs channel: the ring
// channel plus failure notices on the bootstrap's control connections.
#pragma once

#include <poll.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/net.h"
#include "transport/channel.h"
#include "transport/net/net_plugin.h"
#include "transport/transport.h"

namespace clb {

// The transport of ranks that share no memory (socket, verbs): a ring channel, and failure
// notices on the bootstrap's second pair of connections to the ring neighbours (they never wait
// behind data). A rank that fails or aborts tells both neighbours; a rank that learns of it
// forwards the notice (its origin kept) when it fails in turn, so the news goes round the ring.
class SocketPeerChannel;

// The bytes of a failure notice's message on the wire (with its NUL).
constexpr size_t kNoticeReasonBytes = 240;

// One non-blocking read of up to `bytes` into buf (Link::tryRecv): the bytes read, 0 when nothing
// is there now, -1 when the peer closed (*closedErrno = -1) or the read failed (*closedErrno =
// errno), which the ring and the point-to-point channels both report once they need the data.
ssize_t readNow(Link& link, void* buf, size_t bytes, int* closedErrno);

class LinkTransport : public Transport {
 public:
  // `plugin`: the network plugin of the ring channel (transport verbs), whose point-to-point
  // channels carry the pairs' messages (every rank's has them: createTransport agreed); NULL: TCP.
  LinkTransport(CommContext* comm, int kind, std::unique_ptr<RingChannel> ring, std::string describe = std::string(),
                const clbNetPlugin_v1_t* plugin = nullptr);
  ~LinkTransport() override;
  int kind() const override { return kind_; }
  std::string describe() const override { return describe_; }
  RingChannel& ring() override { return *ring_; }
  const clbNetPlugin_v1_t* netPlugin() const override;
  // Point-to-point: a TCP connection per pair (the bootstrap's, bootstrap/bootstrap_peers.cc;
  // transport/socket/peer.cc); under transport verbs the plugin's channel with the peer
  // (NetPeerChannel: RDMA WRITE with immediate into the peer's slots), set up over that connection.
  clbResult_t peer(int p, PeerChannel** out) override;
  clbResult_t waitPeers(uint64_t seen, int64_t startMs, const char* what, int peer,
                        const std::vector<int>& peers) override;
  clbResult_t trim() override;
  bool waitNotice(int peer, PeerNotice* n) override;
  bool statusNotice(PeerNotice* n) override;
  // For the relay: the control connections on which news may still come (appended to *fds, each
  // with `this` in *owners); false when one holds a TLS record already read (ask statusNotice now).
  bool watchNotices(std::vector<pollfd>* fds, std::vector<LinkTransport*>* owners);
  void announce(PeerNotice::Kind kind, const char* reason) override;
  void close(PeerNotice::Kind end) override;

 private:
  CommContext* comm_;
  int kind_;
  std::unique_ptr<RingChannel> ring_;
  std::string describe_;
  // The first notice from a neighbour ('A', 'F' with the origin's message, or 'G' for a neighbour
  // whose process ended without one), forwarded on failure; and which neighbour (0 prev, 1 next) closed after which
  // call. Read and written under noticeMutex_ (any thread asks statusNotice); the atomics let
  // announce's forwarding read them too.
  void sendNotice(char kind, int origin, uint64_t seq, const char* reason, Link* only = nullptr);
  void readNotices();
  bool noticeOf(PeerNotice* out) const;
  std::mutex noticeMutex_;
  std::atomic<char> noticeKind_{0};
  std::atomic<int> noticeOrigin_{-1};
  std::atomic<uint64_t> noticeSeq_{0};
  char noticeReason_[kNoticeReasonBytes] = {};  // 'F': the origin's message (set before noticeKind_)
  bool closedBy_[2] = {false, false};
  uint64_t closedSeq_[2] = {0, 0};
  std::vector<std::unique_ptr<SocketPeerChannel>> peers_;  // per peer once used
  const clbNetPlugin_v1_t* plugin_ = nullptr;
  std::vector<std::unique_ptr<NetPeerChannel>> netPeers_;  // per peer once used, over peers_[p]
};

// Both directions with one peer over one TCP connection (transport/socket/peer.cc): sends are
// copied into pipelineDepth slots and written without blocking, receives read eagerly into as many.
// The rank that needs the connection first dials (bootstrap's peerLink); nothing moves until it is
// open.
class SocketPeerChannel : public PeerChannel {
 public:
  SocketPeerChannel(CommContext* comm, int peer);
  ~SocketPeerChannel() override;
  // Dials the peer, or takes its connection if it came (bootstrap's peerLink).
  clbResult_t connect();
  bool connected() const { return link_.open(); }
  size_t maxMessageBytes() const override { return (size_t)comm_->cfg.chunkBytes; }
  clbResult_t trySend(size_t bytes, void** buf, size_t* room) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t tryRecv(const MsgTag** tag, const void** buf) override;
  clbResult_t releaseRecv() override;
  clbResult_t progress(bool* sent) override;
  bool closedByPeer() const override { return closedErrno_ == -1 || closedErrno_ == ECONNRESET || sendErrno_ == -1; }
  // What to poll for: the socket and its events (fd -1 while not connected).
  int fd() const { return link_.fd(); }
  short events() const;
  bool buffered() const { return link_.buffered(); }
  void trim();
  // Writes what is queued (destroy of a healthy rank), until the timeout.
  clbResult_t flush();

 private:
  struct Slot {
    std::vector<char> data;  // MsgTag + payload
    size_t done = 0;
  };
  clbResult_t io();
  clbResult_t closedError(int e) const;
  int sendFailure() const { return sendErrno_ ? sendErrno_ : closedErrno_; }  // why nothing more goes out (0: it can)
  void account();
  CommContext* comm_;
  int peer_;
  Link link_;
  size_t depth_, slotLimit_;
  std::vector<Slot> send_, recv_;
  uint64_t sendPosted_ = 0, sendWritten_ = 0, recvRead_ = 0, recvConsumed_ = 0;
  MsgTag pendingHeader_{};
  size_t pendingHeaderDone_ = 0;
  int closedErrno_ = 0;  // reading: -1 the peer closed; > 0 a failed read
  // Writing: -1 the peer closed; > 0 a failed write. Reads go on after a failed write: what the
  // peer sent before it closed is still there to take.
  int sendErrno_ = 0;
  int64_t accounted_ = 0;
};

class SocketRingChannel : public RingChannel {
 public:
  // `send` and `recv` (the bootstrap's) outlive the channel.
  SocketRingChannel(CommContext* comm, Link& send, Link& recv);
  ~SocketRingChannel() override;
  const char* name() const override { return "socket"; }
  clbResult_t prepare(size_t maxBytes) override;
  clbResult_t acquireSend(size_t bytes, void** buf) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t waitRecv(const MsgTag& expect, const void** buf) override;
  clbResult_t releaseRecv() override;
  clbResult_t finish() override;
  clbResult_t trim() override;

 private:
  struct Slot {
    std::vector<char> data;  // MsgTag header + payload
    size_t done = 0;         // bytes written (send) or read (recv)
  };
  // One round of non-blocking I/O; `wait` = poll up to a short time for readiness first.
  clbResult_t progress(bool wait, int64_t startMs, const char* what);
  void resize(std::vector<Slot>& slots, size_t capacity);
  size_t depth() const { return slots_; }
  CommContext* comm_;
  Link& sendLink_;
  Link& recvLink_;
  int next_, prev_;
  size_t slots_ = 2, capacity_ = 0;  // payload bytes per slot
  std::vector<Slot> send_, recv_;
  uint64_t sendPosted_ = 0, sendWritten_ = 0;  // messages
  uint64_t recvRead_ = 0, recvConsumed_ = 0;   // messages fully read / consumed
  MsgTag pendingHeader_{};
  size_t pendingHeaderDone_ = 0;
  int64_t accounted_ = 0;
  int recvClosedErrno_ = 0;  // -1: peer closed; >0: errno of a failed read
};

}  // namespace clb
