// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
// Implementation of clb::waitUntil (included by comm.h): a communicator's wait, with its
// timeout and abort checks, over the clocks and futex of base/clock.h.
#pragma once

#include <sched.h>

#include "base/clock.h"

namespace clb {

template <class Pred, class Tick>
clbResult_t waitUntil(clbComm* comm, Pred pred, std::atomic<uint64_t>* word,
                      std::atomic<uint32_t>* waiters, const char* what, int peer, Tick tick) {
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
      struct timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
    if (pred()) return clbSuccess;
  }
}

}  // namespace clb
