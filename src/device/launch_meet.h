// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks that share one CUDA context (threads of one process on one GPU) meet on the host before
// they launch a device collective, and again once every one of them has launched.
//
// Why: the kernels of one call wait on the device for each other. If rank A's kernel were in
// flight while rank B's thread sat in cudaFree, cudaMalloc, cudaDeviceSynchronize or a
// synchronous copy (each waits for all work in the context, A's kernel included) before
// launching its own, neither would ever go on: A's kernel waits for B's launch, B's thread for
// A's kernel. The same holds inside the GPU when the ranks' streams share a hardware queue:
// work that depends on A's kernel, queued in front of B's kernel, stalls the queue B's kernel
// is in. So no kernel of a call is launched before every co-located rank is inside the call
// (not blocked in CUDA), and no rank returns (and queues dependent work) before every one of
// them has launched. Between the two meetings each rank launches its own kernels on its own
// stream, in parallel. Captured graphs replay without the host: docs/device.md says what that
// leaves to the application.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/comm_context.h"

namespace clb {

class LaunchMeet {
 public:
  // The meeting of `ranks` (ascending, this rank among them), one object per key in the process:
  // the first member to ask makes it, the others get the same one while any member holds it.
  static std::shared_ptr<LaunchMeet> join(const std::string& key, const std::vector<int>& ranks);

  // This rank arrives with its call. Returns once every member has arrived with the same call, or
  // fails: every member alike when their calls differ (INVALID_USAGE naming both, once every
  // member has seen it), this rank on its timeout (naming the members that have not arrived),
  // abort or a peer's failure (CommContext::checkWait; a non-member that closed normally is no
  // failure), and every member once one of them gave up. Whether a meeting completes is decided
  // once, atomically: a member that times out as the last one arrives either withdrew first (then
  // nobody launches) or finds the meeting complete (then it goes on like the others). `warnMs` >
  // 0: a wait that long says so once (WARN). On failure nothing must be launched and launched()
  // is not called.
  clbResult_t arrive(CommContext* comm, const OpDesc& call, int64_t warnMs);
  // After this rank's launches, whatever their outcome: returns once every member has launched
  // (or failed to arrive), or on this rank's timeout.
  clbResult_t launched(CommContext* comm);

  int size() const { return (int)ranks_.size(); }
  const std::vector<int>& ranks() const { return ranks_; }
  explicit LaunchMeet(const std::vector<int>& ranks);

 private:
  struct alignas(64) Member {
    std::atomic<uint64_t> arrived{0};   // meetings this member arrived at
    std::atomic<uint64_t> launched{0};  // ... and left (launched, or gave up)
    OpDesc call{};                      // its call at the latest one
  };
  int indexOf(int rank) const;
  void bump();                                                // after any member's counter moved: wake sleepers
  bool everyone(uint64_t k, bool launchedPhase) const;        // every member's counter is at k or past it
  std::string missing(uint64_t k, bool launchedPhase) const;  // the members whose counter is not
  std::vector<int> ranks_;
  std::unique_ptr<Member[]> m_;
  std::atomic<uint64_t> word_{0};  // moves at every arrival and launch (futex word)
  std::atomic<uint32_t> waiters_{0};
  // Arrivals at every meeting together, times 2, plus 1 once a member gave up (then it stops
  // moving and no later meeting completes): meeting k is complete when it reached 2 * k * members
  // (the bit aside), which only arrivals before any give-up can do.
  std::atomic<uint64_t> round_{0};
  std::atomic<int> gaveUp_{-1};  // the member that gave up (timeout, abort, a peer's failure)
};

}  // namespace clb
