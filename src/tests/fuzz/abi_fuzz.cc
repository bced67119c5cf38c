// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target over the argument checks of the C ABI (colibri.h) and of the NCCL drop-in
// (nccl/nccl.cc, compiled into this program): an input is a short program of calls on one-rank
// communicators (one made by clbCommInitRank, one by ncclCommInitRank), with counts and
// displacements up to 2^64 - 1 (2^62 - 16, 2^63, SIZE_MAX / size and their neighbours among
// them), roots, peers, types and operations in and out of range, NULL buffers and arrays, and
// buffers that alias or overlap, alone or inside groups. Every buffer lies in one arena between
// two PROT_NONE pages. For each call the target works out by itself what its arguments are:
//   * invalid (an unknown type, operation, root or peer; NULL with a count; a count or a
//     displacement whose bytes pass SIZE_MAX or, from the buffer's address, the end of the address
//     space; buffers that overlap other than in place; a send to itself outside a group, or without
//     its matching receive): the call must fail, say why (clbGetLastError / ncclGetLastError), and
//     change no byte of the arena;
//   * valid, with every extent inside the arena: it must succeed, leave clbGetLastError empty, and
//     leave the arena exactly as a one-rank call would (the copies it makes, nothing else);
//   * not decidable by the library (an extent that leaves the arena without wrapping could be a
//     larger buffer of the caller): the call is not made.
// A few layouts are refused by a coarser rule than the exact one (all-to-all's overlap check
// compares the hulls from each buffer's start, and a displacement of a block of 0 elements may be
// refused); there either outcome passes, the data checked as above when it succeeds.
// Any read or write outside the arena faults on a guard page (or is an ASan report); an unchecked
// wrap-around of an address lands before its buffer: on the lower guard page when the buffer
// starts the arena, else on arena bytes that the data check finds changed.
// An input whose first byte is 0xf0 or above drives two-rank communicators instead, with calls on
// which the ranks agree or disagree (kTwoRanks, below: the data each rank must see, nothing
// written outside its buffers, every disagreement ended by a mismatch or a short timeout).
//
// Built with -DCOLIBRI_FUZZ=ON (clang), run by scripts/sanitize.sh for a bounded time on the seed
// corpus in corpus/. Run by hand: build/fuzz/colibri_abi_fuzz -max_total_time=60 src/tests/fuzz/corpus
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "nccl/nccl.h"

namespace {

using u128 = unsigned __int128;
constexpr size_t kArena = 64 * 1024;
constexpr u128 kAddressSpace = (u128)1 << 64;

char* gArena = nullptr;                // kArena bytes, a PROT_NONE page on either side
std::vector<unsigned char> gBefore;    // the arena before a call
std::vector<unsigned char> gExpected;  // what the call must leave
clbComm_t gComm = nullptr;
ncclComm_t gNccl = nullptr;
constexpr int64_t kPairTimeoutMs = 300;  // the two-rank communicators' timeout (twoRanks)

// ---- known defects, not fixed yet ----
// Inputs that reach a known defect are not made while it is listed here (the run says so when it
// starts); COLIBRI_FUZZ_KNOWN_DEFECTS=1 makes them too, to show the defect or to check its fix.
// Remove an entry with the fix.
const std::vector<const char*> kKnownDefects = {};  // none at present
bool gKnownDefectsToo = false;

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "colibri_abi_fuzz: %s\n", what.c_str());
  abort();
}

void setUp() {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* m = mmap(nullptr, kArena + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("mmap of the arena failed");
  gArena = static_cast<char*>(m) + page;
  if (mprotect(gArena, kArena, PROT_READ | PROT_WRITE) != 0) fail("mprotect of the arena failed");
  gKnownDefectsToo = getenv("COLIBRI_FUZZ_KNOWN_DEFECTS") && !strcmp(getenv("COLIBRI_FUZZ_KNOWN_DEFECTS"), "1");
  for (const char* d : kKnownDefects)
    fprintf(stderr, "colibri_abi_fuzz: known defect, its inputs %s: %s\n",
            gKnownDefectsToo ? "made all the same (COLIBRI_FUZZ_KNOWN_DEFECTS=1)" : "left out", d);
  gBefore.resize(kArena);
  gExpected.resize(kArena);
  clbSetLogLevel(clbLogOff);
  // The drop-in's two-rank communicators (kTwoRanks) take their timeout from the environment.
  setenv("COLIBRI_TIMEOUT_MS", std::to_string(kPairTimeoutMs).c_str(), 0);
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess || clbCommInitRank(&gComm, &id, 0, 1, nullptr) != clbSuccess)
    fail(std::string("one-rank clbCommInitRank failed: ") + clbGetLastError());
  ncclUniqueId nid;
  if (ncclGetUniqueId(&nid) != ncclSuccess || ncclCommInitRank(&gNccl, 1, nid, 0) != ncclSuccess)
    fail(std::string("one-rank ncclCommInitRank failed: ") + ncclGetLastError(nullptr));
}

// ---- the input ----

struct Reader {
  const uint8_t* p;
  size_t n;
  uint8_t u8() {
    if (!n) return 0;
    n--;
    return *p++;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)u8() << (8 * i);
    return v;
  }
};

// A count or a displacement in elements: mostly small, often at an edge of size_t.
uint64_t number(Reader& in) {
  static const uint64_t edges[] = {
      1ull << 62,       (1ull << 62) - 16, (1ull << 62) - 1, (1ull << 62) + 16,   1ull << 63,      (1ull << 63) - 1,
      (1ull << 61) - 8, 1ull << 61,        1ull << 60,       UINT64_MAX,          UINT64_MAX - 15, UINT64_MAX / 2,
      UINT64_MAX / 4,   UINT64_MAX / 8,    1ull << 32,       (1ull << 32) - 1,    1ull << 31,      kArena,
      kArena / 2,       kArena / 4,        kArena / 8,       (1ull << 48) - 4096, 1ull << 47};
  const uint8_t k = in.u8();
  switch (k % 10) {
    case 0: return 0;
    case 1:
    case 2:
    case 3: return in.u8() % 48;
    case 4: return in.u8() | (uint64_t)in.u8() << 8;
    case 5: return edges[in.u8() % (sizeof edges / sizeof edges[0])];
    case 6: return edges[in.u8() % (sizeof edges / sizeof edges[0])] - in.u8();
    case 7: return edges[in.u8() % (sizeof edges / sizeof edges[0])] + in.u8();
    default: return in.u64();
  }
}

