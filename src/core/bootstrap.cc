// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "core/bootstrap.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace clb {
namespace {

struct RingHello {
  WireHeader h;
  uint8_t secret[kSecretBytes];
  uint64_t nonce;
  int32_t fromRank;
  int32_t channel;  // 0: data, 1: notices
};

constexpr int64_t kRootReadMs = 10000;

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time
  for (int i = 0; i < kSecretBytes; i++) diff |= a[i] ^ b[i];
  return diff == 0;
}

std::string versionString(uint32_t code) {
  char b[32];
  snprintf(b, sizeof b, "%u.%u.%u", code / 10000, code / 100 % 100, code % 100);
  return b;
}

void sendReply(int fd, clbResult_t status, const std::string& msg, uint32_t nranks, uint64_t nonce,
               const std::vector<RankInfo>* table) {
  ReplyHeader r{kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, (uint32_t)status,
                (uint32_t)msg.size(), nranks, nonce};
  int64_t deadline = nowMs() + kRootReadMs;
  if (sendAll(fd, &r, sizeof r, deadline, nullptr, "a rank") != clbSuccess) return;
  if (!msg.empty() && sendAll(fd, msg.data(), msg.size(), deadline, nullptr, "a rank") != clbSuccess) return;
  if (table) sendAll(fd, table->data(), table->size() * sizeof(RankInfo), deadline, nullptr, "a rank");
}

struct Root {
  int listenFd;
  IdData id;
  std::string where;

  void run() {
    std::vector<int> fds;
    std::vector<RankInfo> table;
    std::vector<bool> have;
    int nranks = -1, count = 0;
    while (nranks < 0 || count < nranks) {
      int fd = -1;
      if (acceptTcp(listenFd, INT64_MAX, nullptr, &fd) != clbSuccess) break;
      WireHeader h{};
      if (recvAll(fd, &h, sizeof h, nowMs() + kRootReadMs, nullptr, "a rank") != clbSuccess ||
          h.magic != kWireMagic) {
        close(fd);  // not a Colibri rank: say nothing
        continue;
      }
      if (h.protocol != CLB_PROTOCOL_VERSION) {
        char m[256];
        snprintf(m, sizeof m,
                 "the bootstrap root at %s speaks protocol %u (Colibri %s); this rank speaks protocol %u "
                 "(Colibri %s): run the same Colibri version on every rank",
                 where.c_str(), CLB_PROTOCOL_VERSION, versionString(CLB_VERSION_CODE).c_str(),
                 h.protocol, versionString(h.libVersion).c_str());
        sendReply(fd, clbAuthError, m, 0, 0, nullptr);
        close(fd);
        continue;
      }
      HelloBody b{};
      if (h.bodyBytes != sizeof b ||
          recvAll(fd, &b, sizeof b, nowMs() + kRootReadMs, nullptr, "a rank") != clbSuccess) {
        close(fd);
        continue;
      }
      char m[384];
      if (!secretEqual(b.secret, id.secret)) {
        snprintf(m, sizeof m,
                 "wrong secret: this rank's UniqueId has secret fingerprint %08x, the root at %s was "
                 "created with fingerprint %08x; pass every rank the same UniqueId (a new one is made "
                 "for each communicator)",
                 secretFingerprint(b.secret), where.c_str(), secretFingerprint(id.secret));
        sendReply(fd, clbAuthError, m, 0, 0, nullptr);
        close(fd);
        continue;
      }
      if (b.nranks < 1 || b.nranks > CLB_MAX_RANKS) {  // before anything is sized by it
        snprintf(m, sizeof m, "rank %d says nranks=%d: a communicator has 1 to %d ranks", b.rank, b.nranks,
                 CLB_MAX_RANKS);
        sendReply(fd, clbInvalidArgument, m, 0, 0, nullptr);
        close(fd);
        continue;
      }
      if (nranks < 0) {
        nranks = b.nranks;
        table.assign(nranks, RankInfo{});
        have.assign(nranks, false);
        fds.assign(nranks, -1);
      }
      if (b.nranks != nranks || b.rank < 0 || b.rank >= nranks || have[b.rank]) {
        if (b.nranks != nranks)
          snprintf(m, sizeof m, "rank %d says nranks=%d but an earlier rank said nranks=%d: every rank must pass the same nranks",
                   b.rank, b.nranks, nranks);
        else if (b.rank < 0 || b.rank >= nranks)
          snprintf(m, sizeof m, "rank %d is out of range for nranks=%d", b.rank, nranks);
        else
          snprintf(m, sizeof m, "rank %d joined twice (from %s pid %d and pid %d): give every process a distinct rank",
                   b.rank, b.info.hostname, table[b.rank].pid, b.info.pid);
        sendReply(fd, clbInvalidArgument, m, 0, 0, nullptr);
        close(fd);
        continue;
      }
      have[b.rank] = true;
      table[b.rank] = b.info;
      fds[b.rank] = fd;
      count++;
    }
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) nonce = (uint64_t)nowMs() ^ (uint64_t)getpid();
    for (int r = 0; r < (int)fds.size(); r++) {
      if (fds[r] < 0) continue;
      sendReply(fds[r], clbSuccess, "", (uint32_t)nranks, nonce, &table);
      close(fds[r]);
    }
    close(listenFd);
    CLB_DEBUG("bootstrap root at %s done: %d ranks", where.c_str(), nranks);
  }
};

}  // namespace

