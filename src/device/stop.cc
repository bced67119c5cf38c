// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The decision of stop.h: when this rank's device kernels of a communicator end at once.
#include "device/stop.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/error.h"
#include "transport/transport.h"

namespace clb::cuda {

bool mustStopDevice(DeviceCommContext* comm, clbResult_t* code, std::string* why) {
  char b[640];
  PeerNotice n;
  if (comm->aborted.load()) {
    *code = clbAborted;
    snprintf(b, sizeof b,
             "rank %d's communicator was aborted: its device calls on it end at once (their output is undefined)",
             comm->rank);
  } else if (comm->carrier && comm->carrier->abandonedNotice(&n)) {
    *code = n.kind == PeerNotice::kAborted ? clbAborted : clbRemoteError;
    if (n.kind == PeerNotice::kAborted)
      snprintf(b, sizeof b,
               "rank %d aborted its communicator, so rank %d's device calls on it end at once (their output is "
               "undefined; destroy the communicator)",
               n.origin, comm->rank);
    else
      snprintf(b, sizeof b,
               "rank %d (pid %d) exited or was killed, so rank %d's device calls on this communicator end at once "
               "(their output is undefined; destroy the communicator)",
               n.origin, n.pid, comm->rank);
  } else if (comm->deviceEndsEveryAtMs.load()) {
    // (What this rank reports first is its own failure: this sentence is for the log.)
    *code = clbInternalError;
    snprintf(b, sizeof b,
             "rank %d's communicator failed, and it cannot tell its peers which of its device calls complete: its "
             "device calls on it end at once, and its peers' (their output is undefined)",
             comm->rank);
  } else {
    int p = 0;
    for (; comm->carrier && p < comm->nranks; p++)
      if (p != comm->rank && comm->carrier->deviceEnd(p) == kDeviceEndEvery) break;
    if (!comm->carrier || p == comm->nranks) return false;
    *code = clbRemoteError;
    int at = snprintf(b, sizeof b,
                      "rank %d's communicator failed, and it could not tell which of its device calls complete (its "
                      "calls were captured in a CUDA graph, a launch failed, or its own kernels failed), so rank %d's "
                      "device calls on this communicator end at once (their output is undefined; destroy the "
                      "communicator)",
                      p, comm->rank);
    // Its own words, where its notice carries them (the first failure any peer announced).
    if (comm->carrier->statusNotice(&n) && n.kind == PeerNotice::kFailed && n.origin == p && n.reason && at > 0 &&
        at < (int)sizeof b)
      snprintf(b + at, sizeof b - at, ". Rank %d said: %.236s", p, n.reason);
  }
  *why = b;
  return true;
}

EveryCall endEveryDeviceCall(DeviceCommContext* comm, const char* why, bool final, bool pointToPoint) {
  if (comm->deviceEndsEveryAtMs.load()) return EveryCall::kSaid;
  if (comm->nranks < 2 || !comm->carrier || !comm->carrier->sharesMemory()) return EveryCall::kNoPeerHears;
  for (int p = 0; p < comm->nranks; p++) {
    const uint64_t end = p == comm->rank ? 0 : comm->carrier->deviceEnd(p);
    if (end != 0 && (pointToPoint || end != kDeviceEndToldInBoxes)) return EveryCall::kEcho;
  }
  PeerNotice n;
  if (!final && comm->carrier->statusNotice(&n) && n.kind == PeerNotice::kFailed && n.origin != comm->rank) {
    int64_t since = 0;
    const int64_t now = std::max<int64_t>(nowMs(), 1);
    if (!comm->deviceEndLaterSinceMs.compare_exchange_strong(since, now)) {
      if (now - since < kEveryCallWaitMs) return EveryCall::kLater;
    } else {
      return EveryCall::kLater;
    }
  }
  int64_t none = 0;
  if (comm->deviceEndsEveryAtMs.compare_exchange_strong(none, std::max<int64_t>(nowMs(), 1))) {
    comm->carrier->announceDeviceEnd(kDeviceEndEvery);
    CLB_INFO(
        "rank %d: its communicator failed and %s, so it cannot tell which of its device calls complete: its device "
        "calls on it, and its peers', end at once (their output is undefined)",
        comm->rank, why);
  }
  return EveryCall::kSaid;
}

void graceForEveryDeviceCall(const DeviceCommContext* comm) {
  const int64_t at = comm->deviceEndsEveryAtMs.load();
  if (!at) return;
  if (const int64_t left = at + kEveryDeviceCallGraceMs - nowMs(); left > 0) usleep((useconds_t)left * 1000);
}

}  // namespace clb::cuda
