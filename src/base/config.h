// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "colibri/colibri.h"

namespace clb {

// Valid ranges of clbConfig_t fields (the Java Options use the same).
constexpr int kMinDepth = 1, kMaxDepth = 64;
constexpr int64_t kMinChunk = 4096, kMaxChunk = 64LL << 20;
constexpr int64_t kMaxDirect = 1LL << 30;
constexpr int64_t kMinCap = 64LL << 10, kMaxCap = 1LL << 40;
constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;
constexpr int kMinVerbsPort = 1, kMaxVerbsPort = 255;
constexpr int kMinVerbsGidIndex = -1, kMaxVerbsGidIndex = 255;  // sgid_index is 8 bits
constexpr int kMaxVerbsTrafficClass = 255, kMaxVerbsTimeout = 31, kMaxVerbsRetryCount = 7;
constexpr int kMinVerbsQpsPerConnection = 1, kMaxVerbsQpsPerConnection = 8;

// sizeof(clbConfig_t) before the verbs fields (the first version of the struct: up to
// versionCheck, padded); clbCommInitRank still takes a struct of that size.
constexpr size_t kConfigSizeV1 = 64;
static_assert(offsetof(clbConfig_t, verbsPort) == 60 && kConfigSizeV1 < sizeof(clbConfig_t),
              "the fields of the first clbConfig_t must keep their place");
// sizeof(clbConfig_t) of the second version: up to verbsDevice, before verbsQpsPerConnection;
// clbCommInitRank still takes a struct of that size too.
constexpr size_t kConfigSizeV2 = offsetof(clbConfig_t, verbsQpsPerConnection);
static_assert(kConfigSizeV2 == 144 && kConfigSizeV2 < sizeof(clbConfig_t),
              "the fields of the second clbConfig_t must keep their place");

clbResult_t validateConfig(const clbConfig_t& c);

// The complete configuration of a communicator from what the caller passed: NULL is
// clbConfigInit; a struct of this version is copied; one of an earlier version (size
// kConfigSizeV1 or kConfigSizeV2) has the fields it lacks filled as clbConfigInit fills them.
// Then validated.
clbResult_t resolveConfig(const clbConfig_t* in, clbConfig_t* out);

// The device path's settings, read from COLIBRI_DEVICE_* (and COLIBRI_VERBS_GPU_MEMORY,
// COLIBRI_STUCK_WARN_PERCENT) when a communicator starts: no CUDA call, and every rank's are in
// the bootstrap's table, where the ones that change the device schedule are compared
// (bootstrap/agree.h). The device path (src/device) takes them from here. A bad value does not fail
// init: `error` says what, and the first device call reports it (as when these were read there).
constexpr int64_t kDefaultDeviceDirectMinBytes = 0;      // auto: direct from this size (docs/performance.md)
constexpr int64_t kDefaultDeviceLLMaxBytes = 256 << 10;  // auto: LL up to this many bytes per destination
constexpr int64_t kDeviceLLBufferCap = 6 << 20;          // ... and an LL buffer of at most this much by default
// ... and, through host memory (GPUs without peer access) with three or more ranks, up to this
// many: beyond, the copy engines are faster there (results/gpu/2026-12-03-h200-copies-split/).
constexpr int64_t kDefaultViaHostLLMaxBytes = 128 << 10;
constexpr int64_t kMaxDeviceLLMaxBytes = 1 << 20;  // COLIBRI_DEVICE_LL_MAX_BYTES at most (4 x ranks MiB)
enum DevicePathSetting { kDevicePathAuto, kDevicePathLL, kDevicePathStaged, kDevicePathDirect, kDevicePathInvalid };
// COLIBRI_DEVICE_LAUNCH: auto replays prepared graphs where a rank is alone in its process.
enum DeviceLaunchSetting { kDeviceLaunchAuto, kDeviceLaunchGraph, kDeviceLaunchKernel };
// COLIBRI_DEVICE_GATE: auto gates wide kernels where a rank of another process shares the GPU.
enum DeviceGateSetting { kDeviceGateAuto, kDeviceGateOn, kDeviceGateOff };
enum GpuMemorySetting { kGpuMemoryAuto, kGpuMemoryDmabuf, kGpuMemoryPeermem, kGpuMemoryHost, kGpuMemoryInvalid };
struct DeviceConfig {
  int path = kDevicePathAuto;      // COLIBRI_DEVICE_PATH (kDevicePathInvalid: a bad value)
  bool meetOff = false;            // COLIBRI_DEVICE_MEET=off
  int launch = kDeviceLaunchAuto;  // COLIBRI_DEVICE_LAUNCH
  int gate = kDeviceGateAuto;      // COLIBRI_DEVICE_GATE
  bool p2pOff = false;             // COLIBRI_DEVICE_P2P=off
  bool p2pInPlaceOff = false;      // COLIBRI_DEVICE_P2P_IN_PLACE=off: every message through the lines
  bool checkCalls = false;         // COLIBRI_DEVICE_CHECK_CALLS=1
  int64_t directMinBytes = kDefaultDeviceDirectMinBytes;  // COLIBRI_DEVICE_DIRECT_MIN_BYTES
  int64_t llMaxBytes = 0;                                 // COLIBRI_DEVICE_LL_MAX_BYTES (default by nranks)
  bool llMaxGiven = false;             // ... other than its default (set by COLIBRI_DEVICE_LL_MAX_BYTES)
  int64_t stuckWarnPercent = 50;       // COLIBRI_STUCK_WARN_PERCENT
  std::string error;                   // a COLIBRI_DEVICE_* / COLIBRI_STUCK_WARN_PERCENT value that is not valid
  int gpuMemory = kGpuMemoryAuto;      // COLIBRI_VERBS_GPU_MEMORY (kGpuMemoryInvalid: a bad value)
  std::string gpuMemoryText = "auto";  // ... as given, for messages
};
DeviceConfig readDeviceConfig(int nranks);

// Reads the integer environment variable `name` into *out, which stays as it is when the
// variable is unset or empty; anything but an integer in lo..hi is INVALID_ARGUMENT naming it.
clbResult_t envInt(const char* name, int64_t lo, int64_t hi, int64_t* out);

// The boolean environment variable `name`: `dflt` when it is unset or empty, false when it is
// "0", "false" or "no" (the words in any case), true for any other value.
bool envFlag(const char* name, bool dflt);

}  // namespace clb