// An int argument (type, op, root, peer): mostly in range, sometimes any.
int small(Reader& in, int range) {
  const uint8_t k = in.u8();
  if (k < 224) return in.u8() % range;
  if (k < 240) return range + in.u8() % 4;
  if (k < 248) return -1 - in.u8() % 4;
  return (int)(uint32_t)in.u64();
}

// A buffer: NULL, against the lower or the upper guard page, aliasing `other`, near it, or
// anywhere in the arena. `bytes`: the extent the call will give it, where known and small.
char* buffer(Reader& in, const char* other, u128 bytes) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(gArena);
  switch (in.u8() % 8) {
    case 0: return nullptr;
    case 1: return gArena;
    case 2: return bytes <= kArena ? gArena + (kArena - (size_t)bytes) : gArena;
    case 3: return other ? const_cast<char*>(other) : gArena;
    case 4: {
      if (!other) return gArena;
      const int16_t delta = (int16_t)(in.u8() | in.u8() << 8);
      const uintptr_t at = reinterpret_cast<uintptr_t>(other) + (intptr_t)delta;
      return at >= base && at < base + kArena ? gArena + (at - base) : gArena;
    }
    default: return gArena + ((in.u8() | in.u8() << 8) % kArena);
  }
}

// ---- what a call may do ----

struct Region {
  uintptr_t at = 0;
  u128 bytes = 0;
  u128 end() const { return (u128)at + bytes; }
  bool overlaps(const Region& o) const { return bytes && o.bytes && at < o.end() && o.at < end(); }
};

// A self send or receive of a call, for the group's pairing (k-th send to k-th receive).
struct SelfOp {
  bool send;
  uint64_t count;
  int type;
  int call;
  Region region;
};

struct Plan {
  std::string call;                               // what was called, for a failure's message
  bool invalid = false;                           // must be refused
  std::string why;                                // the first reason it must be
  bool maybe = false;                             // may be refused (a coarser check than the exact one)
  bool skip = false;                              // not made: an extent leaves the arena without wrapping
  const char* knownDefect = nullptr;              // not made while that defect is left out (kKnownDefects)
  std::vector<std::pair<Region, Region>> copies;  // (to, from), in the order they run
  std::vector<SelfOp> self;                       // all-to-all's and send/recv's self operations (count > 0)
  std::vector<Region> reads, writes;

  void refuse(const std::string& reason) {
    if (!invalid) why = reason;
    invalid = true;
  }
  // A buffer's extent [p + from, p + from + bytes): NULL with bytes, bytes past SIZE_MAX, or a wrap
  // past the address space must be refused; outside the arena otherwise is not decidable.
  Region extent(const char* name, const void* p, u128 from, u128 bytes) {
    Region r;
    r.at = reinterpret_cast<uintptr_t>(p);
    if (bytes == 0) return Region{};
    if (!p) {
      refuse(std::string(name) + " is NULL with a count");
      return Region{};
    }
    if (from + bytes > SIZE_MAX) {
      refuse(std::string(name) + "'s bytes pass SIZE_MAX");
      return Region{};
    }
    if ((u128)r.at + from + bytes > kAddressSpace) {
      refuse(std::string(name) + "'s extent wraps past the end of the address space");
      return Region{};
    }
    r.at += (uintptr_t)from;
    r.bytes = bytes;
    const uintptr_t base = reinterpret_cast<uintptr_t>(gArena);
    if (r.at < base || r.end() > (u128)base + kArena) skip = true;
    return r;
  }
};

// Sizes of Colibri's types; 0 for a value that is none.
size_t typeSize(int t) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return t >= 0 && t < clbNumTypes ? sizes[t] : 0;
}

// NCCL's type as Colibri's (-1: refused). fp8 moves as bytes in calls that do not reduce.
int fromNccl(int t, bool reduces) {
  static const int map[] = {clbInt8,   clbUint8,   clbInt32,   clbUint32,  clbInt64,
                            clbUint64, clbFloat16, clbFloat32, clbFloat64, clbBfloat16};
  if (t >= 0 && t < 10) return map[t];
  if ((t == ncclFloat8e4m3 || t == ncclFloat8e5m2) && !reduces) return clbUint8;
  return -1;
}

enum Kind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAllToAll,
  kAllToAllv,
  kSend,
  kRecv,
  kNumKinds
};
const char* kKindNames[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Gather",
                            "Scatter",   "AllToAll",  "AllToAllv",     "Send",      "Recv"};

struct Call {
  bool nccl = false;
  bool nullComm = false;
  int kind = kAllReduce;
  bool bcastInPlace = false;  // ncclBcast
  char* send = nullptr;
  char* recv = nullptr;
  uint64_t count = 0;
  int type = 0, op = 0, root = 0;
  // AllToAllv: one entry each (one rank); a NULL array when its flag is set.
  uint64_t sendCount = 0, sendDispl = 0, recvCount = 0, recvDispl = 0;
  bool nullArray[4] = {false, false, false, false};
};

bool reduces(int kind) { return kind == kAllReduce || kind == kReduceScatter || kind == kReduce; }

std::string describe(const Call& c) {
  char b[512];
  snprintf(b, sizeof b,
           "%s%s%s(send=%+td recv=%+td count=%" PRIu64 " type=%d op=%d root/peer=%d sc=%" PRIu64 " sd=%" PRIu64
           " rc=%" PRIu64 " rd=%" PRIu64 " null=%d%d%d%d%s)",
           c.nccl ? "nccl" : "clb", c.bcastInPlace ? "Bcast" : kKindNames[c.kind], c.nullComm ? "[comm NULL]" : "",
           c.send ? c.send - gArena : (ptrdiff_t)-1, c.recv ? c.recv - gArena : (ptrdiff_t)-1, c.count, c.type, c.op,
           c.root, c.sendCount, c.sendDispl, c.recvCount, c.recvDispl, c.nullArray[0], c.nullArray[1], c.nullArray[2],
           c.nullArray[3], "");
  return b;
}

