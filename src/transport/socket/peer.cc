// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point over TCP (socket.h, SocketPeerChannel): one connection per pair, made at the
// pair's first message (bootstrap/bootstrap_peers.cc); nothing for peers never used. Under transport
// verbs that connection only sets up the plugin's channel with the peer (NetPeerChannel). Slots are as large
// as the messages need, at most chunkBytes, and their share of stagingCapBytes.
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "bootstrap/tls.h"
#include "transport/socket/socket.h"

namespace clb {

SocketPeerChannel::SocketPeerChannel(CommContext* comm, int peer) : comm_(comm), peer_(peer) {
  depth_ = comm->cfg.pipelineDepth < 2 ? 2 : (size_t)comm->cfg.pipelineDepth;
  // Both directions' slots within this pair's share of the cap; both ranks compute the same.
  const int64_t share = comm->cfg.stagingCapBytes / std::max(1, comm->nranks - 1);
  size_t limit = (size_t)std::max<int64_t>(4096, share / (int64_t)(2 * depth_) / 4096 * 4096);
  slotLimit_ = std::min(limit, std::max<size_t>(4096, (size_t)comm->cfg.chunkBytes));
  send_.resize(depth_);
  recv_.resize(depth_);
}

SocketPeerChannel::~SocketPeerChannel() { comm_->mem.addHost(-accounted_); }

void SocketPeerChannel::account() {
  int64_t total = 0;
  for (const Slot& s : send_) total += (int64_t)s.data.capacity();
  for (const Slot& s : recv_) total += (int64_t)s.data.capacity();
  comm_->mem.addHost(total - accounted_);
  accounted_ = total;
}

clbResult_t SocketPeerChannel::connect() {
  if (link_.open()) return clbSuccess;
  // The dial ends as soon as the communicator's wait would: a peer that failed or closed (its
  // notice), an abort, the timeout; not only at the dial's deadline.
  const int64_t start = nowMs();
  WaitCheck check([&] { return comm_->checkWait(start, "a point-to-point connection", peer_); });
  return comm_->boot.peerLink(peer_, &link_);  // may stay closed: the peer's dial is to come
}

short SocketPeerChannel::events() const {
  // Readable matters only while a receive slot is free (else the data waits in the kernel), and
  // writable only while something is queued: otherwise poll() would return at once, every time.
  short want = recvRead_ - recvConsumed_ < depth_ && closedErrno_ == 0 ? (short)POLLIN : (short)0;
  if (sendWritten_ < sendPosted_ && sendErrno_ == 0) want |= POLLOUT;
  return want ? link_.wantEvents(want) : (short)0;
}

clbResult_t SocketPeerChannel::closedError(int e) const {
  if (e == -1 || e == ECONNRESET)
    return setError(clbRemoteError, "rank %d closed its point-to-point connection to rank %d (did it exit or fail?)",
                    peer_, comm_->rank);
  if (e == EPROTO)
    return setError(clbAuthError, "the TLS connection with rank %d failed: %s", peer_,
                    link_.tls() ? link_.tls()->failure().c_str() : "?");
  return setSysError(e, "the point-to-point connection between rank %d and rank %d failed (did it exit?)", comm_->rank,
                     peer_);
}

// Writes what is queued, in order, and reads eagerly while a slot is free; never blocks.
clbResult_t SocketPeerChannel::io() {
  if (!link_.open()) return clbSuccess;
  while (sendWritten_ < sendPosted_ && sendFailure() == 0) {
    Slot& s = send_[sendWritten_ % depth_];
    const MsgTag* tag = reinterpret_cast<const MsgTag*>(s.data.data());
    const size_t total = sizeof(MsgTag) + tag->bytes;
    const ssize_t n = link_.trySend(s.data.data() + s.done, total - s.done);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      sendErrno_ = errno == EPIPE || errno == ECONNRESET ? -1 : errno;
      break;
    }
    s.done += n;
    if (s.done < total) break;
    s.done = 0;
    sendWritten_++;
  }
  while (closedErrno_ == 0 && recvRead_ - recvConsumed_ < depth_) {
    if (pendingHeaderDone_ < sizeof(MsgTag)) {
      const ssize_t n = readNow(link_, reinterpret_cast<char*>(&pendingHeader_) + pendingHeaderDone_,
                                sizeof(MsgTag) - pendingHeaderDone_, &closedErrno_);
      if (n <= 0) break;
      pendingHeaderDone_ += n;
      if (pendingHeaderDone_ < sizeof(MsgTag)) break;
      if (pendingHeader_.bytes > (uint64_t)std::max<int64_t>(4096, comm_->cfg.chunkBytes))
        return setError(clbRemoteError,
                        "rank %d sent rank %d a point-to-point message of %llu bytes, above chunkBytes "
                        "(%lld): do the ranks agree on the configuration?",
                        peer_, comm_->rank, (unsigned long long)pendingHeader_.bytes, (long long)comm_->cfg.chunkBytes);
    }
    Slot& s = recv_[recvRead_ % depth_];
    const size_t total = sizeof(MsgTag) + pendingHeader_.bytes;
    if (s.done == 0) {
      if (s.data.size() < total) {
        s.data.resize(total);
        account();
      }
      memcpy(s.data.data(), &pendingHeader_, sizeof(MsgTag));
      s.done = sizeof(MsgTag);
    }
    if (s.done < total) {
      const ssize_t n = readNow(link_, s.data.data() + s.done, total - s.done, &closedErrno_);
      if (n <= 0) break;
      s.done += n;
      if (s.done < total) break;
    }
    s.done = 0;
    pendingHeaderDone_ = 0;
    recvRead_++;
  }
  return clbSuccess;
}

