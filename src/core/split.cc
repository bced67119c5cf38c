// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommSplit: new communicators of the ranks that pass the same color, made over the parent's
// bootstrap in two all-gathers, without a root.
//
//  1. Every rank gives {status, color, key}: a bad color or config on any rank fails every rank
//     here, naming it, before anything is made (no rank waits for a child that never comes).
//  2. Every rank computes the same grouping: per color, its members ordered by (key, parent
//     rank). Each member derives the child's secret and session, as every member does alike, from
//     the parent's secret, the parent's session nonce, the split's number on the parent and the
//     color (nothing secret is sent, two splits never share them); makes its child communicator;
//     sets up its TLS and opens its ring listener (Bootstrap::prepareTable). The second
//     all-gather carries every member's row of the child's bootstrap table (address, versions,
//     agreed settings) and whether making it worked.
//  3. Each member takes its color's rows as the child's table, the same on all of them, and
//     connects the child's ring as an init does after the root's reply (Bootstrap::initWithTable),
//     whose handshakes prove the derived secret and session as usual. The parent's all-gather is
//     authenticated, so the table arrives as its ranks sent it.
// The parent is not changed (it only counts the split), so it stays usable whatever happens, but
// a failure inside one of its all-gathers (the ranks may then disagree) breaks it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "bootstrap/crypto.h"
#include "base/error.h"

namespace clb {
namespace {

struct SplitEntry {
  int32_t status;  // clbResult_t of this rank's arguments
  int32_t color;
  int32_t key;
  int32_t pad;
  char why[240];  // what was wrong with them (cut to fit: 256 bytes a rank, protocol 6)
};
static_assert(sizeof(SplitEntry) == 256, "a split entry is 256 bytes on the wire");

struct SplitMember {
  int32_t status;  // making this rank's child and its listener; 0 on ranks without a color
  int32_t pad;
  RankInfo info;  // its row of the child's table
  char why[192];  // what failed, when status is not clbSuccess
};

// What the members of a split derive alike from the parent's secret: the child's secret and its
// session, each for one split (`splitSeq`) of one parent session (`nonce`) and one color.
void derive(const IdData& parent, const char* label, uint64_t nonce, uint64_t splitSeq, int32_t color, uint8_t* out,
            size_t bytes) {
  HmacSha256 h(parent.secret, kSecretBytes);
  h.update(label, strlen(label) + 1);
  h.update(&nonce, sizeof nonce);
  h.update(&splitSeq, sizeof splitSeq);
  h.update(&color, sizeof color);
  uint8_t digest[kSha256Bytes];
  h.final(digest);
  memcpy(out, digest, bytes);
  wipe(digest, sizeof digest);
}

}  // namespace
}  // namespace clb

using namespace clb;

namespace {

// clbCommSplit, or with `refusal` (not NULL) clbCommSplitRefuse: this rank's part refused for it.
clbResult_t split(clbComm* c, int color, int key, const clbConfig_t* config, clbComm_t* newcomm, const char* refusal) {
  clearError();
  if (newcomm) *newcomm = nullptr;
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallSplit);
  CLB_CHECK(call.result());
  CLB_CHECK(c->checkUsable());
  // A peer that failed or aborted (its notice came) takes no part: refused now, not at the timeout.
  CLB_CHECK(c->asyncStatus());

