// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "algo/p2p.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "base/dtype.h"
#include "base/hash.h"
#include "transport/transport.h"

namespace clb {
namespace {

// One operation's progress: bytes moved so far and its next message's number.
struct Progress {
  size_t done = 0;
  uint64_t index = 0;
  bool complete = false;
};

// The operations with one peer, in batch order per direction.
struct PeerQueues {
  int peer = -1;
  PeerChannel* ch = nullptr;
  std::vector<int> sends, recvs;
  size_t sendHead = 0, recvHead = 0;
  bool unsent = false;  // messages posted but not yet out of this rank (socket writes queued)
};

OpDesc descOf(const PeerOp& o, uint64_t seq) {
  OpDesc d{};
  d.seq = seq;
  d.coll = o.call;
  d.dtype = o.type;
  d.op = o.call == kReduce ? (o.preMulSum ? (uint32_t)kOpPreMulSum : (uint32_t)o.op) : 0;
  d.algo = 0;
  d.root = o.root;
  d.epoch = o.epoch;
  d.count = o.count;
  return d;
}

// What the batch still waits for, for the timeout's message: the first incomplete operation.
std::string waitingFor(const std::vector<PeerOp>& ops, const std::vector<Progress>& prog, int* peer) {
  for (size_t i = 0; i < ops.size(); i++) {
    if (prog[i].complete) continue;
    const PeerOp& o = ops[i];
    *peer = o.peer;
    char b[200];
    snprintf(b, sizeof b, "%s rank %d (%s of %zu %s, %zu of %zu bytes moved)",
             o.kind == PeerOp::kSend ? "room to send to" : "the data of a receive from", o.peer, collectiveName(o.call),
             o.count, typeName(o.type), prog[i].done, o.count * clbTypeSize(o.type));
    return b;
  }
  *peer = -1;
  return "point-to-point messages";
}

// dst = incoming op dst; the last step of an average divides.
void reduceInto(void* dst, const void* in, size_t n, const PeerOp& o) {
  if (o.divideBy > 0)
    reducePairFinal(dst, in, dst, n, o.type, o.op, o.divideBy);
  else
    reducePair(dst, in, dst, n, o.type, o.op);
}

// A message's bytes between an operation's buffer and a channel's slot: memcpy in host memory,
// else through the communicator's PeerDeviceMemory (an operation on device buffers, or a slot of a
// channel in device mode), complete when it returns.
clbResult_t moveBytes(CommContext* c, void* dst, const void* src, size_t bytes, bool device, void* stream) {
  if (!bytes) return clbSuccess;
  if (!device) {
    memcpy(dst, src, bytes);
    return clbSuccess;
  }
  const PeerDeviceMemory* m = c->peerDeviceMemory.get();
  if (!m || !m->copy)
    return setError(clbInternalError, "rank %d: a point-to-point message in GPU memory without the means to reach it",
                    c->rank);
  return m->copy(m->self, dst, src, bytes, stream);
}

// Sends and receives of this rank to itself (count > 0: count 0 moves nothing): the k-th send
// goes to the k-th receive. Found and checked before anything is written (selfPairs), copied
// with the batch's local copies once every check passed (runSelf).
clbResult_t selfPairs(CommContext* c, const std::vector<PeerOp>& ops, std::vector<std::pair<int, int>>* pairs) {
  std::vector<int> sends, recvs;
  for (size_t i = 0; i < ops.size(); i++) {
    const PeerOp& o = ops[i];
    if (o.kind == PeerOp::kCopy || o.peer != c->rank || o.count == 0) continue;
    (o.kind == PeerOp::kSend ? sends : recvs).push_back((int)i);
  }
  if (sends.size() != recvs.size())
    return setError(clbInvalidUsage,
                    "rank %d posted %zu send(s) to itself and %zu receive(s) from itself: a send to this rank itself "
                    "is copied to its matching receive, which must be in the same group (clbGroupStart / "
                    "clbGroupEnd around both)",
                    c->rank, sends.size(), recvs.size());
  for (size_t k = 0; k < sends.size(); k++) {
    const PeerOp& s = ops[sends[k]];
    const PeerOp& r = ops[recvs[k]];
    if (s.count != r.count || s.type != r.type || s.call != r.call)
      return setError(clbInvalidArgument,
                      "rank %d: its send to itself #%zu (%s of %zu %s) and its receive from itself #%zu (%s of %zu %s) "
                      "differ: a send and its receive must have the same count and type",
                      c->rank, k, collectiveName(s.call), s.count, typeName(s.type), k, collectiveName(r.call), r.count,
                      typeName(r.type));
    if (pairs) pairs->emplace_back(sends[k], recvs[k]);
  }
  return clbSuccess;
}

void runSelf(std::vector<PeerOp>& ops, const std::vector<std::pair<int, int>>& pairs, std::vector<Progress>& prog) {
  for (size_t i = 0; i < ops.size(); i++) {
    const PeerOp& o = ops[i];
    if (o.kind != PeerOp::kCopy) continue;
    if (o.dst != o.src && o.count) memmove(o.dst, o.src, o.count * clbTypeSize(o.type));
    prog[i].complete = true;
  }
  for (auto [si, ri] : pairs) {
    const PeerOp& s = ops[si];
    PeerOp& r = ops[ri];
    const size_t bytes = s.count * clbTypeSize(s.type);
    if (r.kind == PeerOp::kRecvReduce)
      reduceInto(r.dst, s.src, s.count, r);
    else if (bytes && r.dst != s.src)
      memmove(r.dst, s.src, bytes);
    prog[si].complete = prog[ri].complete = true;
  }
}

}  // namespace

clbResult_t checkPeerOps(CommContext* c, const std::vector<PeerOp>& ops) { return selfPairs(c, ops, nullptr); }

uint64_t peerOpSignature(const PeerOp& o) {
  const OpDesc d = descOf(o, 0);
  const uint64_t words[] = {d.coll, d.dtype, d.op, (uint32_t)d.root, d.epoch, d.count, o.announce ? 1u : 0u};
  Fnv1a f;  // over the words, then a final mix
  for (uint64_t w : words) f.word(w);
  uint64_t h = f.value();
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 33);
}

