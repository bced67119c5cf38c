// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Linked into libcolibri_verbs.so only: the few core functions the verbs code calls (errors,
// logging, environment flags), implemented over the clbNetCore_v1_t the core gives at
// init. So a plugin's error lands in the calling thread's last error of the core
// (clbGetLastError) and its logs in the core's sink, and the plugin has no state of its own for
// either. In libcolibri.so (and the unit tests) the core's own definitions are used instead.
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include <strings.h>

#include "colibri/net_plugin.h"
#include "base/config.h"
#include "base/error.h"
#include "bootstrap/net.h"
#include "transport/channel.h"

namespace clb {

namespace {

const clbNetCore_v1_t* gCore = nullptr;
thread_local std::string tlsCopy;   // lastError's std::string: a copy of the core's text
thread_local std::string tlsLocal;  // before init (no core yet)

std::string vformat(const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  return buf;
}

clbResult_t put(clbResult_t result, const std::string& text) {
  if (gCore) return gCore->setError(result, text.c_str());
  tlsLocal = text;
  return result;
}

}  // namespace

void setPluginCore(const clbNetCore_v1_t* core) { gCore = core; }

clbResult_t setError(clbResult_t result, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return put(result, s);
}

clbResult_t setSysError(int errnum, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  appendErrno(&s, errnum);
  return put(clbSystemError, s);
}

void appendBreadcrumb(const char* file, int line) {
  if (gCore) gCore->breadcrumb(file, line);
}

void clearError() { put(clbSuccess, std::string()); }

const std::string& lastError() {
  tlsCopy = gCore ? gCore->lastError() : tlsLocal;
  return tlsCopy;
}

int logLevel() { return gCore ? gCore->logLevel() : clbLogWarn; }

void setLogLevelIfLower(int) {}  // the threshold is the core's

void log(int level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  if (gCore)
    gCore->log(level, s.c_str());
  else
    fprintf(stderr, "colibri verbs plugin: %s\n", s.c_str());
}

bool envFlag(const char* name, bool dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  return strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

// VerbsChannel::waitRecv (the RingChannel entry, which the plugin's C entries do not use: they
// return the tag and the core compares it with checkTag, in the core's words). A plain
// comparison here keeps the plugin free of the core's call descriptions.
clbResult_t checkTag(const MsgTag& got, const MsgTag& expect, int fromRank, int myRank) {
  if (got.op == expect.op && got.index == expect.index && got.bytes == expect.bytes) return clbSuccess;
  return setError(clbRemoteError,
                  "rank %d: the message from rank %d is not the one expected (message %llu of %llu "
                  "bytes, expected %llu of %llu)",
                  myRank, fromRank, (unsigned long long)got.index, (unsigned long long)got.bytes,
                  (unsigned long long)expect.index, (unsigned long long)expect.bytes);
}

}  // namespace clb
