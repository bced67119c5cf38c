// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Optional TLS for the bootstrap and the socket transport, through OpenSSL 3 (libssl.so.3)
// loaded at run time: Colibri never links it, and a host without it runs with TLS off.
//
// COLIBRI_TLS picks what runs over TLS 1.3 with mutual certificate authentication:
//   off        nothing (the default): every connection still proves the secret (bootstrap/handshake.h);
//   bootstrap  the connections to the root (the table of every rank's address, host and pid, and
//              the session);
//   all        every TCP connection: the root's, and the ring's (the bootstrap's later
//              all-gathers, failure notices, the socket transport's data).
// Each rank presents COLIBRI_TLS_CERT (PEM, the chain) with COLIBRI_TLS_KEY and accepts only a
// peer whose certificate chains to COLIBRI_TLS_CA. TLS proves that a peer belongs to the cluster
// (holds a key the CA signed); the secret's challenge-response inside it still proves that it
// belongs to this communicator. The mode travels in the unique id, so every rank agrees on it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "colibri/colibri.h"

namespace clb {

enum class TlsMode : uint32_t { kOff = 0, kBootstrap = 1, kAll = 2 };
const char* tlsModeName(TlsMode m);

// COLIBRI_TLS read now: unset or empty is kOff (and *set false); anything but off, bootstrap or
// all is INVALID_ARGUMENT naming the variable.
clbResult_t tlsModeFromEnv(TlsMode* out, bool* set);

class TlsContext;  // an SSL_CTX with this process's certificate, key and CA: shared, refcounted
using TlsContextRef = std::shared_ptr<TlsContext>;

// The context for `mode` (nullptr for kOff), built from COLIBRI_TLS_CERT / _KEY / _CA as they are
// now; the same files give the same context. Errors name the variable, the file and OpenSSL's
// reason; without libssl.so.3 (or COLIBRI_TLS_LIBRARY, a path to another build of it), UNSUPPORTED.
clbResult_t tlsContextFor(TlsMode mode, TlsContextRef* out);

// One TLS connection over a non-blocking TCP socket (the socket's fd stays the caller's). Thread
// safe: every call holds the session's lock, so one thread may send while another receives.
class TlsSession {
 public:
  // Server (accept) or client (connect) side; the handshake runs in handshakeStep / connect.
  static clbResult_t create(const TlsContextRef& ctx, int fd, bool server, std::unique_ptr<TlsSession>* out);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // One non-blocking step of the handshake: 1 done, 0 not yet (poll for wantEvents()), -1 failed
  // (*why says why: a certificate the CA did not sign, a peer that is not TLS, ...), -2 the peer
  // closed the connection (a client may connect again: a full server drops connections).
  int handshakeStep(std::string* why);
  // The whole client handshake, waiting up to deadlineMs; `peer` names the server in errors.
  // REMOTE_ERROR when the server closed the connection during it (retry), AUTH_ERROR otherwise.
  clbResult_t connect(int64_t deadlineMs, const std::atomic<bool>* abort, const char* peer);
  // As send / recv with MSG_DONTWAIT: bytes moved; 0 on recv when the peer closed; -1 with errno
  // (EAGAIN: try again once wantEvents() is ready; EPROTO: the TLS stream is corrupt).
  ssize_t send(const void* buf, size_t bytes);
  ssize_t recv(void* buf, size_t bytes, bool peek);
  // Plaintext already decrypted here: recv returns it although the socket is not readable.
  bool buffered();
  // What to poll for after EAGAIN: POLLIN, or POLLOUT when TLS must write before it can go on.
  short wantEvents(short dflt) const {
    const short w = want_.load(std::memory_order_relaxed);
    return w ? w : dflt;
  }
  // 32 bytes that both ends of this TLS session, and nobody else, derive from it (the RFC 5705
  // exporter): the challenge-response MACs them, so that it cannot be relayed between two TLS
  // sessions by someone in the middle who holds a certificate of the CA. False on failure.
  bool binding(uint8_t out[32]);
  // "TLSv1.3 TLS_AES_256_GCM_SHA384", for logs and tests.
  std::string describe();
  // Why the last call failed with EPROTO (OpenSSL's reasons, an alert the peer sent).
  std::string failure();

 private:
  TlsSession() = default;
  ssize_t io(int ret, bool reading);
  std::mutex mu_;
  void* ssl_ = nullptr;  // SSL*
  TlsContextRef ctx_;
  int fd_ = -1;
  std::atomic<short> want_{0};
  std::string failure_;
};

}  // namespace clb
