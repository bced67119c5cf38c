// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks that share one CUDA context (threads of one process on one GPU) meet on the host before
// they launch a batch of point-to-point operations on the GPU (device/p2p_device.cc), and again
// once they have launched: the point-to-point counterpart of launch_meet.h.
//
// Why: a rank's kernel waits on the GPU for its peers' kernels. If rank A's kernel were in flight
// while peer B's thread sat in cuMemFree, cuMemAlloc, a context synchronization or a synchronous
// copy (each of which may wait for all work in the context, A's kernel included), neither would
// go on. Unlike a collective, a batch involves only some ranks (a pipeline stage talks to its
// neighbours), so the ranks that meet are a batch's *component*: the ranks reachable from it
// through the peers of the batches they are in now, each pair of neighbours in each other's batch.
// Nobody launches before the whole component has arrived (a peer's peer too: B's kernel waits for
// its own peers, so B may launch only once they are in the call), and nobody leaves before the
// whole component has launched. A rank whose current batch does not name the peer yet is waited
// for (it is in an earlier call); two batches that name each other but do not pair up (another
// number of messages, or of bytes) are refused on every rank of the component, nothing launched.
// Batches captured in a CUDA graph do not meet: replays launch without the host.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/comm_context.h"

namespace clb {

class PeerMeet {
 public:
  // A batch's messages with one peer, in posting order: the bytes of each.
  struct Edge {
    int peer = -1;
    std::vector<uint64_t> sends, recvs;
  };

  // The meeting of one session (communicator) in this process: the first rank to ask makes it,
  // the others get the same one while any of them holds it.
  static std::shared_ptr<PeerMeet> join(uint64_t session);

  // This rank arrives with its batch (at least one edge, one per peer, no peer twice, not itself).
  // Returns once every rank of its component has arrived with batches that pair up, or fails:
  // INVALID_USAGE on every rank of the component when two batches do not pair up (the message
  // names both ranks and what differs); this rank on its timeout (naming the ranks not there);
  // abort or a peer's failure (CommContext::checkWait). On failure nothing may be launched and
  // launched() must not be called. `warnMs` > 0: a wait that long says so once (WARN).
  clbResult_t arrive(CommContext* comm, const std::vector<Edge>& edges, int64_t warnMs);
  // After this rank's launch, whatever its outcome: returns once every rank of its component has
  // launched, or on this rank's timeout.
  clbResult_t launched(CommContext* comm);
  // This rank refuses its batch (`why`: an error of its own, found before arriving): the ranks of
  // its component waiting now, or arriving later with the batches that pair with it, fail with
  // INVALID_USAGE saying so instead of waiting for it until the timeout. Returns at once; this
  // rank's next arrival replaces the refusal.
  void refuse(CommContext* comm, const std::vector<Edge>& edges, const std::string& why);

 private:
  struct Component {
    std::vector<int> ranks;
    size_t launched = 0;
  };
  struct Member {
    enum State { kOut, kArrived, kGo, kFailed, kRefused } state = kOut;
    std::vector<Edge> edges;
    std::shared_ptr<Component> component;  // kGo: the ranks launching together
    std::string failure;                   // kFailed, kRefused: why (every rank of the component alike)
    std::set<int> untold;                  // kRefused: the peers its refusal has not failed yet
  };
  const Edge* edgeTo(const Member& m, int peer) const;
  // From `start` (arrived): every rank reachable through pairs of batches that name each other.
  // Sets *missing to the ranks named by a batch whose own batch does not name it back (not there
  // yet) and *mismatch to the first pair that names each other but does not pair up.
  std::vector<int> reach(int start, std::vector<int>* missing, std::string* mismatch) const;
  void settle(int start);  // after an arrival: a complete component goes, a mismatch fails
  // Until something changed (spinning first), at most ~2 ms; the lock held on entry and exit.
  void pause(std::unique_lock<std::mutex>& lk);
  std::atomic<uint64_t> version_{0};  // moves at every decision and launch
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Member> members_;
};

}  // namespace clb
