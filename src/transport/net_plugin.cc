// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The core's side of the network plugin interface (see net_plugin.h).
#include "transport/net_plugin.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace clb {

namespace {

clbResult_t coreSetError(clbResult_t result, const char* text) { return setError(result, "%s", text ? text : ""); }
const char* coreLastError() { return lastError().c_str(); }
void coreBreadcrumb(const char* file, int line) { appendBreadcrumb(file, line); }
void coreLog(int level, const char* text) { log(level, "%s", text ? text : ""); }
int coreLogLevel() { return logLevel(); }

const clbNetCore_v1_t kCore = {CLB_NET_PLUGIN_VERSION, sizeof(clbNetCore_v1_t), coreSetError, coreLastError,
                             coreBreadcrumb, coreLog, coreLogLevel};

clbComm* commOf(void* ctx) { return static_cast<clbComm*>(ctx); }

clbResult_t hostAllGather(void* ctx, void* buf, size_t bytesPerRank) {
  return commOf(ctx)->boot.allGather(buf, bytesPerRank);
}
clbResult_t hostCheckWait(void* ctx, int64_t startMs, const char* what, int peer) {
  return commOf(ctx)->checkWait(startMs, what, peer);
}
void hostAccount(void* ctx, int64_t hostDelta, int64_t deviceDelta) {
  clbComm* c = commOf(ctx);
  if (hostDelta) c->mem.addHost(hostDelta);
  if (deviceDelta) c->mem.addDevice(deviceDelta);
}
// The options a network plugin may ask for, by their clbConfig_t names.
int hostOption(void* ctx, const char* name, char* buf, size_t len) {
  const clbConfig_t& cfg = commOf(ctx)->cfg;
  if (!name || !buf || !len) return -1;
  int n;
  if (strcmp(name, "verbsDevice") == 0) n = snprintf(buf, len, "%s", cfg.verbsDevice);
  else if (strcmp(name, "verbsPort") == 0) n = snprintf(buf, len, "%d", cfg.verbsPort);
  else if (strcmp(name, "verbsGidIndex") == 0) n = snprintf(buf, len, "%d", cfg.verbsGidIndex);
  else if (strcmp(name, "verbsTrafficClass") == 0) n = snprintf(buf, len, "%d", cfg.verbsTrafficClass);
  else if (strcmp(name, "verbsTimeout") == 0) n = snprintf(buf, len, "%d", cfg.verbsTimeout);
  else if (strcmp(name, "verbsRetryCount") == 0) n = snprintf(buf, len, "%d", cfg.verbsRetryCount);
  else if (strcmp(name, "verbsQpsPerConnection") == 0) n = snprintf(buf, len, "%d", cfg.verbsQpsPerConnection);
  else if (strcmp(name, "pipelineDepth") == 0) n = snprintf(buf, len, "%d", cfg.pipelineDepth);
  else if (strcmp(name, "chunkBytes") == 0) n = snprintf(buf, len, "%lld", (long long)cfg.chunkBytes);
  else return -1;
  return n >= 0 && (size_t)n < len ? 0 : -1;
}

}  // namespace

const clbNetCore_v1_t* netCore() { return &kCore; }

clbNetHost_v1_t netHostFor(clbComm* c) {
  clbNetHost_v1_t h{};
  h.version = CLB_NET_PLUGIN_VERSION;
  h.size = sizeof(clbNetHost_v1_t);
  h.ctx = c;
  h.rank = c->rank;
  h.nranks = c->nranks;
  h.timeoutMs = c->cfg.timeoutMs;
  h.stagingCapBytes = c->cfg.stagingCapBytes;
  h.slots = c->cfg.pipelineDepth < 2 ? 2 : c->cfg.pipelineDepth;
  h.allGather = hostAllGather;
  h.checkWait = hostCheckWait;
  h.account = hostAccount;
  h.option = hostOption;
  return h;
}

}  // namespace clb