// What `c` must do on a one-rank communicator.
Plan plan(const Call& c, bool inGroup) {
  Plan p;
  p.call = describe(c);
  if (c.nullComm) p.refuse("comm is NULL");
  const int t = c.nccl ? fromNccl(c.type, reduces(c.kind)) : c.type;
  const size_t esz = typeSize(t);
  if (!esz) p.refuse("unknown type");
  if (reduces(c.kind)) {
    const bool knownOp = c.op >= 0 && c.op < 5;
    if (!knownOp) p.refuse("unknown op (no PreMulSum was created)");
  }
  if ((c.kind == kBroadcast || c.kind == kReduce || c.kind == kGather || c.kind == kScatter) && c.root != 0)
    p.refuse("root out of range");
  if ((c.kind == kSend || c.kind == kRecv) && c.root != 0) p.refuse("peer out of range");
  if (p.invalid) return p;  // the sizes below need a type
  const u128 bytes = (u128)c.count * esz;
  auto copyPair = [&](const char* sendName, const char* recvName, bool inPlaceAllowed) {
    Region s = p.extent(sendName, c.send, 0, bytes), r = p.extent(recvName, c.recv, 0, bytes);
    if (p.invalid || p.skip || !bytes) return;
    if (s.at == r.at && inPlaceAllowed) return;  // in place: nothing moves
    if (s.overlaps(r)) p.refuse("send and recv overlap, not in place");
    p.reads.push_back(s);
    p.writes.push_back(r);
    p.copies.push_back({r, s});
  };
  switch (c.kind) {
    case kAllReduce:
    case kAllGather:
    case kReduceScatter:
    case kBroadcast:
    case kReduce: copyPair("send", "recv", true); break;
    case kGather: copyPair("send", "recv (root)", true); break;
    case kScatter: copyPair("send (root)", "recv", true); break;
    case kAllToAll:
    case kAllToAllv: {
      uint64_t sc = c.count, sd = 0, rc = c.count, rd = 0;
      if (c.kind == kAllToAllv) {
        for (int i = 0; i < 4; i++)
          if (c.nullArray[i]) p.refuse("a count or displacement array is NULL");
        if (p.invalid) return p;
        sc = c.sendCount, sd = c.sendDispl, rc = c.recvCount, rd = c.recvDispl;
      }
      // A block of 0 elements: its displacement may be refused where it overflows or wraps.
      auto emptyBlock = [&](const char* p0, uint64_t d) {
        const u128 at = (u128) reinterpret_cast<uintptr_t>(p0) + (u128)d * esz;
        if ((u128)d * esz > SIZE_MAX || at > kAddressSpace) p.maybe = true;
      };
      Region s, r;
      if (sc)
        s = p.extent("send block", c.send, (u128)sd * esz, (u128)sc * esz);
      else
        emptyBlock(c.send, sd);
      if (rc)
        r = p.extent("recv block", c.recv, (u128)rd * esz, (u128)rc * esz);
      else
        emptyBlock(c.recv, rd);
      if (p.invalid) return p;
      // Its own block is a self send and a self receive: both or neither, of one count.
      if ((sc == 0) != (rc == 0))
        p.refuse("a self send without its receive, or the reverse");
      else if (sc != rc)
        p.refuse("send and recv counts of the self block differ");
      if (p.invalid || p.skip) return p;
      if (!sc) return p;
      const bool inPlace = c.send == c.recv && sd == rd;
      if (!inPlace) {
        if (s.overlaps(r)) p.refuse("send and recv blocks overlap, not in place");
        // The library compares hulls from each buffer's start: coarser, so it may refuse.
        Region sh{reinterpret_cast<uintptr_t>(c.send), (u128)(sd + sc) * esz};
        Region rh{reinterpret_cast<uintptr_t>(c.recv), (u128)(rd + rc) * esz};
        if (sh.overlaps(rh)) p.maybe = true;
      }
      if (p.invalid) return p;
      p.reads.push_back(s);
      p.writes.push_back(r);
      p.self.push_back({true, sc, t, c.kind, s});
      p.self.push_back({false, rc, t, c.kind, r});
      break;
    }
    case kSend:
    case kRecv: {
      Region b = p.extent(c.kind == kSend ? "send" : "recv", c.kind == kSend ? c.send : c.recv, 0, bytes);
      if (p.invalid || p.skip || !bytes) return p;
      if (!inGroup) p.refuse("a send or receive to itself outside a group");
      (c.kind == kSend ? p.reads : p.writes).push_back(b);
      p.self.push_back({c.kind == kSend, c.count, t, kSend, b});
      break;
    }
  }
  return p;
}

// Makes the call; returns its result (0 success) and its message.
int invoke(const Call& c, std::string* msg) {
  int rc = 0;
  if (!c.nccl) {
    clbComm_t comm = c.nullComm ? nullptr : gComm;
    const clbDataType_t t = static_cast<clbDataType_t>(c.type);
    const clbRedOp_t o = static_cast<clbRedOp_t>(c.op);
    const size_t arrays[4] = {c.sendCount, c.sendDispl, c.recvCount, c.recvDispl};
    auto arr = [&](int i) { return c.nullArray[i] ? nullptr : &arrays[i]; };
    switch (c.kind) {
      case kAllReduce: rc = clbAllReduce(c.send, c.recv, c.count, t, o, comm, nullptr); break;
      case kAllGather: rc = clbAllGather(c.send, c.recv, c.count, t, comm, nullptr); break;
      case kReduceScatter: rc = clbReduceScatter(c.send, c.recv, c.count, t, o, comm, nullptr); break;
      case kBroadcast: rc = clbBroadcast(c.send, c.recv, c.count, t, c.root, comm, nullptr); break;
      case kReduce: rc = clbReduce(c.send, c.recv, c.count, t, o, c.root, comm, nullptr); break;
      case kGather: rc = clbGather(c.send, c.recv, c.count, t, c.root, comm, nullptr); break;
      case kScatter: rc = clbScatter(c.send, c.recv, c.count, t, c.root, comm, nullptr); break;
      case kAllToAll: rc = clbAllToAll(c.send, c.recv, c.count, t, comm, nullptr); break;
      case kAllToAllv: rc = clbAllToAllv(c.send, arr(0), arr(1), c.recv, arr(2), arr(3), t, comm, nullptr); break;
      case kSend: rc = clbSend(c.send, c.count, t, c.root, comm, nullptr); break;
      case kRecv: rc = clbRecv(c.recv, c.count, t, c.root, comm, nullptr); break;
    }
    *msg = clbGetLastError();
    return rc;
  }
  ncclComm_t comm = c.nullComm ? nullptr : gNccl;
  const ncclDataType_t t = static_cast<ncclDataType_t>(c.type);
  const ncclRedOp_t o = static_cast<ncclRedOp_t>(c.op);
  switch (c.kind) {
    case kAllReduce: rc = ncclAllReduce(c.send, c.recv, c.count, t, o, comm, nullptr); break;
    case kAllGather: rc = ncclAllGather(c.send, c.recv, c.count, t, comm, nullptr); break;
    case kReduceScatter: rc = ncclReduceScatter(c.send, c.recv, c.count, t, o, comm, nullptr); break;
    case kBroadcast:
      rc = c.bcastInPlace ? ncclBcast(c.recv, c.count, t, c.root, comm, nullptr)
                          : ncclBroadcast(c.send, c.recv, c.count, t, c.root, comm, nullptr);
      break;
    case kReduce: rc = ncclReduce(c.send, c.recv, c.count, t, o, c.root, comm, nullptr); break;
    case kGather: rc = ncclGather(c.send, c.recv, c.count, t, c.root, comm, nullptr); break;
    case kScatter: rc = ncclScatter(c.send, c.recv, c.count, t, c.root, comm, nullptr); break;
    case kAllToAll: rc = ncclAlltoAll(c.send, c.recv, c.count, t, comm, nullptr); break;
    case kSend: rc = ncclSend(c.send, c.count, t, c.root, comm, nullptr); break;
    case kRecv: rc = ncclRecv(c.recv, c.count, t, c.root, comm, nullptr); break;
    default: fail("no drop-in call for this kind");
  }
  *msg = ncclGetLastError(comm);
  return rc;
}