clbResult_t SocketPeerChannel::trySend(size_t bytes, void** buf, size_t* room) {
  *buf = nullptr;
  CLB_CHECK(connect());
  if (!link_.open()) return clbSuccess;
  CLB_CHECK(io());
  if (const int e = sendFailure()) return closedError(e);
  if (sendPosted_ - sendWritten_ >= depth_) return clbSuccess;
  Slot& s = send_[sendPosted_ % depth_];
  *room = std::min(bytes, slotLimit_);
  if (s.data.size() < sizeof(MsgTag) + *room) {
    s.data.resize(sizeof(MsgTag) + *room);
    account();
  }
  *buf = s.data.data() + sizeof(MsgTag);
  return clbSuccess;
}

clbResult_t SocketPeerChannel::postSend(const MsgTag& tag) {
  Slot& s = send_[sendPosted_ % depth_];
  memcpy(s.data.data(), &tag, sizeof tag);
  s.done = 0;
  sendPosted_++;
  return io();
}

clbResult_t SocketPeerChannel::tryRecv(const MsgTag** tag, const void** buf) {
  *buf = nullptr;
  CLB_CHECK(connect());
  CLB_CHECK(io());
  if (recvRead_ == recvConsumed_) return closedErrno_ ? closedError(closedErrno_) : clbSuccess;
  const char* d = recv_[recvConsumed_ % depth_].data.data();
  *tag = reinterpret_cast<const MsgTag*>(d);
  *buf = d + sizeof(MsgTag);
  return clbSuccess;
}

clbResult_t SocketPeerChannel::releaseRecv() {
  recvConsumed_++;
  return io();  // a slot is free: read on
}

clbResult_t SocketPeerChannel::progress(bool* sent) {
  CLB_CHECK(io());
  if (const int e = sendFailure(); e && sendWritten_ < sendPosted_) return closedError(e);
  *sent = sendWritten_ == sendPosted_;
  return clbSuccess;
}

