// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The bootstrap's point-to-point connections (bootstrap.h): one TCP connection per pair of ranks
// that exchange messages, made at their first message and never before. The rank that needs it
// first dials the other's ring listener and proves the secret and the session as the ring's
// connections do (bootstrap/handshake.h), purpose kPurposePeerData, body {from, to}; the other rank's
// acceptor thread answers with a tagged status and keeps the connection until its transport takes
// it. Two dials at once: the acceptor of the lower rank, which is dialing too, answers the higher
// rank's dial "duplicate", and the higher rank's acceptor takes the lower rank's: both end with
// the lower rank's connection.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "base/error.h"

namespace clb {
namespace {

constexpr char kPeerAccept[] = "colibri/3/peer-accept";
// The acceptor's answer to a dial that crossed this rank's own (lower) dial: use that one.
constexpr uint32_t kPeerDuplicate = 0x44555021;  // "!PUD"

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
  peerState_.assign(nranks_, kNoLink);
  acceptor_ = std::thread([this] { acceptPeers(); });
  return clbSuccess;
}

void Bootstrap::drainAcceptorFd() {
  uint64_t v;
  if (readyFd_ >= 0) (void)!read(readyFd_, &v, sizeof v);
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

// A dial that proved the secret and the session: kept when it is from another rank to this one
// and this rank has no connection with it yet; "duplicate" when it crossed this rank's own dial
// and this rank is the lower one; refused otherwise. The answer is tagged either way.
void Bootstrap::answerPeer(Authenticated* a, const char* where) {
  PeerBody b;
  memcpy(&b, a->body.data(), sizeof b);
  uint32_t status = (uint32_t)clbAuthError;
  const int from = b.fromRank;
  {
    // Decided under the lock that this rank's thread takes before it dials: from here until the
    // connection is in the stash that thread waits for it instead of dialing (kAnswering).
    std::lock_guard<std::mutex> g(stashMutex_);
    if (from >= 0 && from < nranks_ && from != rank_ && b.toRank == rank_) {
      const PeerState st = peerState_[from];
      // The lower rank's own dial wins, also when it was answered already.
      if ((st == kDialing || st == kOwn) && rank_ < from)
        status = kPeerDuplicate;
      else if ((st == kNoLink || st == kDialing || st == kAwaitingTheirs) && !stash_[from].open())
        status = (uint32_t)clbSuccess;
    }
    if (status == clbSuccess) peerState_[from] = kAnswering;
  }
  uint8_t mac[kTagBytes];
  tag(id_.secret, kPeerAccept, a->transcript, {{&status, sizeof status}}, mac);
  const int64_t by = nowMs() + handshakeTimeoutMs();
  const bool answered =
      sendAllParts(a->link, {{&status, sizeof status}, {mac, sizeof mac}}, by, nullptr, where) == clbSuccess;
  if (status == (uint32_t)clbAuthError)
    CLB_WARN(
        "rank %d refused a point-to-point connection from %s: it proved the secret but says it is rank "
        "%d to rank %d, which has a connection with this rank already (or is not another rank of it)",
        rank_, a->from.c_str(), from, b.toRank);
  if (status != clbSuccess) return;
  {
    std::lock_guard<std::mutex> g(stashMutex_);
    // Not answered: the dialer dials again, and this rank may dial too.
    if (answered) stash_[from] = std::move(a->link);
    peerState_[from] = answered ? kAwaitingTheirs : kNoLink;
  }
  signal(readyFd_);
}

clbResult_t Bootstrap::peerLink(int p, Link* out) {
  {
    std::lock_guard<std::mutex> g(stashMutex_);
    if (stash_[p].open()) {  // p dialed (and won any race)
      *out = std::move(stash_[p]);
      peerState_[p] = kTheirs;
      return clbSuccess;
    }
    // p's connection is being answered, or is to come (this rank's dial was the duplicate).
    const PeerState st = peerState_[p];
    if (st == kAnswering || st == kAwaitingTheirs || st == kOwn || st == kTheirs) return clbSuccess;
    peerState_[p] = kDialing;
  }
  bool duplicate = false;
  Link link;
  const clbResult_t rc = dialPeer(p, &link, &duplicate);
  std::lock_guard<std::mutex> g(stashMutex_);
  if (rc != clbSuccess) {
    peerState_[p] = kNoLink;
    return rc;
  }
  if (duplicate) {  // p is lower and dials this rank too: its connection is the pair's
    if (stash_[p].open()) {
      *out = std::move(stash_[p]);
      peerState_[p] = kTheirs;
    } else if (peerState_[p] != kAnswering) {
      peerState_[p] = kAwaitingTheirs;
    }
    return clbSuccess;
  }
  *out = std::move(link);
  peerState_[p] = kOwn;
  return clbSuccess;
}

clbResult_t Bootstrap::dialPeer(int p, Link* out, bool* duplicate) {
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
      rc = clientHandshake(link, ringTls_, id_.secret, kPurposePeerData, session_, &body, sizeof body, deadline, abort_,
                           name, &t, &retry);
    }
    if (rc == clbSuccess) {
      uint32_t status = 0;
      uint8_t mac[kTagBytes];
      rc = recvAll(link, &status, sizeof status, deadline, abort_, name);
      if (rc == clbSuccess) rc = recvAll(link, mac, sizeof mac, deadline, abort_, name);
      if (rc == clbSuccess && !tagMatches(id_.secret, kPeerAccept, t, {{&status, sizeof status}}, mac))
        return setError(clbAuthError,
                        "%s's answer to this rank's point-to-point connection failed its "
                        "authentication tag: something on the network between the ranks changed it",
                        name);
      if (rc == clbSuccess && status == kPeerDuplicate) {
        *duplicate = true;
        return clbSuccess;
      }
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

}  // namespace clb
