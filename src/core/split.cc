// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Communicators made from another: clbCommSplit, clbCommShrink and clbCommGrow (each below).
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
//  3. Each member takes its color's rows as the child's table, the same on all of them (the whole
//     table: no gather on the child's tree), checks it and connects the child's ring
//     (Bootstrap::initWithTable),
//     whose handshakes prove the derived secret and session as usual. The parent's all-gather is
//     authenticated, so the table arrives as its ranks sent it.
// The parent is not changed (it only counts the split), so it stays usable whatever happens, but
// a failure inside one of its all-gathers (the ranks may then disagree) breaks it.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
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
#include "base/hash.h"
#include "base/watch.h"
#include "base/clock.h"

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

// What the members of a split or a shrink derive alike from the parent's secret: the child's
// secret and its session, each for one split or shrink (`seq`) of one parent session (`nonce`) and
// one color (a shrink: its exclusion list's digest).
void derive(const IdData& parent, const char* label, uint64_t nonce, uint64_t seq, uint64_t color, uint8_t* out,
            size_t bytes) {
  HmacSha256 h(parent.secret, kSecretBytes);
  h.update(label, strlen(label) + 1);
  h.update(&nonce, sizeof nonce);
  h.update(&seq, sizeof seq);
  h.update(&color, sizeof color);
  uint8_t digest[kSha256Bytes];
  h.final(digest);
  memcpy(out, digest, bytes);
  wipe(digest, sizeof digest);
}

// This member's child (newComm) and its row of the child's table: TLS set up and listener opened
// before the members' exchange, so that a member that cannot says so there. Its result; the reason
// in `why` on failure.
clbResult_t prepareChild(clbComm* parent, int childRank, int members, const clbConfig_t* config, const IdData& id,
                         std::unique_ptr<clbComm>* child, RankInfo* info, char* why, size_t whyBytes) {
  clbResult_t rc = newComm(childRank, members, config ? config : &parent->cfg, child);
  if (rc == clbSuccess) rc = (*child)->boot.prepareTable(id, childRank, info);
  if (rc == clbSuccess) {
    info->versions = (*child)->versions;
    info->agreed = (*child)->agreed;
  } else {
    snprintf(why, whyBytes, "%s", lastError().c_str());
  }
  return rc;
}

