// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Errors and logging. A failing call records a message in the calling thread's last-error slot
// (clbGetLastError) and returns a clbResult_t. CLB_CHECK propagates a failure and appends a
// breadcrumb ("  at file:line"), so the message shows the path the failure took.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "colibri/colibri.h"

namespace clb {

// Replaces the thread's last-error message; returns `result` for `return setError(...)`.
clbResult_t setError(clbResult_t result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Like setError, with ": <strerror(errnum)> (errno N)" appended.
clbResult_t setSysError(int errnum, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// What setSysError appends to its message (shared with the verbs plugin's own setSysError).
inline void appendErrno(std::string* text, int errnum) {
  char num[64];
  snprintf(num, sizeof num, " (errno %d)", errnum);
  *text += ": ";
  *text += strerror(errnum);
  *text += num;
}
void appendBreadcrumb(const char* file, int line);
void clearError();
const std::string& lastError();
// A binding's reason for refusing a call (clbCommRefuse, clbCommSplitRefuse, clbGroupRefuse),
// copied before the refusal clears this thread's last error (which it may be): at most `limit`
// characters; a NULL or empty one is "(no reason given)", and still refuses (the peers would wait
// for the call otherwise).
inline std::string refusalReason(const char* reason, size_t limit) {
  return reason && *reason ? std::string(reason, strnlen(reason, limit)) : std::string("(no reason given)");
}

// Logging (log.cc): the process-wide threshold, and one line to the sink (stderr, or the callback
// of clbSetLogCallback). Call through CLB_LOG, which formats nothing above the threshold.
int logLevel();
void setLogLevelIfLower(int level);
void log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace clb

#define CLB_CHECK(call)                            \
  do {                                             \
    clbResult_t clb_rc_ = (call);                  \
    if (clb_rc_ != clbSuccess) {                   \
      ::clb::appendBreadcrumb(__FILE__, __LINE__); \
      return clb_rc_;                              \
    }                                              \
  } while (0)

#define CLB_LOG(level, ...)                                           \
  do {                                                                \
    if (::clb::logLevel() >= (level)) ::clb::log(level, __VA_ARGS__); \
  } while (0)
#define CLB_WARN(...) CLB_LOG(clbLogWarn, __VA_ARGS__)
#define CLB_INFO(...) CLB_LOG(clbLogInfo, __VA_ARGS__)
#define CLB_DEBUG(...) CLB_LOG(clbLogDebug, __VA_ARGS__)
