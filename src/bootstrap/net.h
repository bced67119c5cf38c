// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// TCP helpers for the bootstrap and the socket transport. Every blocking step has a deadline and
// watches an abort flag, so that no call can hang forever.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "base/clock.h"  // nowMs(): the clock of every deadlineMs below
#include "colibri/colibri.h"

namespace clb {

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  std::string str() const;  // "host:port" ("[v6]:port")
  int port() const;
};

// Resolves host (name or literal) and port; prefers IPv4.
clbResult_t resolveHost(const char* host, int port, SockAddr* out);
// The address other hosts should use to reach this one: COLIBRI_BOOTSTRAP_HOST if set, else the
// first address of the interface named by COLIBRI_SOCKET_IFNAME (comma-separated name prefixes),
// else the source address of the default route, else the first non-loopback interface, else
// 127.0.0.1.
clbResult_t localAddress(SockAddr* out);

// The backlog listenTcp asks for; the kernel takes at most net.core.somaxconn of it.
constexpr int kListenBacklog = 65535;
// Listens on `addr` (port 0 = ephemeral) and returns the bound address (with the real port).
clbResult_t listenTcp(const SockAddr& addr, int* fd, SockAddr* bound);
// A check the network waits of this thread make while it is in scope: every 100 ms of a wait
// for a socket (waitFd), before each new connection attempt (connectTcp) and each step of a TLS
// handshake. A result other than clbSuccess ends the wait with that result (its message set by the
// check). A point-to-point dial installs its communicator's (CommContext::checkWait: a peer's
// failure notice, an abort, the timeout), so that dialing a rank that refused a call and closed
// ends at once instead of at the dial's deadline. Scopes nest; the innermost check is asked.
class WaitCheck {
 public:
  explicit WaitCheck(std::function<clbResult_t()> check);
  ~WaitCheck();
  WaitCheck(const WaitCheck&) = delete;
  WaitCheck& operator=(const WaitCheck&) = delete;
  // The innermost check in scope on this thread, or clbSuccess when there is none.
  static clbResult_t poll();

 private:
  std::function<clbResult_t()> check_;
  WaitCheck* outer_;
};

// Connects, retrying refused connections until deadlineMs (absolute, nowMs() clock).
clbResult_t connectTcp(const SockAddr& addr, int64_t deadlineMs, const std::atomic<bool>* abort, int* fd);
// One attempt of connectTcp without waiting, for callers that poll many sockets: 0 with *fd
// connected, EINPROGRESS with *fd connecting (wait for POLLOUT, then finishConnect), or the errno
// of the failed attempt with *fd = -1 (*noSocket set when socket() itself failed).
int startConnect(const SockAddr& addr, int* fd, bool* noSocket = nullptr);
// After POLLOUT (or an error) on a connecting socket: 0 when it connected (tuned as tuneTcp), else
// its error (the socket is the caller's to close).
int finishConnect(int fd);
// Whether a connect that failed with `err` is worth trying again (nobody listens yet, the
// network is not there yet).
bool connectRetryable(int err);
clbResult_t acceptTcp(int listenFd, int64_t deadlineMs, const std::atomic<bool>* abort, int* fd);

class TlsSession;  // bootstrap/tls.h

// A TCP connection of the bootstrap or the socket transport: its socket and, where COLIBRI_TLS
// covers it, its TLS session. Owns both, closing them on destruction (a borrowed Link does not).
class Link {
 public:
  Link();
  explicit Link(int fd);
  static Link borrow(int fd);  // uses fd without owning it (plain, no TLS)
  Link(Link&& o) noexcept;
  Link& operator=(Link&& o) noexcept;
  ~Link();
  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  TlsSession* tls() const { return tls_.get(); }
  void setTls(std::unique_ptr<TlsSession> tls);
  // One try, as send / recv with MSG_DONTWAIT (and MSG_NOSIGNAL): bytes moved, 0 on receive when
  // the peer closed, -1 with errno (EAGAIN: poll for wantEvents first; EPROTO: TLS failed).
  ssize_t trySend(const void* buf, size_t bytes);
  ssize_t tryRecv(void* buf, size_t bytes, bool peek = false);
  // Data that tryRecv returns without the socket being readable (decrypted, buffered by TLS).
  bool buffered() const;
  // The poll events to wait for after EAGAIN: `dflt`, unless TLS must first read or write.
  short wantEvents(short dflt) const;
  void close();

 private:
  int fd_ = -1;
  bool owned_ = true;
  std::unique_ptr<TlsSession> tls_;
};

// Whole-buffer send/recv with a deadline. `what` names the peer for messages.
clbResult_t sendAll(Link& link, const void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what);
clbResult_t recvAll(Link& link, void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what);
// The buffers one after the other as one message: on a plain socket one sendmsg for what fits
// its buffer, so that the peer wakes once for it (with TCP_NODELAY, every send is a segment of its
// own); over TLS one record (the parts copied into one buffer, one write).
struct ConstBuf {
  const void* data;
  size_t bytes;
};
clbResult_t sendAllParts(Link& link, std::initializer_list<ConstBuf> parts, int64_t deadlineMs,
                         const std::atomic<bool>* abort, const char* what);
clbResult_t sendAll(int fd, const void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what);
clbResult_t recvAll(int fd, void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what);
void setNonBlocking(int fd);
// TCP_NODELAY and non-blocking, as every bootstrap and transport socket is.
void tuneTcp(int fd);
void closeFd(int* fd);

}  // namespace clb
