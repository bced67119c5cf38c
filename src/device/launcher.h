// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Kernel launches of eager device calls through prepared one-kernel CUDA graphs.
//
// On the H200 here, cuLaunchKernel costs the calling thread about 3 us, while setting the
// parameters of a prepared graph's kernel node and launching the graph (cuGraphExecKernelNodeSetParams
// + cuGraphLaunch) costs about 1.6 us (colibri_device_bench --enqueue; docs/performance.md). So
// outside stream capture a launch replays a graph of one kernel node, one graph per (stream,
// kernel); inside capture (the user's own graph) it is an ordinary launch, which the capture
// records. Launches of one graph are ordered behind each other, which adds nothing on one stream:
// that is why a graph serves one stream only. A call like the previous one on its stream (same
// buffers, count and type: an eager loop) skips the update and costs only the graph launch.
#pragma once

#include <cuda.h>

#include <atomic>
#include <vector>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

class GraphLauncher {
 public:
  GraphLauncher() = default;
  ~GraphLauncher() = default;  // release() frees the graphs: it needs the driver and the context
  GraphLauncher(const GraphLauncher&) = delete;
  GraphLauncher& operator=(const GraphLauncher&) = delete;

  // Launches `fn` (1-D grid of `blocks` x `threads`, no dynamic shared memory) on `stream` with
  // its one parameter, `argBytes` bytes at `arg` (copied), in the caller's current context. A
  // launch whose grid and parameter equal the previous launch of its graph replays the graph
  // without updating it.
  clbResult_t launch(const Driver* d, CUfunction fn, unsigned blocks, unsigned threads, CUstream stream,
                     const void* arg, size_t argBytes);
  // Frees the prepared graphs (the context that made them current).
  void release(const Driver* d);
  // Prepared graphs: read by describe() while a call may add one.
  size_t graphs() const { return count_.load(std::memory_order_relaxed); }
  // Graphs on or off (COLIBRI_DEVICE_LAUNCH=graph|kernel, read by the caller), before any launch.
  void useGraphs(bool on) { graphs_ = on; }
  bool usesGraphs() const { return graphs_; }

 private:
  struct Entry {
    CUstream stream;
    CUfunction fn;
    CUgraph graph;
    CUgraphNode node;
    CUgraphExec exec;
    unsigned blocks, threads;  // of the graph's kernel node now
    std::vector<char> arg;     // ... and its parameter
  };
  // Streams x kernels; beyond, ordinary launches (no eviction: a server that makes a stream per
  // request would pay a graph's preparation for every stream, more than an ordinary launch costs).
  static constexpr size_t kMaxEntries = 16;
  std::atomic<bool> graphs_{true};  // read by describe() too
  std::vector<Entry> entries_;
  std::atomic<size_t> count_{0};  // entries_.size(), for graphs()
};

}  // namespace clb::cuda
