// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The parts behind Device (device.h), each in a file of its own, all working on the one
// DeviceShared (shared.h) the Device holds.
//
// A collective inside a node takes one of the collective paths: a CollectivePath each, in the
// registry Device makes (DeviceShared::paths, in the order auto prefers them). A path is a protocol (how
// data and its readiness travel between the ranks' kernels) and an algorithm (how the data moves);
// Device picks the protocol from the message size first, then the first path of that protocol
// that takes the call (CollectivePath::takes). So a new path is a class here, its file, its
// kernel (src/kernels) and a line in the registry (docs/architecture.md, "How to extend").
//
//   inside a node (every rank on one host):          protocol  algorithm
//     LLPath          ll.cc           small messages   lines     push
//     DirectPath      direct.cc       in place         simple    in place (one-shot or two-shot)
//     HostCopyPath    hostcopy.cc     no peer access   simple    copy engines, in rounds
//     StagedPath      staged.cc       otherwise        simple    staged, in rounds
//     Registrations   registration.cc clbCommRegister: peers' buffers mapped through CUDA IPC
//   between hosts (host-driven, not collective paths):
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

// How data and its readiness travel between the ranks' kernels.
enum class Protocol {
  kLines,   // 8 data bytes and the call's number in each 16-byte line: a reader polls the data itself
  kSimple,  // the data, then a flag that says it is there (a barrier of flags per round)
};

// How a collective's data moves.
enum class Algorithm {
  kPush,         // every rank pushes its whole input into every rank's buffer; each combines locally
  kInPlace,      // every rank reads the peers' buffers where they are
  kStaged,       // through every rank's staging on the device, in rounds
  kCopyEngines,  // through staging in pinned host memory, moved by the copy engines, in rounds
};
const char* protocolName(Protocol p);    // "lines", "simple"
const char* algorithmName(Algorithm a);  // "push", "in place", "staged", "copy engines"

// What a path is chosen from (Device::run): alike on every rank, so every rank picks the same.
struct CallShape {
  size_t perDest = 0;       // bytes a rank sends to each rank
  size_t msg = 0;           // bytes of the whole message (an allGather's output, a reduceScatter's input)
  bool registered = false;  // every rank's buffers are registered, their addresses in the call's arguments
  // Ranks in several processes with peer access, a communicator holding registrations, an
  // allReduce, allGather or reduceScatter of the LL sizes, COLIBRI_DEVICE_PATH=direct: the direct
  // path takes it, its kernel reading the peers' windows in place (DirectPath). Under auto such
  // calls take LL, measured faster at every LL size (docs/performance.md, "Windows").
  bool windowed = false;
};

// One way a collective runs on the GPU inside a node, each rank's kernels on the caller's stream.
class CollectivePath {
 public:
  virtual ~CollectivePath() = default;
  // COLIBRI_DEVICE_PATH's word where the path can be forced; clbCommInfo's "last call".
  virtual const char* name() const = 0;
  virtual Protocol protocol() const = 0;
  virtual Algorithm algorithm() const = 0;
  // At set-up, in the context: its kernels from the image. `occupancy`: the kernel whose blocks
  // wait for each other (NodeLayout::maxBlocks bounds its launches), or left alone.
  virtual clbResult_t load(const Kernels& k, CUfunction* occupancy) = 0;
  // Whether it takes a call of this shape, given the node (peer access, processes) and the
  // settings (COLIBRI_DEVICE_PATH, the sizes auto goes by). Device asks the paths of the call's
  // protocol in the registry's order; the last of each takes every call.
  virtual bool takes(const CallShape& c) const = 0;
  // Before every call, whichever path takes it (every rank calls it at the same call): what the
  // path sets up ahead of its first call, so that every call it takes can be captured afterwards.
  virtual clbResult_t ahead(CUstream) { return clbSuccess; }
  // Before its launches: its buffers grown for this call (may meet the peers over the host).
  virtual clbResult_t prepare(const CollArgs&, CUstream) { return clbSuccess; }
  // The call's launches, each between the meetings of the ranks sharing this GPU and process
  // (LaunchControl::together). `given`: the arguments the call agreement filled (the peers'
  // registered buffers), or nullptr.
  virtual clbResult_t run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) = 0;
  // What it holds of its own, given back at destroy (in the context, this rank's kernels done).
  virtual void release() {}
  virtual std::string note() const { return {}; }  // for describe()
};

