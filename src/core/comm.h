// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The communicator: configuration, bootstrap, transports, memory accounting, and the waiting
// discipline every blocking step goes through (spin, then yield, then futex sleep; abort, peer
// failure and timeout are checked on the slow path).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "base/config.h"
#include "base/error.h"

namespace clb {

class Transport;
struct PeerDeviceMemory;
namespace cuda {
class Device;
class PeerDevice;
class Scaler;
}

enum Collective : uint32_t { kAllReduce = 1, kAllGather = 2, kReduceScatter = 3, kBroadcast = 4 };
// The calls made of point-to-point messages (core/p2p.cc): their messages carry one of these, so a
// receiver in another of them (or in a send/recv of another count or type) is told, not fed.
// kPeerSetUp: the records two ranks in different processes exchange at their first point-to-point
// call on device memory with each other; kPeerPlace: the record a receive of a large message from
// another process sends its sender when the communicator has registrations, saying where the
// message may be written in place (device/p2p_device.cc). Both are numbered like the pair's messages.
enum PeerCall : uint32_t { kSendRecv = 5, kAllToAll, kAllToAllv, kGather, kScatter, kReduce, kPeerSetUp, kPeerPlace };
inline bool isPeerCall(uint32_t c) { return c >= kSendRecv && c <= kPeerPlace; }
// clbBarrier is an all-reduce of one int32 whose descriptor says root kBarrierRoot (an all-reduce
// has no root): every path runs it as an all-reduce, and its tags never match a user's call.
constexpr int32_t kBarrierRoot = -2;
const char* collectiveName(uint32_t c);
// The other calls that take the communicator for their duration (clbComm::enterCall), after the
// collectives: they use its channels, staging or sequence numbers too.
enum Call : uint32_t {
  kCallRegister = 16, kCallDeregister, kCallTrim, kCallDestroy, kCallSplit, kCallPeers, kCallGraphLaunch
};
// "allReduce" for a Collective, "clbCommTrim" for a Call.
const char* callName(uint32_t call);

// What a rank says it is doing; peers compare it to detect mismatched calls.
struct OpDesc {
  uint64_t seq;
  uint32_t coll, dtype, op, algo;
  int32_t root;
  // Point-to-point messages of a call that every rank makes (all-to-all, gather, scatter,
  // reduce): the call's number among those on this communicator (clbComm::peerCollectives), so
  // that a message left over from an earlier call (ranks that disagreed on a root, say) never
  // matches a later one; 0 for send / recv and the collectives (whose seq already numbers calls).
  uint32_t epoch;
  uint64_t count;
  bool operator==(const OpDesc& o) const {
    return seq == o.seq && coll == o.coll && dtype == o.dtype && op == o.op && algo == o.algo &&
           root == o.root && epoch == o.epoch && count == o.count;
  }
};
std::string describe(const OpDesc& d);

struct MemAccount {
  std::atomic<int64_t> host{0}, hostPeak{0}, device{0}, devicePeak{0};
  void addHost(int64_t d) { add(host, hostPeak, d); }
  void addDevice(int64_t d) { add(device, devicePeak, d); }

