// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The parts behind Device (device.h): one class per path, each in a file of its own, all working
// on the one DeviceShared (shared.h) the Device holds. Device picks the path of a call; a path
// stages or hands over the buffers and launches its kernels through DeviceShared's launcher.
//
//   inside a node (every rank on one host):
//     LLPath          ll.cc           small messages: data and call number in 16-byte lines
//     DirectPath      direct.cc       peers' buffers read in place (one process, or registered)
//     StagedPath      staged.cc       through every rank's staging, in rounds
//     HostCopyPath    hostcopy.cc     GPUs without peer access: the copy engines through the
//                                     staging in host memory, in rounds
//     Registrations   registration.cc clbCommRegister: peers' buffers mapped through CUDA IPC
//   between hosts:
//     GpuDirectPath   gpudirect.cc    the verbs ring channel on GPU memory (GPUDirect RDMA)
//     HostStagedPath  host_staged.cc  through pinned host memory and the host transport
#pragma once

#include <cuda.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "algo/algorithms.h"
#include "device/shared.h"

namespace clb::cuda {

// Small messages inside a node (ll.cc): each rank pushes its data, with the call's number, in
// 16-byte lines into every rank's LL buffer; readers poll their own memory.
class LLPath {
 public:
  explicit LLPath(DeviceShared& s) : s_(s) {}
  // Before the launch (may meet the peers over the host): the LL buffer, whole at the first call
  // of any size, and grown for this call when it goes this way (`use`).
  clbResult_t prepare(bool use, size_t perDest, CUstream stream);
  clbResult_t launch(const CollArgs& a, CUstream stream);  // in the context, between the meetings

 private:
  DeviceShared& s_;
};

// Peers' buffers read in place (direct.cc): every rank in this process, or every rank's buffers
// registered (Registrations::agreeCall gave their addresses).
class DirectPath {
 public:
  explicit DirectPath(DeviceShared& s) : s_(s) {}
  // `k` holds common()'s fields, and the peers' buffers when the host gave them (registered).
  clbResult_t launch(const CollArgs& a, CUstream stream, ClbDevCallArgs k);

 private:
  DeviceShared& s_;
};

// Through the staging (staged.cc): each rank writes into its slot of every rank's staging half;
// messages larger than a slot go in rounds.
class StagedPath {
 public:
  explicit StagedPath(DeviceShared& s) : s_(s) {}
  clbResult_t prepare(const CollArgs& a, CUstream stream);  // the staging, grown for this call
  clbResult_t run(const CollArgs& a, CUstream stream);      // every round, each between the meetings

 private:
  size_t slotBytes() const;  // bytes per rank's slot in a staging half
  clbResult_t launch(const CollArgs& a, size_t e0, size_t m, CUstream stream);
  DeviceShared& s_;
};

// A copies-path call as the parts that go through its rounds one after the other (hostcopy.cc):
// the call itself, or, for an allReduce over three or more ranks, a reduceScatter of the first
// n * q elements into each rank's slice of the output (q elements, a multiple of `granule`), an
// allGather of those slices in place, and an allReduce of the rest (fewer than n * granule
// elements) when there is one. Each rank then copies in 2 (n - 1) / n of the message instead of
// n - 1 times it. Returns how many parts it wrote (1 to 3); rank is the caller's.
int splitCopyCall(const CollArgs& a, int nranks, int rank, size_t granule, CollArgs parts[3]);

// The bytes per rank (a reduceScatter's per slice) of one round of a part that walks `walked`
// bytes per rank, where a half of the staging holds `fits`: at least kCopyRounds rounds until a
// round reaches kCopyRoundMin, never more than fits, a multiple of 256. Each round costs fixed
// steps (small kernels, a meeting over host memory), so rounds are large, but the first copy in
// and the last copies out overlap nothing, so a call has enough of them (measured on the H200,
// docs/decisions.md).
constexpr size_t kCopyRoundMin = 4u << 20;
constexpr size_t kCopyRounds = 8;
size_t copyRoundBytes(size_t fits, size_t walked);

// Between GPUs without peer access, above the LL sizes (hostcopy.cc): the copy engines move the
// data through each rank's staging in pinned host memory; small one-block kernels in between
// wait and announce with plain loads and stores (no atomics on host memory).
class HostCopyPath {
 public:
  explicit HostCopyPath(DeviceShared& s) : s_(s) {}
  // The staging, the second stream and the device scratch (outside a capture).
  clbResult_t prepare(const CollArgs& a, CUstream stream);
  clbResult_t run(const CollArgs& a, CUstream stream);  // every round, each in two meetings
  void release();                                       // the scratch and the stream go (at destroy)
  size_t scratchBytes() const { return scratchBytes_; }

