// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the core needs from a transport, whichever one carries the ranks' data: the ring channel,
// the peers' health and failure notices, telling the peers that this rank failed or aborted, the
// optional direct algorithm, and the words transportInfo says. createTransport picks and builds
// one from the configuration. The core includes this header and no transport's own.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/comm_context.h"
#include "colibri/net_plugin.h"
#include "transport/channel.h"

namespace clb {

struct CollArgs;  // algo/algorithms.h

// Something a peer said or showed that ends a wait (or the communicator, for
// clbCommGetAsyncError). The core words the error; the transport only finds it.
// Transport::announceDeviceEnd: "every device call", from a failed rank that cannot say which;
// and "told elsewhere": a failed rank told how far its point-to-point launches go (in its boxes)
// and names no call of its own (yet: a call's number replaces it).
constexpr uint64_t kDeviceEndEvery = ~0ull;
constexpr uint64_t kDeviceEndToldInBoxes = ~0ull - 1;

struct PeerNotice {
  enum Kind : char {
    kNone = 0,
    kAborted = 'A',  // the peer aborted its communicator (or forwarded a rank's abort)
    kFailed = 'F',   // a collective failed on the peer
    kClosed = 'C',   // the peer destroyed its communicator
    kGone = 'G',     // the peer's process exited or was killed
  };
  Kind kind = kNone;
  int origin = -1;               // the rank it is about (the rank that failed first, when forwarded)
  int pid = 0;                   // kGone: that rank's process
  const char* reason = nullptr;  // kFailed: the rank's own message where the transport carries one
};

// A transport's algorithm for small messages inside a host: every rank posts its input where the
// others read it in place, one copy in and one pass out (the shm transport has one).
class DirectAlgorithm {
 public:
  virtual ~DirectAlgorithm() = default;
  // Bytes of scratch a rank needs for collective `a` (0 if it posts nothing).
  virtual size_t scratchBytes(const CollArgs& a) const = 0;
  virtual clbResult_t run(const CollArgs& a) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // The clbTransport_t it is (never auto).
  virtual int kind() const = 0;
  // transportInfo's link line (the verbs device, port, GID index and MTU); "" if it has none.
  virtual std::string describe() const { return std::string(); }
  // The ring channel that every algorithm but direct runs on.
  virtual RingChannel& ring() = 0;
  // Whether the ranks map each other's memory (all on one host), so device memory can be mapped too.
  virtual bool sharesMemory() const { return false; }
  // The direct algorithm, where the transport has one; null otherwise.
  virtual DirectAlgorithm* direct() { return nullptr; }
  // The network plugin its ring channel runs on (transport verbs: libcolibri_verbs.so), which
  // device buffers between hosts use too (GPUDirect RDMA, device/gpudirect.cc); null for a
  // transport of the core's own.
  virtual const clbNetPlugin_v1_t* netPlugin() const { return nullptr; }

  // Point-to-point. The channel with peer p (never this rank), made at the first call that needs
  // it; clbUnsupported (with the reason) where the transport has none.
  virtual clbResult_t peer(int p, PeerChannel** out) {
    (void)p;
    *out = nullptr;
    return setError(clbUnsupported, "this transport has no point-to-point channels");
  }
  // A number that changes whenever something may have moved on a peer channel of this rank (a
  // message came in, a peer consumed one); waitPeers(seen, ...) returns once it differs from
  // `seen` (or after a short while), with the slow path's checks (abort, peers, timeout from
  // startMs, naming `what` and `peer`). `peers`: the ranks the waiting batch still has operations
  // with (a transport that polls connections polls theirs only).
  virtual uint64_t peerActivity() { return 0; }
  virtual clbResult_t waitPeers(uint64_t seen, int64_t startMs, const char* what, int peer,
                                const std::vector<int>& peers);

  // Peer health. Whether peer p's process exited or was killed, where the transport can tell
  // (over connections, the closed connection says so instead). Any thread.
  virtual bool peerGone(int p) const { return false; }
  // On the slow path of every wait (CommContext::checkWait; `peer` as there): a notice that ends the
  // wait, taking what arrived; false if there is none. A peer that failed or aborted in a later
  // collective than this rank's has finished this one: that is no notice yet.
  virtual bool waitNotice(int peer, PeerNotice* n) = 0;
  // The same for clbCommGetAsyncError (any thread): looks without taking anything, whatever the
  // collective; a peer that closed its communicator is not a notice.
  virtual bool statusNotice(PeerNotice* n) = 0;
  // A peer that aborted or died, looked for past any that failed first (any thread): after one,
  // no call of this communicator can complete, whatever another peer's failure says
  // (DeviceShared::stopIfAbandoned ends this rank's device kernels then). This default sees only
  // the first notice; a transport that can look at every peer overrides it.
  virtual bool abandonedNotice(PeerNotice* n) {
    return statusNotice(n) && (n->kind == PeerNotice::kAborted || n->kind == PeerNotice::kGone);
  }
  // The device calls of a communicator that failed (DeviceShared::tellPeersOfFailure): this rank
  // says that `next` is the first device call it will never make (its kernels finished every call
  // before it), or kDeviceEndEvery: it cannot tell, and its device kernels end, so the peers' must
  // too (device/stop.h), or kDeviceEndToldInBoxes. A peer reads what peer p said (0: nothing yet).
  // Any thread; once said, a number stays until kDeviceEndEvery replaces it, which stays, and
  // kDeviceEndToldInBoxes replaces only nothing. A transport without shared memory has no device
  // paths: nothing to say.
  virtual void announceDeviceEnd(uint64_t next) {}
  virtual uint64_t deviceEnd(int p) const { return 0; }
  // Tells the peers that this rank failed (kFailed, `reason` its first error) or aborted
  // (kAborted). An abort this rank learnt of stays an abort for the peers it tells.
  virtual void announce(PeerNotice::Kind kind, const char* reason) = 0;

  // Collective `d` starts on this rank (before any message): what peers compare and report.
  virtual void beginCollective(const OpDesc& d) {}
  // clbCommTrim: gives back staging memory once the peers consumed what was sent.
  virtual clbResult_t trim() { return ring().trim(); }
  // clbCommDestroy, before the device path goes: `end` is kClosed for a healthy rank (which lets
  // the peers read what it sent last), else kFailed or kAborted. The transport is freed next.
  virtual void close(PeerNotice::Kind end) = 0;
};

// The transport of communicator `c` (bootstrap up): config transport auto picks shm when every
// rank is on one host, else socket. Sets c->transport (resolved) and c->allOnOneHost. *out stays
// null for one rank (its collectives are copies). Errors: shm across hosts, algorithm direct off
// shm, verbs without its network plugin (libcolibri_verbs.so, loaded by loadNetPlugin; every rank
// learns whether every rank has it), and whatever setting the transport up fails with.
clbResult_t createTransport(CommContext* c, std::unique_ptr<Transport>* out);

}  // namespace clb
