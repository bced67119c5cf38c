// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/error.h"
#include "bootstrap/tls.h"

namespace clb {

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  char out[INET6_ADDRSTRLEN + 16];
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    snprintf(out, sizeof out, "%s:%d", host, ntohs(a->sin_port));
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    snprintf(out, sizeof out, "[%s]:%d", host, ntohs(a->sin6_port));
  } else {
    snprintf(out, sizeof out, "<no address>");
  }
  return out;
}

int SockAddr::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

clbResult_t resolveHost(const char* host, int port, SockAddr* out) {
  if (port < 0 || port > 65535) return setError(clbInvalidArgument, "port %d is out of range: use 0..65535", port);
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int rc = getaddrinfo(host, nullptr, &hints, &res);
  if (rc != 0 || !res)
    return setError(clbInvalidArgument, "cannot resolve host '%s': %s; check the address (e.g. MASTER_ADDR)", host,
                    gai_strerror(rc));
  struct addrinfo* pick = res;
  for (auto* p = res; p; p = p->ai_next)
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  memcpy(&out->ss, pick->ai_addr, pick->ai_addrlen);
  out->len = pick->ai_addrlen;
  if (out->ss.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&out->ss)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&out->ss)->sin6_port = htons(port);
  freeaddrinfo(res);
  return clbSuccess;
}

// The first address of the first interface, in the order of the comma-separated name prefixes in
// `list`, that is up (IPv4 before IPv6, IPv6 link-local addresses skipped: their scope cannot be
// advertised).
static clbResult_t interfaceAddress(const char* list, SockAddr* out) {
  if (list[0] == '^' || list[0] == '=')
    return setError(clbInvalidArgument,
                    "COLIBRI_SOCKET_IFNAME=%s: exclusion (^) and exact (=) forms are not supported; give the "
                    "names (or name prefixes) of the interfaces to use, separated by commas, e.g. eth0 or ens,eth",
                    list);
  struct ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return setSysError(errno, "getifaddrs() for COLIBRI_SOCKET_IFNAME=%s failed", list);
  for (const char* p = list; *p;) {
    const char* end = strchr(p, ',');
    const size_t n = end ? (size_t)(end - p) : strlen(p);
    for (int family : {AF_INET, AF_INET6}) {
      for (auto* i = ifs; n && i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_flags & IFF_UP) == 0 || i->ifa_addr->sa_family != family) continue;
        if (strncmp(i->ifa_name, p, n) != 0) continue;
        if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr))
          continue;
        const size_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        memcpy(&out->ss, i->ifa_addr, len);
        out->len = len;
        freeifaddrs(ifs);
        return clbSuccess;
      }
    }
    p += n + (end ? 1 : 0);
  }
  std::string seen;
  for (auto* i = ifs; i; i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_flags & IFF_UP) && seen.find(std::string(" ") + i->ifa_name + ",") == std::string::npos)
      seen += std::string(" ") + i->ifa_name + ",";
  freeifaddrs(ifs);
  if (!seen.empty()) seen.pop_back();
  return setError(clbInvalidArgument,
                  "COLIBRI_SOCKET_IFNAME=%s matches no interface that is up with an address; the interfaces that "
                  "are up here:%s",
                  list, seen.c_str());
}

clbResult_t localAddress(SockAddr* out) {
  if (const char* h = getenv("COLIBRI_BOOTSTRAP_HOST"); h && *h) return resolveHost(h, 0, out);
  if (const char* n = getenv("COLIBRI_SOCKET_IFNAME"); n && *n) return interfaceAddress(n, out);
  // Source address of the default route: a UDP connect sends nothing.
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(53);
    inet_pton(AF_INET, "8.8.8.8", &dst.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == 0) {
      sockaddr_in me{};
      socklen_t len = sizeof me;
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0 && me.sin_addr.s_addr != 0) {
        close(fd);
        me.sin_port = 0;
        memcpy(&out->ss, &me, sizeof me);
        out->len = sizeof me;
        return clbSuccess;
      }
    }
    close(fd);
  }
  struct ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (auto* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK)) continue;
      memcpy(&out->ss, i->ifa_addr, sizeof(sockaddr_in));
      out->len = sizeof(sockaddr_in);
      freeifaddrs(ifs);
      return clbSuccess;
    }
    freeifaddrs(ifs);
  }
  return resolveHost("127.0.0.1", 0, out);
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void closeFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void tuneTcp(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setNonBlocking(fd);
}