 private:
  size_t roundBytes(const CollArgs& a) const;
  size_t scratchFor(const CollArgs& a) const;                       // device scratch a part needs
  size_t scratchForCall(const CollArgs& a) const;                   // ... and a whole call (its parts' largest)
  clbResult_t fold(const CollArgs& a, int j, size_t e0, size_t m);  // allReduce / reduce's round j, after WAIT
  clbResult_t post(const CollArgs& a, int j, size_t e0, size_t m, CUstream stream);
  clbResult_t collect(const CollArgs& a, int j, size_t e0, size_t m);
  clbResult_t step(int phase, int round, size_t m, void* out, unsigned blocks, CUstream stream);
  DeviceShared& s_;
  CUstream side_ = nullptr;  // the second stream: each round's copies out of the peers' halves
  CUevent fork_ = nullptr, join_ = nullptr;
  CUdeviceptr scratch_ = 0;  // the peers' parts of a round, copied in (reducing collectives)
  size_t scratchBytes_ = 0;
  const char* parts_[CLB_MAX_DEVICE_RANKS] = {};  // what COMBINE reads, rank by rank
  ClbDevCallArgs base_{};                         // this call's arguments common to every step (run())
  struct Round {
    int part;
    size_t e0, m;
  };
  std::vector<Round> rounds_;  // this call's rounds, part by part (run())
};

struct RegInfo;  // what a rank tells the others about a buffer it registers

// Registered device buffers, clbCommRegister / clbCommDeregister (registration.cc): between
// processes, peers' buffers mapped once through CUDA IPC, so that calls on them go direct.
class Registrations {
 public:
  explicit Registrations(DeviceShared& s) : s_(s) {}
  // clbCommRegister / clbCommDeregister (collective; see colibri.h).
  clbResult_t registerBuffer(void* buff, size_t bytes, void** handle);
  clbResult_t deregisterBuffer(void* handle);
  // Every rank says what call this is (an error naming the ranks if they differ) and, with
  // zeroCopy, which registered buffers it uses; true in *given when all ranks' are registered,
  // with the peers' addresses filled in. A host collective: only where every rank calls it.
  // `capture`: the stream when it is capturing (else nullptr), whose graph then holds the
  // registrations the call reads (holdForGraph).
  clbResult_t agreeCall(const CollArgs& a, bool zeroCopy, CUstream capture, ClbDevCallArgs* k, bool* given);
  // The graph that `stream` is capturing holds registration `id` until the graph and every
  // instantiation of it are destroyed: until then clbCommDeregister refuses it on every rank, as
  // the graph's replays read the peers' buffers through its mappings. Nothing when not capturing.
  clbResult_t holdForGraph(CUstream stream, uint64_t id);
  // Point-to-point between processes (p2p_device.cc): where a receive of `len` bytes at p lies in
  // this rank's registrations (true, with the registration's ID and p's offset in it), and peer
  // `peer`'s range of registration `id` as mapped here (nullptr: none such, or not mapped).
  bool locate(const void* p, size_t len, uint64_t* id, uint64_t* offset);
  char* peerRange(uint64_t id, int peer) const;
  uint64_t digest() const { return liveDigest_; }
  bool empty() const { return regs_.empty(); }
  size_t count() const { return regs_.size(); }
  size_t mapped() const { return mappings_.size(); }  // peer allocations mapped here
  void release();  // every mapping closed (at destroy, in the context, once this rank's kernels are done)

