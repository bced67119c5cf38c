// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Transport verbs at communicator init (see verbs_ring.h).
#include "transport/verbs/verbs_ring.h"

#include "core/config.h"
#include "core/error.h"
#include "transport/net_plugin.h"
#include "transport/socket.h"
#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/verbs_connect.h"

namespace clb {

using verbs::VerbsApi;
using verbs::VerbsChannel;
using verbs::VerbsOptions;

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
  const VerbsApi* api = nullptr;
  clbResult_t rc = verbs::selectVerbsApi(&api);
  const clbNetHost_v1_t host = netHostFor(c);
  std::unique_ptr<VerbsChannel> ch;
  CLB_CHECK(verbs::connectVerbs(rc == clbSuccess ? api : nullptr, rc, host, device, &ch, describe));
  *out = std::move(ch);
  return clbSuccess;
}

}  // namespace clb
