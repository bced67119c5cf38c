// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Consistency across ranks: each rank reads the versions it runs with (the Colibri library, the
// NVIDIA kernel driver, the first RDMA NIC's firmware), the bootstrap gives every rank everyone's,
// and init compares them under the versionCheck setting (clbVersionCheck_t; the strictest setting
// of any rank applies, so that every rank takes the same decision and none is left waiting).
//
// Nothing here loads libcuda or libibverbs: the driver version comes from
// /proc/driver/nvidia/version and the firmware from /sys/class/infiniband/<dev>/fw_ver.
#pragma once

#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"

namespace clb {

// "580.159.04" from the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64
// Kernel Module  580.159.04  ..." or "... Open Kernel Module for x86_64  580.159.04  ..."); "" when
// the text has no version.
std::string parseNvidiaDriverVersion(const std::string& procText);
// The driver version from `path`; "none" when the file does not exist (no NVIDIA driver loaded),
// "unrecognized" when it has no version in the expected place.
std::string readNvidiaDriverVersion(const char* path = "/proc/driver/nvidia/version");
// fw_ver of the first device (by name) under `classDir`; "none" when there is none or it cannot
// be read.
std::string readNicFirmware(const char* classDir = "/sys/class/infiniband");

// This rank's versions, with `check` its clbVersionCheck_t. Tests may replace the values: a
// thread's override (setVersionOverrideForThread) first, then the environment variables
// COLIBRI_TEST_FAKE_VERSION, COLIBRI_TEST_FAKE_DRIVER, COLIBRI_TEST_FAKE_FIRMWARE.
VersionInfo localVersions(int check);

// For tests that run ranks as threads of one process: the values the calling thread's
// clbCommInitRank reports. Empty strings keep the real value. NULL clears the override.
struct VersionOverride {
  std::string colibri, driver, firmware;
};
void setVersionOverrideForThread(const VersionOverride* o);

// Compares every rank's versions (peers[r].versions). A difference that the strictest setting
// among the ranks makes fatal returns clbInvalidUsage with a message naming two ranks and their
// values and the fix; other differences are logged (CLB_WARN) and return clbSuccess. Ranks that
// report "none" for the driver or the firmware (no NVIDIA driver, no RDMA NIC) are not compared.
clbResult_t checkVersions(const std::vector<RankInfo>& peers, int myRank);

// "0-2,5" for ranks {0, 1, 2, 5}.
std::string rankList(const std::vector<int>& ranks);
// "580.159.04 on ranks 0-1,3, 575.57.08 on rank 2" for values[r], the value of rank r (at most 8
// values named).
std::string valuesByRank(const std::vector<std::string>& values);

// One line for clbCommInfo: "versions: colibri 0.1.0, driver 580.159.04, NIC firmware none (all
// ranks)", or, when they differ, each value with the ranks that have it.
std::string describeVersions(const std::vector<RankInfo>& peers);

}  // namespace clb