Call drawCall(Reader& in, bool nccl) {
  Call c;
  c.nccl = nccl;
  c.kind = in.u8() % kNumKinds;
  if (nccl && c.kind == kAllToAllv) c.kind = kAllToAll;  // the drop-in has no all-to-all-v
  c.nullComm = in.u8() == 0xff;
  c.type = small(in, nccl ? ncclNumTypes : clbNumTypes);
  c.op = small(in, nccl ? ncclNumOps : clbNumOps);
  c.root = small(in, 1);
  c.count = number(in);
  const int t = nccl ? fromNccl(c.type, reduces(c.kind)) : c.type;
  const size_t esz = typeSize(t) ? typeSize(t) : 1;
  u128 sendBytes = (u128)c.count * esz, recvBytes = sendBytes;
  if (c.kind == kAllToAllv) {
    c.sendCount = number(in), c.sendDispl = number(in), c.recvCount = number(in), c.recvDispl = number(in);
    if (in.u8() == 0xfe) c.nullArray[in.u8() % 4] = true;
    sendBytes = (u128)(c.sendDispl + (u128)c.sendCount) * esz;
    recvBytes = (u128)(c.recvDispl + (u128)c.recvCount) * esz;
  }
  c.send = buffer(in, nullptr, sendBytes);
  c.recv = buffer(in, c.send, recvBytes);
  if (nccl && c.kind == kBroadcast && in.u8() % 4 == 0) c.bcastInPlace = true, c.send = c.recv;
  return c;
}

// The arena as `p` leaves it (its copies in order, on the arena before the call).
void applyCopies(const std::vector<std::pair<Region, Region>>& copies) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(gArena);
  for (auto& [to, from] : copies)
    memmove(gExpected.data() + (to.at - base), gExpected.data() + (from.at - base), (size_t)to.bytes);
}