clbResult_t SocketPeerChannel::flush() {
  const int64_t start = nowMs();
  char what[96];
  snprintf(what, sizeof what, "rank %d to take the point-to-point messages this rank sent it", peer_);
  for (;;) {
    bool sent = false;
    CLB_CHECK(progress(&sent));
    if (sent) break;
    struct pollfd p {
      fd(), events(), 0
    };
    poll(&p, 1, 20);
    CLB_CHECK(comm_->checkWait(start, what, peer_));
  }
  // Written is not delivered: closing a socket with unread bytes in it (set-up messages the peer
  // sent that this rank no longer needed) resets the connection, and the reset drops what the
  // kernel still holds to send, such as this rank's last message. So the kernel's queue empties
  // (the peer acknowledged every byte) before the socket closes; a peer that is gone empties it
  // too (its reset), one that cannot be reached ends the wait at the timeout. A reset connection
  // (state CLOSE) keeps reporting the bytes it never had acknowledged (SIOCOUTQ is write_seq -
  // snd_una, frozen by the reset), so its state ends the wait: seen over the verbs stand-in, whose
  // peer closes the pair's connection with bytes unread, as a destroy that waited its whole timeout.
  for (int queued = 1;;) {
    if (ioctl(fd(), SIOCOUTQ, &queued) != 0 || queued == 0) return clbSuccess;
    struct tcp_info info {};
    socklen_t len = sizeof info;
    if (getsockopt(fd(), IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_state == TCP_CLOSE) return clbSuccess;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    CLB_CHECK(comm_->checkWait(start, what, peer_));
  }
}

void SocketPeerChannel::trim() {
  if (sendWritten_ != sendPosted_ || recvRead_ != recvConsumed_ || pendingHeaderDone_ != 0) return;
  for (Slot& s : send_) std::vector<char>().swap(s.data);
  for (Slot& s : recv_) std::vector<char>().swap(s.data);
  account();
}

// ---- the transport's part ----

clbResult_t LinkTransport::peer(int p, PeerChannel** out) {
  if (peers_.empty()) peers_.resize(comm_->nranks);
  const bool overPlugin = netPluginHasPeers(plugin_);
  if (!peers_[p]) {
    peers_[p] = std::make_unique<SocketPeerChannel>(comm_, p);
  }
  if (!overPlugin) {
    *out = peers_[p].get();
    return clbSuccess;
  }
  if (netPeers_.empty()) netPeers_.resize(comm_->nranks);
  if (!netPeers_[p])  // in device mode where this rank has GPU memory for it by now (NetPeerChannel)
    netPeers_[p] = std::make_unique<NetPeerChannel>(comm_, plugin_, p, peers_[p].get(), comm_->peerDeviceMemory);
  *out = netPeers_[p].get();
  return clbSuccess;
}

clbResult_t LinkTransport::waitPeers(uint64_t, int64_t startMs, const char* what, int peer,
                                     const std::vector<int>& peers) {
  // The batch's peers only: a connection of another peer with data for a later call is readable
  // all along, and would make this wait spin.
  std::vector<pollfd> fds;
  int timeout = 20;
  bool awaiting = false;    // a peer's connection is still to come: the acceptor says when
  bool overPlugin = false;  // a peer set up over the plugin: its completions wake no poll
  for (int p : peers) {
    if (p < (int)netPeers_.size() && netPeers_[p] && netPeers_[p]->ready()) {
      overPlugin = true;
      continue;
    }
    SocketPeerChannel* ch = p < (int)peers_.size() ? peers_[p].get() : nullptr;
    if (!ch || !ch->connected()) {
      awaiting = true;
      continue;
    }
    if (ch->buffered()) timeout = 0;
    if (const short ev = ch->events()) fds.push_back({ch->fd(), ev, 0});
  }
  if (overPlugin) timeout = 0;
  const bool acceptor = awaiting && comm_->boot.acceptorFd() >= 0;
  if (acceptor) fds.push_back({comm_->boot.acceptorFd(), POLLIN, 0});
  if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
    return setSysError(errno, "poll() on the point-to-point connections");
  if (acceptor && fds.back().revents) comm_->boot.drainAcceptorFd();
  if (overPlugin) std::this_thread::sleep_for(std::chrono::microseconds(20));
  return comm_->checkWait(startMs, what, peer);
}

clbResult_t LinkTransport::trim() {
  for (auto& ch : peers_)
    if (ch) ch->trim();
  return ring_->trim();
}

}  // namespace clb
