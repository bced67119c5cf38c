// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Logging (error.h declares log(), logLevel() and the CLB_LOG macros; colibri.h the C ABI). One
// process-wide threshold, and one sink: stderr, or the callback a binding installed.
//
// The callback is swapped while other threads may be calling it, and clbSetLogCallback promises
// that the previous one is no longer running when it returns (its `user` may be freed). Readers
// take no lock: each counts itself in one of two slots, picked by an epoch, while it uses the
// sink. The setter swaps the pointer, then twice advances the epoch and waits for the slot that
// was current to drain. A reader that saw the old sink counted itself before the swap, in one of
// the two slots, so one of the two waits sees it; readers that come during a wait count in the
// other slot, so no stream of new lines keeps a setter waiting.
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>
#include <thread>

#include "base/error.h"

namespace clb {
namespace {

std::atomic<int> gLogLevel{-1};

struct Sink {
  clbLogCallback_t fn;
  void* user;
};

std::atomic<const Sink*> gSink{nullptr};
std::atomic<uint32_t> gEpoch{0};
std::atomic<uint32_t> gReaders[2] = {{0}, {0}};
std::mutex gSetMutex;  // one setter at a time
// This thread runs the callback now: a line it emits meanwhile goes to stderr, not into the
// callback again, and clbSetLogCallback is refused (it would wait for itself).
thread_local bool tlsInCallback = false;

int levelFromEnv() {
  const char* v = std::getenv("COLIBRI_LOG_LEVEL");
  if (!v) return clbLogWarn;
  static const char* names[] = {"off", "error", "warn", "info", "debug"};
  for (int i = 0; i < 5; i++)
    if (strcasecmp(v, names[i]) == 0) return i;
  return clbLogWarn;
}

void writeStderr(int level, const char* msg) {
  static const char* tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG"};
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  fprintf(stderr, "%02d:%02d:%02d.%03ld colibri %s [pid %d] %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
          ts.tv_nsec / 1000000,
          tags[level < 0   ? 0
               : level > 4 ? 4
                           : level],
          (int)getpid(), msg);
}

// Hands the line to the installed callback; false if there is none (the caller writes it to stderr).
bool deliver(int level, const char* msg) {
  const uint32_t slot = gEpoch.load() & 1;
  gReaders[slot].fetch_add(1);
  const Sink* s = gSink.load();
  if (s) {
    tlsInCallback = true;
    try {
      s->fn(level, msg, s->user);
    } catch (...) {  // colibri.h forbids it; the line is lost, the process is not
    }
    tlsInCallback = false;
  }
  gReaders[slot].fetch_sub(1);
  return s != nullptr;
}

// Returns once every reader that might still use a sink swapped out before this call is done.
void waitForReaders() {
  for (int i = 0; i < 2; i++) {
    const uint32_t drained = gEpoch.fetch_add(1) & 1;
    while (gReaders[drained].load() != 0) std::this_thread::yield();
  }
}

}  // namespace

int logLevel() {
  int l = gLogLevel.load(std::memory_order_relaxed);
  if (l < 0) {
    l = levelFromEnv();
    int unset = -1;  // a clbSetLogLevel meanwhile wins over the environment
    if (!gLogLevel.compare_exchange_strong(unset, l, std::memory_order_relaxed)) l = unset;
  }
  return l;
}

void setLogLevelIfLower(int level) {
  // The most verbose level any communicator asked for wins: logging is process-wide.
  int cur = logLevel();
  while (level > cur && !gLogLevel.compare_exchange_weak(cur, level)) {
  }
}

void log(int level, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!tlsInCallback && gSink.load(std::memory_order_relaxed) && deliver(level, msg)) return;
  writeStderr(level, msg);
}

}  // namespace clb

extern "C" {

clbResult_t clbSetLogCallback(clbLogCallback_t callback, void* user) {
  clb::clearError();
  if (clb::tlsInCallback)
    return clb::setError(clbInvalidUsage,
                         "clbSetLogCallback was called from inside the log callback, which must not "
                         "call Colibri: install or remove the callback from another thread or after it returns");
  const clb::Sink* fresh = nullptr;
  if (callback) {
    fresh = new (std::nothrow) clb::Sink{callback, user};
    if (!fresh) return clb::setError(clbOutOfMemory, "cannot allocate the log callback's record");
  }
  std::lock_guard<std::mutex> g(clb::gSetMutex);
  const clb::Sink* old = clb::gSink.exchange(fresh);
  clb::waitForReaders();
  delete old;
  return clbSuccess;
}

clbResult_t clbSetLogLevel(int level) {
  clb::clearError();
  if (level < clbLogOff || level > clbLogDebug)
    return clb::setError(clbInvalidArgument, "log level %d is not a clbLogLevel_t: pass %d (off) .. %d (debug)", level,
                         clbLogOff, clbLogDebug);
  clb::gLogLevel.store(level);
  return clbSuccess;
}

clbResult_t clbGetLogLevel(int* level) {
  clb::clearError();
  if (!level) return clb::setError(clbInvalidArgument, "level (output) is NULL");
  *level = clb::logLevel();
  return clbSuccess;
}

}  // extern "C"
