// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommSplit: new communicators of the ranks that pass the same color, made over the parent's
// bootstrap in two all-gathers and one init per child.
//
//  1. Every rank gives {status, color, key}: a bad color or config on any rank fails every rank
//     here, naming it, before anything is started (no rank waits for a child that never comes).
//  2. Every rank computes the same table: per color, its members ordered by (key, parent rank).
//     The child's rank 0 starts the child's bootstrap root in its process. The child's secret is
//     derived, by every member alike, from the parent's secret, the parent's session nonce, the
//     split's number on the parent and the color: nothing secret is sent, and two splits never
//     share a secret. The second all-gather carries each child root's address (the id without
//     its secret) and whether starting it worked.
//  3. Every member joins its child with clbCommInitRank on that id; different colors do so at once.
// The parent is not changed (it only counts the split), so it stays usable whatever happens.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/crypto.h"
#include "core/error.h"

namespace clb {
namespace {

struct SplitEntry {
  int32_t status;  // clbResult_t of this rank's arguments
  int32_t color;
  int32_t key;
  int32_t pad;
  char why[160];   // what was wrong with them
};

struct SplitRoot {
  int32_t status;  // the child root's start, on the child's rank 0; else 0
  int32_t pad;
  IdData id;       // its address, secret zeroed
  char why[192];   // what failed, when status is not clbSuccess
};

void deriveSecret(const IdData& parent, uint64_t nonce, uint64_t splitSeq, int32_t color, uint8_t* out) {
  HmacSha256 h(parent.secret, kSecretBytes);
  static const char label[] = "colibri/split/1";
  h.update(label, sizeof label);
  h.update(&nonce, sizeof nonce);
  h.update(&splitSeq, sizeof splitSeq);
  h.update(&color, sizeof color);
  uint8_t digest[kSha256Bytes];
  h.final(digest);
  memcpy(out, digest, kSecretBytes);
  wipe(digest, sizeof digest);
}

}  // namespace
}  // namespace clb

using namespace clb;

extern "C" clbResult_t clbCommSplit(clbComm_t c, int color, int key, const clbConfig_t* config, clbComm_t* newcomm) {
  clearError();
  if (!c) return setError(clbInvalidArgument, "communicator is NULL (was it created, or already destroyed?)");
  if (newcomm) *newcomm = nullptr;
  CallScope call(c, kCallSplit);
  CLB_CHECK(call.result());
  CLB_CHECK(c->checkUsable());

  // 1. Every rank's arguments, checked by all.
  clbResult_t mine = clbSuccess;
  std::string myWhy;
  if (!newcomm) {
    mine = setError(clbInvalidArgument, "rank %d: newcomm (output) is NULL", c->rank);
  } else if (color < 0 && color != CLB_SPLIT_NOCOLOR) {
    mine = setError(clbInvalidArgument, "rank %d: color=%d: a color is >= 0, or CLB_SPLIT_NOCOLOR (-1) for no new "
                    "communicator", c->rank, color);
  } else if (config && color != CLB_SPLIT_NOCOLOR) {
    clbConfig_t resolved;
    mine = resolveConfig(config, &resolved);
  }
  if (mine != clbSuccess) myWhy = lastError();
  const int n = c->nranks;
  std::vector<SplitEntry> entries(n);
  memset(entries.data(), 0, entries.size() * sizeof(SplitEntry));
  entries[c->rank].status = mine;
  entries[c->rank].color = color;
  entries[c->rank].key = key;
  snprintf(entries[c->rank].why, sizeof entries[c->rank].why, "%s", myWhy.c_str());
  if (n > 1) {
    clbResult_t rc = c->boot.allGather(entries.data(), sizeof(SplitEntry));
    if (rc != clbSuccess) {
      c->markFailed(rc);
      return rc;
    }
  }
  const uint64_t splitSeq = ++c->splits;
  if (mine != clbSuccess) return setError(mine, "%s", myWhy.c_str());
  for (int p = 0; p < n; p++)
    if (entries[p].status != clbSuccess)
      return setError((clbResult_t)entries[p].status, "rank %d: clbCommSplit was refused on rank %d, so on every rank "
                      "(comm stays usable): %.160s", c->rank, p, entries[p].why);

  // 2. The children's tables; this rank's child root if it is a child's rank 0.
  std::vector<int> members;  // parent ranks of this rank's color, in child order
  if (color != CLB_SPLIT_NOCOLOR) {
    for (int p = 0; p < n; p++)
      if (entries[p].color == color) members.push_back(p);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return entries[a].key < entries[b].key; });
  }
  const int childRank =
      color == CLB_SPLIT_NOCOLOR ? -1 : (int)(std::find(members.begin(), members.end(), c->rank) - members.begin());
  std::vector<SplitRoot> roots(n);
  memset(roots.data(), 0, roots.size() * sizeof(SplitRoot));
  IdData child{};
  if (childRank == 0) {
    const IdData& parent = c->boot.id();
    child.magic = kIdMagic;
    child.protocol = parent.protocol;
    child.flags = parent.flags & kIdTlsMask;  // the parent's TLS mode; the root runs here, not at rank 0's init
    deriveSecret(parent, c->boot.sessionNonce(), splitSeq, color, child.secret);
    SplitRoot& r = roots[c->rank];
    r.status = startLocalRoot(&child);
    if (r.status != clbSuccess) snprintf(r.why, sizeof r.why, "%s", lastError().c_str());
    r.id = child;
    wipe(r.id.secret, kSecretBytes);
  }
  if (n > 1) {
    clbResult_t rc = c->boot.allGather(roots.data(), sizeof(SplitRoot));
    if (rc != clbSuccess) {
      if (childRank == 0 && roots[c->rank].status == clbSuccess) releaseRoot(child);
      wipe(&child, sizeof child);
      c->markFailed(rc);
      return rc;
    }
  }
  if (color == CLB_SPLIT_NOCOLOR) return clbSuccess;  // *newcomm stays NULL
  const SplitRoot& root = roots[members[0]];
  if (root.status != clbSuccess) {
    wipe(&child, sizeof child);
    return setError((clbResult_t)root.status, "rank %d: the communicator of color %d could not start its bootstrap "
                    "on rank %d (its rank 0): %.191s", c->rank, color, members[0], root.why);
  }

  // 3. Join the child.
  if (childRank != 0) {
    child = root.id;
    deriveSecret(c->boot.id(), c->boot.sessionNonce(), splitSeq, color, child.secret);
  }
  clbUniqueId id;
  static_assert(sizeof id == sizeof child, "IdData fills clbUniqueId");
  memcpy(&id, &child, sizeof id);
  clbComm_t out = nullptr;
  clbResult_t rc = clbCommInitRank(&out, &id, childRank, (int)members.size(), config ? config : &c->cfg);
  if (rc != clbSuccess) {
    const std::string why = lastError();
    if (childRank == 0) releaseRoot(child);
    wipe(&child, sizeof child);
    wipe(&id, sizeof id);
    return setError(rc, "rank %d: the communicator of color %d (rank %d of %d there) failed to start: %s", c->rank,
                    color, childRank, (int)members.size(), why.c_str());
  }
  wipe(&child, sizeof child);
  wipe(&id, sizeof id);
  *newcomm = out;
  return clbSuccess;
}