// The registry (device.cc): every collective path on `s`, in the order auto prefers them within
// a protocol; the last of each protocol takes every call the others leave.
std::vector<std::unique_ptr<CollectivePath>> collectivePaths(DeviceShared& s);

// The path of a call of shape `c` (Device::run): the protocol first, by the call's size (lines up
// to `llMax` bytes per rank, unless `forced`, the path COLIBRI_DEVICE_PATH names, is of the other
// protocol, or the call is windowed), then `forced` where it is of that protocol and takes the call, else the first
// path of `paths` of that protocol that takes it (the registry's order is auto's).
CollectivePath* choosePath(const std::vector<std::unique_ptr<CollectivePath>>& paths, CollectivePath* forced,
                           size_t llMax, const CallShape& c);

// Whether a call that `path` would take asks every rank for its registered buffers
// (Registrations::agreeCall) to go in place instead: a call that would stage on the device and
// was not forced to, between processes with peer access, from directMin on, where this rank holds
// `registrations`; never a reduce (its other ranks have no recv buffer to register). Alike on
// every rank: registrations are made and dropped by collective steps.
bool asksForRegistered(const CollectivePath& path, const CollectivePath* forced, const DeviceShared& s,
                       bool registrations, const CallShape& c, uint32_t coll);

// Whether a call of shape `c` is windowed (CallShape::windowed), where this rank holds
// `registrations`. Alike on every rank, as asksForRegistered is: registrations are made and
// dropped by collective steps, the layout and the settings are compared at init, and the call's
// shape by every kernel.
bool isWindowed(const CollectivePath* forced, const DeviceShared& s, bool registrations, const CallShape& c,
                uint32_t coll);

// Small messages inside a node (ll.cc): each rank pushes its data, with the call's number, in
// 16-byte lines into every rank's LL buffer; readers poll their own memory.
class LLPath final : public CollectivePath {
 public:
  explicit LLPath(DeviceShared& s) : s_(s) {}
  const char* name() const override { return "ll"; }
  Protocol protocol() const override { return Protocol::kLines; }
  Algorithm algorithm() const override { return Algorithm::kPush; }
  clbResult_t load(const Kernels& k, CUfunction* occupancy) override;
  bool takes(const CallShape&) const override { return true; }  // the protocol was chosen by size
  // The LL buffer whole at the first call of any size (where auto or ll may take a call).
  clbResult_t ahead(CUstream stream) override;
  clbResult_t prepare(const CollArgs& a, CUstream stream) override;  // ... and grown for this call
  clbResult_t run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) override;

 private:
  clbResult_t launch(const CollArgs& a, CUstream stream);  // in the context, between the meetings
  DeviceShared& s_;
  CUfunction fn_ = nullptr;  // clb_dev_ll
};

// The LL buffer's bytes for `perRank` bytes per rank (ll.cc): two halves (call parity) of one slot
// per rank; a slot holds 16-byte lines of 8 data bytes.
size_t llBytes(int nranks, size_t perRank);