uint32_t secretFingerprint(const uint8_t* secret) {
  uint32_t h = 2166136261u;  // FNV-1a: shows which secret, reveals little of it
  for (int i = 0; i < kSecretBytes; i++) h = (h ^ secret[i]) * 16777619u;
  return h;
}

uint64_t localHostHash() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  std::string key = name;
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (fgets(boot, sizeof boot, f)) key += boot;
    fclose(f);
  }
  if (const char* h = getenv("COLIBRI_HOSTID")) key = h;  // lets tests pretend to be many hosts
  uint64_t x = 1469598103934665603ull;
  for (unsigned char c : key) x = (x ^ c) * 1099511628211ull;
  return x;
}

SockAddr idAddress(const IdData& id) {
  SockAddr a;
  if (id.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(id.port);
    memcpy(&s->sin6_addr, id.addr, 16);
    a.len = sizeof *s;
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(id.port);
    memcpy(&s->sin_addr, id.addr, 4);
    a.len = sizeof *s;
  }
  return a;
}

clbResult_t decodeId(const clbUniqueId* id, IdData* out) {
  if (!id) return setError(clbInvalidArgument, "unique id is NULL");
  memcpy(out, id, sizeof *out);
  if (out->magic != kIdMagic)
    return setError(clbInvalidArgument,
                    "this is not a Colibri unique id (bad magic %08x): create it with clbGetUniqueId / "
                    "UniqueId.create() and pass its bytes unchanged to every rank", out->magic);
  if (out->protocol != CLB_PROTOCOL_VERSION)
    return setError(clbAuthError,
                    "the unique id was made for bootstrap protocol %u, this library (Colibri %s) speaks "
                    "protocol %u: run the same Colibri version on every rank",
                    out->protocol, versionString(CLB_VERSION_CODE).c_str(), CLB_PROTOCOL_VERSION);
  return clbSuccess;
}

clbResult_t startRoot(const SockAddr& listenAddr, const IdData& id, SockAddr* bound) {
  int fd = -1;
  CLB_CHECK(listenTcp(listenAddr, &fd, bound));
  Root* root = new Root{fd, id, ""};
  root->where = idAddress(id).port() ? idAddress(id).str() : bound->str();
  try {
    std::thread([root] {
      root->run();
      delete root;
    }).detach();
  } catch (const std::exception& e) {
    close(fd);
    delete root;
    return setError(clbSystemError, "cannot start the bootstrap root thread: %s", e.what());
  }
  return clbSuccess;
}

Bootstrap::~Bootstrap() { close(); }

