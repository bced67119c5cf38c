// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The device layer as the communicator holds it (DeviceCommContext::device): one Device per
// communicator, made at the first call on device memory. It picks each call's path and hands the
// call to it (paths.h, one class and one file per path): inside a node LL, direct or staged, each
// rank's kernels on the caller's stream, synchronized by flags on the device, so that the call
// returns at once and the host never waits (see src/kernels/collective.cu); between hosts
// GPUDirect RDMA or staging through pinned host memory, host-driven. Registered buffers let the
// direct path work between processes. What the paths share (context, kernels, launcher, flags, LL
// buffer, staging, host status) is one DeviceShared (shared.h). docs/architecture.md ("Device
// paths") has the map.
#pragma once

#include <cuda.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "algo/algorithms.h"
#include "algo/p2p.h"
#include "device/paths.h"
#include "device/kernels.h"
#include "device/peer_meet.h"
#include "device/device_context.h"
#include "device/gpu_runtime.h"
#include "device/runtime.h"
#include "base/call.h"
#include "device/shared.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

// classifyPointer, driverInProcess, readScalar, graphLaunch: runtime.h (in every build).

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

// Holds `holds` (one more) for as long as the CUDA graph that `stream` is capturing into, or an
// instantiation of it, exists: a user object the graph retains drops the hold when the graph and
// its instantiations are destroyed. Nothing when the stream is not capturing. Registrations count
// the graphs that read through them so; the communicator counts its captured calls so
// (DeviceCommContext::capturedCallHolds, which clbCommSuspend reads).
clbResult_t holdWhileGraphLives(const Driver* d, CUstream stream, const std::shared_ptr<std::atomic<int>>& holds);

// Point-to-point operations (algo/p2p.h) some of which are on device memory, from the host: the
// streams synchronized, each device range copied to a host shadow, run(shadowed ops), the ranges
// written copied back (p2p_staged.cc). Refused inside a CUDA graph capture.
// Sends and receives on device buffers whose pair goes over a network plugin with channels in
// GPU memory (CommContext::peerDeviceMemory) are left in place: the batch copies each message
// between the buffer and the channel's slot (GPU memory: GPUDirect RDMA, no host copy).
clbResult_t runPeerOpsStaged(DeviceCommContext* c, std::vector<PeerOp>& ops,
                             const std::function<clbResult_t(std::vector<PeerOp>&)>& run);
// Makes c->peerDeviceMemory at the first point-to-point call on device buffers (at `anyDevice`,
// on the communicator's GPU) over the verbs transport, where the plugin has channels in GPU memory
// and this rank can register GPU memory (COLIBRI_VERBS_GPU_MEMORY); else says why not in
// c->peerDeviceMemoryWhy, with a warning (auto), or fails (a forced mode, a bad value). Once.
clbResult_t peerDeviceMemoryFor(DeviceCommContext* c, const void* anyDevice);
// Whether device memory at p is on the GPU of c->peerDeviceMemory (so a message may move between
// it and a channel's slots in place).
bool peerDeviceMemoryReaches(const DeviceCommContext* c, const void* p);

// Point-to-point on the GPU for the pairs of ranks on one GPU, threads of one process or processes
// of one host (p2p_device.cc, kernels/p2p.cu): one launch per batch on the caller's stream,
// capturable once each pair made one device call. run() launches the operations it takes and
// leaves the rest (host buffers, pairs across GPUs or hosts) in *rest, for runPeerOpsStaged.
class PeerDevice {
 public:
  explicit PeerDevice(DeviceCommContext* c);
  ~PeerDevice();
  clbResult_t run(std::vector<PeerOp>& ops, std::vector<PeerOp>* rest);
  // What went wrong in a launch (clbCommGetAsyncError): 0, or CLB_P2P_ERROR_TIMEOUT (a wait ran
  // out of time), CLB_P2P_ERROR_MISMATCH (an operation met its peer's of another call) or
  // CLB_P2P_ERROR_PEER_ENDED (a wait for a peer whose communicator failed first); the output is
  // then undefined.
  unsigned int launchError() const;
  // With CLB_P2P_ERROR_PEER_ENDED, the rank waited for (whose communicator failed and said how far
  // its launches with this rank go: tellPeersOfEnd); else -1.
  int endedPeer() const;
  // Waits for this rank's kernels (its context synchronized), still in the watchdog's sight.
  void drain();
  // The watchdog's round once more, out of its sight (after unwatch), taking its lock whatever
  // holds it: before a destroy lets the transport go, while what this rank says to its peers
  // through it still reaches them.
  void lastRound();
  // Out of the watchdog's sight (before the communicator's transport goes: its round reads the
  // notices); the next run() watches again (after a suspend).
  void unwatch();

