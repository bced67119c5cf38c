// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Test helpers that speak the bootstrap protocol by hand (a rank's hello to the root, raw
// connections), and look at this process's sockets, threads and fds.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/net.h"

namespace clbtest {

// The client handshake on a plain socket that the caller keeps owning.
inline clbResult_t clientHandshake(int fd, const uint8_t* secret, clb::Purpose purpose, const uint8_t* session,
                                   const void* body, size_t bodyBytes, int64_t deadlineMs,
                                   const std::atomic<bool>* abort, const char* peer, clb::Transcript* out,
                                   bool* retry) {
  clb::Link link = clb::Link::borrow(fd);
  return clb::clientHandshake(link, nullptr, secret, purpose, session, body, bodyBytes, deadlineMs, abort, peer, out,
                              retry);
}

inline clb::IdData idData(const clbUniqueId& uid) {
  clb::IdData d;
  memcpy(&d, &uid, sizeof d);
  return d;
}

// What the root answered one hello.
struct RootAnswer {
  clbResult_t rc = clbInternalError;  // of the handshake and the read (the message in `error`)
  std::string error;
  uint32_t status = 0;  // the root's verdict
  std::string msg;
};

// A connection to the root of `id` that proves `secret` and says hello as rank/nranks; when
// `keep` is given the connection stays open (the rank's place held) and its fd is returned there.
// `rowRank`: the rank its row (HelloBody::info) names, when not `rank` (-1: `rank`).
inline RootAnswer helloToRoot(const clb::IdData& id, const uint8_t* secret, int rank, int nranks, int* keep = nullptr,
                              int rowRank = -1) {
  RootAnswer a;
  int fd = -1;
  const int64_t by = clb::nowMs() + 3000;
  a.rc = clb::connectTcp(clb::idAddress(id), by, nullptr, &fd);
  if (a.rc != clbSuccess) {
    a.error = clbGetLastError();
    return a;
  }
  clb::HelloBody b{};
  b.rank = rank;
  b.nranks = nranks;
  b.timeoutMs = 3000;
  b.info.rank = rowRank >= 0 ? rowRank : rank;
  b.info.pid = getpid();
  snprintf(b.info.hostname, sizeof b.info.hostname, "test");
  b.info.agreed.settingsValid = 1;  // a rank whose configuration was taken (0: the root refuses it)
  clb::Transcript t{};
  bool retry = false;
  a.rc = clientHandshake(fd, secret, clb::kPurposeRoot, nullptr, &b, sizeof b, by, nullptr, "the root", &t, &retry);
  if (a.rc == clbSuccess && keep) {
    *keep = fd;
    return a;
  }
  clb::ReplyHeader r{};
  if (a.rc == clbSuccess) a.rc = clb::recvAll(fd, &r, sizeof r, by, nullptr, "the root");
  if (a.rc == clbSuccess && r.msgBytes <= clb::kMaxReplyMessageBytes) {
    a.status = r.status;
    a.msg.assign(r.msgBytes, '\0');
    if (r.msgBytes) a.rc = clb::recvAll(fd, a.msg.data(), a.msg.size(), by, nullptr, "the root");
  }
  if (a.rc != clbSuccess) a.error = clbGetLastError();
  close(fd);
  return a;
}

// A raw TCP connection to `addr`, or -1.
inline int rawConnect(const clb::SockAddr& addr) {
  int fd = -1;
  return clb::connectTcp(addr, clb::nowMs() + 3000, nullptr, &fd) == clbSuccess ? fd : -1;
}

// True when the peer closes the connection (EOF or reset) within `ms` without sending a byte:
// how a server refuses a client that did not prove the secret. An answer (a reply, a refusal
// message) is false, and so is silence until `ms` pass.
inline bool closedSilently(int fd, int ms) {
  const int64_t by = clb::nowMs() + ms;
  char b[512];
  while (clb::nowMs() < by) {
    ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    usleep(1000);
  }
  return false;
}

inline int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (struct dirent* e = readdir(d))
      if (e->d_name[0] != '.') n++;
    closedir(d);
  }
  return n;
}
inline int openFds() { return countEntries("/proc/self/fd"); }
inline int threads() { return countEntries("/proc/self/task"); }
// The mappings of shared-memory segments this process holds: lines of /proc/self/maps that name a
// file in /dev/shm (a segment unlinked but still mapped shows as "/dev/shm/... (deleted)").
inline int shmMappings() {
  int n = 0;
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (fgets(line, sizeof line, f))
      if (strstr(line, "/dev/shm/")) n++;
    fclose(f);
  }
  return n;
}
// This process's resident memory in KiB (VmRSS of /proc/self/status); -1 when unreadable.
inline long residentKiB() {
  long kib = -1;
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
  }
  return kib;
}

// The TCP ports in LISTEN state that sockets of this process hold (/proc/net/tcp and tcp6, whose
// inodes are matched against /proc/self/fd), with their local address as the kernel prints it
// (hex, e.g. 0100007F for 127.0.0.1, 00000000 for every interface).
struct Listening {
  std::string addr;
  int port;
};
inline std::vector<Listening> listeningPorts() {
  std::vector<std::string> mine;  // "socket:[inode]" of every fd here
  if (DIR* d = opendir("/proc/self/fd")) {
    while (struct dirent* e = readdir(d)) {
      char link[64] = {0};
      std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), link, sizeof link - 1) > 0 && !strncmp(link, "socket:[", 8)) mine.push_back(link);
    }
    closedir(d);
  }
  std::vector<Listening> v;
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    FILE* p = fopen(f, "r");
    if (!p) continue;
    char line[512];
    if (!fgets(line, sizeof line, p)) {
      fclose(p);
      continue;
    }
    while (fgets(line, sizeof line, p)) {
      char local[64] = {0}, remote[64] = {0};
      unsigned st = 0;
      unsigned long inode = 0;
      if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*s %*s %lu", local, remote, &st, &inode) != 4 || st != 0x0A)
        continue;
      bool own = false;
      for (const auto& m : mine) own = own || m == "socket:[" + std::to_string(inode) + "]";
      char* colon = strrchr(local, ':');
      if (!own || !colon) continue;
      *colon = 0;
      v.push_back({local, (int)strtol(colon + 1, nullptr, 16)});
    }
    fclose(p);
  }
  return v;
}

}  // namespace clbtest
