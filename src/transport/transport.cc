// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// createTransport: the one place that knows every transport (see transport.h).
#include "transport/transport.h"

#include "transport/shm.h"
#include "transport/socket.h"
#include "transport/verbs/verbs_ring.h"

namespace clb {

clbResult_t createTransport(clbComm* c, std::unique_ptr<Transport>* out) {
  const auto& peers = c->boot.peers();
  c->allOnOneHost = true;
  int other = -1;
  for (int r = 0; r < c->nranks; r++)
    if (peers[r].hostHash != peers[0].hostHash) { c->allOnOneHost = false; other = r; break; }
  c->transport = c->cfg.transport;
  if (c->transport == clbTransportAuto) c->transport = c->allOnOneHost ? clbTransportShm : clbTransportSocket;
  if (c->transport == clbTransportShm && !c->allOnOneHost)
    return setError(clbInvalidUsage,
                    "transport shm needs every rank on one host, but rank 0 is on %s and rank %d on %s: use "
                    "transport auto or socket", peers[0].hostname, other, peers[other].hostname);
  if (c->cfg.algorithm == clbAlgoDirect && c->transport != clbTransportShm && c->nranks > 1)
    return setError(clbInvalidUsage, "algorithm direct needs the shm transport (all ranks on one host): use algorithm auto or ring");
  if (c->nranks == 1) return clbSuccess;
  if (c->transport == clbTransportShm) {
    auto shm = std::make_unique<ShmTransport>(c);
    CLB_CHECK(shm->init());
    *out = std::move(shm);
  } else if (c->transport == clbTransportVerbs) {
#ifdef CLB_HAVE_VERBS
    CLB_CHECK(createVerbsTransport(c, out));
#else
    return setError(clbUnsupported, "transport verbs: this libcolibri was built without infiniband/verbs.h "
                    "(libibverbs-dev), so it has no verbs transport: use transport socket");
#endif
  } else {
    *out = std::make_unique<LinkTransport>(c, clbTransportSocket,
                                           std::make_unique<SocketRingChannel>(c, c->boot.next(), c->boot.prev()));
  }
  return clbSuccess;
}

}  // namespace clb
