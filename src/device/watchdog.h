// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// One thread per process, started with the first device communicator, that looks at every
// communicator's device status (ClbDevHostStatus, written by its kernels into mapped host memory)
// every 100 ms and logs what no call would report yet: a device wait past its warning threshold
// (WARN, naming the call, the collective and the ranks that have not arrived), one that timed
// out, and a peer that made another call (ERROR). Asynchronous calls, and graphs replayed without any call, so say they
// are stuck while they are; clbCommGetAsyncError reads the same status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "colibri/colibri.h"
#include "kernels/kernel_abi.h"

namespace clb::cuda {

struct Watched {
  int rank = 0;
  int nranks = 0;
  int64_t timeoutMs = 0;
  int64_t warnMs = 0;  // 0: no warnings (timeouts are still logged)
  const volatile ClbDevHostStatus* status = nullptr;
  // Called by the watchdog at each round (its thread, under its lock, so never after
  // watchdogRemove returned), before it looks at `status`: the owner's own look.
  std::function<void()> tick;
  // Kept by the watchdog: what it already said.
  unsigned long long saidStuck = 0;
  bool saidError = false;
};

// "allReduce" ... for CLB_DEV_* (the kernels' numbering).
const char* collName(unsigned int coll);
// The ranks whose word in `waitingFor` (a long wait) or `timedOutFor` (a timeout) names `call`
// ("1, 3"; "none known" when none does).
const char* ranksWaitedFor(const volatile ClbDevHostStatus* s, int nranks, unsigned long long call, char* buf,
                           size_t bytes);
const char* ranksTimedOutFor(const volatile ClbDevHostStatus* s, int nranks, unsigned long long call, char* buf,
                             size_t bytes);

// What the device error in `s` (its `error` set) means, as one sentence for the log and for
// clbCommGetAsyncError, and its result: clbTimeout for a wait that timed out, clbRemoteError for a
// peer that made another call (its description and this rank's, decoded from CLB_DEV_SIG).
clbResult_t deviceError(const volatile ClbDevHostStatus* s, int rank, int nranks, int64_t timeoutMs, std::string* text);

// `w` must stay valid until watchdogRemove(w) returns.
void watchdogAdd(Watched* w);
void watchdogRemove(Watched* w);

}  // namespace clb::cuda
