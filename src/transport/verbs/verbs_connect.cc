// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// One rank's verbs channel, opened and connected through the plugin host (see verbs_connect.h).
#include "transport/verbs/verbs_connect.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace clb {
namespace verbs {

namespace {

// What every rank contributes to the connection exchange.
struct Exchange {
  int32_t status;  // clbResult_t of this rank's set-up
  int32_t pad;
  VerbsConnInfo send, recv;
};

clbResult_t intOption(const clbNetHost_v1_t& host, const char* name, long lo, long hi, long* out) {
  char b[64];
  if (!host.option || host.option(host.ctx, name, b, sizeof b) != 0)
    return setError(clbInternalError, "verbs: the core does not give the option %s", name);
  char* end = nullptr;
  errno = 0;
  long v = strtol(b, &end, 10);
  if (errno || end == b || *end || v < lo || v > hi)
    return setError(clbInvalidArgument, "verbs: option %s is '%s', not an integer in %ld..%ld", name, b, lo, hi);
  *out = v;
  return clbSuccess;
}

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

std::string gpuMemoryPlan(const VerbsApi& api, const std::string& mode) {
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

clbResult_t verbsOptionsFromHost(const clbNetHost_v1_t& host, VerbsOptions* o, std::string* deviceName) {
  char dev[CLB_VERBS_DEVICE_BYTES + 1] = "";
  if (!host.option || host.option(host.ctx, "verbsDevice", dev, sizeof dev) != 0)
    return setError(clbInternalError, "verbs: the core does not give the option verbsDevice");
  *deviceName = dev;
  o->deviceName = deviceName->empty() ? nullptr : deviceName->c_str();
  long v;
  CLB_CHECK(intOption(host, "verbsPort", 1, 255, &v));
  o->port = (uint8_t)v;
  CLB_CHECK(intOption(host, "verbsGidIndex", -1, 1 << 16, &v));
  o->gidIndex = (int)v;
  CLB_CHECK(intOption(host, "verbsTrafficClass", 0, 255, &v));
  o->trafficClass = (uint8_t)v;
  CLB_CHECK(intOption(host, "verbsTimeout", 0, 31, &v));
  o->timeout = (uint8_t)v;
  CLB_CHECK(intOption(host, "verbsRetryCount", 0, 7, &v));
  o->retryCnt = (uint8_t)v;
  CLB_CHECK(intOption(host, "verbsQpsPerConnection", 1, kVerbsMaxQps, &v));
  o->qpsPerConnection = (int)v;
  // Messages in flight per link, as on the other transports: K receive slots (and K send staging
  // slots) of one chunk each, so registered memory follows pipelineDepth x chunkBytes and stays
  // under the staging cap wherever the socket transport's does.
  o->slots = host.slots < 2 ? 2 : host.slots;
  return clbSuccess;
}

clbResult_t connectVerbs(const VerbsApi* api, clbResult_t rc, const clbNetHost_v1_t& host, const DeviceMemory* device,
                         std::unique_ptr<VerbsChannel>* out, std::string* describe) {
  const int n = host.nranks, r = host.rank;
  VerbsOptions o;
  std::string deviceName;
  if (rc == clbSuccess && !api) rc = setError(clbInternalError, "verbs: no VerbsApi table");
  if (rc == clbSuccess) rc = verbsOptionsFromHost(host, &o, &deviceName);
  o.device = device;
  std::unique_ptr<VerbsChannel> ch;
  if (rc == clbSuccess) rc = VerbsChannel::create(api, o, &host, &ch);
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
  CLB_CHECK(host.allGather(host.ctx, all.data(), sizeof(Exchange)));
  if (rc != clbSuccess) return setError(rc, "%s", myError.c_str());
  for (int p = 0; p < n; p++)
    if (all[p].status != clbSuccess)
      return setError(clbRemoteError,
                      "rank %d could not set up the verbs transport (see its error), so rank %d cannot use it "
                      "either",
                      p, r);

  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  rc = ch->connect(all[next].recv, all[prev].send);
  myError = rc != clbSuccess ? lastError() : std::string();
  std::vector<int32_t> status(n, 0);
  status[r] = rc;
  CLB_CHECK(host.allGather(host.ctx, status.data(), sizeof(int32_t)));
  if (rc != clbSuccess) return setError(rc, "%s", myError.c_str());
  for (int p = 0; p < n; p++)
    if (status[p] != clbSuccess)
      return setError(clbRemoteError,
                      "rank %d could not connect its verbs queue pairs (see its error), so rank %d cannot use "
                      "the verbs transport either",
                      p, r);

  char b[512], qps[48] = "";
  ibv_context* ctx = ch->context();
  const char* dev = ctx && ctx->device ? api->getDeviceName(ctx->device) : "?";
  if (o.qpsPerConnection > 1) snprintf(qps, sizeof qps, ", %d queue pairs per link", o.qpsPerConnection);
  // The GPU memory path is said here, at init, not only at the first device call. Which library
  // serves the device is not named: the device's name says it (colibri_emu0 for the tests' emulator).
  char gpuMemory[32] = "auto";  // a core that does not give the option: the default
  if (host.option && host.option(host.ctx, "verbsGpuMemory", gpuMemory, sizeof gpuMemory) != 0)
    snprintf(gpuMemory, sizeof gpuMemory, "auto");
  snprintf(b, sizeof b,
           "verbs: %s port %d, GID index %d, path MTU %d, traffic class %d, timeout %d, retry count %d%s%s%s",
           dev ? dev : "?", (int)o.port, ch->gidIndex(), mtuBytes(ch->pathMtu()), (int)o.trafficClass, (int)o.timeout,
           (int)o.retryCnt, qps, device ? "; GPU memory registered through " : "; ",
           device ? device->name : gpuMemoryPlan(*api, gpuMemory).c_str());
  *describe = b;
  *out = std::move(ch);
  return clbSuccess;
}

}  // namespace verbs
}  // namespace clb
