// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// When a rank's device kernels of a communicator end at once instead of waiting out the device
// timeout: one decision for the collectives' kernels (DeviceShared::stopIfAbandoned) and the
// point-to-point ones (PeerDevice::stopIfAbandoned), taken at every round of the watchdog and
// before a destroy waits for the kernels. Each then sets its own error word, which its kernels
// read on the slow path of every wait (docs/device.md, "Errors of asynchronous work").
#pragma once

#include <cstdint>
#include <string>

#include "colibri/colibri.h"
#include "device/device_context.h"

namespace clb::cuda {

// Whether this rank's device kernels of `comm` must end at once, and if so the result and the
// sentence that the next call and clbCommGetAsyncError report (unless something they look at first
// says more). They must when:
//  - the communicator was aborted here, or a peer aborted or died (a notice): no call of it can
//    complete any more;
//  - this rank failed and cannot tell its peers which of its device calls it completes
//    (endEveryDeviceCall);
//  - a peer said the same of itself: its kernels ended, so those that wait for it would wait until
//    the timeout.
// A peer that failed and told how far it goes is no reason: the calls it launched before its
// failure complete (DeviceShared::tellPeersOfFailure, PeerDevice::tellPeersOfEnd end the rest).
bool mustStopDevice(DeviceCommContext* comm, clbResult_t* code, std::string* why);

// This rank's communicator failed, and it cannot tell how far its device calls go: its calls were
// captured in a CUDA graph (replays run calls the host does not count), a launch failed (some of
// its kernels may run), or its own kernels failed (one may have counted a call it did not
// finish). So every device kernel of the communicator ends, here and on every peer: this rank's at
// its next mustStopDevice, the peers' at theirs, once they read what this says
// (Transport::announceDeviceEnd with kDeviceEndEvery). The output of calls in flight is undefined.
// `why` is which of these it is, for the log. Any thread. What it did:
enum class EveryCall {
  kSaid,         // said (now or before)
  kNoPeerHears,  // one rank, or a transport without shared memory (whose communicators have no
                 // device collectives): nothing is said
  kEcho,         // a peer said first how far it goes: this rank's failure follows from that one,
                 // whose calls before its end still complete; nothing is said
  kLater,        // another rank failed too and has not said yet how far it goes (one that can
                 // tell says so once its kernels finished its calls): nothing is said yet; ask
                 // again at the next round. For kEveryCallWaitMs at most from the first kLater:
                 // then (or at once when `final`: a destroy, whose kernels are done) it is said,
                 // so that two failed ranks that cannot tell never wait for each other.
};
constexpr int64_t kEveryCallWaitMs = 500;
// `pointToPoint`: the caller is the point-to-point side, for which a peer's kDeviceEndToldInBoxes
// is an end told (for the collectives it says nothing of their calls).
EveryCall endEveryDeviceCall(DeviceCommContext* comm, const char* why, bool final = false, bool pointToPoint = false);

// A destroy that said so keeps the memory its peers' kernels read (its flags, staging and boxes)
// this long after it said so: the peers' watchdogs see it at their next round (every 100 ms) and
// their kernels at the next slow path of a wait, and then leave this rank's memory alone.
constexpr int64_t kEveryDeviceCallGraceMs = 250;
void graceForEveryDeviceCall(const DeviceCommContext* comm);

}  // namespace clb::cuda
