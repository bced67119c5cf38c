// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The communicator: what the layers under it see of it (bootstrap/comm_context.h: rank, size,
// configuration, bootstrap, memory accounts, transport, the wait's checks; and what the device
// runtime sees besides, device/device_context.h: the device settings, the failure marks, the
// device objects), and what only the core uses: the first failure's message, the call in
// progress, agreed settings, PreMulSum's host scratch, the init steps and the argument checks
// that every C entry point shares.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/call.h"
#include "base/config.h"
#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/comm_context.h"
#include "colibri/colibri.h"
#include "device/device_context.h"

// The communicator: what the layers under it see (clb::CommContext, clb::DeviceCommContext), and
// what only the core uses.
struct clbComm : clb::DeviceCommContext {
  // Why this rank's configuration was refused, when it joined its peers' init only to say so
  // (clb::newComm); empty otherwise.
  std::string refusedSettings;
  std::string failure;  // the first failure (set under failureMutex before `failed`)
  clbResult_t failureCode = clbSuccess;
  mutable std::mutex failureMutex;
  bool destroyed = false;
  uint64_t splits = 0;               // clbCommSplit calls so far: every rank counts alike (they are collective)
  std::atomic<uint32_t> shrinks{0};  // clbCommShrink calls so far, refused ones too (the survivors count alike)
  // The grow ids clbCommGetUniqueId made here: their roots (in this process) stop at destroy, when
  // no grow can use them any more (one that formed stopped already).
  std::mutex growIdsMutex;
  std::vector<clb::IdData> growIds;
  // Calls made of point-to-point operations that every rank makes (all-to-all(v), gather,
  // scatter, reduce), numbered alike on every rank: their messages' OpDesc::epoch.
  uint32_t peerCollectives = 0;
  // clbCommSuspend gave the device memory back: every call but clbCommResume (and the queries,
  // clbCommDestroy, clbCommAbort) is refused until clbCommResume.
  std::atomic<bool> suspended{false};
  // clbCommRevoke: aborted too (its calls ended, the peers told), but a later call is a usage
  // refusal that says to shrink or destroy it.
  std::atomic<bool> revoked{false};
  clb::VersionInfo versions{};  // what this rank puts in the bootstrap table (init)
  clb::AgreedSettings agreed{};
  // The call in progress, 0 when none: (seq when it began << 8) | its Collective or Call. A call
  // takes it with one compare-and-swap and gives it back with one store; a call from a second
  // thread meanwhile is refused (clbInvalidUsage) without touching anything else. No lock is held
  // across the call, so clbCommAbort and the status queries never wait for it.
  std::atomic<uint64_t> inCall{0};
  std::atomic<int> lastAlgo{clbAlgoNone};
  // The transport (clb::Transport: ring, peer health, failure notices), nranks > 1 only;
  // `transport` says which one it is, and `carrier` points at it.
  std::unique_ptr<clb::Transport> ownedCarrier;
  // PreMulSum (core/premul.h) on host buffers, under the call like every use: the scratch for
  // scaled inputs (reduceScatter, reduce's other ranks), in mem.host, made at the first such call
  // (on device buffers DeviceCommContext::scaler). clbCommTrim and clbCommDestroy free it.
  std::unique_ptr<char[]> preMulHost;
  size_t preMulHostBytes = 0;
  std::string info;

  ~clbComm() override;
  clbResult_t checkWait(int64_t startMs, const char* what, int peer) override;
  // The communicator cannot go on; `code` and the thread's last error say why (the first call wins).
  void markFailed(clbResult_t code = clbInternalError) override;
  // A collective on host buffers for the device runtime (DeviceCommContext::hostCollective):
  // core/collectives.cc.
  clbResult_t hostCollective(uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                             clbRedOp_t op, int root) override;
  // clbCommGetAsyncError: what has gone wrong without a call (abort, an earlier failure, a device
  // wait that timed out, a peer that failed, aborted or died), with the message; any thread.
  clbResult_t asyncStatus();
  // clbAborted / clbInvalidUsage with the message users see once the communicator is unusable.
  clbResult_t checkUsable() const;
  // clbInvalidUsage saying so once clbCommRevoke was called (the calls that checkUsable does not
  // guard: trim, register, suspend and resume).
  clbResult_t refuseIfRevoked() const;
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
// (finishInit). `joinWhenRefused`: a configuration refused (clbInvalidArgument) with nranks > 1
// gives a communicator with the defaults that joins the bootstrap only to fail every rank at once
// (clbCommInitRank; a split checks its configurations before, over its parent).
clbResult_t newComm(int rank, int nranks, const clbConfig_t* config, std::unique_ptr<clbComm>* out,
                    bool joinWhenRefused = false);
Bootstrap::TableCheck initTableCheck(clbComm* c);
clbResult_t finishInit(clbComm* c);

// clbInvalidArgument for a NULL communicator, or one that is not alive in this process (destroyed
// already, or never made), with the message every call gives; nothing of it is read.
clbResult_t checkComm(clbComm* c);
// A call this rank refused for its arguments, or for what they ask that this rank cannot do
// (`rc`: clbInvalidArgument, clbUnsupported, clbOutOfMemory, clbSystemError; the thread's last
// error saying why), is a call its peers make and would wait for until their timeout. So where
// `c` is a live communicator with peers, such a refusal fails it here and tells the peers at once
// (Transport::announce, every transport): their waits end with clbRemoteError naming this rank,
// `call` ("allReduce", "clbSend") and the reason, and the message returned here says so. A failure
// midway, which marked c failed already, passes unchanged. `code`: the call's Collective or PeerCall
// (a refused collective takes its number: the peers finish the calls before it); `held`: whether
// this thread holds c's call (CallScope) already, else it is taken here, and while another thread
// is in a call on c the refusal is that usage refusal instead (clbInvalidUsage, nothing changes).
// Other results pass unchanged: a usage refusal (clbInvalidUsage) changes nothing, and a failure
// midway or an abort was told already.
clbResult_t refuseArguments(clbComm* c, clbResult_t rc, const char* call, uint32_t code, bool held,
                            bool numbered = false);
// The same for a refusal of any code `rc` (a group's end that runs nothing, whatever the reason,
// leaves the peers of its calls waiting).
clbResult_t tellRefusal(clbComm* c, clbResult_t rc, const char* call, uint32_t code, bool held, bool numbered = false);
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

}  // namespace clb
