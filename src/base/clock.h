// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Time and waiting without a communicator: the monotonic clocks every timeout is measured on, the
// spin-wait hint, and the futex on a 64-bit counter that the host path's waits sleep on.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace clb {

// Monotonic time in milliseconds: every deadline (deadlineMs arguments) is on this clock.
inline int64_t nowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

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
  struct timespec ts {
    0, timeoutNs
  };
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

}  // namespace clb
