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

template <class Pred>
clbResult_t waitUntil(clbComm* comm, Pred pred, std::atomic<uint64_t>* word,
                      std::atomic<uint32_t>* waiters, const char* what, int peer) {
  if (pred()) return clbSuccess;
  for (int i = 0; i < 512; i++) {
    cpuRelax();
    if (pred()) return clbSuccess;
  }
  const int64_t start = nowMs();
  for (int i = 0; i < 64; i++) {
    sched_yield();
    if (pred()) return clbSuccess;
  }
  for (;;) {
    clbResult_t rc = comm->checkWait(start, what, peer);
    if (rc != clbSuccess) return rc;
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