// A child's bootstrap from the members' table, as an init's after the root's reply: its ring
// connects under `abort` (the parent's flag, or none), then the child's own; then the rest of an
// init. The child is freed on failure, with the error naming `what`.
clbResult_t startChild(std::unique_ptr<clbComm>& child, const IdData& id, int childRank, int members,
                       const std::atomic<bool>* abort, const uint8_t* session, std::vector<RankInfo> table,
                       const std::string& what, const std::array<uint8_t, kSha256Bytes>* digest = nullptr) {
  clbResult_t rc = child->boot.initWithTable(id, childRank, members, child->cfg.timeoutMs, abort, session,
                                             std::move(table), initTableCheck(child.get()), digest);
  child->boot.setAbortFlag(&child->aborted);
  if (rc == clbSuccess) rc = finishInit(child.get());
  if (rc != clbSuccess) {
    const std::string why = lastError();
    child.reset();
    return setError(rc, "%s (rank %d of %d there) failed to start: %s", what.c_str(), childRank, members, why.c_str());
  }
  registerComm(child.get());
  return clbSuccess;
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
    me.status = prepareChild(c, childRank, (int)members.size(), config, id, &child, &me.info, me.why, sizeof me.why);
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
  clbResult_t rc =
      startChild(child, id, childRank, (int)members.size(), &c->aborted, session, std::move(table),
                 "rank " + std::to_string(c->rank) + ": the communicator of color " + std::to_string(color));
  wipe(&id, sizeof id);
  wipe(session, sizeof session);
  CLB_CHECK(rc);
  *newcomm = child.release();
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

// ---- clbCommShrink ----
//
// The survivors (every rank not excluded) meet without the excluded ranks and without the parent's
// ring (Bootstrap::gatherAmong through the lowest survivor): each says whether its arguments are
// good and which exclusion list it passed (a digest), and gives its row of the child's table. The
// lowest survivor judges them and answers each with the verdict, the table's hash and the rows it
// connects with; each connects the child's ring and tree and gathers the rest of the table there
// (Bootstrap::initWithTable with the hash), the child's secret and session derived as a split's,
// from the parent's secret, session, the shrink's number and the list. The parent is not changed
// (it only counts the shrink).

namespace {

struct ShrinkMember {
  int32_t status;  // this rank's arguments and its child's listener
  uint32_t pad;
  uint64_t digest;  // of the exclusion list (sorted, without repeats)
  RankInfo info;
  char why[176];
};

uint64_t listDigest(const std::vector<int>& sorted) {
  Fnv1a h;  // over the ranks and their count
  for (int r : sorted) h.word((uint64_t)(uint32_t)r);
  return h.word(sorted.size()).value();
}

}  // namespace

extern "C" clbResult_t clbCommShrink(clbComm_t c, const int* excluded, int nexcluded, const clbConfig_t* config,
                                     clbComm_t* newcomm, int flags) {
  clearError();
  if (newcomm) *newcomm = nullptr;
  CLB_CHECK(checkComm(c));
  // Counted by every rank that calls, refused or not, so that the survivors' numbers stay alike
  // for the next shrink (a survivor whose call was refused here retries with the others).
  const uint32_t seq = c->shrinks.fetch_add(1) + 1;
  const int n = c->nranks;
  // A list that names no set of survivors: refused here alone (the others learn it at the timeout,
  // naming this rank as missing).
  if (nexcluded < 0 || (nexcluded > 0 && !excluded))
    return setError(clbInvalidArgument, "rank %d: excluded=%p, nexcluded=%d: pass a list of nexcluded >= 0 ranks",
                    c->rank, (const void*)excluded, nexcluded);
  std::vector<int> out(excluded, excluded + nexcluded);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (int r : out)
    if (r < 0 || r >= n)
      return setError(clbInvalidArgument, "rank %d: excluded rank %d is not a rank of this communicator (0..%d)",
                      c->rank, r, n - 1);
  if (std::binary_search(out.begin(), out.end(), c->rank))
    return setError(clbInvalidArgument,
                    "rank %d is in the exclusion list: an excluded rank takes no part in clbCommShrink (destroy its "
                    "communicator instead)",
                    c->rank);
  // With CLB_SHRINK_ABORT, the parent's calls in progress on other threads end first.
  const bool abortFirst = flags == CLB_SHRINK_ABORT;
  if (abortFirst) (void)clbCommAbort(c);
  const int64_t until = nowMs() + (abortFirst ? c->cfg.timeoutMs : 0);
  clbResult_t entered;
  while ((entered = c->enterCall(kCallShrink)) != clbSuccess && nowMs() < until) usleep(1000);
  if (entered != clbSuccess) return entered;
  struct Leave {
    clbComm* c;
    ~Leave() { c->leaveCall(); }
  } leave{c};
  clearError();

  std::vector<int> members;
  for (int p = 0; p < n; p++)
    if (!std::binary_search(out.begin(), out.end(), p)) members.push_back(p);
  const int m = (int)members.size();
  const int childRank = (int)(std::find(members.begin(), members.end(), c->rank) - members.begin());
  ShrinkMember me;
  memset(&me, 0, sizeof me);
  me.digest = listDigest(out);
  const IdData& parent = c->boot.id();
  IdData id{};
  id.magic = kIdMagic;
  id.protocol = parent.protocol;
  id.flags = parent.flags & kIdTlsMask;
  uint8_t session[kSessionBytes];
  derive(parent, "colibri/shrink/secret/1", c->boot.sessionNonce(), seq, me.digest, id.secret, kSecretBytes);
  derive(parent, "colibri/shrink/session/1", c->boot.sessionNonce(), seq, me.digest, session, kSessionBytes);
  std::unique_ptr<clbComm> child;
  clbResult_t rc = clbSuccess;
  // Refusals of this rank's arguments go to every survivor through the exchange (at once).
  if (flags & ~CLB_SHRINK_ABORT)
    rc = setError(clbInvalidArgument, "rank %d: flags=%d: pass CLB_SHRINK_DEFAULT (0) or CLB_SHRINK_ABORT (1)", c->rank,
                  flags);
  else if (!newcomm)
    rc = setError(clbInvalidArgument, "rank %d: newcomm (output) is NULL", c->rank);
  clbConfig_t resolved;
  if (rc == clbSuccess && config) rc = resolveConfig(config, &resolved);
  if (rc == clbSuccess)
    rc = prepareChild(c, childRank, m, config, id, &child, &me.info, me.why, sizeof me.why);
  else
    snprintf(me.why, sizeof me.why, "%s", lastError().c_str());
  me.status = rc;
  std::vector<ShrinkMember> all(m);
  auto fail = [&](clbResult_t code) {
    wipe(&id, sizeof id);
    wipe(session, sizeof session);
    child.reset();
    return code;
  };
  // The lowest survivor judges every survivor's block (its arguments, its list) and hashes the
  // child's table; each survivor gets the verdict and the rows it connects with (replyRows), and
  // gathers the rest on the child's tree: the lowest survivor's work grows as n, not n x n.
  const Bootstrap::GatherJudge judge = [&members](const char* blocks, size_t count) {
    Bootstrap::GatherVerdict v;
    std::vector<RankInfo> rows(count);
    ShrinkMember first;
    memcpy(&first, blocks, sizeof first);
    char b[320];
    for (size_t i = 0; i < count; i++) {
      ShrinkMember s;
      memcpy(&s, blocks + i * sizeof s, sizeof s);
      s.why[sizeof s.why - 1] = 0;
      if (s.status != clbSuccess) {
        snprintf(b, sizeof b, "refused on rank %d, so on every survivor (comm is unchanged): %s", members[i], s.why);
        v.status = (clbResult_t)s.status;
      } else if (s.digest != first.digest) {
        snprintf(b, sizeof b,
                 "ranks %d and %d passed different lists of excluded ranks: every survivor passes the same ranks "
                 "(comm is unchanged)",
                 members[0], members[i]);
        v.status = clbInvalidArgument;
      }
      if (v.status != clbSuccess) {
        v.why = b;
        return v;
      }
      rows[i] = s.info;
    }
    v.digest = tableDigest(rows.data(), rows.size());
    return v;
  };
  std::array<uint8_t, kSha256Bytes> digest{};
  if (clbResult_t g = c->boot.gatherAmong(members, seq, &me, sizeof me, judge, all.data(), &digest); g != clbSuccess)
    return fail(setError(g, "clbCommShrink: %s", lastError().c_str()));
  if (me.status != clbSuccess || !child)  // this rank's own refusal wins over any verdict
    return fail(setError(me.status != clbSuccess ? (clbResult_t)me.status : clbInternalError,
                         "rank %d: clbCommShrink was refused here, though the lowest survivor (rank %d) answered that "
                         "every survivor's part was good: %.176s",
                         c->rank, members[0], me.why));
  // This survivor's rows; the others (rank -1) come over the child's tree.
  RankInfo unknown{};
  unknown.rank = -1;
  std::vector<RankInfo> table(m, unknown);
  for (int k : replyRows(childRank, m)) table[k] = all[k].info;
  rc = startChild(child, id, childRank, m, nullptr, session, std::move(table),
                  "rank " + std::to_string(c->rank) + ": the shrunk communicator", &digest);
  wipe(&id, sizeof id);
  wipe(session, sizeof session);
  CLB_CHECK(rc);
  *newcomm = child.release();
  return clbSuccess;
}

// ---- clbCommGetUniqueId, clbCommGrow ----
//
// A grown communicator is made by an init from a grow id: its root runs in the coordinator's
// process, new ranks join it with the id they were given, and the existing ranks with the same id,
// which each of them rebuilds from comm: the coordinator's all-gather over comm carries the id but
// its secret, and the secret is derived from comm's (as a split's) with the id's nonce, so it never
// crosses the network. The init's handshakes then prove it on every connection as usual.

namespace {

constexpr const char* kGrowSecret = "colibri/grow/secret/1";

struct GrowEntry {
  int32_t status;  // this rank's arguments
  int32_t nranks;
  int32_t hasId;
  int32_t pad;
  IdData id;  // the id it passed, its secret zeroed (when hasId)
  char why[112];
};
static_assert(sizeof(GrowEntry) == 256, "a grow entry is 256 bytes on the wire");

void growSecret(const clbComm* c, uint64_t nonce, uint8_t* out) {
  derive(c->boot.id(), kGrowSecret, c->boot.sessionNonce(), nonce, 0, out, kSecretBytes);
}

// An id that a rank of comm passes to clbCommGrow: made by clbCommGetUniqueId on comm, for its size.
clbResult_t checkGrowId(const clbComm* c, const clbUniqueId* given, IdData* id) {
  CLB_CHECK(decodeId(given, id));
  uint8_t want[kSecretBytes];
  if (id->flags & kIdGrow) growSecret(c, id->growNonce, want);
  const bool ours = (id->flags & kIdGrow) && equalConstantTime(want, id->secret, kSecretBytes);
  wipe(want, sizeof want);
  if (!ours)
    return setError(clbInvalidArgument,
                    "rank %d: the id passed to clbCommGrow was not made by clbCommGetUniqueId on this communicator "
                    "(a clbGetUniqueId id, or another communicator's): make it with clbCommGetUniqueId(comm) on one of "
                    "comm's ranks",
                    c->rank);
  if (id->growFrom != (uint32_t)c->nranks)
    return setError(clbInvalidArgument,
                    "rank %d: the id was made for growing a communicator of %u ranks, this one has %d", c->rank,
                    id->growFrom, c->nranks);
  return clbSuccess;
}

// A new rank's part: an init from the grow id, as the rank it was given.
clbResult_t joinGrow(int nranks, const clbUniqueId* given, int rank, const clbConfig_t* config, clbComm_t* newcomm,
                     const int* abortFlag) {
  IdData id;
  CLB_CHECK(decodeId(given, &id));
  wipe(id.secret, sizeof id.secret);
  if (!(id.flags & kIdGrow))
    return setError(clbInvalidArgument,
                    "clbCommGrow with comm NULL (a new rank) needs the id that clbCommGetUniqueId made on a rank of "
                    "the communicator being grown; this one is from clbGetUniqueId (for that, call clbCommInitRank)");
  if (nranks <= (int)id.growFrom || nranks > CLB_MAX_RANKS)
    return setError(clbInvalidArgument,
                    "clbCommGrow: nranks=%d: the grown communicator has more ranks than the %u it grows from, and "
                    "at most %d",
                    nranks, id.growFrom, CLB_MAX_RANKS);
  if (rank < (int)id.growFrom || rank >= nranks)
    return setError(clbInvalidArgument,
                    "clbCommGrow: a new rank takes one of ranks %u..%d (ranks 0..%u are the existing ones), not %d",
                    id.growFrom, nranks - 1, id.growFrom - 1, rank);
  return clbCommInitRankAbortable(newcomm, given, rank, nranks, config, abortFlag);
}

}  // namespace

extern "C" clbResult_t clbCommGetUniqueId(clbComm_t c, clbUniqueId* out) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!out) return setError(clbInvalidArgument, "rank %d: clbCommGetUniqueId: id (output) is NULL", c->rank);
  CLB_CHECK(c->checkUsable());
  const IdData& parent = c->boot.id();
  IdData d{};
  d.magic = kIdMagic;
  d.protocol = parent.protocol;
  d.flags = (parent.flags & kIdTlsMask) | kIdGrow;
  d.growFrom = (uint32_t)c->nranks;
  if (!randomBytes(&d.growNonce, sizeof d.growNonce))
    return setSysError(errno, "getrandom() for a grow id's nonce failed");
  growSecret(c, d.growNonce, d.secret);
  clbResult_t rc = startLocalRoot(&d);
  if (rc == clbSuccess) {
    memcpy(out, &d, sizeof d);
    std::lock_guard<std::mutex> g(c->growIdsMutex);
    // The ids whose root has ended (its grow formed or timed out) need no release at destroy:
    // forgotten here, so that a long-lived communicator that grows many times holds only the live.
    auto ended = std::remove_if(c->growIds.begin(), c->growIds.end(), [](IdData& old) {
      if (rootRuns(old)) return false;
      wipe(&old, sizeof old);
      return true;
    });
    c->growIds.erase(ended, c->growIds.end());
    c->growIds.push_back(d);
  }
  wipe(&d, sizeof d);
  return rc;
}

