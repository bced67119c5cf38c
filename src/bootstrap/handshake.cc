// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/handshake.h"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "bootstrap/net.h"

namespace clb {
namespace {

static_assert(sizeof(Transcript) == 56, "Transcript is MACed as bytes: no padding");
static_assert(sizeof(ClientHello) == 40 && sizeof(ServerChallenge) == 72, "wire layout");

constexpr char kServerProof[] = "colibri/3/server-proof";
constexpr char kClientProof[] = "colibri/3/client-proof";
constexpr size_t kPrefixBytes = 20;   // magic, protocol, libVersion, status, msgBytes: in every version
constexpr size_t kRefusalBytes = 32;  // a refusal's header: the prefix and 12 zero bytes, then its text
constexpr uint32_t kMaxMessageBytes = 4096;

std::string peerName(int fd) {
  SockAddr a;
  a.len = sizeof a.ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0) return "an unknown address";
  return a.str();
}

// One send on a fresh connection: its socket buffer is empty, so a short message goes at once or
// the peer is not worth waiting for.
bool sendNow(Link& link, const void* buf, size_t bytes) { return link.trySend(buf, bytes) == (ssize_t)bytes; }

// Pending handshakes of every listener of this process, and their bound: a quarter of the fd
// limit (at least 16), so that a flood at several listeners cannot take the process's last fds.
std::atomic<int> gPendingTotal{0};
int processPendingLimit() {
  static const int limit = [] {
    struct rlimit r {};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 4096;
    const long q = (long)(r.rlim_cur / 4);
    return (int)(q < 16 ? 16 : q > 65536 ? 65536 : q);
  }();
  return limit;
}

// Under TLS the proofs also MAC the session's exporter value (TlsSession::binding), so that they
// are valid on this TLS session only; without TLS they MAC what they always did.
bool bindingOf(Link& link, TlsBinding* out) {
  if (!link.tls()) return true;
  out->on = true;
  return link.tls()->binding(out->bytes);
}
// The binding's part (under TLS), then the body's (the client's proof; none for the server's).
void proofTag(const uint8_t* secret, const char* label, const Transcript& t, const TlsBinding& b, const void* body,
              size_t bodyBytes, uint8_t out[kTagBytes]) {
  Part parts[2];
  size_t n = 0;
  if (b.on) parts[n++] = {b.bytes, sizeof b.bytes};
  if (body) parts[n++] = {body, bodyBytes};
  tag(secret, label, t, parts, n, out);
}
bool proofMatches(const uint8_t* secret, const char* label, const Transcript& t, const TlsBinding& b, const void* body,
                  size_t bodyBytes, const uint8_t* got) {
  uint8_t want[kTagBytes];
  proofTag(secret, label, t, b, body, bodyBytes, want);
  return equalConstantTime(want, got, kTagBytes);
}

}  // namespace

std::string versionString(uint32_t code) {
  char b[32];
  snprintf(b, sizeof b, "%u.%u.%u", code / 10000, code / 100 % 100, code % 100);
  return b;
}

uint32_t secretFingerprint(const uint8_t* secret) {
  Sha256 h;
  static const char label[] = "colibri/fingerprint";
  h.update(label, sizeof label);
  h.update(secret, kSecretBytes);
  uint8_t d[kSha256Bytes];
  h.final(d);
  return (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
}

void tag(const uint8_t* secret, const char* label, const Transcript& t, const Part* parts, size_t count,
         uint8_t out[kTagBytes]) {
  HmacSha256 m(secret, kSecretBytes);
  m.update(label, strlen(label) + 1);
  m.update(&t, sizeof t);
  for (size_t i = 0; i < count; i++) {
    const Part& p = parts[i];
    const uint64_t n = p.bytes;  // each part framed by its length: no two part lists MAC alike
    m.update(&n, sizeof n);
    if (p.bytes) m.update(p.data, p.bytes);
  }
  m.final(out);
}

bool tagMatches(const uint8_t* secret, const char* label, const Transcript& t, std::initializer_list<Part> parts,
                const uint8_t* got) {
  uint8_t want[kTagBytes];
  tag(secret, label, t, parts, want);
  return equalConstantTime(want, got, kTagBytes);
}

int pendingHandshakesInProcess() { return gPendingTotal.load(); }

int64_t handshakeTimeoutMs() {
  static const int64_t ms = [] {
    const char* s = getenv("COLIBRI_HANDSHAKE_TIMEOUT_MS");
    if (!s || !*s) return (int64_t)1000;
    char* end = nullptr;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 10 || v > 600000) {
      CLB_WARN("COLIBRI_HANDSHAKE_TIMEOUT_MS=%s is not a number of milliseconds in 10..600000: using 1000", s);
      return (int64_t)1000;
    }
    return (int64_t)v;
  }();
  return ms;
}