clbResult_t listenTcp(const SockAddr& addr, int* fd, SockAddr* bound) {
  int s = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return setSysError(errno, "socket() for listening on %s failed", addr.str().c_str());
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    int e = errno;
    close(s);
    return setSysError(e, "cannot listen on %s (is the port in use, or the address not local?)", addr.str().c_str());
  }
  // The accept queue: as long as the kernel allows (it clamps to net.core.somaxconn, 4096 by
  // default since Linux 5.4). A root that n ranks dial at once holds every SYN it can: one dropped
  // at a full queue is sent again only after 1 s (then 2 s, 4 s ...). With 256, 1 024 ranks
  // starting together took 7 s to join instead of 44 ms (colibri_boot_netsim, docs/performance.md).
  if (listen(s, kListenBacklog) != 0) {
    int e = errno;
    close(s);
    return setSysError(e, "listen() on %s failed", addr.str().c_str());
  }
  bound->len = sizeof bound->ss;
  getsockname(s, reinterpret_cast<sockaddr*>(&bound->ss), &bound->len);
  setNonBlocking(s);
  *fd = s;
  return clbSuccess;
}

namespace {
thread_local WaitCheck* tInnermostCheck = nullptr;
}  // namespace

WaitCheck::WaitCheck(std::function<clbResult_t()> check) : check_(std::move(check)), outer_(tInnermostCheck) {
  tInnermostCheck = this;
}

WaitCheck::~WaitCheck() { tInnermostCheck = outer_; }

clbResult_t WaitCheck::poll() {
  WaitCheck* c = tInnermostCheck;
  return c && c->check_ ? c->check_() : clbSuccess;
}

static clbResult_t waitFd(int fd, short events, int64_t deadlineMs, const std::atomic<bool>* abort, const char* what) {
  for (;;) {
    if (abort && abort->load(std::memory_order_relaxed))
      return setError(clbAborted, "aborted while waiting for %s", what);
    CLB_CHECK(WaitCheck::poll());
    int64_t left = deadlineMs - nowMs();
    if (left <= 0) return setError(clbTimeout, "timed out waiting for %s", what);
    struct pollfd p {
      fd, events, 0
    };
    int rc = poll(&p, 1, (int)(left < 100 ? left : 100));
    if (rc > 0) return clbSuccess;
    if (rc < 0 && errno != EINTR) return setSysError(errno, "poll() waiting for %s failed", what);
  }
}

int startConnect(const SockAddr& addr, int* fd, bool* noSocket) {
  *fd = -1;
  if (noSocket) *noSocket = false;
  int s = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) {
    if (noSocket) *noSocket = true;
    return errno;
  }
  int err = connect(s, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) == 0 ? 0 : errno;
  if (err != 0 && err != EINPROGRESS) {
    close(s);
    return err;
  }
  if (err == 0) tuneTcp(s);
  *fd = s;
  return err;
}

int finishConnect(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) tuneTcp(fd);
  return err;
}

bool connectRetryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNRESET ||
         err == EAGAIN;
}

clbResult_t connectTcp(const SockAddr& addr, int64_t deadlineMs, const std::atomic<bool>* abort, int* fd) {
  int delayMs = 1;
  for (;;) {
    bool noSocket = false;
    int err = startConnect(addr, fd, &noSocket);
    if (noSocket) return setSysError(err, "socket() to connect to %s failed", addr.str().c_str());
    if (err == EINPROGRESS) {
      std::string what = "connection to " + addr.str();
      clbResult_t w = waitFd(*fd, POLLOUT, deadlineMs, abort, what.c_str());
      if (w != clbSuccess) {
        closeFd(fd);
        return w;
      }
      err = finishConnect(*fd);
      if (err != 0) closeFd(fd);
    }
    if (err == 0) return clbSuccess;
    if (!connectRetryable(err)) return setSysError(err, "cannot connect to %s", addr.str().c_str());
    if (abort && abort->load()) return setError(clbAborted, "aborted while connecting to %s", addr.str().c_str());
    CLB_CHECK(WaitCheck::poll());
    if (nowMs() + delayMs >= deadlineMs)
      return setError(clbTimeout,
                      "nobody accepted a connection at %s before the timeout (last error: %s); "
                      "check that the root / peer is running and the address is reachable",
                      addr.str().c_str(), strerror(err));
    usleep(delayMs * 1000);
    if (delayMs < 100) delayMs *= 2;
  }
}

clbResult_t acceptTcp(int listenFd, int64_t deadlineMs, const std::atomic<bool>* abort, int* fd) {
  for (;;) {
    int s = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s >= 0) {
      tuneTcp(s);
      *fd = s;
      return clbSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return setSysError(errno, "accept() failed");
    CLB_CHECK(waitFd(listenFd, POLLIN, deadlineMs, abort, "an incoming connection"));
  }
}

Link::Link() = default;
Link::Link(int fd) : fd_(fd) {}
Link Link::borrow(int fd) {
  Link l(fd);
  l.owned_ = false;
  return l;
}
Link::Link(Link&& o) noexcept : fd_(o.fd_), owned_(o.owned_), tls_(std::move(o.tls_)) { o.fd_ = -1; }
Link& Link::operator=(Link&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    owned_ = o.owned_;
    tls_ = std::move(o.tls_);
    o.fd_ = -1;
  }
  return *this;
}
Link::~Link() { close(); }