// Peers' buffers read in place (direct.cc): every rank in this process, every rank's buffers
// registered (Registrations::agreeCall gave their addresses), or a windowed call (CallShape): each
// rank's kernel posts where its send buffer lies (its window, or a copy in its own LL buffer) and
// reads the peers' there, with no word over the host.
class DirectPath final : public CollectivePath {
 public:
  explicit DirectPath(DeviceShared& s) : s_(s) {}
  const char* name() const override { return "direct"; }
  Protocol protocol() const override { return Protocol::kSimple; }
  Algorithm algorithm() const override { return Algorithm::kInPlace; }
  clbResult_t load(const Kernels& k, CUfunction* occupancy) override;
  // Every rank in this process with peer access (forced, or auto from directMin on), every
  // rank's buffers registered, or a windowed call.
  bool takes(const CallShape& c) const override;
  // Forced, between processes, once registrations are held: the LL buffer whole, for the
  // windowed calls' copies (LL sets up none when direct is forced).
  clbResult_t ahead(CUstream stream) override;
  clbResult_t run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) override;

 private:
  // A windowed call's arguments: this rank's window and the peers' ranges of it, or none.
  clbResult_t postWindow(const CollArgs& a, CUstream stream, ClbDevCallArgs* k);
  // `k` holds common()'s fields, and the peers' buffers when the host gave them (registered).
  clbResult_t launch(const CollArgs& a, CUstream stream, ClbDevCallArgs k);
  DeviceShared& s_;
  CUfunction fn_ = nullptr;  // clb_dev_direct
};

// Through the staging (staged.cc): each rank writes into its slot of every rank's staging half;
// messages larger than a slot go in rounds.
class StagedPath final : public CollectivePath {
 public:
  explicit StagedPath(DeviceShared& s) : s_(s) {}
  const char* name() const override { return "staged"; }
  Protocol protocol() const override { return Protocol::kSimple; }
  Algorithm algorithm() const override { return Algorithm::kStaged; }
  clbResult_t load(const Kernels& k, CUfunction* occupancy) override;
  bool takes(const CallShape&) const override { return true; }       // every call the others leave
  clbResult_t prepare(const CollArgs& a, CUstream stream) override;  // the staging, grown for this call
  clbResult_t run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) override;

 private:
  size_t slotBytes() const;  // bytes per rank's slot in a staging half
  clbResult_t launch(const CollArgs& a, size_t e0, size_t m, CUstream stream);
  DeviceShared& s_;
  CUfunction fn_ = nullptr;  // clb_dev_staged
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
class HostCopyPath final : public CollectivePath {
 public:
  explicit HostCopyPath(DeviceShared& s) : s_(s) {}
  const char* name() const override { return "copies"; }
  Protocol protocol() const override { return Protocol::kSimple; }
  Algorithm algorithm() const override { return Algorithm::kCopyEngines; }
  clbResult_t load(const Kernels& k, CUfunction* occupancy) override;
  // Staging in host memory, unless COLIBRI_DEVICE_PATH=staged keeps the staged kernel there.
  bool takes(const CallShape& c) const override;
  // The staging, the second stream and the device scratch (outside a capture).
  clbResult_t prepare(const CollArgs& a, CUstream stream) override;
  // Every round, each in two meetings.
  clbResult_t run(const CollArgs& a, CUstream stream, const ClbDevCallArgs* given) override;
  void release() override;            // the scratch and the stream go (at destroy)
  std::string note() const override;  // its device scratch, if any

 private:
  size_t roundBytes(const CollArgs& a) const;
  size_t scratchFor(const CollArgs& a) const;                       // device scratch a part needs
  size_t scratchForCall(const CollArgs& a) const;                   // ... and a whole call (its parts' largest)
  clbResult_t fold(const CollArgs& a, int j, size_t e0, size_t m);  // allReduce / reduce's round j, after WAIT
  clbResult_t post(const CollArgs& a, int j, size_t e0, size_t m, CUstream stream);
  clbResult_t collect(const CollArgs& a, int j, size_t e0, size_t m);
  clbResult_t step(int phase, int round, size_t m, void* out, unsigned blocks, CUstream stream);
  DeviceShared& s_;
  CUfunction copyFn_ = nullptr, combineFn_ = nullptr;  // clb_dev_hostcopy, clb_dev_hostcopy_combine
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
