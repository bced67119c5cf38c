// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Transport verbs at communicator init (see verbs_ring.h).
#include "transport/verbs/verbs_ring.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "transport/verbs/verbs_channel.h"

namespace clb {

using verbs::VerbsApi;
using verbs::VerbsChannel;
using verbs::VerbsConnInfo;
using verbs::VerbsOptions;

namespace {

// What every rank contributes to the connection exchange.
struct Exchange {
  int32_t status;  // clbResult_t of this rank's set-up
  int32_t pad;
  VerbsConnInfo send, recv;
};

}  // namespace

void verbsOptionsFromConfig(const clbConfig_t& cfg, VerbsOptions* o) {
  o->deviceName = cfg.verbsDevice[0] ? cfg.verbsDevice : nullptr;
  o->port = (uint8_t)cfg.verbsPort;
  o->gidIndex = cfg.verbsGidIndex;
  o->trafficClass = (uint8_t)cfg.verbsTrafficClass;
  o->timeout = (uint8_t)cfg.verbsTimeout;
  o->retryCnt = (uint8_t)cfg.verbsRetryCount;
  // Messages in flight per link, as on the other transports: K receive slots (and K send staging
  // slots) of one chunk each, so registered memory follows pipelineDepth x chunkBytes and stays
  // under the staging cap wherever the socket transport's does.
  o->slots = cfg.pipelineDepth < 2 ? 2 : cfg.pipelineDepth;
}

clbResult_t createVerbsRing(clbComm* c, std::unique_ptr<RingChannel>* out, std::string* describe) {
  const int n = c->nranks, r = c->rank;
  const VerbsApi* api = nullptr;
  VerbsOptions o;
  verbsOptionsFromConfig(c->cfg, &o);  // validated by clbCommInitRank; c->cfg outlives the channel
  std::unique_ptr<VerbsChannel> ch;
  clbResult_t rc = verbs::selectVerbsApi(&api);
  if (rc == clbSuccess) rc = VerbsChannel::create(api, o, c, &ch);
  std::string myError = rc != clbSuccess ? lastError() : std::string();

  // Every rank learns every rank's outcome and infos, so that no rank waits for a failed one.
  std::vector<Exchange> all(n);
  memset(all.data(), 0, n * sizeof(Exchange));
  all[r].status = rc;
  if (ch) {
    all[r].send = ch->sendSideInfo();
    all[r].recv = ch->recvSideInfo();
  }
  CLB_CHECK(c->boot.allGather(all.data(), sizeof(Exchange)));
  if (rc != clbSuccess) return setError(rc, "%s", myError.c_str());
  for (int p = 0; p < n; p++)
    if (all[p].status != clbSuccess)
      return setError(clbRemoteError,
                      "rank %d could not set up the verbs transport (see its error), so rank %d cannot use it "
                      "either", p, r);

  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  rc = ch->connect(all[next].recv, all[prev].send);
  myError = rc != clbSuccess ? lastError() : std::string();
  std::vector<int32_t> status(n, 0);
  status[r] = rc;
  CLB_CHECK(c->boot.allGather(status.data(), sizeof(int32_t)));
  if (rc != clbSuccess) return setError(rc, "%s", myError.c_str());
  for (int p = 0; p < n; p++)
    if (status[p] != clbSuccess)
      return setError(clbRemoteError,
                      "rank %d could not connect its verbs queue pairs (see its error), so rank %d cannot use "
                      "the verbs transport either", p, r);

  char b[384];
  ibv_context* ctx = ch->context();
  const char* dev = ctx && ctx->device ? api->getDeviceName(ctx->device) : "?";
  // The GPU memory path is said here, at init, not only at the first device call.
  snprintf(b, sizeof b,
           "verbs%s: %s port %d, GID index %d, path MTU %d, traffic class %d, timeout %d, retry count %d; device "
           "buffers staged through pinned host memory (GPUDirect RDMA not implemented yet)",
           strcmp(api->impl, "emulator") == 0 ? " (emulator)" : "", dev ? dev : "?", (int)o.port, ch->gidIndex(),
           verbs::mtuBytes(ch->pathMtu()), (int)o.trafficClass, (int)o.timeout, (int)o.retryCnt);
  *describe = b;
  *out = std::move(ch);
  return clbSuccess;
}

}  // namespace clb