void Link::setTls(std::unique_ptr<TlsSession> tls) { tls_ = std::move(tls); }

void Link::close() {
  tls_.reset();  // its close_notify goes out before the socket closes
  if (fd_ >= 0 && owned_) ::close(fd_);
  fd_ = -1;
  owned_ = true;
}

ssize_t Link::trySend(const void* buf, size_t bytes) {
  if (tls_) return tls_->send(buf, bytes);
  return ::send(fd_, buf, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t Link::tryRecv(void* buf, size_t bytes, bool peek) {
  if (tls_) return tls_->recv(buf, bytes, peek);
  return ::recv(fd_, buf, bytes, MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
}

bool Link::buffered() const { return tls_ && tls_->buffered(); }

short Link::wantEvents(short dflt) const { return tls_ ? tls_->wantEvents(dflt) : dflt; }

// The error of a send that failed with errno (not EAGAIN): the peer's doing, TLS's, or this host's.
static clbResult_t sendFailed(Link& link, const char* what) {
  if (errno == EPIPE || errno == ECONNRESET)
    return setError(clbRemoteError, "%s closed the connection (did it exit or fail?): %s", what, strerror(errno));
  if (errno == EPROTO && link.tls())
    return setError(clbAuthError, "the TLS connection to %s failed: %s", what, link.tls()->failure().c_str());
  return setSysError(errno, "sending to %s failed (did the peer exit?)", what);
}

clbResult_t sendAll(Link& link, const void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what) {
  const char* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    ssize_t n = link.trySend(p, bytes);
    if (n > 0) {
      p += n;
      bytes -= n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      CLB_CHECK(waitFd(link.fd(), link.wantEvents(POLLOUT), deadlineMs, abort, what));
      continue;
    }
    return sendFailed(link, what);
  }
  return clbSuccess;
}

clbResult_t sendAllParts(Link& link, std::initializer_list<ConstBuf> parts, int64_t deadlineMs,
                         const std::atomic<bool>* abort, const char* what) {
  if (link.tls()) {  // one write of the parts together: one TLS record, one send
    size_t total = 0;
    for (const ConstBuf& p : parts) total += p.bytes;
    std::string msg;
    msg.reserve(total);
    for (const ConstBuf& p : parts)
      if (p.bytes) msg.append(static_cast<const char*>(p.data), p.bytes);
    return sendAll(link, msg.data(), msg.size(), deadlineMs, abort, what);
  }
  const int fd = link.fd();
  constexpr size_t kMaxParts = 8;
  iovec iov[kMaxParts];
  size_t n = 0;
  for (const ConstBuf& p : parts) {
    if (!p.bytes) continue;
    if (n == kMaxParts) return setError(clbInternalError, "sendAllParts: more than %zu parts", kMaxParts);
    iov[n++] = iovec{const_cast<void*>(p.data), p.bytes};
  }
  size_t first = 0;
  while (first < n) {
    msghdr m{};
    m.msg_iov = iov + first;
    m.msg_iovlen = n - first;
    ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      size_t k = (size_t)sent;
      while (first < n && k >= iov[first].iov_len) k -= iov[first++].iov_len;
      if (first < n) {  // a part sent in part goes on from where it stopped
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + k;
        iov[first].iov_len -= k;
      }
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      CLB_CHECK(waitFd(fd, POLLOUT, deadlineMs, abort, what));
      continue;
    }
    return sendFailed(link, what);
  }
  return clbSuccess;
}

clbResult_t recvAll(Link& link, void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what) {
  char* p = static_cast<char*>(buf);
  while (bytes > 0) {
    ssize_t n = link.tryRecv(p, bytes);
    if (n > 0) {
      p += n;
      bytes -= n;
      continue;
    }
    if (n == 0) return setError(clbRemoteError, "%s closed the connection (did the peer exit or fail?)", what);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!link.buffered()) CLB_CHECK(waitFd(link.fd(), link.wantEvents(POLLIN), deadlineMs, abort, what));
      continue;
    }
    if (errno == ECONNRESET) return setError(clbRemoteError, "%s reset the connection (did it exit or fail?)", what);
    if (errno == EPROTO)
      return setError(clbAuthError, "the TLS connection with %s failed: %s", what, link.tls()->failure().c_str());
    return setSysError(errno, "receiving from %s failed (did the peer exit?)", what);
  }
  return clbSuccess;
}

clbResult_t sendAll(int fd, const void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what) {
  Link l = Link::borrow(fd);
  return sendAll(l, buf, bytes, deadlineMs, abort, what);
}

clbResult_t recvAll(int fd, void* buf, size_t bytes, int64_t deadlineMs, const std::atomic<bool>* abort,
                    const char* what) {
  Link l = Link::borrow(fd);
  return recvAll(l, buf, bytes, deadlineMs, abort, what);
}

}  // namespace clb
