// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Bootstrap: ranks meet at a root over TCP, prove the shared secret, check protocol versions,
// receive the table of all ranks, then connect into a ring of TCP connections (next / prev) that
// serves the bootstrap's own all-gather and barrier and, for the socket transport, the data path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "core/net.h"

namespace clb {

constexpr uint32_t kIdMagic = 0x31424c43;    // "CLB1"
constexpr uint32_t kWireMagic = 0x57424c43;  // "CLBW"
constexpr int kSecretBytes = 16;

// The layout of clbUniqueId's 128 bytes.
struct IdData {
  uint32_t magic;
  uint32_t protocol;
  uint32_t flags;  // kIdRootAtRank0: rank 0 opens the root itself (torchrun style)
  uint16_t family;
  uint16_t port;
  uint8_t addr[16];
  uint8_t secret[kSecretBytes];
  char host[64];   // as given by the user, for messages
  uint8_t pad[16];
};
static_assert(sizeof(IdData) == CLB_UNIQUE_ID_BYTES, "IdData must fill clbUniqueId exactly");
constexpr uint32_t kIdRootAtRank0 = 1;

// The versions a rank runs with, compared across ranks at init (core/versions.h). Text, NUL
// terminated; "none" where the machine has no such thing.
struct VersionInfo {
  char colibri[16];   // "0.1.0"
  char driver[32];    // NVIDIA kernel driver, "580.159.04"
  char firmware[64];  // first RDMA NIC's fw_ver, "28.39.1002"
  int32_t check;      // this rank's clbVersionCheck_t
  int32_t pad;
};

// What each rank tells the others. Changing this layout needs a new CLB_PROTOCOL_VERSION.
struct RankInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;  // equal on one host (hostname + boot id)
  uint16_t family;
  uint16_t port;      // this rank's ring listener
  uint8_t addr[16];
  char hostname[64];
  VersionInfo versions;
};

// On the wire to the root: a header, then a hello (the root answers with a ReplyHeader, its
// message and, on success, the table). Changing these needs a new CLB_PROTOCOL_VERSION.
struct WireHeader {
  uint32_t magic;
  uint32_t protocol;
  uint32_t libVersion;
  uint32_t bodyBytes;
};

struct HelloBody {
  uint8_t secret[kSecretBytes];
  int32_t rank;
  int32_t nranks;
  RankInfo info;
};

struct ReplyHeader {
  uint32_t magic;
  uint32_t protocol;
  uint32_t libVersion;
  uint32_t status;  // clbResult_t
  uint32_t msgBytes;
  uint32_t nranks;
  uint64_t nonce;
};

uint32_t secretFingerprint(const uint8_t* secret);
uint64_t localHostHash();
SockAddr idAddress(const IdData& id);
clbResult_t decodeId(const clbUniqueId* id, IdData* out);

// Starts the root listener and its thread (detached). It serves one communicator: it collects
// every rank's hello, answers each bad one with the reason, then sends everyone the table.
clbResult_t startRoot(const SockAddr& listenAddr, const IdData& id, SockAddr* bound);

class Bootstrap {
 public:
  Bootstrap() = default;
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // `versions` (may be NULL: all zero) goes to every rank in the table, see peers().
  clbResult_t init(const IdData& id, int rank, int nranks, int64_t timeoutMs,
                   const std::atomic<bool>* abort, const VersionInfo* versions = nullptr);
  // Every rank contributes `bytes` at buf + rank * bytes; all ranks end with every block.
  clbResult_t allGather(void* buf, size_t bytes);
  clbResult_t barrier();
  void close();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t sessionNonce() const { return nonce_; }
  const std::vector<RankInfo>& peers() const { return peers_; }
  int nextFd() const { return nextFd_; }
  int prevFd() const { return prevFd_; }
  // Second connection pair for notices (abort, failure) that must not wait behind data.
  int nextCtlFd() const { return nextCtlFd_; }
  int prevCtlFd() const { return prevCtlFd_; }
  int64_t timeoutMs() const { return timeoutMs_; }

 private:
  clbResult_t connectRing();
  int rank_ = 0, nranks_ = 0;
  uint64_t nonce_ = 0;
  int64_t timeoutMs_ = 0;
  const std::atomic<bool>* abort_ = nullptr;
  IdData id_{};
  int listenFd_ = -1, nextFd_ = -1, prevFd_ = -1, nextCtlFd_ = -1, prevCtlFd_ = -1;
  std::vector<RankInfo> peers_;
};

}  // namespace clb