 private:
  struct Pair;
  void watch();
  // This rank's point-to-point kernels end at once when mustStopDevice says so (stop.h: an abort,
  // a death, a failed rank that cannot say how far it goes): the watchdog's round, and the
  // destroy before it waits for the kernels (as DeviceShared::stopIfAbandoned for the collectives').
  void stopIfAbandoned();
  // Once the communicator failed (not aborted): how far this rank's launches with each peer go,
  // into its own boxes, so that the peers' kernels waiting past that end at once (ClbP2pBox::ended).
  // wait: take its lock whatever holds it (a destroy); else try, and leave it to the next round.
  void tellPeersOfEnd(bool wait);
  Watched watched_;  // in the watchdog's sight from the set-up on (status: none)
  bool watching_ = false;
  CUstream stopStream_ = nullptr;  // stopIfAbandoned's and tellPeersOfEnd's (made at the first)
  CUresult stopStream(CUstream* s);
  CUresult stopKernels(CUstream* s);  // the error word set on stopStream (stopIfAbandoned, tellPeersOfEnd)
  bool stopped_ = false;
  // The launches' and tellPeersOfEnd's (which the watchdog's round calls): once the end is told,
  // nothing more is launched, so the counts told stay true.
  std::mutex endMutex_;
  std::atomic<bool> endTold_{false};
  bool captured_ = false;  // a launch was captured: its replays move the counts on without the host
  int64_t toldAtMs_ = 0;   // when the end was told (0: not, or to no box): the destroy's grace counts from it
  static constexpr int64_t kEndGraceMs = 100;
  void setMine(Pair& pr, CUdeviceptr box);
  clbResult_t setUpRank(CUcontext ctx, CUstream stream);
  clbResult_t publish(int p, CUstream stream);
  clbResult_t meet(int p);
  clbResult_t joinProcesses(const std::vector<int>& peers, CUcontext ctx, CUstream stream);
  bool onThisHost(int p) const;
  bool inThisProcess(int p) const;
  clbResult_t check(const std::vector<PeerOp>& ops, const std::vector<int>& mine) const;
  // How an operation with a rank in another process moves (placeAcrossProcesses): in place or in
  // lines, and for an in-place send the receiver's buffer as mapped here (held by the graph that
  // `capture`, when not nullptr, is capturing into).
  struct Placement {
    bool inPlace = false;
    void* peerDst = nullptr;
  };
  clbResult_t placeAcrossProcesses(const std::vector<PeerOp>& ops, const std::vector<int>& mine, CUstream capture,
                                   std::vector<Placement>* place);
  clbResult_t launch(std::vector<PeerOp>& ops, const std::vector<int>& mine, const std::vector<Placement>& place,
                     CUstream stream, bool captured);
  clbResult_t refuseInCapture(CUstream stream, const char* what);
  DeviceCommContext* c_;
  GpuRuntime& rt_;  // the kernel image and the device memory (gpu_runtime.h)
  uint64_t nonce_;  // the communicator's session: names its boxes in the process table
  const Driver* d_ = nullptr;
  CUcontext ctx_ = nullptr;
  int ordinal_ = -1;
  // [small][bulk]: clb_dev_p2p, clb_dev_p2p_bulk, clb_dev_p2p_small, clb_dev_p2p_small_bulk.
  CUfunction fn_[2][2] = {};
  clbResult_t carve(size_t bytes, CUdeviceptr* out);
  void uncarve(CUdeviceptr a, size_t bytes);
  int othersOnHost_ = 0;  // ranks of the communicator in other processes of this host (blockBudget)
  std::vector<std::pair<CUdeviceptr, size_t>> arenas_;  // the state's and the boxes' allocations
  CUdeviceptr state_ = 0;                               // ClbP2pState
  unsigned int* hostError_ = nullptr;
  CUdeviceptr hostErrorDev_ = 0;
  std::vector<Pair> pairs_;
  int slots_ = 1;  // the GPU's block slots for clb_dev_p2p (setUpRank)
  int blockBudget() const;
  clbResult_t everyRankHere(bool* here);
  clbResult_t awaitTable(int peer, const char* what, const std::function<bool()>& found) const;
  CUevent lastLaunch_ = nullptr;         // recorded after each launch outside a capture
  CUstream lastStream_ = nullptr;        // ... on this stream
  std::shared_ptr<clb::PeerMeet> meet_;  // with the ranks of this process on this GPU (device/peer_meet.h)
};