// Every byte outside `writes` unchanged; the whole arena as expected where `exact`.
void checkArena(const Plan& p, bool succeeded, bool exact, const std::string& what) {
  if (!succeeded) {
    if (memcmp(gArena, gBefore.data(), kArena) != 0) fail(what + ": refused, yet changed the arena");
    return;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(gArena);
  for (size_t i = 0; i < kArena; i++) {
    const bool mayWrite = [&] {
      for (const Region& w : p.writes)
        if (base + i >= w.at && (u128)(base + i) < w.end()) return true;
      return false;
    }();
    if (exact ? (unsigned char)gArena[i] != gExpected[i] : !mayWrite && (unsigned char)gArena[i] != gBefore[i]) {
      char b[160];
      snprintf(b, sizeof b, ": arena byte %zu is 0x%02x, expected 0x%02x (%s)", i, (unsigned char)gArena[i],
               exact ? gExpected[i] : gBefore[i], mayWrite ? "inside what it writes" : "outside what it writes");
      fail(what + b);
    }
  }
}

void judge(const Plan& p, int rc, const std::string& msg, bool exact) {
  if (p.invalid && rc == 0) fail(p.call + " succeeded, but must be refused: " + p.why);
  if (!p.invalid && !p.maybe && rc != 0) fail(p.call + " was refused, but is valid: " + msg);
  if (rc != 0 && msg.empty()) fail(p.call + " failed with code " + std::to_string(rc) + " and no message");
  checkArena(p, rc == 0, exact, p.call);
}

void fill(uint32_t seed) {
  for (size_t i = 0; i < kArena; i++) gArena[i] = (char)((i * 131 + seed) >> 3 ^ i);
}

// One call outside a group.
void single(Reader& in, bool nccl) {
  Call c = drawCall(in, nccl);
  Plan p = plan(c, false);
  if ((p.skip && !p.invalid) || (p.knownDefect && !gKnownDefectsToo)) return;
  memcpy(gBefore.data(), gArena, kArena);
  gExpected = gBefore;
  std::vector<std::pair<Region, Region>> order = p.copies;
  if (p.self.size() == 2) order.push_back({p.self[1].region, p.self[0].region});  // all-to-all's own block
  applyCopies(order);
  std::string msg;
  const int rc = invoke(c, &msg);
  if (rc == 0 && !nccl && *clbGetLastError())
    fail(p.call + " succeeded but clbGetLastError says: " + clbGetLastError());
  judge(p, rc, msg, true);
}

// A group of up to 4 calls (clb's or the drop-in's): refused as a whole where one is, or where its
// self sends and receives do not pair (the k-th send with the k-th receive: same count, type and call).
void group(Reader& in, bool nccl) {
  const int n = 1 + in.u8() % 4;
  std::vector<Call> calls;
  std::vector<Plan> plans;
  Plan all;
  all.call = nccl ? "ncclGroup{" : "clbGroup{";
  for (int i = 0; i < n; i++) {
    Call c = drawCall(in, nccl);
    Plan p = plan(c, true);
    if ((p.skip && !p.invalid) || (p.knownDefect && !gKnownDefectsToo)) continue;
    calls.push_back(c);
    plans.push_back(p);
    all.call += p.call + "; ";
    if (p.invalid) all.refuse(p.why);
    all.maybe = all.maybe || p.maybe;
    for (auto& x : p.copies) all.copies.push_back(x);
    for (auto& x : p.self) all.self.push_back(x);
    for (auto& x : p.reads) all.reads.push_back(x);
    for (auto& x : p.writes) all.writes.push_back(x);
  }
  all.call += "}";
  std::vector<const SelfOp*> sends, recvs;
  for (const SelfOp& s : all.self) (s.send ? sends : recvs).push_back(&s);
  if (!all.invalid && sends.size() != recvs.size()) all.refuse("unpaired self sends and receives");
  for (size_t k = 0; !all.invalid && k < sends.size(); k++)
    if (sends[k]->count != recvs[k]->count || sends[k]->type != recvs[k]->type || sends[k]->call != recvs[k]->call)
      all.refuse("a self send and its receive differ");
  // The exact result only where no call writes what another reads or writes (else the order
  // inside the group decides it); elsewhere only that nothing outside the buffers changed.
  bool exact = true;
  for (size_t i = 0; i < plans.size(); i++)
    for (size_t j = 0; j < plans.size(); j++)
      for (const Region& w : plans[i].writes) {
        if (i == j) continue;
        for (const Region& o : plans[j].writes) exact = exact && !w.overlaps(o);
        for (const Region& o : plans[j].reads) exact = exact && !w.overlaps(o);
      }
  memcpy(gBefore.data(), gArena, kArena);
  gExpected = gBefore;
  // Point-to-point pairs copy as send k to receive k; the collectives' copies follow.
  std::vector<std::pair<Region, Region>> order;
  for (size_t k = 0; k < sends.size() && k < recvs.size(); k++) order.push_back({recvs[k]->region, sends[k]->region});
  for (auto& x : all.copies) order.push_back(x);
  if (!all.invalid) applyCopies(order);  // a refused group changes nothing (and its pairs may differ in size)
  int startRc = nccl ? ncclGroupStart() : clbGroupStart();
  if (startRc != 0) fail("group start failed");
  bool anyRefused = false;
  std::string msg;
  for (const Call& c : calls) {
    std::string m;
    if (invoke(c, &m) != 0) {
      anyRefused = true;
      if (m.empty()) fail(describe(c) + " refused in a group with no message");
    }
  }
  const int rc = nccl ? ncclGroupEnd() : clbGroupEnd();
  msg = nccl ? ncclGetLastError(gNccl) : clbGetLastError();
  if (anyRefused && rc == 0) fail(all.call + ": a call was refused, yet the group's end succeeded");
  judge(all, rc, msg, exact);
}

// ---- two ranks ----
// An input whose first byte is kTwoRanks or above drives a two-rank communicator instead (clb's
// or the drop-in's, made anew for every input that needs one and after every call that failed or
// that the ranks disagreed on): rank 0 on this thread, rank 1 on a thread of its own, each with
// an arena of its own between PROT_NONE pages. Rank 1 makes rank 0's call, or one that differs in
// one argument (count, type, op, root or peer, the call itself, one all-to-all-v count), which
// may be out of range. Every value a rank sends is a small integer computed from (rank, index),
// so the result a rank must see is computed here from its own arguments, the peer assumed to make
// the same call (all-to-all-v: the peer's own layout):
//   * arguments of its own that are invalid: the call fails and changes nothing of its arena;
//   * both ranks agree: both succeed and leave exactly that result, nothing else changed;
//   * they disagree: a rank that succeeds has exactly that result; one that fails (a mismatch it
//     sees, or the peer's timeout, kPairTimeoutMs) says why and changes nothing outside the
//     buffers its own arguments let the call write.
// A call that does not end within libFuzzer's -timeout is a hang, which it reports.
constexpr uint8_t kTwoRanks = 0xf0;
constexpr size_t kRankArena = 16 * 1024;
char* gRankArena[2] = {nullptr, nullptr};
clbComm_t gPairClb[2] = {nullptr, nullptr};
ncclComm_t gPairNccl[2] = {nullptr, nullptr};

void setUpRankArenas() {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* m = mmap(nullptr, 2 * kRankArena + 3 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("mmap of the rank arenas failed");
  for (int r = 0; r < 2; r++) {
    gRankArena[r] = static_cast<char*>(m) + page + r * (kRankArena + page);
    if (mprotect(gRankArena[r], kRankArena, PROT_READ | PROT_WRITE) != 0) fail("mprotect of a rank arena failed");
  }
}

// Runs f(0) here and f(1) on a thread of its own, both at once.
template <typename F>
void onBothRanks(F f) {
  std::thread peer([&] { f(1); });
  f(0);
  peer.join();
}

void destroyPair() {
  onBothRanks([](int r) {
    if (gPairClb[r]) clbCommDestroy(gPairClb[r]);
    if (gPairNccl[r]) ncclCommDestroy(gPairNccl[r]);
    gPairClb[r] = nullptr;
    gPairNccl[r] = nullptr;
  });
}

void makePair(bool nccl) {
  if (nccl ? gPairNccl[0] != nullptr : gPairClb[0] != nullptr) return;
  int rcs[2] = {0, 0};
  std::string errors[2];
  if (nccl) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) fail("ncclGetUniqueId failed");
    onBothRanks([&](int r) {
      rcs[r] = ncclCommInitRank(&gPairNccl[r], 2, id, r);  // the timeout: COLIBRI_TIMEOUT_MS (setUp)
      if (rcs[r]) errors[r] = ncclGetLastError(nullptr);
    });
  } else {
    clbUniqueId id;
    if (clbGetUniqueId(&id) != clbSuccess) fail("clbGetUniqueId failed");
    onBothRanks([&](int r) {
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      cfg.timeoutMs = kPairTimeoutMs;
      cfg.logLevel = clbLogOff;
      rcs[r] = clbCommInitRank(&gPairClb[r], &id, r, 2, &cfg);
      if (rcs[r]) errors[r] = clbGetLastError();
    });
  }
  for (int r = 0; r < 2; r++)
    if (rcs[r]) fail("two-rank init failed on rank " + std::to_string(r) + ": " + errors[r]);
}

