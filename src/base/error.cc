// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "base/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace clb {
namespace {

thread_local std::string tlsError;

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
  appendErrno(&tlsError, errnum);
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

}  // namespace clb
