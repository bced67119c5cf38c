// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// createTransport: the one place that knows every transport (see transport.h).
#include "transport/transport.h"

#include <vector>

#include "bootstrap/agree.h"
#include "transport/net/net_plugin.h"
#include "transport/shm/shm.h"
#include "transport/socket/socket.h"

namespace clb {

clbResult_t Transport::waitPeers(uint64_t, int64_t, const char*, int, const std::vector<int>&) {
  return setError(clbInternalError, "waitPeers on a transport without point-to-point channels");
}

clbResult_t createTransport(CommContext* c, std::unique_ptr<Transport>* out) {
  const auto& peers = c->boot.peers();
  c->allOnOneHost = true;
  int other = -1;
  for (int r = 0; r < c->nranks; r++)
    if (peers[r].hostHash != peers[0].hostHash) {
      c->allOnOneHost = false;
      other = r;
      break;
    }
  c->transport = resolveTransport(c->cfg.transport, c->allOnOneHost);
  if (c->transport == clbTransportShm && !c->allOnOneHost)
    return setError(clbInvalidUsage,
                    "transport shm needs every rank on one host, but rank 0 is on %s and rank %d on %s: use "
                    "transport auto or socket",
                    peers[0].hostname, other, peers[other].hostname);
  if (c->cfg.algorithm == clbAlgoDirect && c->transport != clbTransportShm && c->nranks > 1)
    return setError(clbInvalidUsage,
                    "algorithm direct needs the shm transport (all ranks on one host): use algorithm auto or ring");
  // The ring listener: kept, for the point-to-point connections of ranks that share no memory
  // (their acceptor starts now) and for clbCommShrink's exchange among the survivors
  // (Bootstrap::gatherAmong, which starts the acceptor of shm's ranks when it needs it).
  if (c->nranks == 1)
    c->boot.closeListener();
  else if (c->transport != clbTransportShm)
    CLB_CHECK(c->boot.startPeerAcceptor());
  if (c->nranks == 1) return clbSuccess;
  if (c->transport == clbTransportShm) {
    auto shm = std::make_unique<ShmTransport>(c);
    CLB_CHECK(shm->init());
    *out = std::move(shm);
  } else if (c->transport == clbTransportVerbs) {
    // The network plugin (libcolibri_verbs.so): its channel, with the socket transport's failure
    // notices on the bootstrap connections.
    // Every rank learns whether every rank has it, so that none waits in the plugin's exchanges
    // for a rank that could not load it.
    // Also whether each rank's plugin has point-to-point channels: the pairs use them only where
    // every rank's has (an older plugin on one host sends every pair over TCP, all ranks alike).
    const clbNetPlugin_v1_t* plugin = nullptr;
    clbResult_t rc = loadNetPlugin("verbs", &plugin);
    const std::string myError = rc != clbSuccess ? lastError() : std::string();
    struct Status {
      int32_t rc, peers;
    };
    std::vector<Status> status(c->nranks, Status{0, 0});
    status[c->rank] = Status{rc, rc == clbSuccess && netPluginHasPeers(plugin) ? 1 : 0};
    CLB_CHECK(c->boot.allGather(status.data(), sizeof(Status)));
    if (rc != clbSuccess) return setError(rc, "%s", myError.c_str());
    int without = -1;  // a rank whose plugin has no point-to-point channels
    for (int p = 0; p < c->nranks; p++) {
      if (status[p].rc != clbSuccess)
        return setError(clbRemoteError,
                        "rank %d could not load the verbs network plugin (see its error), so rank %d "
                        "cannot use transport verbs either",
                        p, c->rank);
      if (!status[p].peers && without < 0) without = p;
    }
    if (without >= 0 && c->rank == 0)
      CLB_WARN(
          "the verbs plugin of rank %d has no point-to-point channels (an older libcolibri_verbs.so): every "
          "rank sends point-to-point messages over TCP (one connection per pair); the collectives use RDMA",
          without);
    std::unique_ptr<NetRingChannel> ring;
    std::string describe;
    CLB_CHECK(connectNetChannel(c, plugin, nullptr, &ring, &describe));
    *out = std::make_unique<LinkTransport>(c, clbTransportVerbs, std::move(ring), std::move(describe),
                                           without < 0 ? plugin : nullptr);
  } else if (c->transport == clbTransportSocket) {
    *out = std::make_unique<LinkTransport>(
        c, clbTransportSocket, std::make_unique<SocketRingChannel>(c, c->boot.dataNext(), c->boot.dataPrev()));
  } else {  // a clbTransport_t this factory was not taught (validateConfig lets only known ones in)
    return setError(clbInternalError, "createTransport has no branch for transport %s (%d)",
                    clbTransportName(c->transport), c->transport);
  }
  return clbSuccess;
}

}  // namespace clb
