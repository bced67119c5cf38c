// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A batch of point-to-point operations (the sends and receives of a group, or of one all-to-all,
// gather, scatter or reduce), run together over the transport's peer channels (PeerChannel).
// Every operation moves on as soon as its peer lets it, whatever the order the batch lists them
// in, so a batch never waits in a circle (a ring exchange, an all-to-all); operations with one
// peer in one direction keep their order (that is how the two ranks match them), and an operation
// may wait for another to complete first (`after`: a reduce at its root adds its peers' data in
// rank order, so that its result does not depend on who was faster).
#pragma once

#include <cstddef>
#include <vector>

#include "bootstrap/comm_context.h"
#include "base/call.h"

namespace clb {

struct PeerOp {
  enum Kind : uint8_t {
    kSend,        // count elements at src to peer
    kRecv,        // count elements from peer into dst
    kRecvReduce,  // dst = (incoming op dst) over count elements; divideBy > 0: the last step (avg)
    kCopy,        // count elements from src to dst on this rank (before any message moves)
  };
  Kind kind = kSend;
  int peer = -1;  // this rank itself for a send or receive to itself (matched with each other)
  const void* src = nullptr;
  void* dst = nullptr;
  size_t count = 0;
  clbDataType_t type = clbUint8;
  clbRedOp_t op = clbSum;
  int divideBy = 0;
  int after = -1;             // index in the batch of an operation that must complete before this one starts
  uint32_t call = kSendRecv;  // the PeerCall it is part of: its messages say so
  int root = -1;              // that call's root (gather, scatter, reduce)
  uint32_t epoch = 0;         // that call's number among those every rank makes (OpDesc::epoch)
  // A message without data that only says which call the sender is in (its tag carries count,
  // type, root and epoch): scatter's other ranks send one to the root, which otherwise receives
  // nothing, so that a rank that wrongly believes it is the root finds out.
  bool announce = false;
  bool onDevice = false;   // its buffers are device memory (cuda::runPeerOpsStaged stages them)
  void* stream = nullptr;  // the CUstream of its call (device buffers)
  // A reduce with a PreMulSum operation (core/premul.h): op is clbSum, its messages say
  // kOpPreMulSum, and on the operation that reads the rank's input (a send, or the root's copy)
  // `scale` holds the scalar: the batch scales src before anything moves (core/p2p.cc).
  bool preMulSum = false;
  PreMul scale;
  // A send of an in-place all-to-all: the batch copies src into the communicator's scratch before
  // anything moves (the receives overwrite the buffer it reads), as it does a PreMulSum's scaling.
  bool copyAside = false;
};

// Runs `ops` on host buffers; returns when every receive completed and every send left this rank
// (its buffer may be reused). Operations of count 0 move nothing. Errors: a send to this rank
// itself without its receive (or counts that differ), a message that is not what the receive
// expects (another call, count or type: the message names both), and the waits' errors (abort,
// a peer that failed or left, the timeout naming the operation and peer still waited for).
clbResult_t runPeerOps(CommContext* c, std::vector<PeerOp>& ops);
// The checks runPeerOps makes before anything moves (a send to this rank itself without its
// receive, or with another count or type), alone: a group checks every communicator's batch
// first, so that a refusal on one runs nothing on any.
clbResult_t checkPeerOps(CommContext* c, const std::vector<PeerOp>& ops);
// What a message of `o` says about its call on the GPU, hashed: the call's kind, count, type, op,
// root and number among the calls every rank makes (what the host path's message tag carries,
// but the message's own number), and whether it is an announcement. A send and the receive it
// meets have the same one exactly when they agree (src/kernels/p2p.cu compares them).
uint64_t peerOpSignature(const PeerOp& o);

}  // namespace clb