// One rank's view of a two-rank call. kSend: rank `root` sends to the other, which receives.
struct Call2 {
  bool nccl = false;
  int kind = kAllReduce, type = 0, op = 0, root = 0;
  size_t count = 0;
  size_t sc[2] = {0, 0}, sd[2] = {0, 0}, rc[2] = {0, 0}, rd[2] = {0, 0};  // AllToAllv
  bool inPlace = false;
  bool operator==(const Call2& o) const {
    return nccl == o.nccl && kind == o.kind && type == o.type && op == o.op && root == o.root && count == o.count &&
           !memcmp(sc, o.sc, sizeof sc) && !memcmp(sd, o.sd, sizeof sd) && !memcmp(rc, o.rc, sizeof rc) &&
           !memcmp(rd, o.rd, sizeof rd) && inPlace == o.inPlace;
  }
};

// What rank `r` sends at element i of its send buffer: 0 .. 7, so that sums, products and
// averages of two stay exact in every type.
uint64_t val(int r, size_t i) { return (r * 3 + i * 5 + 1) % 8; }

// v (a small non-negative integer or a half) as one element of clb type t, encoded here.
void encode(int t, char* at, double v) {
  switch (t) {
    case clbInt8:
    case clbUint8: {
      uint8_t x = (uint8_t)v;
      memcpy(at, &x, 1);
      break;
    }
    case clbInt32:
    case clbUint32: {
      uint32_t x = (uint32_t)v;
      memcpy(at, &x, 4);
      break;
    }
    case clbInt64:
    case clbUint64: {
      uint64_t x = (uint64_t)v;
      memcpy(at, &x, 8);
      break;
    }
    case clbFloat16: {
      uint16_t h = 0;
      if (v != 0) {  // v = m x 2^e, m in [0.5, 1): exponent e - 1 (bias 15), 10 bits of 2m - 1
        int e = 0;
        const double m = frexp(v, &e);
        h = (uint16_t)((e - 1 + 15) << 10 | (uint16_t)((2 * m - 1) * 1024));
      }
      memcpy(at, &h, 2);
      break;
    }
    case clbBfloat16: {
      const float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      const uint16_t b = (uint16_t)(bits >> 16);
      memcpy(at, &b, 2);
      break;
    }
    case clbFloat32: {
      float x = (float)v;
      memcpy(at, &x, 4);
      break;
    }
    default: {
      memcpy(at, &v, 8);
      break;
    }
  }
}

bool isFloat(int t) { return t >= clbFloat16; }

double combine(int t, int op, double a, double b) {
  switch (op) {
    case clbSum: return a + b;
    case clbProd: return a * b;
    case clbMin: return a < b ? a : b;
    case clbMax: return a > b ? a : b;
    default: return isFloat(t) ? (a + b) / 2 : (double)(((uint64_t)a + (uint64_t)b) / 2);
  }
}

// A rank's buffers in its arena, where its own arguments put them, and what the call reads and
// writes there (in elements; a write of ok = true only).
struct Layout2 {
  bool valid = true;
  size_t sendElems = 0, recvElems = 0;  // extents
  size_t sendAt = 0, recvAt = 0;        // byte offsets
  bool writes = false;                  // whether recv is written at all
};

Layout2 layout2(const Call2& c, int r, uint8_t place, uint16_t sendOff, uint16_t recvOff) {
  Layout2 l;
  const bool typeOk = c.type >= 0 && c.type < clbNumTypes;
  const bool rootOk = c.root == 0 || c.root == 1;
  const bool opOk = c.op >= 0 && c.op < clbNumOps;
  const size_t n = c.count;
  l.valid = typeOk && (!reduces(c.kind) || opOk);
  if (c.kind == kBroadcast || c.kind == kReduce || c.kind == kGather || c.kind == kScatter || c.kind == kSend)
    l.valid = l.valid && rootOk;
  if (c.kind == kAllToAllv) l.valid = l.valid && c.sc[r] == c.rc[r];  // its own block: both or neither
  const size_t esz = typeOk ? typeSize(c.type) : 1;
  const bool isRoot = c.root == r;
  switch (c.kind) {
    case kAllReduce: l.sendElems = n, l.recvElems = n; break;
    case kAllGather: l.sendElems = n, l.recvElems = 2 * n; break;
    case kReduceScatter: l.sendElems = 2 * n, l.recvElems = n; break;
    case kBroadcast: l.sendElems = n, l.recvElems = n; break;
    case kReduce: l.sendElems = n, l.recvElems = isRoot ? n : 0; break;
    case kGather: l.sendElems = n, l.recvElems = isRoot ? 2 * n : 0; break;
    case kScatter: l.sendElems = isRoot ? 2 * n : 0, l.recvElems = n; break;
    case kAllToAll: l.sendElems = 2 * n, l.recvElems = 2 * n; break;
    case kAllToAllv:
      for (int p = 0; p < 2; p++) {
        if (c.sc[p]) l.sendElems = std::max(l.sendElems, c.sd[p] + c.sc[p]);
        if (c.rc[p]) l.recvElems = std::max(l.recvElems, c.rd[p] + c.rc[p]);
      }
      break;
    case kSend: l.sendElems = isRoot ? n : 0, l.recvElems = isRoot ? 0 : n; break;
  }
  l.writes = l.recvElems > 0;
  const size_t half = kRankArena / 2, sendBytes = l.sendElems * esz, recvBytes = l.recvElems * esz;
  l.sendAt = place & 2 ? 0 : (sendOff % (half - sendBytes + 1)) / esz * esz;
  l.recvAt = place & 4 ? (kRankArena - recvBytes) / esz * esz : half + (recvOff % (half - recvBytes + 1)) / esz * esz;
  if (c.inPlace) l.recvAt = l.sendAt;
  return l;
}