  // 1. Every rank's arguments, checked by all.
  clbResult_t mine = clbSuccess;
  std::string myWhy;
  if (refusal) {
    mine = setError(clbInvalidArgument, "rank %d: %.200s", c->rank, refusal);
  } else if (!newcomm) {
    mine = setError(clbInvalidArgument, "rank %d: newcomm (output) is NULL", c->rank);
  } else if (color < 0 && color != CLB_SPLIT_NOCOLOR) {
    mine = setError(clbInvalidArgument,
                    "rank %d: color=%d: a color is >= 0, or -1 (CLB_SPLIT_NOCOLOR, "
                    "NCCL_SPLIT_NOCOLOR through libnccl.so.2) for no new communicator",
                    c->rank, color);
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
      return setError((clbResult_t)entries[p].status,
                      "rank %d: clbCommSplit was refused on rank %d, so on every rank "
                      "(comm stays usable): %.240s",
                      c->rank, p, entries[p].why);

  // 2. Every member's child, and its ring listener; one all-gather of them over the parent.
  std::vector<int> members;  // parent ranks of this rank's color, in child order
  if (color != CLB_SPLIT_NOCOLOR) {
    for (int p = 0; p < n; p++)
      if (entries[p].color == color) members.push_back(p);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return entries[a].key < entries[b].key; });
  }
  const int childRank =
      color == CLB_SPLIT_NOCOLOR ? -1 : (int)(std::find(members.begin(), members.end(), c->rank) - members.begin());
  std::vector<SplitMember> all(n);
  memset(all.data(), 0, all.size() * sizeof(SplitMember));
  SplitMember& me = all[c->rank];
  std::unique_ptr<clbComm> child;
  // The child's id and session, derived by every member alike; no root.
  const IdData& parent = c->boot.id();
  IdData id{};
  id.magic = kIdMagic;
  id.protocol = parent.protocol;
  id.flags = parent.flags & kIdTlsMask;  // the parent's TLS mode
  uint8_t session[kSessionBytes];
  if (color != CLB_SPLIT_NOCOLOR) {
    derive(parent, "colibri/split/secret/1", c->boot.sessionNonce(), splitSeq, color, id.secret, kSecretBytes);
    derive(parent, "colibri/split/session/1", c->boot.sessionNonce(), splitSeq, color, session, kSessionBytes);
    clbResult_t rc = newComm(childRank, (int)members.size(), config ? config : &c->cfg, &child);
    // TLS set up and listener opened before the exchange: a rank that cannot says so there.
    if (rc == clbSuccess) rc = child->boot.prepareTable(id, childRank, &me.info);
    if (rc == clbSuccess) {
      me.info.versions = child->versions;
      me.info.agreed = child->agreed;
    } else {
      snprintf(me.why, sizeof me.why, "%s", lastError().c_str());
    }
    me.status = rc;
  }
  if (n > 1) {
    clbResult_t rc = c->boot.allGather(all.data(), sizeof(SplitMember));
    if (rc != clbSuccess) {
      wipe(&id, sizeof id);
      wipe(session, sizeof session);
      c->markFailed(rc);
      return rc;
    }
  }
  if (color == CLB_SPLIT_NOCOLOR) return clbSuccess;  // *newcomm stays NULL
  for (int p : members)
    if (all[p].status != clbSuccess) {
      wipe(&id, sizeof id);
      wipe(session, sizeof session);
      return setError((clbResult_t)all[p].status,
                      "rank %d: the communicator of color %d could not be made, because "
                      "rank %d could not take part (comm stays usable): %.191s",
                      c->rank, color, p, all[p].why);
    }

  // 3. The child's bootstrap from that table. Its ring connects under the parent's abort flag
  // (the caller has no handle on the child yet: clbCommAbort(comm) ends the wait), then the
  // child's own.
  std::vector<RankInfo> table;
  for (int p : members) table.push_back(all[p].info);
  clbResult_t rc = child->boot.initWithTable(id, childRank, (int)members.size(), child->cfg.timeoutMs, &c->aborted,
                                             session, std::move(table), initTableCheck(child.get()));
  child->boot.setAbortFlag(&child->aborted);
  wipe(&id, sizeof id);
  wipe(session, sizeof session);
  if (rc == clbSuccess) rc = finishInit(child.get());
  if (rc != clbSuccess) {
    const std::string why = lastError();
    child.reset();
    return setError(rc, "rank %d: the communicator of color %d (rank %d of %d there) failed to start: %s", c->rank,
                    color, childRank, (int)members.size(), why.c_str());
  }
  registerComm(child.get());
  clbComm_t out = child.release();
  *newcomm = out;
  return clbSuccess;
}

}  // namespace

extern "C" clbResult_t clbCommSplit(clbComm_t c, int color, int key, const clbConfig_t* config, clbComm_t* newcomm) {
  return split(c, color, key, config, newcomm, nullptr);
}

extern "C" clbResult_t clbCommSplitRefuse(clbComm_t c, const char* reason) {
  const std::string why = refusalReason(reason, 200);
  return split(c, CLB_SPLIT_NOCOLOR, 0, nullptr, nullptr, why.c_str());
}
