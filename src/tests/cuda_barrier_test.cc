// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbBarrier on a stream (ranks as threads on one GPU): a rank's stream passes the barrier only
// once every rank enqueued it (checked with a counter each rank bumps just before it enqueues,
// the ranks enqueueing at different times), eager and captured into a CUDA graph replayed; the
// first barrier inside a capture is refused with what to do; the 4 bytes are counted. Skipped
// without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "tests/cuda_test_util.h"

namespace {

constexpr int kRounds = 6;
std::atomic<int> gEntered[2 * kRounds];

std::string barrierRank(const clbUniqueId& id, int rank, int n) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm); !e.empty()) return e;
  std::string err;
  // The first barrier inside a capture: refused, and the communicator stays usable.
  CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  clbResult_t rc = clbBarrier(comm, stream);
  const std::string msg = clbGetLastError();
  CUgraph none = nullptr;
  d->cuStreamEndCapture(stream, &none);
  if (none) d->cuGraphDestroy(none);
  if (rc != clbInvalidUsage || msg.find("once before capturing") == std::string::npos)
    err =
        "first barrier in a capture: expected INVALID_USAGE saying what to do, got " + std::to_string(rc) + ": " + msg;
  auto late = [&](int round) {
    if (rank == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  // Eager.
  for (int round = 0; round < kRounds && err.empty(); round++) {
    late(round);
    gEntered[round]++;
    if (clbBarrier(comm, stream) != clbSuccess) err = std::string("barrier: ") + clbGetLastError();
    if (err.empty()) CU_OK(d->cuStreamSynchronize(stream));
    if (err.empty() && gEntered[round].load() != n)
      err = "eager round " + std::to_string(round) + ": the stream passed the barrier before every rank enqueued it";
  }
  clbMemStats_t st{};
  clbCommMemStats(comm, &st);
  if (err.empty() && st.deviceBytes < 4) err = "the barrier's 4 bytes are not counted";
  // Captured: one barrier in a graph, replayed.
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (err.empty()) {
    CU_OK(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    if (clbBarrier(comm, stream) != clbSuccess) err = std::string("captured barrier: ") + clbGetLastError();
    CU_OK(d->cuStreamEndCapture(stream, &graph));
    if (err.empty()) CU_OK(d->cuGraphInstantiateWithFlags(&exec, graph, 0));
  }
  for (int round = kRounds; round < 2 * kRounds && err.empty(); round++) {
    late(round);
    gEntered[round]++;
    if (std::string e = replay(exec, stream, {comm}); !e.empty()) return e;
    CU_OK(d->cuStreamSynchronize(stream));
    if (gEntered[round].load() != n)
      err = "replay " + std::to_string(round) + ": the stream passed the barrier before every rank launched it";
  }
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  clbCommDestroy(comm);
  d->cuStreamDestroy(stream);
  return err;
}

TEST(DeviceBarrier, StreamPassesOnlyOnceEveryRankEnqueuedEagerAndInAGraph) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  for (int n : {2, 4}) {
    for (auto& e : gEntered) e = 0;
    runThreads(n, barrierRank);
  }
}

}  // namespace
