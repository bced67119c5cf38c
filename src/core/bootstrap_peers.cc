// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The bootstrap's point-to-point connections (bootstrap.h): one TCP connection per pair of ranks
// that exchange messages, made at their first message and never before. The lower rank dials the
// higher rank's ring listener and proves the secret and the session as the ring's connections do
// (core/handshake.h), purpose kPurposePeerData, body {from, to}; the higher rank's acceptor
// thread answers with a tagged status and keeps the connection until its transport takes it.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/bootstrap.h"
#include "core/error.h"

namespace clb {
namespace {

constexpr char kPeerAccept[] = "colibri/3/peer-accept";

// The size of the ring's body (bootstrap.cc), so that a ring listener still connecting its ring
// takes these too.
struct PeerBody {
  int32_t fromRank;
  int32_t toRank;
  int32_t pad[2];
};
static_assert(sizeof(PeerBody) == 16, "PeerBody has the size of the ring's handshake body");

void signal(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

}  // namespace

void Bootstrap::closeListener() {
  if (!acceptor_.joinable()) closeFd(&listenFd_);
}

clbResult_t Bootstrap::startPeerAcceptor() {
  if (acceptor_.joinable() || listenFd_ < 0) return clbSuccess;
  stopFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  readyFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stopFd_ < 0 || readyFd_ < 0) {
    const int e = errno;
    closeFd(&stopFd_);
    closeFd(&readyFd_);
    return setSysError(e, "eventfd for the point-to-point acceptor");
  }
  stash_.resize(nranks_);
  acceptor_ = std::thread([this] { acceptPeers(); });
  return clbSuccess;
}

void Bootstrap::stopAcceptor() {
  if (acceptor_.joinable()) {
    signal(stopFd_);
    acceptor_.join();
  }
  closeFd(&stopFd_);
  closeFd(&readyFd_);
  std::lock_guard<std::mutex> g(stashMutex_);
  stash_.clear();
}

// The acceptor thread: the listener and every pending handshake in one poll, until stopped.
void Bootstrap::acceptPeers() {
  char where[96];
  snprintf(where, sizeof where, "rank %d's point-to-point listener", rank_);
  HandshakeServer server(listenFd_, id_.secret, 1u << kPurposePeerData, session_, sizeof(PeerBody), where,
                         handshakeTimeoutMs(), kMaxPendingHandshakes, ringTls_);
  std::vector<pollfd> fds;
  std::vector<Authenticated> done;
  for (Authenticated& a : earlyPeers_) answerPeer(&a, where);
  earlyPeers_.clear();
  for (;;) {
    fds.clear();
    fds.push_back({stopFd_, POLLIN, 0});
    const size_t n = server.addPollFds(&fds);
    if (poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) return;  // 100 ms: the handshakes' deadlines
    if (fds[0].revents) return;
    done.clear();
    server.advance(fds, 1, n, &done);
    for (Authenticated& a : done) answerPeer(&a, where);
  }
}

// A dial that proved the secret and the session: kept when it says it comes from a lower rank
// to this one, for the first time; the answer is tagged either way.
void Bootstrap::answerPeer(Authenticated* a, const char* where) {
  PeerBody b;
  memcpy(&b, a->body.data(), sizeof b);
  bool fresh = false;
  {
    std::lock_guard<std::mutex> g(stashMutex_);
    fresh = b.fromRank >= 0 && b.fromRank < rank_ && b.toRank == rank_ && !stash_[b.fromRank].open();
  }
  const uint32_t status = fresh ? (uint32_t)clbSuccess : (uint32_t)clbAuthError;
  uint8_t mac[kTagBytes];
  tag(id_.secret, kPeerAccept, a->transcript, {{&status, sizeof status}}, mac);
  const int64_t by = nowMs() + handshakeTimeoutMs();
  if (sendAllParts(a->link, {{&status, sizeof status}, {mac, sizeof mac}}, by, nullptr, where) != clbSuccess ||
      !fresh) {
    if (!fresh)
      CLB_WARN("rank %d refused a point-to-point connection from %s: it proved the secret but says it is rank "
               "%d to rank %d (a lower rank than this one, once)", rank_, a->from.c_str(), b.fromRank, b.toRank);
    return;
  }
  {
    std::lock_guard<std::mutex> g(stashMutex_);
    stash_[b.fromRank] = std::move(a->link);
  }
  signal(readyFd_);
}

clbResult_t Bootstrap::dialPeer(int p, Link* out) {
  const RankInfo& pi = peers_[p];
  IdData tmp{};
  tmp.family = pi.family;
  tmp.port = pi.port;
  memcpy(tmp.addr, pi.addr, 16);
  const SockAddr addr = idAddress(tmp);
  char name[160];
  snprintf(name, sizeof name, "rank %d (%s, pid %d, %s)", p, pi.hostname, pi.pid, addr.str().c_str());
  const int64_t deadline = nowMs() + timeoutMs_;
  int delayMs = 1;
  for (;;) {
    Link link;
    int fd = -1;
    clbResult_t rc = connectTcp(addr, deadline, abort_, &fd);
    if (rc == clbSuccess) link = Link(fd);
    bool retry = false;
    Transcript t{};
    if (rc == clbSuccess) {
      const PeerBody body{rank_, p, {0, 0}};
      rc = clientHandshake(link, ringTls_, id_.secret, kPurposePeerData, session_, &body, sizeof body, deadline,
                           abort_, name, &t, &retry);
    }
    if (rc == clbSuccess) {
      uint32_t status = 0;
      uint8_t mac[kTagBytes];
      rc = recvAll(link, &status, sizeof status, deadline, abort_, name);
      if (rc == clbSuccess) rc = recvAll(link, mac, sizeof mac, deadline, abort_, name);
      if (rc == clbSuccess && !tagMatches(id_.secret, kPeerAccept, t, {{&status, sizeof status}}, mac))
        return setError(clbAuthError, "%s's answer to this rank's point-to-point connection failed its "
                        "authentication tag: something on the network between the ranks changed it", name);
      if (rc == clbSuccess && status != clbSuccess)
        return setError(clbAuthError, "%s refused rank %d's point-to-point connection", name, rank_);
      if (rc == clbSuccess) {
        *out = std::move(link);
        return clbSuccess;
      }
    }
    // Closed before its answer: the peer's listener was full, or was still its ring's (whose
    // server drops what is pending once the ring is up); its acceptor answers the next dial.
    if (!(retry || rc == clbRemoteError) || nowMs() + delayMs >= deadline) return rc;
    usleep(delayMs * 1000);
    delayMs = std::min(delayMs * 2, 100);
  }
}

bool Bootstrap::takePeerLink(int p, Link* out) {
  if (readyFd_ >= 0) {
    uint64_t v;
    (void)!read(readyFd_, &v, sizeof v);  // drained; whoever waits looks at the stash next
  }
  std::lock_guard<std::mutex> g(stashMutex_);
  if (p >= (int)stash_.size() || !stash_[p].open()) return false;
  *out = std::move(stash_[p]);
  return true;
}

}  // namespace clb
