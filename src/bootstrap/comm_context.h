// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the layers under the communicator (the algorithms, the transports, the device runtime)
// see of it: its rank and size, its configuration, its bootstrap, its memory accounts, its call
// counter, its transport, and the check every wait makes on its slow path. The communicator
// (core/comm.h, clbComm) is one; these layers take a CommContext (the device runtime its own
// DeviceCommContext, device/device_context.h, which is one too), never a clbComm, so that they do
// not depend on the layer above them (scripts/check-layers.sh).
//
// And the waiting discipline every blocking step goes through (waitUntil): spin, then yield,
// then sleep on a futex; abort, peer failure and timeout are checked on the slow path.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/call.h"
#include "base/clock.h"
#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "colibri/colibri.h"

namespace clb {

class Transport;
struct PeerDeviceMemory;

struct CommContext {
  CommContext() = default;
  CommContext(const CommContext&) = delete;
  CommContext& operator=(const CommContext&) = delete;
  virtual ~CommContext() = default;

  int rank = 0, nranks = 0;
  clbConfig_t cfg{};
  int transport = clbTransportAuto;  // resolved by the transport factory (createTransport)
  bool allOnOneHost = false;
  Bootstrap boot;
  MemAccount mem;
  // Collectives started on this communicator. Written only by the call that holds the
  // communicator (clbComm::inCall); atomic (relaxed, plain loads and stores) because every call
  // reads it before it tries to take the communicator, which, while another thread holds it, is
  // a read during that thread's writes.
  std::atomic<uint64_t> seq{0};
  // Point-to-point messages so far, per peer and direction: the operations (a send, or one peer's
  // part of an all-to-all) this rank sent to / received from each rank, numbered like `seq` is for
  // collectives. Sized at the first such call; only the pair itself counts alike, so these never
  // touch `seq`.
  std::vector<uint64_t> peerSent, peerRecvd;
  // Host memory a call holds only while it runs (the host copies of device buffers that
  // point-to-point moves through host memory): in mem too, but not staging, so not under its cap.
  std::atomic<int64_t> transientHost{0};
  // Point-to-point on device buffers between hosts (transport/channel.h): the GPU memory of the
  // channels in device mode (GPUDirect RDMA), made at the first such call over a network plugin
  // that has them; null before, and for good when it cannot be had
  // (DeviceCommContext::peerDeviceMemoryWhy). A channel holds it while it lives, so it may
  // outlive the device runtime.
  std::shared_ptr<PeerDeviceMemory> peerDeviceMemory;
  // The transport (ring, peer health, failure notices), nranks > 1 only, once init has made it;
  // the communicator owns it (clbComm::ownedCarrier).
  Transport* carrier = nullptr;

  // When set (ms, nowMs's clock): every wait ends then with clbTimeout, whatever the timeout. A
  // failed communicator's destroy sets it to deliver what its rank sent without waiting the whole
  // timeout on a peer that is alive but no longer receiving (Transport::close).
  std::atomic<int64_t> giveUpAtMs{0};
  // Slow-path checks while waiting: abort, peer failure or death (the carrier's notices), timeout.
  // `startMs` is when the wait began; `what` says what was awaited, for the message. `peer`: the
  // rank waited for (its close is an error too), -1 any rank (every close is an error),
  // kClosesAreFine: none in particular, and a peer that closed normally is not an error.
  static constexpr int kClosesAreFine = -2;
  virtual clbResult_t checkWait(int64_t startMs, const char* what, int peer) = 0;
};

// Waits until pred() is true. `word` is a shared 64-bit counter whose change may make pred true;
// `waiters` counts sleepers in the block that holds it (the writer wakes them). Either may be null
// (no futex: sleep briefly instead). `tick(waitedMs)` runs at every slow-path check (a warning
// about a long wait, say).
struct NoTick {
  void operator()(int64_t) const {}
};
template <class Pred, class Tick = NoTick>
clbResult_t waitUntil(CommContext* comm, Pred pred, std::atomic<uint64_t>* word, std::atomic<uint32_t>* waiters,
                      const char* what, int peer, Tick tick = Tick()) {
  if (pred()) return clbSuccess;
  // Phases by time, not by count (a pause instruction costs 10 to 150 cycles depending on the
  // CPU): spin ~20 us, then yield until ~300 us (lets oversubscribed peers run), then sleep on
  // the futex. A futex wake-up costs tens of microseconds, so small messages must not get there.
  const int64_t t0 = nowNs();
  while (nowNs() - t0 < 20000) {
    for (int i = 0; i < 32; i++) {
      cpuRelax();
      if (pred()) return clbSuccess;
    }
  }
  while (nowNs() - t0 < 300000) {
    sched_yield();
    if (pred()) return clbSuccess;
  }
  const int64_t start = nowMs();
  for (;;) {
    clbResult_t rc = comm->checkWait(start, what, peer);
    if (rc != clbSuccess) return rc;
    tick(nowMs() - start);
    if (word && waiters) {
      uint32_t seen = static_cast<uint32_t>(word->load(std::memory_order_seq_cst));
      waiters->fetch_add(1, std::memory_order_seq_cst);
      if (!pred()) futexWaitLow(word, seen, 2000000);  // 2 ms: bounded, so checks still run
      waiters->fetch_sub(1, std::memory_order_seq_cst);
    } else {
      struct timespec ts {
        0, 50000
      };
      nanosleep(&ts, nullptr);
    }
    if (pred()) return clbSuccess;
  }
}

}  // namespace clb