 private:
  static void add(std::atomic<int64_t>& cur, std::atomic<int64_t>& peak, int64_t d) {
    int64_t now = cur.fetch_add(d) + d;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
};

}  // namespace clb

struct clbComm {
  int rank = 0, nranks = 0;
  clbConfig_t cfg{};
  clb::DeviceConfig deviceCfg;  // the device path's settings, read at init
  std::atomic<bool> aborted{false};
  std::atomic<bool> failed{false};  // a collective failed midway: the communicator is unusable
  std::string failure;               // the first failure (set under failureMutex before `failed`)
  clbResult_t failureCode = clbSuccess;
  mutable std::mutex failureMutex;
  bool destroyed = false;
  clb::Bootstrap boot;
  clb::MemAccount mem;
  int transport = clbTransportAuto;  // resolved
  bool allOnOneHost = false;
  // Collectives started on this communicator. Written only by the call that holds `inCall`; atomic
  // (relaxed, plain loads and stores) because every call reads it before it tries to take `inCall`,
  // which, while another thread holds it, is a read during that thread's writes.
  std::atomic<uint64_t> seq{0};
  uint64_t splits = 0;  // clbCommSplit calls so far: every rank counts alike (they are collective)
  // Point-to-point messages so far, per peer and direction: the operations (a send, or one peer's
  // part of an all-to-all) this rank sent to / received from each rank, numbered like `seq` is for
  // collectives. Sized at the first such call; only the pair itself counts alike, so these never
  // touch `seq`.
  std::vector<uint64_t> peerSent, peerRecvd;
  // Calls made of point-to-point operations that every rank makes (all-to-all(v), gather,
  // scatter, reduce), numbered alike on every rank: their messages' OpDesc::epoch.
  uint32_t peerCollectives = 0;
  // Host memory a call holds only while it runs (the host copies of device buffers that
  // point-to-point moves through host memory): in mem too, but not staging, so not under its cap.
  std::atomic<int64_t> transientHost{0};
  // clbBarrier on a stream: one int32 of device memory, made at the first in the stream's context
  // (under the call, like every use).
  void* barrierScratch = nullptr;
  void* barrierContext = nullptr;  // its CUcontext
  clb::VersionInfo versions{};  // what this rank puts in the bootstrap table (init)
  clb::AgreedSettings agreed{};
  // The call in progress, 0 when none: (seq when it began << 8) | its Collective or Call. A call
  // takes it with one compare-and-swap and gives it back with one store; a call from a second
  // thread meanwhile is refused (clbInvalidUsage) without touching anything else. No lock is held
  // across the call, so clbCommAbort and the status queries never wait for it.
  std::atomic<uint64_t> inCall{0};
  std::atomic<int> lastAlgo{clbAlgoNone};
  // The transport (clb::Transport: ring, peer health, failure notices), nranks > 1 only;
  // `transport` says which one it is.
  std::unique_ptr<clb::Transport> carrier;
  std::unique_ptr<clb::cuda::Device> device;  // set up at the first call on device memory
  std::unique_ptr<clb::cuda::PeerDevice> peerDevice;  // point-to-point on the GPU, at its first device call
  // Point-to-point on device buffers between hosts (transport/channel.h): the GPU memory of the
  // channels in device mode (GPUDirect RDMA), made at the first such call over a network plugin
  // that has them; null before, and for good when it cannot be had (peerDeviceMemoryWhy: why not).
  // A channel holds it while it lives, so it may outlive `device`.
  std::shared_ptr<clb::PeerDeviceMemory> peerDeviceMemory;
  std::string peerDeviceMemoryWhy;
  bool peerStagedWarned = false;  // the warning that device point-to-point goes through host copies (once)
  std::atomic<clb::cuda::Device*> deviceReady{nullptr};  // `device`, once set up (read by other threads)
  // PreMulSum (core/premul.h), under the call like every use: on device buffers the scaling
  // kernels and the device scratch (device.h), made at the first such call; on host buffers the
  // scratch for scaled inputs (reduceScatter, reduce's other ranks), in mem.host. clbCommTrim and
  // clbCommDestroy free them.
  std::unique_ptr<clb::cuda::Scaler> scaler;
  std::unique_ptr<char[]> preMulHost;
  size_t preMulHostBytes = 0;
  std::string info;