 private:
  // One clbCommRegister: this rank's range, and every rank's as mapped in this process.
  struct Registration {
    uint64_t id;           // the same on every rank: registrations are counted alike everywhere
    uintptr_t begin, end;  // this rank's buffer
    uint64_t bufferId;     // its allocation's ID when registered: freeing changes it
    std::vector<char*> peer;
    std::vector<std::tuple<int32_t, uint32_t, uint64_t>> mapped;  // keys of mappings_ this one holds
    // Holds of CUDA graphs that captured calls on it (holdForGraph): each graph's user object
    // keeps a reference and drops its hold when the driver destroys the graph's last copy.
    std::shared_ptr<std::atomic<int>> graphHolds = std::make_shared<std::atomic<int>>(0);
  };
  struct Mapping {  // a peer process's allocation, opened once here (CUDA IPC)
    CUdeviceptr local = 0;
    int refs = 0;
  };
  clbResult_t registerLocal(void* buff, size_t bytes, RegInfo* info);
  clbResult_t mapRegistration(const std::vector<RegInfo>& all, Registration* reg);
  void unmap(Registration* reg, bool closeNow);
  // This rank's registration holding [p, p + len), or nullptr (none, or its memory was freed).
  const Registration* findRegistration(const void* p, size_t len, uint64_t* offset);
  DeviceShared& s_;
  std::vector<std::unique_ptr<Registration>> regs_;
  // (peer pid, its PID namespace, allocation ID) -> here
  std::map<std::tuple<int32_t, uint32_t, uint64_t>, Mapping> mappings_;
  std::vector<CUdeviceptr> closeLater_;  // unused mappings, closed at release (ranks share this process)
  uint64_t nextRegId_ = 0;               // registrations attempted (every rank counts each, failed or not)
  uint64_t liveDigest_ = 0;              // sum of mixed IDs of the live registrations
  bool warnedDigest_ = false;
};

// Between hosts over transport verbs with GPUDirect RDMA (gpudirect.cc): the NIC reads and
// writes GPU memory; the host ring algorithm drives it, kernels on the caller's stream.
class GpuDirectPath {
 public:
  explicit GpuDirectPath(DeviceShared& s) : s_(s) {}
  struct GpuDirect;  // the verbs channel in device mode, and how it registers GPU memory
  // At the first call between hosts (collective: every rank is in this call), whether this path
  // is set up; its failure (a bad variable, a forced mode that cannot work) is sticky.
  clbResult_t decide();
  bool ready() const { return gdr_ != nullptr; }  // set up: calls between hosts go this way
  clbResult_t run(const CollArgs& a, CUstream stream);
  // Gives the channel's slots and staging back (their release reaches the peers in this or a
  // later call; see VerbsChannel::trim).
  clbResult_t trim();
  void release();
  std::string info() const;                        // for describe()
  const std::string& why() const { return why_; }  // why not (when not)

 private:
  clbResult_t setUp();
  DeviceShared& s_;
  GpuDirect* gdr_ = nullptr;          // set up: device buffers between hosts over GPUDirect RDMA
  bool decided_ = false;              // setUp ran
  clbResult_t failure_ = clbSuccess;  // ... and failed (a bad variable, a forced mode that cannot work): sticky
  std::string failMsg_;
  CUevent inputReady_ = nullptr;  // recorded on the caller's stream at each GPUDirect call
  std::string why_;               // why not (when not)
};

// Between hosts otherwise (host_staged.cc): through pinned host memory and the host transport,
// the stream synchronized at each call.
class HostStagedPath {
 public:
  explicit HostStagedPath(DeviceShared& s) : s_(s) {}
  // `whyNotGpuDirect` goes into the warning the first call gives.
  clbResult_t run(const CollArgs& a, CUstream stream, const std::string& whyNotGpuDirect);
  clbResult_t trim();  // the pinned host buffers given back (local)
  void release();      // trim(), and the event goes
  size_t bytes() const { return stageBytes_[0] + stageBytes_[1]; }

 private:
  DeviceShared& s_;
  void* stage_[2] = {nullptr, nullptr};  // input and output in pinned host memory
  size_t stageBytes_[2] = {0, 0};
  CUevent stageDone_ = nullptr;  // recorded after the last copy back from the staging
};

}  // namespace clb::cuda
