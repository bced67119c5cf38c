// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The names of the calls and the text of a call descriptor, for messages (base/call.h).
#include "base/call.h"

#include <cstdio>

#include "base/dtype.h"
#include "colibri/colibri.h"

namespace clb {

const char* collectiveName(uint32_t c) {
  switch (c) {
    case kAllReduce: return "allReduce";
    case kAllGather: return "allGather";
    case kReduceScatter: return "reduceScatter";
    case kBroadcast: return "broadcast";
    case kSendRecv: return "send/recv";
    case kAllToAll: return "allToAll";
    case kAllToAllv: return "allToAllv";
    case kGather: return "gather";
    case kScatter: return "scatter";
    case kReduce: return "reduce";
    case kPeerSetUp: return "the set-up of a device channel";
    case kPeerPlace: return "the place of a registered receive buffer";
  }
  return "unknown";
}

const char* callName(uint32_t call) {
  switch (call) {
    case kCallRegister: return "clbCommRegister";
    case kCallDeregister: return "clbCommDeregister";
    case kCallTrim: return "clbCommTrim";
    case kCallDestroy: return "clbCommDestroy";
    case kCallSplit: return "clbCommSplit";
    case kCallPeers: return "point-to-point calls (clbSend/clbRecv, or a group of them)";
    case kCallGraphLaunch: return "clbGraphLaunch";
    case kCallSuspend: return "clbCommSuspend";
    case kCallShrink: return "clbCommShrink";
    case kCallGrow: return "clbCommGrow";
  }
  return collectiveName(call);
}

std::string describe(const OpDesc& d) {
  char b[200];
  if (d.coll == kCallGraphLaunch) {
    snprintf(b, sizeof b, "a CUDA graph replay through clbGraphLaunch (after call #%llu)", (unsigned long long)d.seq);
    return b;
  }
  if (d.coll == kAllReduce && d.root == kBarrierRoot) {
    snprintf(b, sizeof b, "barrier #%llu", (unsigned long long)d.seq);
    return b;
  }
  if (isPeerCall(d.coll)) {  // seq numbers the messages of one pair and direction (core/p2p.cc)
    snprintf(b, sizeof b, "%s (operation %llu between the two ranks: count %llu, %s%s%s%s)", collectiveName(d.coll),
             (unsigned long long)d.seq, (unsigned long long)d.count, typeName((int)d.dtype),
             d.coll == kReduce ? ", " : "", d.coll == kReduce ? opName((int)d.op) : "",
             d.root >= 0 ? (", root " + std::to_string(d.root)).c_str() : "");
    return b;
  }
  snprintf(b, sizeof b, "%s #%llu (count %llu, %s%s%s, root %d, algorithm %s)", collectiveName(d.coll),
           (unsigned long long)d.seq, (unsigned long long)d.count, typeName((int)d.dtype),
           d.coll == kAllReduce || d.coll == kReduceScatter ? ", " : "",
           d.coll == kAllReduce || d.coll == kReduceScatter ? opName((int)d.op) : "", d.root,
           clbAlgorithmName((int)d.algo));
  return b;
}

}  // namespace clb
