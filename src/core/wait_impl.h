// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
// Implementation of clb::waitUntil (included by comm.h).
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "core/net.h"

namespace clb {

inline int64_t nowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Futex on the low 32 bits of a 64-bit counter (little endian): any increment changes them.
inline void futexWaitLow(std::atomic<uint64_t>* word, uint32_t seen, long timeoutNs) {
  struct timespec ts{0, timeoutNs};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
inline void futexWakeAll(std::atomic<uint64_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}
// Publishes a new counter value and wakes sleepers.
inline void storeAndWake(std::atomic<uint64_t>* word, uint64_t v, std::atomic<uint32_t>* waiters) {
  word->store(v, std::memory_order_seq_cst);
  if (waiters->load(std::memory_order_seq_cst) != 0) futexWakeAll(word);
}

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