clbResult_t clientHandshake(Link& link, const TlsContextRef& tls, const uint8_t* secret, Purpose purpose,
                            const uint8_t* session, const void* body, size_t bodyBytes, int64_t deadlineMs,
                            const std::atomic<bool>* abort, const char* peer, Transcript* out, bool* retry) {
  *retry = false;
  if (tls) {
    std::unique_ptr<TlsSession> s;
    CLB_CHECK(TlsSession::create(tls, link.fd(), false, &s));
    clbResult_t rc = s->connect(deadlineMs, abort, peer);
    if (rc == clbRemoteError) *retry = true;  // closed during TLS: full, or not a root yet
    CLB_CHECK(rc);
    link.setTls(std::move(s));
  }
  ClientHello h;
  CLB_CHECK(clientHello(link, secret, purpose, deadlineMs, abort, peer, &h));
  return clientProve(link, secret, h, session, body, bodyBytes, deadlineMs, abort, peer, out, retry);
}

clbResult_t clientHello(Link& link, const uint8_t* secret, Purpose purpose, int64_t deadlineMs,
                        const std::atomic<bool>* abort, const char* peer, ClientHello* sent) {
  *sent = ClientHello{kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, purpose, secretFingerprint(secret), 0, {}};
  if (!randomBytes(sent->nonce, sizeof sent->nonce))
    return setSysError(errno, "getrandom() for a bootstrap nonce failed");
  return sendAll(link, sent, sizeof *sent, deadlineMs, abort, peer);
}

clbResult_t clientProve(Link& link, const uint8_t* secret, const ClientHello& h, const uint8_t* session,
                        const void* body, size_t bodyBytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                        const char* peer, Transcript* out, bool* retry) {
  *retry = false;
  const Purpose purpose = (Purpose)h.purpose;
  ServerChallenge c{};
  clbResult_t rc = recvAll(link, &c, kPrefixBytes, deadlineMs, abort, peer);
  if (rc == clbRemoteError) *retry = true;  // closed before answering: full, or not a root yet
  CLB_CHECK(rc);
  if (c.magic != kWireMagic)
    return setError(clbAuthError, "%s did not answer like a Colibri bootstrap (is another service on that port?)",
                    peer);
  if (c.protocol != CLB_PROTOCOL_VERSION)
    return setError(clbAuthError,
                    "%s speaks bootstrap protocol %u (Colibri %s); this rank speaks protocol %u (Colibri %s): run "
                    "the same Colibri version on every rank",
                    peer, c.protocol, versionString(c.libVersion).c_str(), CLB_PROTOCOL_VERSION,
                    versionString(CLB_VERSION_CODE).c_str());
  if (c.status != clbSuccess) {
    uint8_t pad[kRefusalBytes - kPrefixBytes];
    CLB_CHECK(recvAll(link, pad, sizeof pad, deadlineMs, abort, peer));
    std::string msg(c.msgBytes <= kMaxMessageBytes ? c.msgBytes : 0, '\0');
    if (!msg.empty()) CLB_CHECK(recvAll(link, msg.data(), msg.size(), deadlineMs, abort, peer));
    // Unauthenticated: the code is one of two, whatever the peer says; its words are in the message.
    return setError(c.status == clbInvalidUsage ? clbInvalidUsage : clbAuthError, "%s refused the connection: %s", peer,
                    msg.c_str());
  }
  CLB_CHECK(
      recvAll(link, reinterpret_cast<uint8_t*>(&c) + kPrefixBytes, sizeof c - kPrefixBytes, deadlineMs, abort, peer));
  Transcript t{CLB_PROTOCOL_VERSION, purpose, {}, {}, {}};
  if (session) memcpy(t.session, session, kSessionBytes);
  memcpy(t.clientNonce, h.nonce, kNonceBytes);
  memcpy(t.serverNonce, c.nonce, kNonceBytes);
  TlsBinding binding;
  if (!bindingOf(link, &binding)) return setError(clbSystemError, "OpenSSL could not export the TLS session's binding");
  if (!proofMatches(secret, kServerProof, t, binding, nullptr, 0, c.proof)) {
    if (c.fingerprint != h.fingerprint)
      return setError(clbAuthError,
                      "wrong secret: this rank's UniqueId has secret fingerprint %08x, %s holds fingerprint %08x; "
                      "pass every rank the same UniqueId (a new one is made for each communicator)",
                      h.fingerprint, peer, c.fingerprint);
    return setError(clbAuthError,
                    "%s did not prove this communicator's secret although it names the same fingerprint %08x: is "
                    "something on the network between the ranks answering for it?",
                    peer, c.fingerprint);
  }
  std::vector<uint8_t> msg(kTagBytes + bodyBytes);
  proofTag(secret, kClientProof, t, binding, body ? body : "", bodyBytes, msg.data());
  if (bodyBytes) memcpy(msg.data() + kTagBytes, body, bodyBytes);
  CLB_CHECK(sendAll(link, msg.data(), msg.size(), deadlineMs, abort, peer));
  *out = t;
  return clbSuccess;
}

