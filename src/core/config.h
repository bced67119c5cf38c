// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Reads the integer environment variable `name` into *out, which stays as it is when the
// variable is unset or empty; anything but an integer in lo..hi is INVALID_ARGUMENT naming it.
clbResult_t envInt(const char* name, int64_t lo, int64_t hi, int64_t* out);

// The boolean environment variable `name`: `dflt` when it is unset or empty, false when it is
// "0", "false" or "no" (the words in any case), true for any other value.
bool envFlag(const char* name, bool dflt);

}  // namespace clb