// The arena rank r must leave (from `before`) where its call succeeds.
void expected2(const Call2& c, int r, const Layout2& l, const Call2& peer, std::vector<unsigned char>& image) {
  const size_t esz = typeSize(c.type), n = c.count;
  char* out = reinterpret_cast<char*>(image.data()) + l.recvAt;
  auto put = [&](size_t i, double v) { encode(c.type, out + i * esz, v); };
  const int other = 1 - r;
  auto red = [&](size_t i) { return combine(c.type, c.op, (double)val(0, i), (double)val(1, i)); };
  switch (c.kind) {
    case kAllReduce:
      for (size_t i = 0; i < n; i++) put(i, red(i));
      break;
    case kAllGather:
      for (size_t i = 0; i < 2 * n; i++) put(i, (double)val((int)(i / (n ? n : 1)), i % (n ? n : 1)));
      break;
    case kReduceScatter:
      for (size_t i = 0; i < n; i++) put(i, red(r * n + i));
      break;
    case kBroadcast:
      for (size_t i = 0; i < n; i++) put(i, (double)val(c.root, i));
      break;
    case kReduce:
      if (c.root == r)
        for (size_t i = 0; i < n; i++) put(i, red(i));
      break;
    case kGather:
      if (c.root == r)
        for (size_t i = 0; i < 2 * n; i++) put(i, (double)val((int)(i / n), i % n));
      break;
    case kScatter:
      for (size_t i = 0; i < n; i++) put(i, (double)val(c.root, r * n + i));
      break;
    case kAllToAll:
      for (size_t i = 0; i < 2 * n; i++) put(i, (double)val((int)(i / n), r * n + i % n));
      break;
    case kAllToAllv:
      for (int p = 0; p < 2; p++) {
        const size_t from = p == r ? c.sd[r] : peer.sd[r];  // where the sender keeps its block for r
        for (size_t i = 0; i < c.rc[p]; i++) put(c.rd[p] + i, (double)val(p, from + i));
      }
      break;
    case kSend:
      if (c.root == other)
        for (size_t i = 0; i < n; i++) put(i, (double)val(other, i));
      break;
  }
}

int nccType(int t) {
  static const int map[] = {ncclInt8,   ncclUint8,   ncclInt32,    ncclUint32,  ncclInt64,
                            ncclUint64, ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};
  return t >= 0 && t < clbNumTypes ? map[t] : ncclNumTypes + (t - clbNumTypes);  // out of range: none
}
int ncclOp(int o) {
  static const int map[] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};
  return o >= 0 && o < clbNumOps ? map[o] : o;
}

// Rank r's call; its result (0 success) and its message.
int invoke2(const Call2& c, int r, const Layout2& l, std::string* msg) {
  char* send = gRankArena[r] + l.sendAt;
  char* recv = gRankArena[r] + l.recvAt;
  const int other = 1 - r;
  int rc = 0;
  if (!c.nccl) {
    clbComm_t comm = gPairClb[r];
    const auto t = static_cast<clbDataType_t>(c.type);
    const auto o = static_cast<clbRedOp_t>(c.op);
    switch (c.kind) {
      case kAllReduce: rc = clbAllReduce(send, recv, c.count, t, o, comm, nullptr); break;
      case kAllGather: rc = clbAllGather(send, recv, c.count, t, comm, nullptr); break;
      case kReduceScatter: rc = clbReduceScatter(send, recv, c.count, t, o, comm, nullptr); break;
      case kBroadcast: rc = clbBroadcast(send, recv, c.count, t, c.root, comm, nullptr); break;
      case kReduce: rc = clbReduce(send, recv, c.count, t, o, c.root, comm, nullptr); break;
      case kGather: rc = clbGather(send, recv, c.count, t, c.root, comm, nullptr); break;
      case kScatter: rc = clbScatter(send, recv, c.count, t, c.root, comm, nullptr); break;
      case kAllToAll: rc = clbAllToAll(send, recv, c.count, t, comm, nullptr); break;
      case kAllToAllv: rc = clbAllToAllv(send, c.sc, c.sd, recv, c.rc, c.rd, t, comm, nullptr); break;
      default:
        rc = c.root == r ? clbSend(send, c.count, t, other, comm, nullptr)
                         : clbRecv(recv, c.count, t, c.root == other ? other : c.root, comm, nullptr);
    }
    *msg = clbGetLastError();
    return rc;
  }
  ncclComm_t comm = gPairNccl[r];
  const auto t = static_cast<ncclDataType_t>(nccType(c.type));
  const auto o = static_cast<ncclRedOp_t>(ncclOp(c.op));
  switch (c.kind) {
    case kAllReduce: rc = ncclAllReduce(send, recv, c.count, t, o, comm, nullptr); break;
    case kAllGather: rc = ncclAllGather(send, recv, c.count, t, comm, nullptr); break;
    case kReduceScatter: rc = ncclReduceScatter(send, recv, c.count, t, o, comm, nullptr); break;
    case kBroadcast: rc = ncclBroadcast(send, recv, c.count, t, c.root, comm, nullptr); break;
    case kReduce: rc = ncclReduce(send, recv, c.count, t, o, c.root, comm, nullptr); break;
    case kGather: rc = ncclGather(send, recv, c.count, t, c.root, comm, nullptr); break;
    case kScatter: rc = ncclScatter(send, recv, c.count, t, c.root, comm, nullptr); break;
    case kAllToAll: rc = ncclAlltoAll(send, recv, c.count, t, comm, nullptr); break;
    default:
      rc = c.root == r ? ncclSend(send, c.count, t, other, comm, nullptr)
                       : ncclRecv(recv, c.count, t, c.root == other ? other : c.root, comm, nullptr);
  }
  *msg = ncclGetLastError(comm);
  return rc;
}

// Rank 0's call from the input; rank 1's is a copy, changed in one argument where the input says.
void drawPair(Reader& in, Call2 c[2]) {
  Call2& a = c[0];
  a.nccl = in.u8() & 1;
  a.kind = in.u8() % (kSend + 1);
  if (a.nccl && a.kind == kAllToAllv) a.kind = kAllToAll;  // the drop-in has no all-to-all-v
  a.type = in.u8() % clbNumTypes;
  a.op = in.u8() % clbNumOps;
  a.root = in.u8() % 2;
  a.count = in.u8() % 4 == 0 ? 0 : in.u8();
  if (a.kind == kAllToAllv) {
    // counts[from][to]; each rank packs its blocks with gaps, in peer order or reversed
    size_t counts[2][2];
    for (auto& row : counts)
      for (size_t& x : row) x = in.u8() % 4 == 0 ? 0 : in.u8() % 40;
    const uint8_t order = in.u8();
    for (int r = 0; r < 2; r++) {
      size_t s = in.u8() % 8, q = in.u8() % 8;
      for (int k = 0; k < 2; k++) {
        const int p = order >> r & 1 ? 1 - k : k;
        c[r].sc[p] = counts[r][p], c[r].sd[p] = s, s += counts[r][p] + in.u8() % 8;
        c[r].rc[p] = counts[p][r], c[r].rd[p] = q, q += counts[p][r] + in.u8() % 8;
      }
    }
  }
  const uint8_t place = in.u8();
  a.inPlace = place & 1 && (a.kind == kAllReduce || a.kind == kBroadcast || a.kind == kReduce || a.kind == kAllToAll);
  Call2 b = a;
  memcpy(b.sc, c[1].sc, sizeof b.sc), memcpy(b.sd, c[1].sd, sizeof b.sd);
  memcpy(b.rc, c[1].rc, sizeof b.rc), memcpy(b.rd, c[1].rd, sizeof b.rd);
  const uint8_t change = in.u8();
  if (change % 4 == 0) {  // one argument differs on rank 1
    switch (in.u8() % 6) {
      case 0: b.count = in.u8() % 2 ? in.u8() : a.count + 1; break;
      case 1: b.type = in.u8() % (clbNumTypes + 1); break;
      case 2: b.op = in.u8() % (clbNumOps + 1); break;
      case 3: b.root = (int)(in.u8() % 4) - 1; break;
      case 4:
        b.kind = in.u8() % (kSend + 1);
        if (b.nccl && b.kind == kAllToAllv) b.kind = kAllToAll;
        break;
      default: {
        const int p = in.u8() % 2;
        (in.u8() % 2 ? b.sc[p] : b.rc[p]) = in.u8() % 40;
      }
    }
    b.inPlace = b.inPlace && (b.kind == kAllReduce || b.kind == kBroadcast || b.kind == kReduce || b.kind == kAllToAll);
  }
  c[1] = b;
}