// PreMulSum on device buffers (scale.cc; core/premul.h): this rank's input times its scalar, by a
// kernel on the call's stream ahead of the collective's own (a capture records both), into recv or
// into the communicator's device scratch. It takes the kernel image from the GPU runtime at the
// first such call: a call between hosts never sets DeviceShared up, and its scaling needs nothing
// of it. An in-place all-to-all copies its input into the same scratch (copy()).
//
// The scratch is one per communicator, whatever the streams: a call writes it on its stream only
// once the previous user's work is done with it. On the same stream the stream orders them; on
// another, the stream waits (on the GPU) for an event recorded after the previous call's work,
// which orders a communicator's calls as they are ordered anyway (a rank's collectives pair with
// its peers' in call order; the point-to-point launches do the same, p2p_device.cc). Inside a
// capture nothing waits or records, as for PeerDevice: the graph's replays are ordered by the
// application, as for every captured call. Scratch that a capture used is never freed before
// clbCommDestroy (a replay still writes it): a larger one replaces it for later calls, and
// clbCommTrim frees only scratch no capture used. Growing waits for the last use first.
class Scaler {
 public:
  explicit Scaler(DeviceCommContext* c);
  ~Scaler();
  Scaler(const Scaler&) = delete;
  Scaler& operator=(const Scaler&) = delete;
  // Before a call's scaling on `stream`, its buffers on GPU `ordinal`: the kernels loaded, and for
  // bytes > 0 *scratch at least that much device scratch, which work queued on `stream` from now on
  // may write. Refused (clbInvalidUsage) inside a capture when either would have to be made. Every
  // call whose begin() succeeded calls end() once its work is queued, also when it failed.
  clbResult_t begin(int ordinal, CUstream stream, size_t bytes, void** scratch);
  // dst[i] = src[i] x pm's scalar for n elements of pm.type, on `stream` (between begin and end).
  // A device-residence scalar is read by the kernel when it runs, so it must be memory the GPU reads.
  clbResult_t scale(void* dst, const void* src, size_t n, const PreMul& pm, CUstream stream);
  // dst = src, `bytes` of them, on `stream` (an in-place all-to-all's input, copied aside).
  clbResult_t copy(void* dst, const void* src, size_t bytes, CUstream stream);
  // The call's work that uses the scratch is queued on `stream`: later calls on other streams wait for it.
  void end(CUstream stream);
  // clbCommTrim: frees the scratch that no capture used, once its last use is done.
  clbResult_t trim();

 private:
  clbResult_t checkScalar(const PreMul& pm);
  DeviceCommContext* c_;
  GpuRuntime& rt_;  // the GPU, its kernels and the scratch's memory (gpu_runtime.h)
  const Driver* d_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  int ordinal_ = -1;
  const Kernels* kernels_ = nullptr;  // the runtime's image, at the first call (outside a capture)
  CUdeviceptr scratch_ = 0;
  size_t bytes_ = 0;
  bool captured_ = false;                                // a capture used scratch_: kept until destroy
  std::vector<std::pair<CUdeviceptr, size_t>> retired_;  // earlier scratch a capture used
  CUevent lastUse_ = nullptr;      // recorded after the work of the last call that used the scratch
  CUstream lastStream_ = nullptr;  // ... on this stream
  bool used_ = false;              // lastUse_ was recorded
  bool capturing_ = false;         // the call between begin and end is being captured
  bool scratchCall_ = false;       // ... and uses the scratch
};
// A stream (non-NULL) of another GPU than `dev` (GPU `ordinal`, context `ctx`) would run kernels
// that cannot see the rank's set-up: refused by name (shared.cc) rather than failing in the launch.
clbResult_t checkStreamGpu(const Driver* d, CUstream stream, CUcontext ctx, CUdevice dev, int ordinal, int rank);

class Device {
 public:
  explicit Device(DeviceCommContext* comm);
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
  // clbGraphLaunch's part (graphLaunch, runtime.h): the ranks that share this GPU and process meet
  // before a replay of a graph holding their calls (graphArrive, with the call number `seq`), as
  // eager calls do, and again once each has launched its own (graphLaunched, only after a
  // graphArrive that succeeded). Without such ranks (or the device path not set up) both do nothing.
  clbResult_t graphArrive(uint64_t seq);
  clbResult_t graphLaunched();
  // Sets (1) or clears (0) the permit that this rank's captured kernels check (replayGuard), on
  // `stream` in stream order: around the graph clbGraphLaunch launches.
  clbResult_t graphPermit(CUstream stream, unsigned int value);
  bool graphMeets() const { return s_.launch.meet != nullptr; }
  // clbCommGetAsyncError's device part: clbTimeout with the call, collective and ranks when a
  // device wait of this rank ran out of time, clbRemoteError naming both calls when a peer made
  // another call (deviceError in watchdog.h), else clbSuccess. Any thread, once set up.
  clbResult_t deviceStatus() const { return s_.status.check(s_.comm); }
  // The path the last call took (its CollectivePath::name, or "one rank"); "none" before any.
  const char* lastPath() const { return lastPath_; }

 private:
  // Once set up, the communicator's async query reads this device's status
  // (DeviceCommContext::deviceReady).
  void markReady();
  // A call of a one-rank communicator: a copy of its input into recv at most (run()).
  clbResult_t runOneRank(const CollArgs& a, CUstream stream);
  clbResult_t release();
  DeviceShared s_;
  // The collective path COLIBRI_DEVICE_PATH names (one of s_.paths), or nullptr (auto).
  CollectivePath* forced_ = nullptr;
  Registrations regs_{s_};
  GpuDirectPath gpuDirect_{s_};
  HostStagedPath hostStaged_{s_};
  const char* lastPath_ = "none";
  const CollectivePath* lastChosen_ = nullptr;  // the last call's path (nullptr: none, or one rank)
  std::string lastKind() const;                 // its protocol and algorithm, for describe()
  bool lastZeroCopy_ = false;
  bool lastWindowed_ = false;  // ... a windowed call (CallShape::windowed)
};

}  // namespace clb::cuda