  ~clbComm();
  // Slow-path checks while waiting: abort, peer failure or death (the carrier's notices), timeout. `startMs` is when the
  // wait began; `what` says what was awaited, for the message. `peer`: the rank waited for (its
  // close is an error too), -1 any rank (every close is an error), kClosesAreFine: none in
  // particular, and a peer that closed normally is not an error.
  static constexpr int kClosesAreFine = -2;
  clbResult_t checkWait(int64_t startMs, const char* what, int peer);
  // The communicator cannot go on; `code` and the thread's last error say why (the first call wins).
  void markFailed(clbResult_t code = clbInternalError);
  // clbCommGetAsyncError: what has gone wrong without a call (abort, an earlier failure, a device
  // wait that timed out, a peer that failed, aborted or died), with the message; any thread.
  clbResult_t asyncStatus();
  // clbAborted / clbInvalidUsage with the message users see once the communicator is unusable.
  clbResult_t checkUsable() const;
  // Takes the communicator for `call` (a Collective or a Call), or returns clbInvalidUsage naming
  // the call another thread is in. leaveCall() gives it back; clb::CallScope does both.
  clbResult_t enterCall(uint32_t call) {
    uint64_t none = 0;
    const uint64_t mine = seq.load(std::memory_order_relaxed) << 8 | call;
    if (inCall.compare_exchange_strong(none, mine, std::memory_order_acquire, std::memory_order_relaxed))
      return clbSuccess;
    return refuseCall(call, none);
  }
  void leaveCall() { inCall.store(0, std::memory_order_release); }

 private:
  // The message of a call refused because another thread is in `current` (an inCall value).
  clbResult_t refuseCall(uint32_t call, uint64_t current) const;
};

namespace clb {

// The steps of clbCommInitRank, shared with clbCommSplit: a communicator with its resolved
// configuration, versions and agreed settings (newComm); the check of the bootstrap table that
// every rank makes alike (initTableCheck); once the bootstrap is up, the transport and the info
// (finishInit).
clbResult_t newComm(int rank, int nranks, const clbConfig_t* config, std::unique_ptr<clbComm>* out);
Bootstrap::TableCheck initTableCheck(clbComm* c);
clbResult_t finishInit(clbComm* c);

// clbInvalidArgument for a NULL communicator, or one that is not alive in this process (destroyed
// already, or never made), with the message every call gives; nothing of it is read.
clbResult_t checkComm(clbComm* c);
// A communicator made (an init's, a split's): alive from now on, until clbCommDestroy.
void registerComm(const clbComm* c);
// A buffer of a call, `bytes` from `p`: refused where its end passes the last address (the
// address plus the size wraps around, so a huge count or displacement would reach memory below
// the buffer). `what` says which buffer or block, for the message.
clbResult_t checkExtent(const char* call, const char* what, const void* p, size_t bytes);
inline bool wrapsAround(const void* p, size_t bytes) { return bytes > UINTPTR_MAX - reinterpret_cast<uintptr_t>(p); }
// A call's send and recv extents, which must not overlap (`inPlace`: the call's in-place layout,
// named in the message; NULL where it has none). Each is checked with checkExtent first, so that a
// wrapped end cannot hide an overlap.
clbResult_t checkOverlap(const char* call, const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                         const char* inPlace);
// Whether a call's buffers are device memory (*ordinal: the GPU), for the collectives and the
// point-to-point calls alike (core/collectives.cc): both must be on the GPU (one GPU) or both on
// the host, and a stream needs device buffers. Either may be NULL (a call that has one).
clbResult_t bufferMemory(const void* send, const void* recv, void* stream, bool* onDevice, int* ordinal);

// The communicator taken for one call for the rest of the scope (clbComm::enterCall), given back
// at its end on every path. result() is clbSuccess when it was taken, else the refusal.
class CallScope {
 public:
  CallScope(clbComm* c, uint32_t call) : c_(c), rc_(c->enterCall(call)) {}
  ~CallScope() {
    if (rc_ == clbSuccess) c_->leaveCall();
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  clbResult_t result() const { return rc_; }

 private:
  clbComm* c_;
  clbResult_t rc_;
};

// Waits until pred() is true. `word` is a shared 64-bit counter whose change may make pred true;
// `waiters` counts sleepers in the block that holds it (the writer wakes them). Either may be null
// (no futex: sleep briefly instead). `tick(waitedMs)` runs at every slow-path check (a warning
// about a long wait, say).
struct NoTick {
  void operator()(int64_t) const {}
};
template <class Pred, class Tick = NoTick>
clbResult_t waitUntil(clbComm* comm, Pred pred, std::atomic<uint64_t>* word,
                      std::atomic<uint32_t>* waiters, const char* what, int peer, Tick tick = Tick());

}  // namespace clb

#include "core/wait_impl.h"
