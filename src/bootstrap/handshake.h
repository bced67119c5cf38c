// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The bootstrap handshake: every TCP connection of the bootstrap (a rank to the root, a rank to
// its ring neighbour) starts with a mutual challenge-response that proves both ends hold the
// communicator's secret without sending it. The client opens with a fresh 16-byte nonce; the
// server answers with its own nonce and HMAC-SHA256(secret, "server" label | transcript); the
// client checks that, then answers with HMAC-SHA256(secret, "client" label | transcript | body),
// which also authenticates the body it carries (a rank's hello). The transcript binds the protocol
// version, the purpose (root or ring channel), the session (the communicator, for ring
// connections) and both nonces: an answer recorded on one connection fails on any other (replay),
// and a server's answer is never a valid client answer (reflection). Messages after the handshake
// carry a MAC keyed the same way (tag()): the root's reply, the ring's accept, the bootstrap's
// all-gather blocks. docs/architecture.md ("The bootstrap handshake") has the threat model.
//
// The server side is a state machine driven by poll (HandshakeServer), so one process serves many
// connections at once, each with a short deadline of its own: a connection that sends nothing, or
// junk, is dropped without delaying the real ranks.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/crypto.h"
#include "bootstrap/net.h"
#include "bootstrap/tls.h"

namespace clb {

constexpr int kSecretBytes = 16;
constexpr int kNonceBytes = 16;
constexpr int kSessionBytes = 16;
constexpr int kTagBytes = (int)kSha256Bytes;
constexpr uint32_t kWireMagic = 0x57424c43;  // "CLBW"

enum Purpose : uint32_t {
  kPurposeRoot = 1,
  kPurposeRingData = 2,
  kPurposeRingNotices = 3,
  kPurposePeerData = 4,
  kPurposeGather = 5  // Bootstrap::gatherAmong
};

// Client -> server, first message. Changing any wire struct needs a new CLB_PROTOCOL_VERSION; the
// first three fields stay where they are in every version, so each side can name the other's.
struct ClientHello {
  uint32_t magic;
  uint32_t protocol;
  uint32_t libVersion;
  uint32_t purpose;
  uint32_t fingerprint;  // of the client's secret, for messages (secretFingerprint)
  uint32_t pad;
  uint8_t nonce[kNonceBytes];
};

// Server -> client. A refusal (status != 0: another protocol, a purpose this server does not
// serve) carries msgBytes of text after it, no proof, and the connection closes.
struct ServerChallenge {
  uint32_t magic;
  uint32_t protocol;
  uint32_t libVersion;
  uint32_t status;
  uint32_t msgBytes;
  uint32_t fingerprint;  // of the server's secret
  uint8_t nonce[kNonceBytes];
  uint8_t proof[kTagBytes];
};

// What both ends MAC over: fixed by the handshake.
struct Transcript {
  uint32_t protocol;
  uint32_t purpose;
  uint8_t session[kSessionBytes];
  uint8_t clientNonce[kNonceBytes];
  uint8_t serverNonce[kNonceBytes];
};

// "0.1.0" for CLB_VERSION_CODE 100.
std::string versionString(uint32_t code);

// A short, one-way name of a secret for messages (the first 4 bytes of a labelled SHA-256).
uint32_t secretFingerprint(const uint8_t* secret);

// HMAC-SHA256(secret, label | transcript | parts...): the proofs and every later message's tag.
// Each part is framed by its length. A part is a ConstBuf (bootstrap/net.h), as sendAllParts takes.
using Part = ConstBuf;
void tag(const uint8_t* secret, const char* label, const Transcript& t, const Part* parts, size_t count,
         uint8_t out[kTagBytes]);
inline void tag(const uint8_t* secret, const char* label, const Transcript& t, std::initializer_list<Part> parts,
                uint8_t out[kTagBytes]) {
  tag(secret, label, t, parts.begin(), parts.size(), out);
}
bool tagMatches(const uint8_t* secret, const char* label, const Transcript& t, std::initializer_list<Part> parts,
                const uint8_t* got);

// The client side on a connected socket: TLS first when `tls` is set (a context of
// tlsContextFor), then the hello, the server's proof checked, proof + body sent. `retry` is set
// when the server closed the connection before its challenge (it was full or restarting): the
// caller may connect again. `peer` names the server in messages.
clbResult_t clientHandshake(Link& link, const TlsContextRef& tls, const uint8_t* secret, Purpose purpose,
                            const uint8_t* session, const void* body, size_t bodyBytes, int64_t deadlineMs,
                            const std::atomic<bool>* abort, const char* peer, Transcript* out, bool* retry);
// clientHandshake after its TLS (none, or done on `link` already) in two steps, so that a rank can
// drive several connections from one poll loop: send the hello, then (once its challenge may have
// come) check the server's proof and send proof + body. `retry` as for clientHandshake.
clbResult_t clientHello(Link& link, const uint8_t* secret, Purpose purpose, int64_t deadlineMs,
                        const std::atomic<bool>* abort, const char* peer, ClientHello* sent);
clbResult_t clientProve(Link& link, const uint8_t* secret, const ClientHello& sent, const uint8_t* session,
                        const void* body, size_t bodyBytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                        const char* peer, Transcript* out, bool* retry);

// Under TLS, the session's exporter value (TlsSession::binding), which the proofs also MAC.
struct TlsBinding {
  uint8_t bytes[32] = {};
  bool on = false;
};

// A connection whose client proved the secret; its body is verified. The server owns the link now.
struct Authenticated {
  Link link;
  uint32_t purpose = 0;
  Transcript transcript{};
  std::vector<uint8_t> body;
  std::string from;  // the peer's address, for messages
};

// The server side: accepts on `listenFd` and drives every pending handshake by poll, TLS first
// when `tls` is set. Connections that are not done within `perConnectionMs` are dropped; beyond
// `maxPending` pending at once, a new connection takes the place of the oldest that sent nothing
// for 1 ms, else of the oldest once it has been pending 20 ms (each at most a tenth of
// perConnectionMs; its client, if real, connects again); until then new connections wait in the
// listener's queue. A
// client that does not speak TLS to a TLS listener, or TLS to a plain one, is told why.
class HandshakeServer {
 public:
  HandshakeServer(int listenFd, const uint8_t* secret, uint32_t purposes /* bit per Purpose */, const uint8_t* session,
                  size_t bodyBytes, std::string where, int64_t perConnectionMs, size_t maxPending,
                  TlsContextRef tls = nullptr);
  ~HandshakeServer();
  HandshakeServer(const HandshakeServer&) = delete;
  HandshakeServer& operator=(const HandshakeServer&) = delete;