HandshakeServer::HandshakeServer(int listenFd, const uint8_t* secret, uint32_t purposes, const uint8_t* session,
                                 size_t bodyBytes, std::string where, int64_t perConnectionMs, size_t maxPending,
                                 TlsContextRef tls)
    : listenFd_(listenFd),
      tls_(std::move(tls)),
      purposes_(purposes),
      bodyBytes_(bodyBytes),
      where_(std::move(where)),
      perConnectionMs_(perConnectionMs),
      maxPending_(maxPending ? maxPending : 1) {
  memcpy(secret_, secret, kSecretBytes);
  fingerprint_ = secretFingerprint(secret_);
  memset(session_, 0, sizeof session_);
  if (session) memcpy(session_, session, kSessionBytes);
}

HandshakeServer::~HandshakeServer() {
  gPendingTotal -= (int)pending_.size();
  pending_.clear();
  wipe(secret_, sizeof secret_);
}

size_t HandshakeServer::addPollFds(std::vector<pollfd>* fds) const {
  fds->push_back({listenFd_, acceptsNow(nowMs()) ? (short)POLLIN : (short)0, 0});
  for (const Conn& c : pending_) fds->push_back({c.link.fd(), c.link.wantEvents(POLLIN), 0});
  return 1 + pending_.size();
}

void HandshakeServer::drop(Conn& c, const char* why) {
  if (!c.link.open()) return;
  // Read what the client already sent before closing: closing over unread data resets the
  // connection, and the reset can overtake what was just sent to say why (a refusal, a TLS alert).
  const int fd = c.link.fd();
  c.link.setTls(nullptr);  // a failed TLS session has its alert out already; a live one says close_notify
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
  }
  c.link.close();
  dropped_++;
  // A scan or a flood must not flood the log: one warning a second, with the count in between.
  const int64_t now = nowMs();
  if (now - lastWarnMs_ >= 1000) {
    CLB_WARN(
        "bootstrap %s dropped a connection from %s: %s (%llu other(s) dropped since the last warning); "
        "real ranks are not delayed by it",
        where_.c_str(), c.from.c_str(), why, (unsigned long long)unwarned_);
    lastWarnMs_ = now;
    unwarned_ = 0;
  } else {
    unwarned_++;
  }
}

void HandshakeServer::refuse(Conn& c, uint32_t status, const char* why) {
  // Unauthenticated and plain (a client that cannot speak TLS reads it too): a refusal header, the text.
  uint32_t head[kRefusalBytes / 4] = {kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, status,
                                      (uint32_t)strlen(why)};
  std::string out(reinterpret_cast<const char*>(head), sizeof head);
  out += why;
  (void)sendNow(c.link, out.data(), out.size());
  drop(c, why);
}

void HandshakeServer::noteRefused(const Conn& c) {
  char who[160];
  snprintf(who, sizeof who, "%s, secret fingerprint %08x", c.from.c_str(), c.fingerprint);
  lastRefused_ = who;
  refused_++;
}