void Bootstrap::close() {
  closeFd(&listenFd_);
  closeFd(&nextFd_);
  closeFd(&prevFd_);
  closeFd(&nextCtlFd_);
  closeFd(&prevCtlFd_);
}

clbResult_t Bootstrap::init(const IdData& id, int rank, int nranks, int64_t timeoutMs,
                            const std::atomic<bool>* abort, const VersionInfo* versions) {
  id_ = id;
  rank_ = rank;
  nranks_ = nranks;
  timeoutMs_ = timeoutMs;
  abort_ = abort;
  const int64_t deadline = nowMs() + timeoutMs;
  SockAddr root = idAddress(id);

  if ((id.flags & kIdRootAtRank0) && rank == 0) {
    SockAddr any = root;
    if (any.ss.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&any.ss)->sin_addr.s_addr = htonl(INADDR_ANY);
    SockAddr bound;
    CLB_CHECK(startRoot(any, id, &bound));
  }

  // Our ring listener, advertised with the address other hosts can reach.
  SockAddr local;
  CLB_CHECK(localAddress(&local));
  SockAddr any = local;
  if (any.ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&any.ss)->sin_addr.s_addr = htonl(INADDR_ANY);
  SockAddr bound;
  CLB_CHECK(listenTcp(any, &listenFd_, &bound));

  HelloBody body{};
  memcpy(body.secret, id.secret, kSecretBytes);
  body.rank = rank;
  body.nranks = nranks;
  body.info.rank = rank;
  body.info.pid = getpid();
  body.info.hostHash = localHostHash();
  body.info.family = local.ss.ss_family;
  body.info.port = (uint16_t)bound.port();
  if (local.ss.ss_family == AF_INET)
    memcpy(body.info.addr, &reinterpret_cast<sockaddr_in*>(&local.ss)->sin_addr, 4);
  else
    memcpy(body.info.addr, &reinterpret_cast<sockaddr_in6*>(&local.ss)->sin6_addr, 16);
  gethostname(body.info.hostname, sizeof body.info.hostname - 1);
  if (versions) body.info.versions = *versions;

  std::string rootName = std::string("the bootstrap root at ") + root.str();
  int fd = -1;
  CLB_CHECK(connectTcp(root, deadline, abort, &fd));
  WireHeader h{kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, sizeof body};
  clbResult_t rc = sendAll(fd, &h, sizeof h, deadline, abort, rootName.c_str());
  if (rc == clbSuccess) rc = sendAll(fd, &body, sizeof body, deadline, abort, rootName.c_str());
  ReplyHeader rep{};
  if (rc == clbSuccess) rc = recvAll(fd, &rep, sizeof rep, deadline, abort, rootName.c_str());
  if (rc == clbTimeout) {
    ::close(fd);
    return setError(clbTimeout,
                    "rank %d waited %lld ms at %s for all %d ranks to join; start every rank with the "
                    "same UniqueId, or raise the timeout (COLIBRI_TIMEOUT_MS)",
                    rank, (long long)timeoutMs, root.str().c_str(), nranks);
  }
  if (rc != clbSuccess) {
    ::close(fd);
    return rc;
  }
  if (rep.magic != kWireMagic) {
    ::close(fd);
    return setError(clbAuthError, "%s did not answer like a Colibri root (is another service on that port?)",
                    rootName.c_str());
  }
  std::string msg(rep.msgBytes, '\0');
  if (rep.msgBytes) rc = recvAll(fd, msg.data(), rep.msgBytes, deadline, abort, rootName.c_str());
  if (rc == clbSuccess && rep.status != clbSuccess) {
    ::close(fd);
    return setError((clbResult_t)rep.status, "%s refused rank %d: %s", rootName.c_str(), rank, msg.c_str());
  }
  peers_.assign(nranks, RankInfo{});
  if (rc == clbSuccess && rep.nranks != (uint32_t)nranks) rc = setError(clbInternalError, "root sent %u ranks, expected %d", rep.nranks, nranks);
  if (rc == clbSuccess) rc = recvAll(fd, peers_.data(), nranks * sizeof(RankInfo), deadline, abort, rootName.c_str());
  ::close(fd);
  CLB_CHECK(rc);
  nonce_ = rep.nonce;
  CLB_CHECK(connectRing());
  closeFd(&listenFd_);
  return clbSuccess;
}

