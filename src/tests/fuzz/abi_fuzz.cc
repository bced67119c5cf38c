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
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "nccl/nccl.h"

namespace {

using u128 = unsigned __int128;
constexpr size_t kArena = 64 * 1024;
constexpr u128 kAddressSpace = (u128)1 << 64;

char* gArena = nullptr;                 // kArena bytes, a PROT_NONE page on either side
std::vector<unsigned char> gBefore;     // the arena before a call
std::vector<unsigned char> gExpected;   // what the call must leave
clbComm_t gComm = nullptr;
ncclComm_t gNccl = nullptr;

// ---- known defects, not fixed yet ----
// Inputs that reach a known defect are not made while it is listed here (the run says so when it
// starts); COLIBRI_FUZZ_KNOWN_DEFECTS=1 makes them too, to show the defect or to check its fix.
// Remove an entry with the fix.
const char* const kEmptyBlockAddress =
    "empty-block-address: clbAllToAllv computes each block's address, send + sdispls[p] x size, also "
    "for a block of 0 elements, which it then drops (src/core/p2p.cc, allToAllv's loop over the "
    "peers): with a NULL buffer and a displacement that is not 0 (\"applying non-zero offset to null "
    "pointer\"), or with a displacement that takes the address past the end of the address space "
    "(\"pointer overflow\"), that is undefined behaviour, which UBSan stops on; the address is never "
    "used. Fix: compute it only for a block of count > 0";
const char* const kKnownDefects[] = {kEmptyBlockAddress};
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
      1ull << 62, (1ull << 62) - 16, (1ull << 62) - 1, (1ull << 62) + 16, 1ull << 63, (1ull << 63) - 1,
      (1ull << 61) - 8, 1ull << 61, 1ull << 60, UINT64_MAX, UINT64_MAX - 15, UINT64_MAX / 2, UINT64_MAX / 4,
      UINT64_MAX / 8, 1ull << 32, (1ull << 32) - 1, 1ull << 31, kArena, kArena / 2, kArena / 4, kArena / 8,
      (1ull << 48) - 4096, 1ull << 47};
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
  std::string call;              // what was called, for a failure's message
  bool invalid = false;          // must be refused
  std::string why;               // the first reason it must be
  bool maybe = false;            // may be refused (a coarser check than the exact one)
  bool skip = false;             // not made: an extent leaves the arena without wrapping
  const char* knownDefect = nullptr;  // not made while that defect is left out (kKnownDefects)
  std::vector<std::pair<Region, Region>> copies;  // (to, from), in the order they run
  std::vector<SelfOp> self;      // all-to-all's and send/recv's self operations (count > 0)
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
  static const int map[] = {clbInt8, clbUint8, clbInt32, clbUint32, clbInt64, clbUint64,
                            clbFloat16, clbFloat32, clbFloat64, clbBfloat16};
  if (t >= 0 && t < 10) return map[t];
  if ((t == ncclFloat8e4m3 || t == ncclFloat8e5m2) && !reduces) return clbUint8;
  return -1;
}

enum Kind {
  kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kGather, kScatter, kAllToAll, kAllToAllv,
  kSend, kRecv, kNumKinds
};
const char* kKindNames[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Gather",
                            "Scatter", "AllToAll", "AllToAllv", "Send", "Recv"};

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
           c.root, c.sendCount, c.sendDispl, c.recvCount, c.recvDispl, c.nullArray[0], c.nullArray[1],
           c.nullArray[2], c.nullArray[3], "");
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
        const u128 at = (u128)reinterpret_cast<uintptr_t>(p0) + (u128)d * esz;
        if ((u128)d * esz > SIZE_MAX || at > kAddressSpace) p.maybe = true;
        // Known defect (kKnownDefects): the block's address is computed all the same.
        if (d && (!p0 || at >= kAddressSpace)) p.knownDefect = kEmptyBlockAddress;
      };
      Region s, r;
      if (sc) s = p.extent("send block", c.send, (u128)sd * esz, (u128)sc * esz);
      else emptyBlock(c.send, sd);
      if (rc) r = p.extent("recv block", c.recv, (u128)rd * esz, (u128)rc * esz);
      else emptyBlock(c.recv, rd);
      if (p.invalid) return p;
      // Its own block is a self send and a self receive: both or neither, of one count.
      if ((sc == 0) != (rc == 0)) p.refuse("a self send without its receive, or the reverse");
      else if (sc != rc) p.refuse("send and recv counts of the self block differ");
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
  if (rc == 0 && !nccl && *clbGetLastError()) fail(p.call + " succeeded but clbGetLastError says: " + clbGetLastError());
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool ready = (setUp(), true);
  (void)ready;
  Reader in{data, size};
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
