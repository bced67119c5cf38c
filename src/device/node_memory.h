// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The memory every rank of a node sees (NodeMemory): the flag blocks, the LL buffer and the
// staging, one allocation per rank mapped into every rank (CUDA IPC across processes, the pointer
// itself inside one), or pinned host memory shared through POSIX shared memory where some GPUs
// cannot reach each other. Each buffer is allocated at the call that first needs it and grown by a
// collective step all ranks take at the same call; every byte is counted in memStats (device
// memory through the GPU runtime, host memory as the communicator's host bytes). One NodeMemory per communicator, in
// its DeviceShared (shared.h).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "algo/algorithms.h"
#include "base/error.h"
#include "device/device_context.h"
#include "device/gpu_runtime.h"
#include "kernels/kernel_abi.h"

namespace clb::cuda {

constexpr size_t kMaxHalf = 4u << 20;  // staging per half: 8 MiB per rank at most
// Through host memory (pinned, the copies path) the halves grow to 8 MiB: rounds of more than
// 4 MiB measured faster there for large messages (copyRoundBytes, hostcopy.cc).
constexpr size_t kMaxHalfViaHost = 8u << 20;
constexpr size_t kMinHalf = 64u << 10;

// Zeroes device memory peers are about to write into (the collectives' shared buffers, the
// point-to-point boxes), on a private stream, and waits until it is done (node_memory.cc says why).
clbResult_t zeroNow(const Driver* d, CUdeviceptr p, size_t bytes);

// One buffer every rank of the node sees: this rank's allocation and every rank's, mapped.
// Between GPUs without peer access it lives in pinned host memory instead (POSIX shared memory
// mapped into every rank's process and registered with CUDA), which every GPU reaches.
struct SharedBuffer {
  CUdeviceptr mine = 0;
  size_t bytes = 0;
  std::vector<char*> peers;
  std::vector<CUdeviceptr> opened;                 // IPC mappings to close
  bool host = false;                               // in host memory (viaHost)
  void* hostMine = nullptr;                        // ... this rank's, as the host sees it
  std::vector<char*> hostPeers;                    // ... every rank's, as this process's host sees it
  std::vector<std::pair<void*, size_t>> hostMaps;  // host mappings to unregister and unmap
};

// Where the other ranks are, as the set-up found them (DeviceShared::setUp): what NodeMemory needs
// to map their buffers.
struct NodeLayout {
  std::vector<char> inProcess;  // [p]: rank p lives in this process (Bootstrap::inThisProcess: not by pid alone)
  bool sharedProcess = false;   // another rank lives in this process
  bool allInProcess = false;    // every rank lives in this process: the direct path is possible
  int sameGpu = 1;              // ranks sharing this GPU, this one included
  bool viaHost = false;         // some GPUs cannot reach each other: shared buffers in host memory
  unsigned maxBlocks = 1;       // per launch: every sharing rank's kernel stays resident
  bool acrossHosts = false;     // Device::runAcrossHosts was used (host staging tells it once, by a warning)
};

class NodeMemory {
 public:
  NodeMemory(DeviceCommContext* comm, GpuRuntime& runtime, const NodeLayout& layout)
      : comm_(comm), runtime_(runtime), layout_(layout) {}
  NodeMemory(const NodeMemory&) = delete;
  NodeMemory& operator=(const NodeMemory&) = delete;

  // Collective, once the layout is known: every rank's flag block, and this rank's block counters.
  clbResult_t setUpFlags(CUstream stream);
  bool ready() const { return flags != 0; }
  // `b` at least `bytes` long on every rank (collective when it must grow; refused in a capture).
  clbResult_t ensure(SharedBuffer* b, size_t bytes, CUstream stream, const char* what);
  // The staging for call `a` (the staged and copies paths size it alike), grown when it needs more.
  clbResult_t ensureStaging(const CollArgs& a, CUstream stream);
  size_t maxHalf() const { return layout_.viaHost ? kMaxHalfViaHost : kMaxHalf; }  // the largest half
  // Set-up (of `need` bytes, or the first device call) is impossible in a capture: refused, saying
  // what to run before capturing.
  clbResult_t refuseInCapture(CUstream stream, size_t need) const;
  // Everything back (local: the peers' mappings closed, this rank's allocations freed).
  void releaseAll();
  // Where clbGraphLaunch's permit is (ClbDevFlags::replayPermit, beside this rank's calls and error).
  CUdeviceptr permitWord() const { return counters + 16 + 12; }

  SharedBuffer staging;                 // staged and copies paths: two halves (call parity), a slot per rank in each
  SharedBuffer llBuf;                   // LL path: two halves, a slot of 16-byte lines per rank in each
  SharedBuffer flagBuf;                 // every rank's ClbDevFlags
  CUdeviceptr flags = 0;                // this rank's (flagBuf.mine): set up once this is set
  std::vector<ClbDevFlags*> peerFlags;  // every rank's, as this rank's kernels reach them
  // This rank's block counters (ClbDevCallArgs::counters): in its flag block, or, with the flags
  // in host memory, in device memory of their own (ownCounters), so no kernel needs a host atomic.
  CUdeviceptr counters = 0;
  bool ownCounters = false;
  // The counters' own device memory: the 16 bytes of ClbDevFlags::blocks, then the copy of calls
  // and error that this rank's kernels read at the start of a call (ClbDevCallArgs::counters).
  static constexpr size_t kOwnWordsBytes = sizeof(ClbDevFlags::blocks) + 16;

 private:
  clbResult_t allocHost(SharedBuffer* b, size_t bytes, const char* what);  // viaHost
  void release(SharedBuffer* b);
  DeviceCommContext* comm_;
  GpuRuntime& runtime_;  // the driver, the context and the allocations (bound before any call here)
  const NodeLayout& layout_;
  uint64_t hostGen_ = 0;  // host-shared buffers made so far (names them)
};

// After a step every rank takes: every rank's status exchanged, the first failure returned on
// every rank (its own message on the failing rank, "rank p could not set up <what>" elsewhere).
// *exchanged (optional): whether the exchange itself worked (false: the result is its failure,
// and the ranks may not agree on anything).
clbResult_t agreeOnStatus(DeviceCommContext* comm, clbResult_t mine, const char* what, bool* exchanged = nullptr);

}  // namespace clb::cuda