  // Appends the pollfds to watch (the listener, then each pending connection); returns how many.
  size_t addPollFds(std::vector<pollfd>* fds) const;
  // The poll timeout to use instead of `wantMs`: shorter while the listener is not watched (full,
  // or paused), so that accepting resumes as soon as a pending connection may make room.
  int pollTimeoutMs(int wantMs) const;
  // After poll(): advances the connections of fds[first, first + n) (as added by addPollFds),
  // drops the expired ones, accepts new ones, and appends the connections that completed to `done`.
  void advance(const std::vector<pollfd>& fds, size_t first, size_t n, std::vector<Authenticated>* done);
  size_t pending() const { return pending_.size(); }
  // Counts for tests and logs: connections dropped (timed out, bad, evicted) since construction.
  uint64_t dropped() const { return dropped_; }
  // Connections that hold another secret (their hello names another fingerprint, or their proof
  // fails), and the last of them ("10.0.0.5:41234, secret fingerprint 1a2b3c4d"), for the
  // messages of ranks that then wait in vain.
  uint64_t refused() const { return refused_; }
  const std::string& lastRefused() const { return lastRefused_; }

 private:
  struct Conn {
    Link link;
    int64_t deadline;
    int stage;  // -1: TLS handshake, 0: reading the hello, 1: reading proof + body
    std::vector<uint8_t> buf;
    size_t have;
    Transcript t;
    std::string from;
    TlsBinding binding{};
    uint32_t fingerprint = 0;  // of the client's secret, from its hello
  };
  bool acceptsNow(int64_t now) const;                    // not paused, and room (or a pending one that may go: victim)
  bool full() const;                                     // this listener's or the process's pending connections
  long victim(int64_t now) const;                        // the pending one to drop for a new one, -1: none yet
  int64_t evictableAt(const Conn& c) const;              // when `c` may go for a new connection
  static bool progressed(const Conn& c);                 // it sent something (a TLS record, its hello)
  bool step(Conn& c, std::vector<Authenticated>* done);  // false: drop it
  bool stepTls(Conn& c);                                 // false: dropped
  void refuse(Conn& c, uint32_t status, const char* why);  // tells the client why, then drops it
  void noteRefused(const Conn& c);                         // one more connection with another secret
  void drop(Conn& c, const char* why);
  int listenFd_;
  TlsContextRef tls_;
  uint8_t secret_[kSecretBytes];
  uint32_t fingerprint_;  // secretFingerprint(secret_)
  uint32_t purposes_;
  uint8_t session_[kSessionBytes];
  size_t bodyBytes_;
  std::string where_;
  int64_t perConnectionMs_;
  size_t maxPending_;
  std::deque<Conn> pending_;
  uint64_t dropped_ = 0;
  uint64_t refused_ = 0;
  std::string lastRefused_;
  int64_t pausedUntil_ = 0;  // out of fds: no accepting until then
  int64_t lastFdWarnMs_ = 0;
  int64_t lastWarnMs_ = 0;
  uint64_t unwarned_ = 0;
};

// Handshakes pending in this process, over all its listeners (tests: 0 once every listener ended).
int pendingHandshakesInProcess();

// COLIBRI_HANDSHAKE_TIMEOUT_MS (default 1000): how long one connection may take to prove itself.
int64_t handshakeTimeoutMs();
constexpr size_t kMaxPendingHandshakes = 256;

}  // namespace clb
