// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device collectives for ranks on one host: each rank owns a staging buffer (two halves, used by
// alternate calls) and a flag block in device memory, shared with the other ranks through CUDA IPC
// (ranks in one process use the pointers directly). A call stages this rank's data and combines
// everyone's, two kernels on the caller's stream, synchronized by flags on the device: the call
// returns at once, and the host never waits (see src/kernels/collective.cu). Messages larger than
// a staging half go in rounds. Staging is sized to the first need (capped), grows when a call
// needs more (a collective step all ranks take at the same call), and is counted in memStats.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algo/algorithms.h"
#include "platform/cuda/driver.h"
#include "device/kernels.h"
#include "device/launcher.h"
#include "device/watchdog.h"

namespace clb {
class LaunchMeet;
}

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

// After a step every rank takes: every rank's status exchanged, the first failure returned on
// every rank (its own message on the failing rank, "rank p could not set up <what>" elsewhere).
// *exchanged (optional): whether the exchange itself worked (false: the result is its failure,
// and the ranks may not agree on anything).
clbResult_t agreeOnStatus(clbComm* comm, clbResult_t mine, const char* what, bool* exchanged = nullptr);

// Which way a call goes (COLIBRI_DEVICE_PATH forces one; see docs/device.md).
enum class DevicePath { kAuto, kLL, kStaged, kDirect };

// Device memory every rank of the node sees: this rank's allocation and every rank's, mapped
// (CUDA IPC across processes, the pointer itself inside one). Allocated on demand, grown by a
// collective step all ranks take at the same call, counted in memStats.
// Between GPUs without peer access the buffers live in pinned host memory instead (POSIX shared
// memory mapped into every rank's process and registered with CUDA), which every GPU reaches.
struct SharedBuffer {
  CUdeviceptr mine = 0;
  size_t bytes = 0;
  std::vector<char*> peers;
  std::vector<CUdeviceptr> opened;  // IPC mappings to close
  bool host = false;                                  // in host memory (viaHost_)
  void* hostMine = nullptr;                           // ... this rank's, as the host sees it
  std::vector<std::pair<void*, size_t>> hostMaps;     // host mappings to unregister and unmap
};

struct RegInfo;   // what a rank tells the others about a buffer it registers
struct PeerInfo;  // what ranks tell each other at set-up

class DeviceWorld {
 public:
  explicit DeviceWorld(clbComm* comm);
  ~DeviceWorld();
  clbResult_t run(const CollArgs& a, int ordinal, CUstream stream);
  // Ranks on several hosts (no shared memory between them): the buffers go through pinned host
  // memory and the host transport (sockets, verbs), the stream synchronized at each call.
  clbResult_t runAcrossHosts(const CollArgs& a, int ordinal, CUstream stream);
  // Gives the pinned host buffers of runAcrossHosts back (local), and the GPUDirect channel's slots
  // and staging (their release reaches the peers in this or a later call; see VerbsChannel::trim).
  clbResult_t trimHostStage();
  struct GpuDirect;  // the verbs channel in device mode, and how it registers GPU memory (gpudirect.cc)
  // clbCommRegister / clbCommDeregister (collective; see colibri.h).
  clbResult_t registerBuffer(void* buff, size_t bytes, void** handle);
  clbResult_t deregisterBuffer(void* handle);
  std::string describe() const;
  // clbCommGetAsyncError's device part: clbTimeout with the call, collective and ranks when a
  // device wait of this rank ran out of time, else clbSuccess. Any thread, once set up.
  clbResult_t deviceStatus() const;
  // The path the last call took ("ll", "staged" or "direct").
  const char* lastPath() const { return lastPath_ == DevicePath::kLL ? "ll" : lastPath_ == DevicePath::kDirect ? "direct" : "staged"; }

