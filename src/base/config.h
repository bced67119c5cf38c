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
// sizeof(clbConfig_t) of the third version: up to verbsQpsPerConnection (then padding), before
// the device settings; taken too.
constexpr size_t kConfigSizeV3 = 152;
static_assert(offsetof(clbConfig_t, devicePath) == 148 && kConfigSizeV3 < sizeof(clbConfig_t),
              "the fields of the third clbConfig_t must keep their place");

// The knob `name` of `c` as text, as clbConfigGet writes it; false for a name the table lacks.
// Touches no thread's last error (the plugins ask for options in the middle of calls).
bool optionText(const clbConfig_t& c, const char* name, std::string* out);

// The word of code `v` of the worded knob `name` ("devicePath", 2: "staged"), or "a value that is
// not valid" for a code it lacks (or a knob without words).
const char* optionWord(const char* name, int64_t v);

// The COLIBRI_* variable of the i-th knob (clbConfigOptionName(i) is its name), NULL past the last.
const char* optionVariable(int i);

// What a rank whose configuration was refused joins with, only to tell the others (core/comm.cc):
// `in` (NULL: clbConfigInit's defaults and environment) with every field or variable that is not
// valid at its default. Never fails.
void salvageConfig(const clbConfig_t* in, clbConfig_t* out);

// The defaults of every field, without the environment (clbConfigInit is these, then COLIBRI_*).
void defaultConfig(clbConfig_t* c);

clbResult_t validateConfig(const clbConfig_t& c);

// The complete configuration of a communicator from what the caller passed: NULL is
// clbConfigInit; a struct of this version is copied; one of an earlier version (size
// kConfigSizeV1 or kConfigSizeV2) has the fields it lacks filled as clbConfigInit fills them.
// Then validated.
clbResult_t resolveConfig(const clbConfig_t* in, clbConfig_t* out);

// The device path's settings, from the communicator's configuration (its device* fields,
// stuckWarnPercent and verbsGpuMemory), resolved for its size: what src/device reads. Every
// rank's are in the bootstrap's table, where the ones that change the device schedule are
// compared (bootstrap/agree.h).
constexpr int64_t kDefaultDeviceDirectMinBytes = 0;      // auto: direct from this size (docs/performance.md)
constexpr int64_t kDefaultDeviceLLMaxBytes = 256 << 10;  // auto: LL up to this many bytes per destination
constexpr int64_t kDeviceLLBufferCap = 6 << 20;          // ... and an LL buffer of at most this much by default
// ... and, through host memory (GPUs without peer access) with three or more ranks, up to this
// many: beyond, the copy engines are faster there (results/gpu/2026-12-03-h200-copies-split/).
constexpr int64_t kDefaultViaHostLLMaxBytes = 128 << 10;
constexpr int64_t kMaxDeviceLLMaxBytes = 1 << 20;  // deviceLLMaxBytes at most (4 x ranks MiB of buffer)
// The codes of the device fields of clbConfig_t (colibri.h lists their words in this order).
enum DevicePathSetting { kDevicePathAuto, kDevicePathLL, kDevicePathStaged, kDevicePathDirect };
// deviceLaunch: auto replays prepared graphs where a rank is alone in its process.
enum DeviceLaunchSetting { kDeviceLaunchAuto, kDeviceLaunchGraph, kDeviceLaunchKernel };
// deviceGate: auto gates wide kernels where a rank of another process shares the GPU.
enum DeviceGateSetting { kDeviceGateAuto, kDeviceGateOn, kDeviceGateOff };
enum GpuMemorySetting { kGpuMemoryAuto, kGpuMemoryDmabuf, kGpuMemoryPeermem, kGpuMemoryHost };
struct DeviceConfig {
  int path = kDevicePathAuto;                                 // devicePath
  bool meetOff = false;                                       // deviceMeet off
  int launch = kDeviceLaunchAuto;                             // deviceLaunch
  int gate = kDeviceGateAuto;                                 // deviceGate
  bool p2pOff = false;                                        // deviceP2P off
  bool p2pInPlaceOff = false;                                 // deviceP2PInPlace off: every message through the lines
  bool checkCalls = false;                                    // deviceCheckCalls
  int64_t directMinBytes = kDefaultDeviceDirectMinBytes;      // deviceDirectMinBytes
  int64_t llMaxBytes = 0;                                     // deviceLLMaxBytes, auto resolved by nranks
  bool llMaxGiven = false;                                    // ... other than its default for nranks
  int64_t stuckWarnPercent = CLB_DEFAULT_STUCK_WARN_PERCENT;  // stuckWarnPercent
  int gpuMemory = kGpuMemoryAuto;                             // verbsGpuMemory
  std::string gpuMemoryText = "auto";                         // ... as a word, for messages
};
DeviceConfig readDeviceConfig(const clbConfig_t& c, int nranks);

// The boolean environment variable `name`: `dflt` when it is unset or empty, false when it is
// "0", "false" or "no" (the words in any case), true for any other value.
bool envFlag(const char* name, bool dflt);

}  // namespace clb
