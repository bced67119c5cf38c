// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// TCP helpers for the bootstrap and the socket transport. Every blocking step has a deadline and
// watches an abort flag, so that no call can hang forever.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "colibri/colibri.h"

namespace clb {

int64_t nowMs();

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

// Listens on `addr` (port 0 = ephemeral) and returns the bound address (with the real port).
clbResult_t listenTcp(const SockAddr& addr, int* fd, SockAddr* bound);
// Connects, retrying refused connections until deadlineMs (absolute, nowMs() clock).
clbResult_t connectTcp(const SockAddr& addr, int64_t deadlineMs, const std::atomic<bool>* abort,
                       int* fd);
clbResult_t acceptTcp(int listenFd, int64_t deadlineMs, const std::atomic<bool>* abort, int* fd);
// Whole-buffer send/recv with a deadline. `what` names the peer for messages.
clbResult_t sendAll(int fd, const void* buf, size_t bytes, int64_t deadlineMs,
                    const std::atomic<bool>* abort, const char* what);
clbResult_t recvAll(int fd, void* buf, size_t bytes, int64_t deadlineMs,
                    const std::atomic<bool>* abort, const char* what);
void setNonBlocking(int fd);
// TCP_NODELAY and non-blocking, as every bootstrap and transport socket is.
void tuneTcp(int fd);
void closeFd(int* fd);

}  // namespace clb
