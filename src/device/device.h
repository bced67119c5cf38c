// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The device layer as the communicator holds it (clbComm::device): one Device per communicator,
// made at the first call on device memory. It picks each call's path and hands the call to it
// (paths.h, one class and one file per path): inside a node LL, direct or staged, each rank's
// kernels on the caller's stream, synchronized by flags on the device, so that the call returns
// at once and the host never waits (see src/kernels/collective.cu); between hosts GPUDirect RDMA
// or staging through pinned host memory, host-driven. Registered buffers let the direct path work
// between processes. What the paths share (context, kernels, launcher, flags, LL buffer, staging,
// host status) is one DeviceShared (shared.h). docs/architecture.md ("Device paths") has the map.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

#include "algo/algorithms.h"
#include "algo/p2p.h"
#include "device/paths.h"
#include "device/kernels.h"
#include "core/peer_meet.h"
#include "device/shared.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

// Whether p is device memory (and on which device). Host memory, including pinned, is "host".
clbResult_t classifyPointer(const void* p, bool* isDevice, int* ordinal);
// The allocation holding p, in one driver call: its range, CUDA's buffer ID (another when it was
// freed and something else took its address), its memory type, whether it is managed, and its
// GPU. Memory CUDA does not know comes back as type 0.
struct Allocation {
  CUdeviceptr base = 0;
  size_t size = 0;
  unsigned long long id = 0;
  unsigned int type = 0;
  unsigned int managed = 0;
  int ordinal = -1;
};
clbResult_t allocationOf(const Driver* d, const void* p, Allocation* a);
// True once this process has loaded libcuda (a process that never did cannot hold device memory).
bool driverInProcess();

// Point-to-point operations (algo/p2p.h) some of which are on device memory, from the host: the
// streams synchronized, each device range copied to a host shadow, run(shadowed ops), the ranges
// written copied back (p2p_staged.cc). Refused inside a CUDA graph capture.
clbResult_t runPeerOpsStaged(clbComm* c, std::vector<PeerOp>& ops,
                             const std::function<clbResult_t(std::vector<PeerOp>&)>& run);

// Point-to-point on the GPU for the pairs of ranks on one GPU, threads of one process or processes
// of one host (p2p_device.cc, kernels/p2p.cu): one launch per batch on the caller's stream,
// capturable once each pair made one device call. run() launches the operations it takes and
// leaves the rest (host buffers, pairs across GPUs or hosts) in *rest, for runPeerOpsStaged.
class PeerDevice {
 public:
  explicit PeerDevice(clbComm* c);
  ~PeerDevice();
  clbResult_t run(std::vector<PeerOp>& ops, std::vector<PeerOp>* rest);
  // What went wrong in a launch (clbCommGetAsyncError): 0, or CLB_P2P_ERROR_TIMEOUT (a wait ran
  // out of time) or CLB_P2P_ERROR_SIZE (a receive got a message of another size); the output is
  // then undefined.
  unsigned int launchError() const;

