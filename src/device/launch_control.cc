// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// LaunchControl (launch_control.h): the gate before a wide kernel, inside the meetings.
#include "device/launch_control.h"

namespace clb::cuda {

clbResult_t LaunchControl::gate(const Driver* d, const ClbDevCallArgs& k, unsigned blocks, CUstream stream) {
  if (!gateWide || blocks <= kGateAboveBlocks) return clbSuccess;
  CLB_CHECK(launcher.launch(d, gateFn, 1, 32, stream, &k, sizeof k));
  if (!meeting) return clbSuccess;
  // Every rank decides alike (the same call, so the same blocks): each ends the first meeting and
  // arrives at a second one, and together() ends that after the kernel.
  clbResult_t rc = meet->launched(comm);
  if (rc == clbSuccess) rc = meet->arrive(comm, *meeting, warnMs);
  if (rc != clbSuccess) meeting = nullptr;  // no meeting left open for together() to end
  return rc;
}

}  // namespace clb::cuda
