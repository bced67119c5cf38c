// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// How a device collective's kernels are launched (LaunchControl), whatever path the call takes:
// through the launcher (prepared graphs or ordinary launches, launcher.h), behind the gate where
// other ranks share the GPU (a wide kernel waits in clb_dev_gate until every rank is in its call),
// and between the two meetings of the ranks that share this GPU and process (launch_meet.h). One
// per communicator, in its DeviceShared (shared.h); set up by DeviceShared::setUp.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "algo/algorithms.h"
#include "base/error.h"
#include "device/device_context.h"
#include "device/launch_meet.h"
#include "device/launcher.h"
#include "kernels/kernel_abi.h"
#include "platform/cuda/driver.h"

namespace clb::cuda {

constexpr int kThreads = 512;  // per block (the kernels' launch bounds)
constexpr int kMaxBlocks = 256;
constexpr size_t kBytesPerBlock = 8u << 10;  // below this per block, fewer blocks
// A kernel of at most this many blocks launches without the gate (LaunchControl::gateWide): while
// it waits it holds at most two SMs' worth of a whole-SM kernel's room (a gate warp holds one),
// which a late rank's work that runs in waves gets past; the small calls' LL kernel (1 block)
// keeps its latency.
constexpr unsigned kGateAboveBlocks = 2;

struct LaunchControl {
  explicit LaunchControl(DeviceCommContext* comm) : comm(comm) {}
  LaunchControl(const LaunchControl&) = delete;
  LaunchControl& operator=(const LaunchControl&) = delete;

  // Before a launch of `blocks` blocks with parameters `k` on `stream`: the gate (gateWide) where
  // that is more than kGateAboveBlocks. Inside together(), the gate and the kernel after it are
  // launched in two meetings: every sharing rank's gate is queued before any rank's kernel, which
  // waits on its stream for its gate, so that streams sharing a hardware queue never hold a gate
  // behind a kernel that waits for it.
  clbResult_t gate(const Driver* d, const ClbDevCallArgs& k, unsigned blocks, CUstream stream);
  // Runs `launch` (this rank's kernels of call `a`) between the two meetings of the ranks that
  // share this GPU and process; just runs it when no other rank does.
  template <class F>
  clbResult_t together(const CollArgs& a, F&& launch);
  // Launches a kernel that counts a call when it completes (ClbDevFlags::calls: a collective's
  // kernel, one per staged round, the copies path's last step), and counts the launch.
  clbResult_t launchCounting(const Driver* d, CUfunction fn, unsigned blocks, unsigned threads, CUstream stream,
                             const ClbDevCallArgs* k) {
    CLB_CHECK(launcher.launch(d, fn, blocks, threads, stream, k, sizeof *k));
    counting++;
    return clbSuccess;
  }

  DeviceCommContext* comm;
  uint64_t counting = 0;        // launchCounting's launches (the calling thread's; Device::run reads it)
  GraphLauncher launcher;       // eager launches: prepared graphs or ordinary
  CUfunction gateFn = nullptr;  // clb_dev_gate
  // Another rank shares this GPU (or COLIBRI_DEVICE_GATE=on; never with =off): a kernel of more
  // than kGateAboveBlocks blocks waits behind clb_dev_gate until every rank is in its call, so
  // that waiting ranks never hold the SMs a late rank's own work needs.
  bool gateWide = false;
  std::shared_ptr<LaunchMeet> meet;  // the ranks sharing this GPU and process, when there are others
  const OpDesc* meeting = nullptr;   // the call of the meeting together() holds open, if any
  int64_t warnMs = 0;                // a meeting this long says so (the device's warning threshold)
  // The call being launched is captured while `meet` exists (Device::run): its kernels check
  // clbGraphLaunch's permit (ClbDevCallArgs::replayGuard).
  bool replayGuard = false;
  // The call's stream is being captured (Device::run asked the driver once per call).
  bool capturing = false;
};

template <class F>
clbResult_t LaunchControl::together(const CollArgs& a, F&& launch) {
  if (!meet) return launch();
  clbResult_t rc = meet->arrive(comm, a.desc, warnMs);
  if (rc != clbSuccess) {
    // Calls that differ are refused alike by every rank here (ranks elsewhere launched and wait,
    // and the ranks' calls may be out of step for good, one having been refused alone before):
    // the communicator cannot go on. Other failures mark it failed in run()'s caller.
    if (rc == clbInvalidUsage) comm->markFailed(rc);
    return rc;
  }
  meeting = &a.desc;
  rc = launch();
  const bool open = meeting != nullptr;  // gate() closes it when its second arrival fails
  meeting = nullptr;
  const std::string why = rc == clbSuccess ? std::string() : lastError();
  clbResult_t left = open ? meet->launched(comm) : clbSuccess;
  if (rc != clbSuccess) return setError(rc, "%s", why.c_str());
  return left;
}

}  // namespace clb::cuda