clbResult_t Bootstrap::connectRing() {
  if (nranks_ == 1) return clbSuccess;
  const int64_t deadline = nowMs() + timeoutMs_;
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  const RankInfo& ni = peers_[next];
  SockAddr na;
  {
    IdData tmp{};
    tmp.family = ni.family;
    tmp.port = ni.port;
    memcpy(tmp.addr, ni.addr, 16);
    na = idAddress(tmp);
  }
  char nextName[128], prevName[128];
  snprintf(nextName, sizeof nextName, "rank %d (%s, pid %d, %s)", next, ni.hostname, ni.pid, na.str().c_str());
  snprintf(prevName, sizeof prevName, "rank %d (%s, pid %d)", prev, peers_[prev].hostname, peers_[prev].pid);

  int* outs[2] = {&nextFd_, &nextCtlFd_};
  for (int ch = 0; ch < 2; ch++) {
    CLB_CHECK(connectTcp(na, deadline, abort_, outs[ch]));
    RingHello hello{{kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, 0}, {}, nonce_, rank_, ch};
    memcpy(hello.secret, id_.secret, kSecretBytes);
    CLB_CHECK(sendAll(*outs[ch], &hello, sizeof hello, deadline, abort_, nextName));
  }

  // Accept prev's two connections; connections that do not prove the secret and session are refused.
  while (prevFd_ < 0 || prevCtlFd_ < 0) {
    int fd = -1;
    CLB_CHECK(acceptTcp(listenFd_, deadline, abort_, &fd));
    RingHello in{};
    if (recvAll(fd, &in, sizeof in, deadline, abort_, prevName) != clbSuccess) {
      ::close(fd);
      continue;
    }
    uint32_t status = clbSuccess;
    int* slot = in.channel == 0 ? &prevFd_ : in.channel == 1 ? &prevCtlFd_ : nullptr;
    if (in.h.magic != kWireMagic || in.h.protocol != CLB_PROTOCOL_VERSION || !secretEqual(in.secret, id_.secret) ||
        in.nonce != nonce_ || in.fromRank != prev || !slot || *slot >= 0)
      status = clbAuthError;
    sendAll(fd, &status, sizeof status, deadline, abort_, prevName);
    if (status != clbSuccess) {
      CLB_WARN("rank %d refused a ring connection that did not prove this communicator's secret/session", rank_);
      ::close(fd);
      continue;
    }
    *slot = fd;
  }
  for (int ch = 0; ch < 2; ch++) {
    uint32_t status = 0;
    CLB_CHECK(recvAll(*outs[ch], &status, sizeof status, deadline, abort_, nextName));
    if (status != clbSuccess) return setError(clbAuthError, "%s refused this rank's ring connection", nextName);
  }
  return clbSuccess;
}

clbResult_t Bootstrap::allGather(void* buf, size_t bytes) {
  if (nranks_ == 1) return clbSuccess;
  char* b = static_cast<char*>(buf);
  const int64_t deadline = nowMs() + timeoutMs_;
  for (int s = 0; s < nranks_ - 1; s++) {
    int sendIdx = (rank_ - s + nranks_) % nranks_;
    int recvIdx = (rank_ - s - 1 + nranks_) % nranks_;
    CLB_CHECK(sendAll(nextFd_, b + sendIdx * bytes, bytes, deadline, abort_, "the next rank (bootstrap)"));
    CLB_CHECK(recvAll(prevFd_, b + recvIdx * bytes, bytes, deadline, abort_, "the previous rank (bootstrap)"));
  }
  return clbSuccess;
}

clbResult_t Bootstrap::barrier() {
  std::vector<char> v(nranks_);
  return allGather(v.data(), 1);
}

}  // namespace clb