bool HandshakeServer::stepTls(Conn& c) {
  if (!c.link.tls()) {  // nothing read yet: TLS opens with a handshake record (type 22)
    unsigned char first = 0;
    ssize_t n = ::recv(c.link.fd(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) {
      drop(c, "it closed before completing the handshake");
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      drop(c, strerror(errno));
      return false;
    }
    if (first != 22) {
      if (first == (kWireMagic & 0xff))
        refuse(c, clbAuthError,
               "this listener takes TLS connections only (COLIBRI_TLS, carried by the unique id): run every rank "
               "with the same COLIBRI_TLS and its certificates");
      else
        drop(c, "not a TLS handshake");
      return false;
    }
    std::unique_ptr<TlsSession> s;
    if (TlsSession::create(tls_, c.link.fd(), true, &s) != clbSuccess) {
      drop(c, lastError().c_str());
      return false;
    }
    c.link.setTls(std::move(s));
  }
  std::string why;
  const int r = c.link.tls()->handshakeStep(&why);
  if (r < 0) {
    drop(c, why.c_str());
    return false;
  }
  if (r == 1) c.stage = 0;
  return true;
}

bool HandshakeServer::step(Conn& c, std::vector<Authenticated>* done) {
  if (c.stage < 0 && (!stepTls(c) || c.stage < 0)) return c.link.open();
  for (;;) {
    ssize_t n = c.link.tryRecv(c.buf.data() + c.have, c.buf.size() - c.have);
    if (n == 0) {
      drop(c, "it closed before completing the handshake");
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      drop(c, errno == EPROTO ? "its TLS stream failed" : strerror(errno));
      return false;
    }
    c.have += n;
    if (c.have < c.buf.size()) continue;
    if (c.stage == 0) {
      ClientHello h;
      memcpy(&h, c.buf.data(), sizeof h);
      if (h.magic != kWireMagic) {
        if (!tls_ && c.buf[0] == 22)  // a TLS client hello: tell it in plain words (its TLS fails on them)
          refuse(c, clbAuthError,
                 "this listener does not take TLS (COLIBRI_TLS=off, carried by the unique id): run every rank with "
                 "the same COLIBRI_TLS");
        else
          drop(c, "not a Colibri bootstrap hello");
        return false;
      }
      char m[320] = {0};
      uint32_t status = clbSuccess;
      if (h.protocol != CLB_PROTOCOL_VERSION) {
        snprintf(m, sizeof m,
                 "it speaks bootstrap protocol %u (Colibri %s), this one speaks protocol %u (Colibri %s): run the "
                 "same Colibri version on every rank",
                 h.protocol, versionString(h.libVersion).c_str(), CLB_PROTOCOL_VERSION,
                 versionString(CLB_VERSION_CODE).c_str());
        status = clbAuthError;
      } else if (h.purpose >= 32 || !(purposes_ & (1u << h.purpose))) {
        snprintf(m, sizeof m, "this listener does not serve connections of purpose %u", h.purpose);
        status = clbInvalidUsage;
      }
      if (status != clbSuccess) {  // say why (unauthenticated, plain text), then close
        refuse(c, status, m);
        return false;
      }
      ServerChallenge ch{kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, clbSuccess, 0, fingerprint_, {}, {}};
      if (!randomBytes(ch.nonce, sizeof ch.nonce)) {
        drop(c, "getrandom() failed");
        return false;
      }
      c.fingerprint = h.fingerprint;
      // A hello that names another secret's fingerprint: its client will refuse this server's
      // proof and close. Unproven, but what a rank that waits in vain wants to hear about.
      if (h.fingerprint != fingerprint_) noteRefused(c);
      c.t = Transcript{CLB_PROTOCOL_VERSION, h.purpose, {}, {}, {}};
      memcpy(c.t.session, session_, kSessionBytes);
      memcpy(c.t.clientNonce, h.nonce, kNonceBytes);
      memcpy(c.t.serverNonce, ch.nonce, kNonceBytes);
      if (!bindingOf(c.link, &c.binding)) {
        drop(c, "OpenSSL could not export the TLS session's binding");
        return false;
      }
      proofTag(secret_, kServerProof, c.t, c.binding, nullptr, 0, ch.proof);
      if (!sendNow(c.link, &ch, sizeof ch)) {
        drop(c, "it does not read");
        return false;
      }
      c.stage = 1;
      c.buf.assign(kTagBytes + bodyBytes_, 0);
      c.have = 0;
      continue;
    }
    const uint8_t* body = c.buf.data() + kTagBytes;
    if (!proofMatches(secret_, kClientProof, c.t, c.binding, body, bodyBytes_, c.buf.data())) {
      noteRefused(c);
      drop(c, "it did not prove the communicator's secret (a wrong UniqueId, a replayed or a forged answer)");
      return false;
    }
    Authenticated a;
    a.link = std::move(c.link);  // the caller owns it now
    a.purpose = c.t.purpose;
    a.transcript = c.t;
    a.body.assign(body, body + bodyBytes_);
    a.from = c.from;
    done->push_back(std::move(a));
    return false;
  }
}

namespace {
// A full server makes room for a new connection by dropping a pending one that has been pending
// this long: a connection that sent nothing yet after 1 ms (an idle one, or a flood), any other
// (a real rank amid its handshake, or one that stalls after its hello) after 20 ms. Each at most a
// tenth of the connection's deadline. So many real ranks dialing at once finish their handshakes
// rather than dial again, and connections that hold places delay them by 20 ms at most.
constexpr int64_t kSilentEvictMs = 1;
constexpr int64_t kBusyEvictMs = 20;
}  // namespace

bool HandshakeServer::progressed(const Conn& c) { return c.stage > 0 || c.have > 0 || (c.stage < 0 && c.link.tls()); }

int64_t HandshakeServer::evictableAt(const Conn& c) const {
  const int64_t since = c.deadline - perConnectionMs_;
  return since + std::min(progressed(c) ? kBusyEvictMs : kSilentEvictMs, perConnectionMs_ / 10);
}

bool HandshakeServer::full() const {
  return pending_.size() >= maxPending_ || gPendingTotal.load() >= processPendingLimit();
}

long HandshakeServer::victim(int64_t now) const {
  for (size_t i = 0; i < pending_.size(); i++)  // the oldest that sent nothing, once it may go
    if (!progressed(pending_[i]) && evictableAt(pending_[i]) <= now) return (long)i;
  return !pending_.empty() && evictableAt(pending_.front()) <= now ? 0 : -1;
}

bool HandshakeServer::acceptsNow(int64_t now) const {
  return now >= pausedUntil_ && (!full() || pending_.empty() || victim(now) >= 0);
}

int HandshakeServer::pollTimeoutMs(int wantMs) const {
  const int64_t now = nowMs();
  if (wantMs <= 0 || acceptsNow(now)) return wantMs;  // the listener is watched
  int64_t at = pausedUntil_;
  if (now >= pausedUntil_) {
    at = INT64_MAX;
    for (const Conn& c : pending_) at = std::min(at, evictableAt(c));
  }
  return (int)std::max<int64_t>(1, std::min<int64_t>(wantMs, at - now));
}

void HandshakeServer::advance(const std::vector<pollfd>& fds, size_t first, size_t n,
                              std::vector<Authenticated>* done) {
  const int64_t now = nowMs();
  const size_t watched = n > 0 ? n - 1 : 0;  // pending_ has not changed since addPollFds
  for (size_t i = 0; i < pending_.size(); i++) {
    Conn& c = pending_[i];
    const bool ready =
        i < watched && fds[first + 1 + i].fd == c.link.fd() && (fds[first + 1 + i].revents || c.link.buffered());
    if (ready && !step(c, done)) continue;
    if (c.link.open() && now > c.deadline) drop(c, "it did not complete the handshake in time");
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->link.open()) {
      ++it;
      continue;
    }
    it = pending_.erase(it);
    gPendingTotal--;
  }
  for (int accepted = 0; accepted < 64 && acceptsNow(now); accepted++) {  // then new ones, a bounded number a round
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of fds: make room (the oldest pending goes) and stop accepting for a moment, rather
        // than spin on a listener that stays readable.
        if (!pending_.empty()) {
          drop(pending_.front(), "the process ran out of file descriptors: the oldest pending goes");
          pending_.pop_front();
          gPendingTotal--;
        }
        pausedUntil_ = now + 50;
        if (now - lastFdWarnMs_ >= 1000) {
          CLB_WARN("bootstrap %s cannot accept connections: %s; raise the limit (ulimit -n) if this is not a flood",
                   where_.c_str(), strerror(errno));
          lastFdWarnMs_ = now;
        }
      }
      break;
    }
    tuneTcp(fd);
    // Bounded per listener and for the whole process (a share of its fd limit): beyond that a
    // pending connection of this listener goes (victim: acceptsNow said there is one), or the new
    // one when this one has none.
    if (full()) {
      const long v = victim(now);
      if (pending_.empty() || v < 0) {
        Conn c{Link(fd), 0, 0, {}, 0, {}, peerName(fd)};
        drop(c, "too many connections are pending in this process");
        continue;
      }
      drop(pending_[v], progressed(pending_[v]) ? "too many connections were pending: the oldest goes"
                                                : "too many connections were pending: one that sent nothing goes");
      pending_.erase(pending_.begin() + v);
      gPendingTotal--;
    }
    Conn c{Link(fd),    now + perConnectionMs_, tls_ ? -1 : 0, std::vector<uint8_t>(sizeof(ClientHello)), 0, {},
           peerName(fd)};
    pending_.push_back(std::move(c));
    gPendingTotal++;
  }
}

}  // namespace clb
