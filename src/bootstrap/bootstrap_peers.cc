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

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"
#include "base/error.h"

namespace clb {
namespace {

constexpr char kPeerAccept[] = "colibri/3/peer-accept";
// gatherAmong's messages: a member's block, and the lowest member's answer (protocol 9: the
// verdict and the member's rows, not every block).
constexpr char kGatherBlock[] = "colibri/3/gather-block";
constexpr char kGatherAnswer[] = "colibri/9/gather-answer";
constexpr size_t kGatherMessageBytes = 320;
// The lowest member's answer to each member of a gatherAmong, then (on success) the blocks of the
// member's replyRows, then a tag over both.
struct GatherAnswer {
  uint32_t status;
  uint32_t judged;  // 1: the status is the judge's verdict over every block (its message complete)
  uint32_t count;   // the members it counted (on success)
  uint32_t pad;
  uint8_t digest[kSha256Bytes];  // the judge's (on success)
  char msg[kGatherMessageBytes];
};
static_assert(sizeof(GatherAnswer) == 16 + kSha256Bytes + kGatherMessageBytes, "GatherAnswer is the wire format");
// The acceptor's answer to a dial that crossed this rank's own (lower) dial: use that one.
constexpr uint32_t kPeerDuplicate = 0x44555021;  // "!PUD"
// The acceptor's answer to a gatherAmong dial while this rank leads no exchange of that number
// (not yet, or no longer, or it is not the lowest member in its list): the dialer tries again.
constexpr uint32_t kGatherNotNow = 0x574f4e21;  // "!NOW"

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
  gatherStash_.resize(nranks_);
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
  gatherStash_.clear();
}

// The acceptor thread: the listener and every pending handshake in one poll, until stopped.
void Bootstrap::acceptPeers() {
  char where[96];
  snprintf(where, sizeof where, "rank %d's point-to-point listener", rank_);
  HandshakeServer server(listenFd_, id_.secret, (1u << kPurposePeerData) | (1u << kPurposeGather), session_,
                         sizeof(PeerBody), where, handshakeTimeoutMs(), kMaxPendingHandshakes, ringTls_);
  std::vector<pollfd> fds;
  std::vector<Authenticated> done;
  for (Authenticated& a : earlyPeers_) answerPeer(&a, where);
  earlyPeers_.clear();
  for (;;) {
    fds.clear();
    fds.push_back({stopFd_, POLLIN, 0});
    const size_t n = server.addPollFds(&fds);
    // 100 ms: the handshakes' deadlines (sooner when a full server may make room)
    if (poll(fds.data(), fds.size(), server.pollTimeoutMs(100)) < 0 && errno != EINTR) return;
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
  if (a->purpose == kPurposeGather) {  // a member of the gatherAmong this rank leads: kept for it
    const bool valid = from >= 0 && from < nranks_ && from != rank_ && b.toRank == rank_;
    std::lock_guard<std::mutex> g(stashMutex_);  // leadGather takes what is kept under it
    const bool now = valid && leading_ == (int64_t)(uint32_t)b.pad[0];
    status = !valid ? (uint32_t)clbAuthError : now ? (uint32_t)clbSuccess : kGatherNotNow;
    uint8_t mac[kTagBytes];
    tag(id_.secret, kPeerAccept, a->transcript, {{&status, sizeof status}}, mac);
    if (sendAllParts(a->link, {{&status, sizeof status}, {mac, sizeof mac}}, nowMs() + handshakeTimeoutMs(), nullptr,
                     where) == clbSuccess &&
        now)
      gatherStash_[from] = GatherDial{std::move(a->link), a->transcript};  // of exchange leading_
    return;
  }
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
  if (rc != clbSuccess && stash_[p].open()) {  // p's own dial came while this one failed: it is the pair's
    clearError();
    *out = std::move(stash_[p]);
    peerState_[p] = kTheirs;
    return clbSuccess;
  }
  if (rc != clbSuccess && peerState_[p] == kAnswering) {  // ... or is being answered: it comes next
    clearError();
    return clbSuccess;
  }
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
  char name[160];
  const SockAddr addr = listenerOf(peers_[p], p, name, sizeof name);
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
    CLB_CHECK(WaitCheck::poll());
    usleep(delayMs * 1000);
    delayMs = std::min(delayMs * 2, 100);
  }
}

clbResult_t Bootstrap::dialGather(int lead, uint32_t seq, int64_t deadline, Link* out, Transcript* t) {
  char name[160];
  const SockAddr addr = listenerOf(peers_[lead], lead, name, sizeof name);
  int delayMs = 1;
  for (;;) {
    Link link;
    int fd = -1;
    clbResult_t rc = connectTcp(addr, deadline, nullptr, &fd);
    if (rc == clbSuccess) link = Link(fd);
    bool retry = false;
    if (rc == clbSuccess) {
      const PeerBody body{rank_, lead, {(int32_t)seq, 0}};
      rc = clientHandshake(link, ringTls_, id_.secret, kPurposeGather, session_, &body, sizeof body, deadline, nullptr,
                           name, t, &retry);
    }
    uint32_t status = 0;
    uint8_t mac[kTagBytes];
    if (rc == clbSuccess) rc = recvAll(link, &status, sizeof status, deadline, nullptr, name);
    if (rc == clbSuccess) rc = recvAll(link, mac, sizeof mac, deadline, nullptr, name);
    bool notNow = false;
    if (rc == clbSuccess) {
      if (!tagMatches(id_.secret, kPeerAccept, *t, {{&status, sizeof status}}, mac) ||
          (status != clbSuccess && status != kGatherNotNow))
        return setError(clbAuthError, "%s refused rank %d's connection for the survivors' exchange", name, rank_);
      if (status == clbSuccess) {
        *out = std::move(link);
        return clbSuccess;
      }
      notNow = true;
    }
    // Not leading this exchange yet, refused or closed (its acceptor starts with its own call, or
    // its listener was full): dialed again until the deadline.
    if (nowMs() + delayMs >= deadline)
      return setError(clbTimeout,
                      "rank %d: %s, the lowest of the ranks taking part, %s within %lld ms (is it alive, making the "
                      "same call with the same list?)%s%s",
                      rank_, name, notNow ? "led no such exchange" : "did not answer", (long long)timeoutMs_,
                      notNow ? "" : ": ", notNow ? "" : lastError().c_str());
    (void)retry;
    usleep(delayMs * 1000);
    delayMs = std::min(delayMs * 2, 50);
  }
}

clbResult_t Bootstrap::leadGather(const std::vector<int>& members, uint32_t seq, size_t bytes, const GatherJudge& judge,
                                  char* all, std::array<uint8_t, kSha256Bytes>* digest, int64_t deadline) {
  if (listenFd_ < 0)
    return setError(clbInternalError, "rank %d: its ring listener is closed: no exchange among survivors", rank_);
  CLB_CHECK(startPeerAcceptor());
  {
    // Leading exchange `seq` from now: the acceptor keeps the dials of this number only (others
    // are told to try again), and what an earlier exchange left is dropped.
    std::lock_guard<std::mutex> g(stashMutex_);
    for (GatherDial& d : gatherStash_) d = GatherDial{};
    leading_ = seq;
  }
  struct StopLeading {
    Bootstrap* b;
    ~StopLeading() {
      std::lock_guard<std::mutex> g(b->stashMutex_);
      b->leading_ = -1;
      for (GatherDial& d : b->gatherStash_) d = GatherDial{};
    }
  } stopLeading{this};
  const size_t m = members.size();
  std::vector<GatherDial> dials(m);
  std::vector<bool> came(m, false);
  came[0] = true;  // this rank
  uint32_t status = clbSuccess;
  char msg[kGatherMessageBytes] = {};
  char name[64];
  size_t missing = m - 1;
  int delayUs = 200;
  // Each member's block is read as it comes, so that no connection is closed with data unread
  // (which could turn the answer into a reset).
  while (missing && nowMs() < deadline) {
    std::vector<size_t> took;
    {
      std::lock_guard<std::mutex> g(stashMutex_);
      for (size_t i = 1; i < m; i++) {
        GatherDial& d = gatherStash_[members[i]];
        if (came[i] || !d.link.open()) continue;
        dials[i] = std::move(d);
        d = GatherDial{};
        came[i] = true;
        took.push_back(i);
        missing--;
      }
    }
    for (size_t i : took) {
      snprintf(name, sizeof name, "rank %d", members[i]);
      uint8_t mac[kTagBytes];
      clbResult_t rc = recvAll(dials[i].link, all + i * bytes, bytes, deadline, nullptr, name);
      if (rc == clbSuccess) rc = recvAll(dials[i].link, mac, sizeof mac, deadline, nullptr, name);
      if (rc == clbSuccess &&
          !tagMatches(id_.secret, kGatherBlock, dials[i].transcript, {{all + i * bytes, bytes}}, mac))
        rc = setError(clbAuthError, "rank %d's block failed its authentication tag", members[i]);
      if (rc != clbSuccess && status == clbSuccess) {
        status = rc;
        snprintf(msg, sizeof msg, "rank %d's part did not arrive whole: %s", members[i], lastError().c_str());
      }
    }
    if (missing && took.empty()) {
      usleep(delayUs);
      delayUs = std::min(delayUs * 2, 10000);
    }
  }
  std::string absent;
  for (size_t i = 1; i < m; i++)
    if (!came[i]) absent += (absent.empty() ? "" : ", ") + std::to_string(members[i]);
  if (!absent.empty() && status == clbSuccess) {
    status = clbTimeout;
    snprintf(msg, sizeof msg, "rank(s) %s did not take part within %lld ms (dead, or not making the same call?)",
             absent.c_str(), (long long)timeoutMs_);
  }
  // Every block is here: the judge's verdict goes to every member, with its own rows.
  GatherAnswer a;
  memset(&a, 0, sizeof a);
  if (status == clbSuccess) {
    const GatherVerdict v = judge(all, m);
    status = v.status;
    a.judged = v.status != clbSuccess;
    snprintf(msg, sizeof msg, "%s", v.why.c_str());
    if (v.status == clbSuccess) {
      memcpy(a.digest, v.digest.data(), sizeof a.digest);
      *digest = v.digest;
    }
  }
  a.status = status;
  a.count = status == clbSuccess ? (uint32_t)m : 0;
  memcpy(a.msg, msg, sizeof a.msg);
  std::vector<char> rows(status == clbSuccess ? kReplyRows * bytes : 0);
  for (size_t i = 1; i < m; i++) {
    if (!came[i]) continue;
    snprintf(name, sizeof name, "rank %d", members[i]);
    if (!rows.empty()) {
      const std::array<int, kReplyRows> at = replyRows((int)i, (int)m);
      for (int k = 0; k < kReplyRows; k++) memcpy(rows.data() + k * bytes, all + at[k] * bytes, bytes);
    }
    uint8_t mac[kTagBytes];
    tag(id_.secret, kGatherAnswer, dials[i].transcript, {{&a, sizeof a}, {rows.data(), rows.size()}}, mac);
    (void)sendAllParts(dials[i].link, {{&a, sizeof a}, {rows.data(), rows.size()}, {mac, sizeof mac}}, deadline + 1000,
                       nullptr, name);
  }
  if (status != clbSuccess) return setError((clbResult_t)status, "rank %d: %s", rank_, msg);
  return clbSuccess;
}

clbResult_t Bootstrap::gatherAmong(const std::vector<int>& members, uint32_t seq, const void* block, size_t bytes,
                                   const GatherJudge& judge, void* out, std::array<uint8_t, kSha256Bytes>* digest) {
  const size_t me = std::find(members.begin(), members.end(), rank_) - members.begin();
  if (me == members.size() || !std::is_sorted(members.begin(), members.end()))
    return setError(clbInternalError, "rank %d: gatherAmong's members are not ascending with this rank among them",
                    rank_);
  char* all = static_cast<char*>(out);
  memcpy(all + me * bytes, block, bytes);
  if (members.size() == 1) {
    const GatherVerdict v = judge(all, 1);
    if (v.status != clbSuccess) return setError(v.status, "rank %d: %s", rank_, v.why.c_str());
    *digest = v.digest;
    return clbSuccess;
  }
  const int64_t deadline = nowMs() + timeoutMs_;
  if (me == 0) return leadGather(members, seq, bytes, judge, all, digest, deadline);
  Link link;
  Transcript t{};
  CLB_CHECK(dialGather(members[0], seq, deadline, &link, &t));
  char name[64];
  snprintf(name, sizeof name, "rank %d", members[0]);
  uint8_t mac[kTagBytes];
  tag(id_.secret, kGatherBlock, t, {{block, bytes}}, mac);
  CLB_CHECK(sendAllParts(link, {{block, bytes}, {mac, sizeof mac}}, deadline, nullptr, name));
  // The lead answers by its own deadline, which began when it called, up to a timeout after this
  // rank (the other survivors' calls come in any order): a timeout more.
  const int64_t answerBy = deadline + timeoutMs_;
  GatherAnswer a;
  CLB_CHECK(recvAll(link, &a, sizeof a, answerBy, nullptr, name));
  // On success the blocks of this member's replyRows, in that order (a changed status fails the
  // tag below, after at most these bytes).
  const bool ok = a.status == clbSuccess;
  std::vector<char> rows(ok ? kReplyRows * bytes : 0);
  if (!rows.empty()) CLB_CHECK(recvAll(link, rows.data(), rows.size(), answerBy, nullptr, name));
  CLB_CHECK(recvAll(link, mac, sizeof mac, answerBy, nullptr, name));
  if (!tagMatches(id_.secret, kGatherAnswer, t, {{&a, sizeof a}, {rows.data(), rows.size()}}, mac))
    return setError(clbAuthError, "rank %d: the answer of %s failed its authentication tag", rank_, name);
  a.msg[sizeof a.msg - 1] = 0;
  if (!ok && a.judged) return setError((clbResult_t)a.status, "rank %d: %s", rank_, a.msg);
  if (!ok) return setError((clbResult_t)a.status, "rank %d: %s says: %s", rank_, name, a.msg);
  if (a.count != members.size())
    return setError(clbInvalidArgument,
                    "rank %d: %s counts %u ranks taking part, this rank %zu: the ranks passed different lists of "
                    "who takes part",
                    rank_, name, a.count, members.size());
  const std::array<int, kReplyRows> at = replyRows((int)me, (int)members.size());
  for (int k = 0; k < kReplyRows; k++)
    if (at[k] != (int)me) memcpy(all + at[k] * bytes, rows.data() + k * bytes, bytes);
  memcpy(digest->data(), a.digest, digest->size());
  return clbSuccess;
}

}  // namespace clb