namespace {

clbResult_t badMessage(CommContext* c, const PeerOp& o, const OpDesc& want, const MsgTag& got, const Progress& p) {
  const size_t bytes = o.count * clbTypeSize(o.type);
  if (!(got.op == want))
    return setError(clbRemoteError,
                    "rank %d is in %s from rank %d, but rank %d sent it %s: the two ranks must post their sends "
                    "and receives to each other in the same order, with the same count and type",
                    c->rank, describe(want).c_str(), o.peer, o.peer, describe(got.op).c_str());
  return setError(clbRemoteError,
                  "rank %d expected message %llu (at most %zu bytes) of %s from rank %d, got message %llu of %llu "
                  "bytes",
                  c->rank, (unsigned long long)p.index, bytes - p.done, describe(want).c_str(), o.peer,
                  (unsigned long long)got.index, (unsigned long long)got.bytes);
}

// A call on the channel with `peer` failed. When that is because the peer's end went away, the
// peer may have failed or aborted first: its notice travels over the carrier, not over this
// channel, and can arrive a moment after the closed connection does. That notice names the cause,
// so it is the error, if it comes within kNoticeGraceMs; otherwise the channel's own error stands.
constexpr int64_t kNoticeGraceMs = 200;

clbResult_t channelFailed(CommContext* c, clbResult_t rc, int peer, const std::string& what) {
  if (rc != clbRemoteError || !c->carrier) return rc;
  const std::string own = lastError();
  const int64_t t0 = nowMs();
  do {
    const clbResult_t told = c->checkWait(nowMs(), what.c_str(), peer);
    if (told != clbSuccess && told != clbTimeout) {
      appendBreadcrumb(__FILE__, __LINE__);
      return told;
    }
    if (told == clbTimeout) break;  // a timeout shorter than the grace: the channel's error is the one
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (nowMs() - t0 < kNoticeGraceMs);
  setError(rc, "%s", own.c_str());
  return rc;
}

}  // namespace

// A call on q's channel; a failure goes through channelFailed.
#define CLB_CHANNEL(q, call)                                                       \
  do {                                                                             \
    clbResult_t clb_rc_ = (call);                                                  \
    if (clb_rc_ != clbSuccess) {                                                   \
      appendBreadcrumb(__FILE__, __LINE__);                                        \
      int waited_ = -1;                                                            \
      return channelFailed(c, clb_rc_, (q).peer, waitingFor(ops, prog, &waited_)); \
    }                                                                              \
  } while (0)

clbResult_t runPeerOps(CommContext* c, std::vector<PeerOp>& ops) {
  std::vector<Progress> prog(ops.size());
  // Zero-count operations move nothing (and number nothing: the two ranks skip them alike).
  for (size_t i = 0; i < ops.size(); i++)
    if (ops[i].count == 0 && ops[i].kind != PeerOp::kCopy) prog[i].complete = true;
  std::vector<std::pair<int, int>> pairs;
  CLB_CHECK(selfPairs(c, ops, &pairs));
  runSelf(ops, pairs, prog);

  // Number each operation within its pair and direction, in batch order, and queue it.
  std::vector<OpDesc> desc(ops.size());
  std::vector<PeerQueues> queues;
  std::vector<int> queueOf;
  for (size_t i = 0; i < ops.size(); i++) {
    const PeerOp& o = ops[i];
    if (prog[i].complete) continue;
    if (c->peerSent.empty()) {
      c->peerSent.assign(c->nranks, 0);
      c->peerRecvd.assign(c->nranks, 0);
    }
    if (queueOf.empty()) queueOf.assign(c->nranks, -1);
    if (queueOf[o.peer] < 0) {
      queueOf[o.peer] = (int)queues.size();
      queues.push_back(PeerQueues{});
      queues.back().peer = o.peer;
      CLB_CHECK(c->carrier->peer(o.peer, &queues.back().ch));
    }
    PeerQueues& q = queues[queueOf[o.peer]];
    if (o.kind == PeerOp::kSend) {
      desc[i] = descOf(o, ++c->peerSent[o.peer]);
      q.sends.push_back((int)i);
    } else {
      desc[i] = descOf(o, ++c->peerRecvd[o.peer]);
      q.recvs.push_back((int)i);
    }
  }

  std::vector<char> bounce;  // a reduce's message out of a slot in GPU memory
  int64_t start = nowMs();
  for (;;) {
    const uint64_t seen = c->carrier ? c->carrier->peerActivity() : 0;
    bool moved = false, pending = false;
    for (PeerQueues& q : queues) {
      const size_t maxMsg = q.ch->maxMessageBytes();
      while (q.sendHead < q.sends.size()) {
        const int i = q.sends[q.sendHead];
        const PeerOp& o = ops[i];
        Progress& p = prog[i];
        if (o.after >= 0 && !prog[o.after].complete) {
          pending = true;
          break;
        }
        const size_t esz = clbTypeSize(o.type), bytes = o.count * esz;
        void* buf = nullptr;
        size_t room = 0;
        if (o.announce) {
          // Its tag alone, with one byte that nobody reads (a message of data is never empty, and
          // the slot may be GPU memory: the byte is left as it is).
          CLB_CHANNEL(q, q.ch->trySend(1, &buf, &room));
          if (!buf) {
            pending = true;
            break;
          }
          CLB_CHANNEL(q, q.ch->postSend(MsgTag{desc[i], p.index++, 1}));
          p.complete = true;
          q.sendHead++;
          moved = true;
          continue;
        }
        CLB_CHANNEL(q, q.ch->trySend(std::min(bytes - p.done, maxMsg / esz * esz), &buf, &room));
        if (!buf) {
          pending = true;
          break;
        }
        const size_t slice = std::min(bytes - p.done, room / esz * esz);
        CLB_CHECK(moveBytes(c, buf, static_cast<const char*>(o.src) + p.done, slice, o.onDevice || q.ch->sendOnDevice(),
                            o.stream));
        CLB_CHANNEL(q, q.ch->postSend(MsgTag{desc[i], p.index++, slice}));
        p.done += slice;
        moved = true;
        if (p.done == bytes) {
          p.complete = true;
          q.sendHead++;
        }
      }
      while (q.recvHead < q.recvs.size()) {
        const int i = q.recvs[q.recvHead];
        const PeerOp& o = ops[i];
        Progress& p = prog[i];
        if (o.after >= 0 && !prog[o.after].complete) {
          pending = true;
          break;
        }
        const MsgTag* tag = nullptr;
        const void* buf = nullptr;
        CLB_CHANNEL(q, q.ch->tryRecv(&tag, &buf));
        if (!buf) {
          pending = true;
          break;
        }
        const size_t esz = clbTypeSize(o.type), bytes = o.count * esz;
        const MsgTag got = *tag;  // the slot is the sender's again once released
        if (o.announce) {
          if (!(got.op == desc[i]) || got.index != 0 || got.bytes != 1) return badMessage(c, o, desc[i], got, p);
          CLB_CHECK(q.ch->releaseRecv());
          p.complete = true;
          q.recvHead++;
          moved = true;
          continue;
        }
        if (!(got.op == desc[i]) || got.index != p.index || got.bytes == 0 || got.bytes > bytes - p.done ||
            got.bytes % esz)
          return badMessage(c, o, desc[i], got, p);
        char* dst = static_cast<char*>(o.dst) + p.done;
        const bool slotOnDevice = q.ch->recvOnDevice();
        if (slotOnDevice && c->peerDeviceMemory && c->peerDeviceMemory->arrived)
          CLB_CHECK(c->peerDeviceMemory->arrived(c->peerDeviceMemory->self));
        if (o.kind == PeerOp::kRecvReduce) {
          // Host buffers only (reductions on device buffers go through host copies: p2p_staged.cc).
          const void* in = buf;
          if (slotOnDevice) {
            bounce.resize(got.bytes);
            CLB_CHECK(moveBytes(c, bounce.data(), buf, got.bytes, true, nullptr));
            in = bounce.data();
          }
          reduceInto(dst, in, got.bytes / esz, o);
        } else {
          CLB_CHECK(moveBytes(c, dst, buf, got.bytes, o.onDevice || slotOnDevice, o.stream));
        }
        CLB_CHECK(q.ch->releaseRecv());
        p.done += got.bytes;
        p.index++;
        moved = true;
        if (p.done == bytes) {
          p.complete = true;
          q.recvHead++;
        }
      }
      bool sent = true;
      CLB_CHANNEL(q, q.ch->progress(&sent));
      q.unsent = !sent;
      if (!sent) pending = true;
    }
    if (!pending) return clbSuccess;
    if (moved) {
      start = nowMs();
      continue;
    }
    int peer = -1;
    const std::string what = waitingFor(ops, prog, &peer);
    std::vector<int> waiting;
    for (const PeerQueues& q : queues)
      if (q.sendHead < q.sends.size() || q.recvHead < q.recvs.size() || q.unsent) waiting.push_back(q.peer);
    CLB_CHECK(c->carrier->waitPeers(seen, start, what.c_str(), peer, waiting));
  }
}

#undef CLB_CHANNEL

}  // namespace clb