extern "C" clbResult_t clbCommGrow(clbComm_t c, int nranks, const clbUniqueId* given, int rank,
                                   const clbConfig_t* config, clbComm_t* newcomm) {
  return clbCommGrowAbortable(c, nranks, given, rank, config, newcomm, nullptr);
}

extern "C" clbResult_t clbCommGrowAbortable(clbComm_t c, int nranks, const clbUniqueId* given, int rank,
                                            const clbConfig_t* config, clbComm_t* newcomm, const int* abortFlag) {
  clearError();
  if (newcomm) *newcomm = nullptr;
  if (!c) {
    if (!newcomm) return setError(clbInvalidArgument, "clbCommGrow: newcomm (output) is NULL");
    if (!given)
      return setError(clbInvalidArgument,
                      "clbCommGrow with comm NULL (a new rank) needs the id from clbCommGetUniqueId: got NULL");
    return joinGrow(nranks, given, rank, config, newcomm, abortFlag);
  }
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallGrow);
  CLB_CHECK(call.result());
  CLB_CHECK(c->checkUsable());
  // A peer that failed or aborted (its notice came) takes no part: refused now, not at the timeout.
  CLB_CHECK(c->asyncStatus());

  // 1. Every existing rank's arguments and id, checked by all.
  const int n = c->nranks;
  GrowEntry me;
  memset(&me, 0, sizeof me);
  me.nranks = nranks;
  clbResult_t mine = clbSuccess;
  IdData id{};
  if (!newcomm)
    mine = setError(clbInvalidArgument, "rank %d: newcomm (output) is NULL", c->rank);
  else if (rank != -1)
    mine = setError(clbInvalidArgument,
                    "rank %d: rank=%d: a rank of comm passes -1 to clbCommGrow (it keeps its number); only new ranks, "
                    "with comm NULL, pass theirs",
                    c->rank, rank);
  else if (nranks <= n || nranks > CLB_MAX_RANKS)
    mine = setError(clbInvalidArgument,
                    "rank %d: nranks=%d: a grown communicator has more than comm's %d ranks, at most %d", c->rank,
                    nranks, n, CLB_MAX_RANKS);
  else if (given)
    mine = checkGrowId(c, given, &id);
  clbConfig_t resolved;
  if (mine == clbSuccess && config) mine = resolveConfig(config, &resolved);
  me.status = mine;
  if (mine != clbSuccess) snprintf(me.why, sizeof me.why, "%s", lastError().c_str());
  if (mine == clbSuccess && given) {
    me.hasId = 1;
    me.id = id;
    wipe(me.id.secret, sizeof me.id.secret);
  }
  wipe(&id, sizeof id);
  std::vector<GrowEntry> all(n);
  all[c->rank] = me;
  if (n > 1) {
    clbResult_t rc = c->boot.allGather(all.data(), sizeof(GrowEntry));
    if (rc != clbSuccess) {
      c->markFailed(rc);
      return rc;
    }
  }
  if (mine != clbSuccess) return setError(mine, "%s", me.why);
  int from = -1;
  for (int p = 0; p < n; p++) {
    const GrowEntry& e = all[p];
    if (e.status != clbSuccess)
      return setError((clbResult_t)e.status,
                      "rank %d: clbCommGrow was refused on rank %d, so on every rank of comm (comm stays usable): "
                      "%.112s",
                      c->rank, p, e.why);
    if (e.nranks != nranks)
      return setError(clbInvalidArgument,
                      "rank %d: rank %d passed clbCommGrow nranks=%d, this rank %d: every rank passes the grown size "
                      "(comm stays usable)",
                      c->rank, p, e.nranks, nranks);
    if (!e.hasId) continue;
    if (from >= 0 && memcmp(&e.id, &all[from].id, sizeof e.id) != 0)
      return setError(clbInvalidArgument,
                      "rank %d: ranks %d and %d passed clbCommGrow different ids: one coordinator's id, the others "
                      "NULL (comm stays usable)",
                      c->rank, from, p);
    if (from < 0) from = p;
  }
  if (from < 0)
    return setError(clbInvalidArgument,
                    "rank %d: no rank of comm passed clbCommGrow an id: the coordinator passes the one "
                    "clbCommGetUniqueId made, the others NULL (comm stays usable)",
                    c->rank);

  // 2. The init from the coordinator's id, its secret derived here.
  id = all[from].id;
  growSecret(c, id.growNonce, id.secret);
  clbUniqueId bytes;
  memcpy(&bytes, &id, sizeof id);
  wipe(&id, sizeof id);
  // Raised, for the init to watch, once comm is aborted or revoked (as they end any call of comm)
  // or the caller's own flag is.
  int stop = 0;
  clbResult_t rc;
  {
    Watch watch(
        [c, abortFlag] { return c->aborted.load() || (abortFlag && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE)); },
        [&stop] { __atomic_store_n(&stop, 1, __ATOMIC_RELEASE); });
    rc = clbCommInitRankAbortable(newcomm, &bytes, c->rank, nranks, config ? config : &c->cfg, &stop);
  }
  wipe(&bytes, sizeof bytes);
  return rc;
}