 private:
  struct Pair;
  clbResult_t setUpRank(CUcontext ctx, CUstream stream);
  clbResult_t publish(int p, CUstream stream);
  clbResult_t meet(int p);
  clbResult_t joinProcesses(const std::vector<int>& peers, CUcontext ctx, CUstream stream);
  bool onThisHost(int p) const;
  bool inThisProcess(int p) const;
  clbResult_t check(const std::vector<PeerOp>& ops, const std::vector<int>& mine) const;
  // How an operation with a rank in another process moves (placeAcrossProcesses): in place or in
  // lines, and for an in-place send the receiver's buffer as mapped here.
  struct Placement {
    bool inPlace = false;
    void* peerDst = nullptr;
  };
  clbResult_t placeAcrossProcesses(const std::vector<PeerOp>& ops, const std::vector<int>& mine,
                                   std::vector<Placement>* place);
  clbResult_t launch(std::vector<PeerOp>& ops, const std::vector<int>& mine, const std::vector<Placement>& place,
                     CUstream stream, bool captured);
  clbResult_t refuseInCapture(CUstream stream, const char* what);
  clbComm* c_;
  uint64_t nonce_;  // the communicator's session: names its boxes in the process table
  const Driver* d_ = nullptr;
  CUcontext ctx_ = nullptr;
  int ordinal_ = -1;
  Kernels kernels_;
  // [small][bulk]: clb_dev_p2p, clb_dev_p2p_bulk, clb_dev_p2p_small, clb_dev_p2p_small_bulk.
  CUfunction fn_[2][2] = {};
  clbResult_t carve(size_t bytes, CUdeviceptr* out);
  void uncarve(CUdeviceptr a, size_t bytes);
  int othersOnHost_ = 0;  // ranks of the communicator in other processes of this host (blockBudget)
  std::vector<CUdeviceptr> arenas_;  // the state's and the boxes' allocations
  CUdeviceptr state_ = 0;  // ClbP2pState
  unsigned int* hostError_ = nullptr;
  CUdeviceptr hostErrorDev_ = 0;
  int64_t held_ = 0;  // device bytes, as counted in memStats
  std::vector<Pair> pairs_;
  int slots_ = 1;  // the GPU's block slots for clb_dev_p2p (setUpRank)
  int blockBudget() const;
  clbResult_t everyRankHere(bool* here);
  clbResult_t awaitTable(int peer, const char* what, const std::function<bool()>& found) const;
  CUevent lastLaunch_ = nullptr;   // recorded after each launch outside a capture
  CUstream lastStream_ = nullptr;  // ... on this stream
  std::shared_ptr<clb::PeerMeet> meet_;  // with the ranks of this process on this GPU (core/peer_meet.h)
};

class Device {
 public:
  explicit Device(clbComm* comm);
  ~Device();
  // Ranks on one host: LL, direct or staged (see run() for the pick).
  clbResult_t run(const CollArgs& a, int ordinal, CUstream stream);
  // Ranks on several hosts (no shared memory between them): GPUDirect RDMA over verbs where every
  // rank can, else the buffers go through pinned host memory and the host transport (sockets,
  // verbs), the stream synchronized at each call.
  clbResult_t runAcrossHosts(const CollArgs& a, int ordinal, CUstream stream);
  // Gives the pinned host buffers of runAcrossHosts back (local), and the GPUDirect channel's slots
  // and staging (their release reaches the peers in this or a later call; see VerbsChannel::trim).
  clbResult_t trimHostStage();
  // clbCommRegister / clbCommDeregister (collective; see colibri.h).
  // A registration may set the device path up (the first device step of the communicator): the
  // async query then watches it from here on, as after a first collective.
  clbResult_t registerBuffer(void* buff, size_t bytes, void** handle) {
    const clbResult_t rc = regs_.registerBuffer(buff, bytes, handle);
    markReady();
    return rc;
  }
  clbResult_t deregisterBuffer(void* handle) { return regs_.deregisterBuffer(handle); }
  // The registrations, for point-to-point between processes (PeerDevice).
  Registrations& registrations() { return regs_; }
  std::string describe() const;
  // clbCommGetAsyncError's device part: clbTimeout with the call, collective and ranks when a
  // device wait of this rank ran out of time, else clbSuccess. Any thread, once set up.
  clbResult_t deviceStatus() const { return s_.deviceStatus(); }
  // The path the last call took ("ll", "staged" or "direct").
  const char* lastPath() const { return lastPath_ == DevicePath::kLL ? "ll" : lastPath_ == DevicePath::kDirect ? "direct" : "staged"; }

 private:
  // Once set up, the communicator's async query reads this device's status (clbComm::deviceReady).
  void markReady();
  clbResult_t release();
  DeviceShared s_;
  LLPath ll_{s_};
  DirectPath direct_{s_};
  StagedPath staged_{s_};
  Registrations regs_{s_};
  GpuDirectPath gpuDirect_{s_};
  HostStagedPath hostStaged_{s_};
  DevicePath lastPath_ = DevicePath::kAuto;
  bool lastZeroCopy_ = false;
};

}  // namespace clb::cuda