// One call on both ranks, judged on each.
void pairStep(Reader& in) {
  Call2 c[2];
  drawPair(in, c);
  const uint8_t place = in.u8();
  const uint16_t offs[2] = {(uint16_t)(in.u8() | in.u8() << 8), (uint16_t)(in.u8() | in.u8() << 8)};
  const bool agree = c[0] == c[1];
  makePair(c[0].nccl);
  Layout2 l[2];
  std::vector<unsigned char> before[2], want[2];
  for (int r = 0; r < 2; r++) {
    l[r] = layout2(c[r], r, place, offs[0], offs[1]);
    // The send buffer holds val(r, i); the rest of the arena a pattern of its own.
    for (size_t i = 0; i < kRankArena; i++) gRankArena[r][i] = (char)(0xa5 ^ (i * 7 + r));
    if (l[r].valid)
      for (size_t i = 0; i < l[r].sendElems; i++)
        encode(c[r].type, gRankArena[r] + l[r].sendAt + i * typeSize(c[r].type), (double)val(r, i));
    before[r].assign(gRankArena[r], gRankArena[r] + kRankArena);
    want[r] = before[r];
    if (l[r].valid) expected2(c[r], r, l[r], c[1 - r], want[r]);
  }
  int rcs[2] = {0, 0};
  std::string msgs[2];
  onBothRanks([&](int r) { rcs[r] = invoke2(c[r], r, l[r], &msgs[r]); });
  for (int r = 0; r < 2; r++) {
    char what[400];
    snprintf(what, sizeof what,
             "two ranks, rank %d of %s: %s%s(count=%zu type=%d op=%d root/peer=%d inPlace=%d sc=%zu,%zu sd=%zu,%zu "
             "rc=%zu,%zu rd=%zu,%zu send@%zu recv@%zu) -> %d",
             r, agree ? "agreeing calls" : "disagreeing calls", c[r].nccl ? "nccl" : "clb", kKindNames[c[r].kind],
             c[r].count, c[r].type, c[r].op, c[r].root, c[r].inPlace, c[r].sc[0], c[r].sc[1], c[r].sd[0], c[r].sd[1],
             c[r].rc[0], c[r].rc[1], c[r].rd[0], c[r].rd[1], l[r].sendAt, l[r].recvAt, rcs[r]);
    const std::string call = what;
    if (!l[r].valid && rcs[r] == 0) fail(call + ": succeeded with an argument out of range");
    if (l[r].valid && agree && rcs[r] != 0) fail(call + ": refused, but both ranks made this valid call: " + msgs[r]);
    if (rcs[r] != 0 && msgs[r].empty()) fail(call + ": failed with no message");
    const unsigned char* now = reinterpret_cast<const unsigned char*>(gRankArena[r]);
    const size_t esz = l[r].valid ? typeSize(c[r].type) : 1;
    for (size_t i = 0; i < kRankArena; i++) {
      const bool inRecv = l[r].writes && i >= l[r].recvAt && i < l[r].recvAt + l[r].recvElems * esz;
      const unsigned char must = rcs[r] == 0 ? want[r][i] : before[r][i];
      if (now[i] != must && (rcs[r] == 0 || !inRecv)) {
        char b[200];
        snprintf(b, sizeof b, ": arena byte %zu is 0x%02x, expected 0x%02x (%s)%s%s", i, now[i], must,
                 inRecv ? "inside what it writes" : "outside what it writes", rcs[r] ? "; it failed: " : "",
                 msgs[r].c_str());
        fail(call + b);
      }
    }
  }
  // A communicator that failed, or whose ranks disagreed (a send may wait unmatched), is made anew.
  if (rcs[0] || rcs[1] || !agree) destroyPair();
}

void twoRanks(Reader& in) {
  for (int step = 0; step < 4 && in.n; step++) pairStep(in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool ready = (setUp(), setUpRankArenas(), true);
  (void)ready;
  Reader in{data, size};
  if (size && data[0] >= kTwoRanks) {
    // COLIBRI_FUZZ_TWO_RANKS=0 leaves them out: a two-rank input costs about 60 one-rank inputs
    // (a pair of communicators, and a timeout where the ranks' disagreement ends in one), so the
    // bounded CI run gives the one-rank inputs most of its time first (scripts/sanitize.sh).
    static const bool twoRanksToo = !getenv("COLIBRI_FUZZ_TWO_RANKS") || strcmp(getenv("COLIBRI_FUZZ_TWO_RANKS"), "0");
    if (!twoRanksToo) return 0;
    in.u8();
    twoRanks(in);
    return 0;
  }
  fill((uint32_t)size * 2654435761u);
  for (int step = 0; step < 12 && in.n; step++) {
    const uint8_t what = in.u8();
    switch (what % 8) {
      case 0:
      case 1:
      case 2: single(in, false); break;
      case 3:
      case 4: single(in, true); break;
      case 5: group(in, false); break;
      case 6: group(in, true); break;
      default:
        // An end without a start: refused, with a message.
        if (clbGroupEnd() == clbSuccess || !*clbGetLastError()) fail("clbGroupEnd without a start succeeded");
        if (ncclGroupEnd() == ncclSuccess || !*ncclGetLastError(gNccl)) fail("ncclGroupEnd without a start succeeded");
        break;
    }
  }
  return 0;
}
