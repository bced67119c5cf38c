// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "core/error.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace clb {
namespace {

thread_local std::string tlsError;
std::atomic<int> gLogLevel{-1};

int levelFromEnv() {
  const char* v = std::getenv("COLIBRI_LOG_LEVEL");
  if (!v) return clbLogWarn;
  static const char* names[] = {"off", "error", "warn", "info", "debug"};
  for (int i = 0; i < 5; i++)
    if (strcasecmp(v, names[i]) == 0) return i;
  return clbLogWarn;
}

std::string vformat(const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  return buf;
}

}  // namespace

clbResult_t setError(clbResult_t result, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tlsError = vformat(fmt, ap);
  va_end(ap);
  CLB_DEBUG("error %s: %s", clbGetErrorString(result), tlsError.c_str());
  return result;
}

clbResult_t setSysError(int errnum, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tlsError = vformat(fmt, ap);
  va_end(ap);
  char num[64];
  snprintf(num, sizeof num, " (errno %d)", errnum);
  tlsError += ": ";
  tlsError += strerror(errnum);
  tlsError += num;
  return clbSystemError;
}

void appendBreadcrumb(const char* file, int line) {
  // Keep messages readable: at most a handful of breadcrumbs.
  if (tlsError.size() > 2048) return;
  const char* base = strstr(file, "src/");
  char buf[256];
  snprintf(buf, sizeof buf, "\n  at %s:%d", base ? base + 4 : file, line);
  tlsError += buf;
}

void clearError() { tlsError.clear(); }
const std::string& lastError() { return tlsError; }

int logLevel() {
  int l = gLogLevel.load(std::memory_order_relaxed);
  if (l < 0) {
    l = levelFromEnv();
    gLogLevel.store(l, std::memory_order_relaxed);
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
  static const char* tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG"};
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  fprintf(stderr, "%02d:%02d:%02d.%03ld colibri %s [pid %d] %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
          ts.tv_nsec / 1000000, tags[level < 0 ? 0 : level > 4 ? 4 : level], (int)getpid(), msg);
}

}  // namespace clb
