// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstdint>

#include "colibri/colibri.h"

namespace clb {

// Valid ranges of clbConfig_t fields (the Java Options use the same).
constexpr int kMinDepth = 1, kMaxDepth = 64;
constexpr int64_t kMinChunk = 4096, kMaxChunk = 64LL << 20;
constexpr int64_t kMaxDirect = 1LL << 30;
constexpr int64_t kMinCap = 64LL << 10, kMaxCap = 1LL << 40;
constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;

clbResult_t validateConfig(const clbConfig_t& c);

// Reads the integer environment variable `name` into *out, which stays as it is when the
// variable is unset or empty; anything but an integer in lo..hi is INVALID_ARGUMENT naming it.
clbResult_t envInt(const char* name, int64_t lo, int64_t hi, int64_t* out);

}  // namespace clb
