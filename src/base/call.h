// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The call descriptors every layer speaks of: which collective, point-to-point call or other
// call a rank is in (Collective, PeerCall, Call) and what it says it is doing (OpDesc), which
// peers compare to detect mismatched calls; and the memory a communicator accounts for
// (MemAccount); a PreMulSum operation as a call takes it (PreMul).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "colibri/colibri.h"

namespace clb {

enum Collective : uint32_t { kAllReduce = 1, kAllGather = 2, kReduceScatter = 3, kBroadcast = 4 };
// The calls made of point-to-point messages (core/p2p.cc): their messages carry one of these, so a
// receiver in another of them (or in a send/recv of another count or type) is told, not fed.
// kPeerSetUp: the records two ranks in different processes exchange at their first point-to-point
// call on device memory with each other; kPeerPlace: the record a receive of a large message from
// another process sends its sender when the communicator has registrations, saying where the
// message may be written in place (device/p2p_device.cc). Both are numbered like the pair's messages.
enum PeerCall : uint32_t { kSendRecv = 5, kAllToAll, kAllToAllv, kGather, kScatter, kReduce, kPeerSetUp, kPeerPlace };
inline bool isPeerCall(uint32_t c) { return c >= kSendRecv && c <= kPeerPlace; }
// clbBarrier is an all-reduce of one int32 whose descriptor says root kBarrierRoot (an all-reduce
// has no root): every path runs it as an all-reduce, and its tags never match a user's call.
constexpr int32_t kBarrierRoot = -2;
const char* collectiveName(uint32_t c);
// The other calls that take the communicator for their duration (clbComm::enterCall), after the
// collectives: they use its channels, staging or sequence numbers too.
enum Call : uint32_t {
  kCallRegister = 16,
  kCallDeregister,
  kCallTrim,
  kCallDestroy,
  kCallSplit,
  kCallPeers,
  kCallGraphLaunch,
  kCallSuspend,
  kCallShrink,
  kCallGrow
};
// "allReduce" for a Collective, "clbCommTrim" for a Call.
const char* callName(uint32_t call);

// What a rank says it is doing; peers compare it to detect mismatched calls.
struct OpDesc {
  uint64_t seq;
  uint32_t coll, dtype, op, algo;
  int32_t root;
  // Point-to-point messages of a call that every rank makes (all-to-all, gather, scatter,
  // reduce): the call's number among those on this communicator (clbComm::peerCollectives), so
  // that a message left over from an earlier call (ranks that disagreed on a root, say) never
  // matches a later one; 0 for send / recv and the collectives (whose seq already numbers calls).
  uint32_t epoch;
  uint64_t count;
  bool operator==(const OpDesc& o) const {
    return seq == o.seq && coll == o.coll && dtype == o.dtype && op == o.op && algo == o.algo && root == o.root &&
           epoch == o.epoch && count == o.count;
  }
};
std::string describe(const OpDesc& d);

struct MemAccount {
  std::atomic<int64_t> host{0}, hostPeak{0}, device{0}, devicePeak{0};
  void addHost(int64_t d) { add(host, hostPeak, d); }
  void addDevice(int64_t d) { add(device, devicePeak, d); }

 private:
  static void add(std::atomic<int64_t>& cur, std::atomic<int64_t>& peak, int64_t d) {
    int64_t now = cur.fetch_add(d) + d;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
};

// What a call takes of its operation when it is made (inside a group: when it is recorded), so
// that the operation may be destroyed as soon as the call has returned, as NCCL allows (PyTorch
// destroys its operation right after the call, also inside a group).
struct PreMul {
  bool on = false;  // a PreMulSum: scale, then sum
  int handle = 0;   // the operation's value, for messages
  int residence = clbScalarHostImmediate;
  clbDataType_t type = clbFloat32;
  uint64_t value = 0;         // host immediate: the scalar, one element of `type` in the first bytes
  const void* ptr = nullptr;  // device residence: where it is read when the call runs
};

// The op a call computes with once its input is scaled: clbSum for a PreMulSum, else op itself.
inline clbRedOp_t arithmeticOp(int op, const PreMul& pm) { return pm.on ? clbSum : static_cast<clbRedOp_t>(op); }

}  // namespace clb
