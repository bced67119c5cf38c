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
#include "transport/socket.h"
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

bool peermemLoaded() {
  bool found = false;
  if (FILE* f = fopen("/proc/modules", "r")) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "nvidia_peermem ", 15) == 0 || strncmp(line, "nv_peer_mem ", 12) == 0) found = true;
    fclose(f);
  }
  return found;
}

std::string gpuMemoryPlan(const VerbsApi& api) {
  const char* env = getenv("COLIBRI_VERBS_GPU_MEMORY");
  std::string mode = env && *env ? env : "auto";
  if (mode == "host") return "device buffers staged through pinned host memory (COLIBRI_VERBS_GPU_MEMORY=host)";
  const bool peermem = peermemLoaded();
  std::string s = "device buffers: GPUDirect RDMA, decided at the first device call (";
  if (mode == "auto" || mode == "dmabuf")
    s += api.regDmabufMr ? "dma-buf if the GPU driver supports it" : "no dma-buf: libibverbs lacks ibv_reg_dmabuf_mr";
  if (mode == "auto") s += ", then ";
  if (mode == "auto" || mode == "peermem") s += peermem ? "nvidia-peermem (loaded)" : "nvidia-peermem (not loaded)";
  if (mode == "auto") s += ", else pinned host memory with a warning";
  return s + ")";
}

void verbsOptionsFromConfig(const clbConfig_t& cfg, VerbsOptions* o) {
  o->deviceName = cfg.verbsDevice[0] ? cfg.verbsDevice : nullptr;
  o->port = (uint8_t)cfg.verbsPort;
  o->gidIndex = cfg.verbsGidIndex;
  o->trafficClass = (uint8_t)cfg.verbsTrafficClass;
  o->timeout = (uint8_t)cfg.verbsTimeout;
  o->retryCnt = (uint8_t)cfg.verbsRetryCount;
  o->qpsPerConnection = cfg.verbsQpsPerConnection;
  // Messages in flight per link, as on the other transports: K receive slots (and K send staging
  // slots) of one chunk each, so registered memory follows pipelineDepth x chunkBytes and stays
  // under the staging cap wherever the socket transport's does.
  o->slots = cfg.pipelineDepth < 2 ? 2 : cfg.pipelineDepth;
}

clbResult_t createVerbsRing(clbComm* c, std::unique_ptr<RingChannel>* out, std::string* describe) {
  return createVerbsChannel(c, nullptr, out, describe);
}

clbResult_t createVerbsTransport(clbComm* c, std::unique_ptr<Transport>* out) {
  std::unique_ptr<RingChannel> ring;
  std::string describe;
  CLB_CHECK(createVerbsRing(c, &ring, &describe));
  *out = std::make_unique<LinkTransport>(c, clbTransportVerbs, std::move(ring), std::move(describe));
  return clbSuccess;
}

clbResult_t createVerbsChannel(clbComm* c, const verbs::DeviceMemory* device, std::unique_ptr<RingChannel>* out,
                               std::string* describe) {
  const int n = c->nranks, r = c->rank;
  const VerbsApi* api = nullptr;
  VerbsOptions o;
  verbsOptionsFromConfig(c->cfg, &o);  // validated by clbCommInitRank; c->cfg outlives the channel
  o.device = device;
  std::unique_ptr<VerbsChannel> ch;
  clbResult_t rc = verbs::selectVerbsApi(&api);
  if (rc == clbSuccess) rc = VerbsChannel::create(api, o, c, &ch);
  if (rc == clbSuccess && device) rc = ch->checkDeviceMemory();
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

  char b[512], qps[48] = "";
  ibv_context* ctx = ch->context();
  const char* dev = ctx && ctx->device ? api->getDeviceName(ctx->device) : "?";
  if (o.qpsPerConnection > 1) snprintf(qps, sizeof qps, ", %d queue pairs per link", o.qpsPerConnection);
  // The GPU memory path is said here, at init, not only at the first device call.
  snprintf(b, sizeof b,
           "verbs%s: %s port %d, GID index %d, path MTU %d, traffic class %d, timeout %d, retry count %d%s%s%s",
           strcmp(api->impl, "emulator") == 0 ? " (emulator)" : "", dev ? dev : "?", (int)o.port, ch->gidIndex(),
           verbs::mtuBytes(ch->pathMtu()), (int)o.trafficClass, (int)o.timeout, (int)o.retryCnt, qps,
           device ? "; GPU memory registered through " : "; ", device ? device->name : gpuMemoryPlan(*api).c_str());
  *describe = b;
  *out = std::move(ch);
  return clbSuccess;
}

}  // namespace clb