 private:
  // One clbCommRegister: this rank's range, and every rank's as mapped in this process.
  struct Registration {
    uint64_t id;           // the same on every rank: registrations are counted alike everywhere
    uintptr_t begin, end;  // this rank's buffer
    uint64_t bufferId;     // its allocation's ID when registered: freeing changes it
    std::vector<char*> peer;
    std::vector<std::pair<int32_t, uint64_t>> mapped;  // keys of mappings_ this one holds
  };
  struct Mapping {  // a peer process's allocation, opened once here (CUDA IPC)
    CUdeviceptr local = 0;
    int refs = 0;
  };
  clbResult_t setUpGpuDirect();  // collective, at the first device call between hosts
  clbResult_t runGpuDirect(const CollArgs& a, CUstream stream);
  clbResult_t trimGpuDirect();
  void releaseGpuDirect();
  std::string gpuDirectInfo() const;
  clbResult_t registerLocal(void* buff, size_t bytes, RegInfo* info);
  clbResult_t mapRegistration(const std::vector<RegInfo>& all, Registration* reg);
  void unmap(Registration* reg, bool closeNow);
  // This rank's registration holding [p, p + len), or nullptr (none, or its memory was freed).
  const Registration* findRegistration(const void* p, size_t len, uint64_t* offset);
  // Every rank says what call this is (an error naming the ranks if they differ) and, with
  // zeroCopy, which registered buffers it uses; true in *given when all ranks' are registered,
  // with the peers' addresses filled in. A host collective: only where every rank calls it.
  clbResult_t agreeCall(const CollArgs& a, bool zeroCopy, ClbDevCallArgs* k, bool* given);
  clbResult_t setUp(int ordinal, CUstream stream);            // once: kernels, flags, peers
  clbResult_t ensureShared(SharedBuffer* b, size_t bytes, CUstream stream, const char* what);
  clbResult_t allocHostShared(SharedBuffer* b, size_t bytes, const char* what);  // viaHost_
  clbResult_t decideViaHost(const std::vector<PeerInfo>& all);  // collective
  void releaseShared(SharedBuffer* b);
  clbResult_t zeroNow(CUdeviceptr p, size_t bytes);  // before peers may write there
  clbResult_t refuseInCapture(CUstream stream, size_t need);  // set-up is impossible in capture
  clbResult_t checkStream(CUstream stream);
  clbResult_t release();
  void common(ClbDevCallArgs* k, const CollArgs& a) const;  // what every path passes alike
  unsigned blocksFor(size_t bytes) const;
  size_t slotBytes() const;  // staged: bytes per rank's slot in a staging half
  clbResult_t staged(const CollArgs& a, size_t e0, size_t m, CUstream stream);
  clbResult_t direct(const CollArgs& a, CUstream stream, ClbDevCallArgs k);
  clbResult_t ll(const CollArgs& a, CUstream stream);
  // Runs `launch` (this rank's kernels of call `a`) between the two meetings of the ranks that
  // share this GPU and process (src/core/launch_meet.h); just runs it when no other rank does.
  template <class F>
  clbResult_t together(const CollArgs& a, F&& launch);
  clbComm* comm_;
  const Driver* d_ = nullptr;
  Kernels kernels_;
  CUfunction staged_ = nullptr, direct_ = nullptr, ll_ = nullptr;
  GraphLauncher launcher_;  // eager launches: prepared graphs or ordinary (set up in setUp)
  int launchMode_ = 0;      // COLIBRI_DEVICE_LAUNCH (DeviceLaunchSetting, core/config.h)
  std::string configError_;       // a COLIBRI_DEVICE_* variable had a bad value
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  int ordinal_ = -1;
  DevicePath path_ = DevicePath::kAuto;
  size_t directMin_ = 0;          // auto: direct from this message size on (bytes)
  size_t llMax_ = 0;              // auto: LL up to this many bytes per destination
  int sameGpu_ = 1;               // ranks sharing this GPU, this one included
  unsigned maxBlocks_ = 1;        // per launch: every sharing rank's kernel stays resident
  DevicePath lastPath_ = DevicePath::kAuto;
  SharedBuffer staging_;  // staged path: two halves (call parity), a slot per rank in each
  SharedBuffer llBuf_;    // LL path: two halves, a slot of 16-byte lines per rank in each
  SharedBuffer flagBuf_;  // every rank's ClbDevFlags
  CUdeviceptr flags_ = 0;  // this rank's (flagBuf_.mine): set up once this is set
  bool viaHost_ = false;   // some GPUs cannot reach each other: shared buffers in host memory
  bool forceHost_ = false; // COLIBRI_DEVICE_P2P=off
  bool checkCalls_ = false;  // COLIBRI_DEVICE_CHECK_CALLS=1: every call compared across ranks
  uint64_t hostGen_ = 0;   // host-shared buffers made so far (names them)
  ClbDevHostStatus* hostStatus_ = nullptr;  // mapped pinned host memory the kernels report into
  CUdeviceptr hostStatusDev_ = 0;
  int64_t warnPercent_ = 50;                // COLIBRI_STUCK_WARN_PERCENT of the timeout: say a wait is long
  Watched watched_;                         // what the watchdog looks at (registered once set up)
  bool watching_ = false;
  std::shared_ptr<LaunchMeet> meet_;        // the ranks sharing this GPU and process, when there are others
  bool meetOff_ = false;                    // COLIBRI_DEVICE_MEET=off: they launch without meeting
  std::vector<ClbDevFlags*> peerFlags_;
  std::vector<int32_t> peerPid_;
  bool sharedProcess_ = false;  // another rank lives in this process
  bool allInProcess_ = false;   // every rank lives in this process: the direct path is possible
  std::vector<std::unique_ptr<Registration>> regs_;
  std::map<std::pair<int32_t, uint64_t>, Mapping> mappings_;  // (peer pid, allocation ID) -> here
  std::vector<CUdeviceptr> closeLater_;  // unused mappings, closed at release (ranks share this process)
  uint64_t nextRegId_ = 0;   // registrations attempted (every rank counts each, failed or not)
  uint64_t liveDigest_ = 0;  // sum of mixed IDs of the live registrations
  bool warnedDigest_ = false;
  void* stage_[2] = {nullptr, nullptr};  // runAcrossHosts: input and output in pinned host memory
  size_t stageBytes_[2] = {0, 0};
  bool acrossHosts_ = false;            // runAcrossHosts was used (told once, by a warning)
  CUevent stageDone_ = nullptr;         // recorded after the last copy back from the staging
  GpuDirect* gdr_ = nullptr;            // set up: device buffers between hosts over GPUDirect RDMA
  bool gdrDecided_ = false;             // setUpGpuDirect ran
  clbResult_t gdrFailure_ = clbSuccess; // ... and failed (a bad variable, a forced mode that cannot work): sticky
  std::string gdrFailMsg_;
  bool lastGdr_ = false;                // the last call between hosts went over GPUDirect RDMA
  CUevent gdrReady_ = nullptr;          // recorded on the caller's stream at each GPUDirect call
  std::string gdrWhy_;                  // why not (when not)
  bool lastZeroCopy_ = false;
};

}  // namespace clb::cuda
