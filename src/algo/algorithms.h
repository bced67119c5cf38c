// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Host algorithms and the arithmetic of their schedules (kept here, pure, so it is unit tested).
//
// Ring (any transport): the data is split into one segment per rank and every segment into J
// slices of at most chunkBytes. Slices go round the ring one after another (slice-major order),
// so every rank alternates one send and one receive and messages stay small and pipelined.
//   reduce-scatter, step s = 0..n-2: rank r sends segment (r-1-s) and receives (r-2-s), which it
//   reduces with its own input; after n-1 steps it holds segment r fully reduced.
//   all-gather, step s = 0..n-2: rank r sends segment (r-s) and receives segment (r-1-s).
//   broadcast: a pipeline along the ring starting at the root.
// Direct (shared memory, small messages): every rank puts its input in its scratch, then reads
// every peer's scratch and reduces in rank order 0..n-1: one copy in, one pass out, no ring steps.
#pragma once

#include <cstddef>

#include "bootstrap/comm_context.h"

namespace clb {

struct CollArgs {
  OpDesc desc;
  const void* send;
  void* recv;
  size_t count;  // allReduce/broadcast: elements; allGather: per-rank send count; reduceScatter: recv count
  clbDataType_t type;
  clbRedOp_t op;
  int root;
};

// Elements of segment i when `count` elements are split over n segments (earlier ones get the
// remainder), and where it starts.
inline size_t segElems(size_t count, int n, int i) { return count / n + ((size_t)i < count % n ? 1 : 0); }
inline size_t segStart(size_t count, int n, int i) {
  return (size_t)i * (count / n) + ((size_t)i < count % n ? (size_t)i : count % n);
}
// Number of slices so that no slice of a segment of `maxSegElems` exceeds chunkBytes (>= 1).
inline size_t sliceCount(size_t maxSegElems, size_t elemBytes, size_t chunkBytes) {
  size_t perSlice = chunkBytes / elemBytes;
  if (perSlice == 0) perSlice = 1;
  size_t j = (maxSegElems + perSlice - 1) / perSlice;
  return j == 0 ? 1 : j;
}
inline int mod(int a, int n) { return ((a % n) + n) % n; }

clbResult_t ringRun(CommContext* comm, const CollArgs& a);  // host buffers over the transport's ring

class RingChannel;
// How the ring touches the buffers: host memory (memcpy and the host reduction loops), or device
// memory (kernels on the caller's stream; GPUDirect RDMA). The ring calls settle() before it posts
// a message it filled and before it releases one it read (the transport reads / reuses that
// memory then), and arrived() after a message came in, before reading it.
class RingMemory {
 public:
  virtual ~RingMemory() = default;
  virtual clbResult_t copy(void* dst, const void* src, size_t bytes) = 0;
  // dst = recvd op mine over n elements; divideBy > 0: the ring's last step (avg divides by it).
  virtual clbResult_t reduce(void* dst, const void* recvd, const void* mine, size_t n, clbDataType_t type,
                             clbRedOp_t op, int divideBy) = 0;
  virtual clbResult_t arrived() { return clbSuccess; }
  virtual clbResult_t settle() { return clbSuccess; }
};
// The ring over channel `ch` with buffers reached through `mem` (comm gives rank, size, chunkBytes).
clbResult_t ringRunOn(CommContext* comm, RingChannel& ch, RingMemory& mem, const CollArgs& a);

}  // namespace clb
