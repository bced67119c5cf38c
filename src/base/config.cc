// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Configuration defaults and COLIBRI_* environment variables for C callers. Java callers resolve
// options (builder > system property > environment > default) in io.colibri.Options and pass a
// complete clbConfig_t; the defaults here and there are checked equal by a test.
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/config.h"
#include "base/error.h"

namespace {

const char* kTransportNames[] = {"auto", "shm", "socket", "verbs"};
static_assert(sizeof(kTransportNames) / sizeof(kTransportNames[0]) == clbNumTransports,
              "a name for every clbTransport_t (colibri.h), in its order");
const char* kAlgoNames[] = {"auto", "ring", "direct", "none"};
const char* kLogNames[] = {"off", "error", "warn", "info", "debug"};
const char* kVersionCheckNames[] = {"warn", "strict", "exact"};

int findName(const char* v, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(v, names[i]) == 0) return i;
  return -1;
}

}  // namespace

namespace clb {

clbResult_t envInt(const char* name, int64_t lo, int64_t hi, int64_t* out) {
  const char* v = getenv(name);
  if (!v || !*v) return clbSuccess;
  char* end = nullptr;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end || x < lo || x > hi)
    return clb::setError(clbInvalidArgument, "environment variable %s='%s' is not an integer in %lld..%lld", name, v,
                         (long long)lo, (long long)hi);
  *out = x;
  return clbSuccess;
}

bool envFlag(const char* name, bool dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  return strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

DeviceConfig readDeviceConfig(int nranks) {
  DeviceConfig d;
  auto word = [&d](const char* name, const char* const* words, int n, int* out) {
    const char* v = getenv(name);
    if (!v || !*v) return;
    const int i = findName(v, words, n);
    if (i >= 0) {
      *out = i;
      return;
    }
    std::string list;
    for (int k = 0; k < n; k++) list += std::string(k ? ", " : "") + words[k];
    d.error = std::string(name) + "='" + v + "' is not one of " + list;
    *out = n;  // the kind's "not valid" value
  };
  static const char* const kPaths[] = {"auto", "ll", "staged", "direct"};
  static const char* const kOnOff[] = {"on", "off"};
  static const char* const kAutoOff[] = {"auto", "off"};
  word("COLIBRI_DEVICE_PATH", kPaths, 4, &d.path);
  static const char* const kLaunch[] = {"auto", "graph", "kernel"};
  static const char* const kGate[] = {"auto", "on", "off"};
  int meet = 0, p2p = 0, launch = 0, inPlace = 0, gate = 0;
  word("COLIBRI_DEVICE_MEET", kOnOff, 2, &meet);
  word("COLIBRI_DEVICE_LAUNCH", kLaunch, 3, &launch);
  word("COLIBRI_DEVICE_P2P", kAutoOff, 2, &p2p);
  word("COLIBRI_DEVICE_P2P_IN_PLACE", kOnOff, 2, &inPlace);
  word("COLIBRI_DEVICE_GATE", kGate, 3, &gate);
  d.meetOff = meet == 1;
  d.launch = launch > kDeviceLaunchKernel ? kDeviceLaunchAuto : launch;  // a bad value: the error above
  d.p2pOff = p2p == 1;
  d.gate = gate > kDeviceGateOff ? kDeviceGateAuto : gate;  // a bad value: the error above
  d.p2pInPlaceOff = inPlace == 1;
  // LL lines carry 8 data bytes in 16, in two halves: the buffer is 4 x ranks x llMax bytes. By
  // default at most 256 KiB per destination and 6 MiB in all (192 KiB with 8 ranks).
  const int64_t llByDefault =
      std::min<int64_t>(kDefaultDeviceLLMaxBytes, kDeviceLLBufferCap / (4 * (int64_t)nranks) / 4096 * 4096);
  d.llMaxBytes = llByDefault;
  int64_t check = 0;
  if (envInt("COLIBRI_DEVICE_DIRECT_MIN_BYTES", 0, INT64_MAX, &d.directMinBytes) != clbSuccess ||
      envInt("COLIBRI_DEVICE_LL_MAX_BYTES", 0, kMaxDeviceLLMaxBytes, &d.llMaxBytes) != clbSuccess ||
      envInt("COLIBRI_DEVICE_CHECK_CALLS", 0, 1, &check) != clbSuccess ||
      envInt("COLIBRI_STUCK_WARN_PERCENT", 0, 99, &d.stuckWarnPercent) != clbSuccess) {
    d.error = lastError();
    clearError();  // init goes on: the first device call reports it
  }
  d.checkCalls = check != 0;
  // Decided from the value, which the ranks compare at init, not from whether the variable is
  // set: a rank that sets the default and one that does not must lower it alike (shared.cc).
  d.llMaxGiven = d.llMaxBytes != llByDefault;
  // Checked where it is used, at the first device call over verbs (a bad value fails that call).
  if (const char* v = getenv("COLIBRI_VERBS_GPU_MEMORY"); v && *v) {
    static const char* const kModes[] = {"auto", "dmabuf", "peermem", "host"};
    d.gpuMemoryText = v;
    d.gpuMemory = kGpuMemoryInvalid;
    for (int k = 0; k < 4; k++)
      if (!strcmp(v, kModes[k])) d.gpuMemory = k;
  }
  return d;
}

clbResult_t validateConfig(const clbConfig_t& c) {
  auto bad = [](const char* what, long long v, long long lo, long long hi) {
    return setError(clbInvalidArgument, "config %s=%lld is out of range %lld..%lld", what, v, lo, hi);
  };
  if (c.size != sizeof(clbConfig_t))
    return setError(clbInvalidArgument, "config.size=%zu but this library expects %zu: start from clbConfigInit",
                    c.size, sizeof(clbConfig_t));
  if (c.transport < 0 || c.transport >= clbNumTransports) return bad("transport", c.transport, 0, clbNumTransports - 1);
  if (c.algorithm < 0 || c.algorithm > clbAlgoDirect) return bad("algorithm", c.algorithm, 0, clbAlgoDirect);
  if (c.logLevel < 0 || c.logLevel > clbLogDebug) return bad("logLevel", c.logLevel, 0, clbLogDebug);
  if (c.pipelineDepth < kMinDepth || c.pipelineDepth > kMaxDepth)
    return bad("pipelineDepth", c.pipelineDepth, kMinDepth, kMaxDepth);
  if (c.chunkBytes < kMinChunk || c.chunkBytes > kMaxChunk)
    return bad("chunkBytes", c.chunkBytes, kMinChunk, kMaxChunk);
  if (c.directMaxBytes < 0 || c.directMaxBytes > kMaxDirect)
    return bad("directMaxBytes", c.directMaxBytes, 0, kMaxDirect);
  if (c.stagingCapBytes < kMinCap || c.stagingCapBytes > kMaxCap)
    return bad("stagingCapBytes", c.stagingCapBytes, kMinCap, kMaxCap);
  if (c.timeoutMs < 1 || c.timeoutMs > kMaxTimeoutMs) return bad("timeoutMs", c.timeoutMs, 1, kMaxTimeoutMs);
  if (c.versionCheck < 0 || c.versionCheck >= clbNumVersionChecks)
    return bad("versionCheck", c.versionCheck, 0, clbNumVersionChecks - 1);
  if (c.verbsPort < kMinVerbsPort || c.verbsPort > kMaxVerbsPort)
    return bad("verbsPort", c.verbsPort, kMinVerbsPort, kMaxVerbsPort);
  if (c.verbsGidIndex < kMinVerbsGidIndex || c.verbsGidIndex > kMaxVerbsGidIndex)
    return bad("verbsGidIndex", c.verbsGidIndex, kMinVerbsGidIndex, kMaxVerbsGidIndex);
  if (c.verbsTrafficClass < 0 || c.verbsTrafficClass > kMaxVerbsTrafficClass)
    return bad("verbsTrafficClass", c.verbsTrafficClass, 0, kMaxVerbsTrafficClass);
  if (c.verbsTimeout < 0 || c.verbsTimeout > kMaxVerbsTimeout)
    return bad("verbsTimeout", c.verbsTimeout, 0, kMaxVerbsTimeout);
  if (c.verbsRetryCount < 0 || c.verbsRetryCount > kMaxVerbsRetryCount)
    return bad("verbsRetryCount", c.verbsRetryCount, 0, kMaxVerbsRetryCount);
  if (c.verbsQpsPerConnection < kMinVerbsQpsPerConnection || c.verbsQpsPerConnection > kMaxVerbsQpsPerConnection)
    return bad("verbsQpsPerConnection", c.verbsQpsPerConnection, kMinVerbsQpsPerConnection, kMaxVerbsQpsPerConnection);
  if (!memchr(c.verbsDevice, 0, sizeof c.verbsDevice))
    return setError(clbInvalidArgument,
                    "config verbsDevice is not a NUL-terminated string within its %zu bytes "
                    "(device names up to %zu bytes)",
                    sizeof c.verbsDevice, sizeof c.verbsDevice - 1);
  return clbSuccess;
}

namespace {
// Earlier versions of clbConfig_t still accepted: their size, how many of their bytes are fields
// (the first version ended in padding), and what they lack.
struct OlderConfig {
  size_t size, copy;
  const char* name;
  const char* lacks;
};
constexpr OlderConfig kOlderConfigs[] = {
    {kConfigSizeV2, kConfigSizeV2, "second version", "verbsQpsPerConnection"},
    {kConfigSizeV1, offsetof(clbConfig_t, verbsPort), "first version", "the verbs settings"},
};
const OlderConfig* olderConfig(size_t size) {
  for (const OlderConfig& v : kOlderConfigs)
    if (v.size == size) return &v;
  return nullptr;
}
}  // namespace

clbResult_t resolveConfig(const clbConfig_t* in, clbConfig_t* out) {
  if (!in) {
    CLB_CHECK(clbConfigInitSized(out, sizeof *out));
  } else if (in->size == sizeof(clbConfig_t)) {
    *out = *in;
  } else if (const OlderConfig* v = olderConfig(in->size)) {
    CLB_CHECK(clbConfigInitSized(out, sizeof *out));  // defaults and COLIBRI_* for the fields an old caller lacks
    CLB_INFO(
        "a clbConfig_t of the %s (%zu bytes): %s from the environment and the defaults (a caller that sets "
        "them must start from clbConfigInitSized with sizeof(clbConfig_t))",
        v->name, v->size, v->lacks);
    memcpy(out, in, v->copy);
    out->size = sizeof(clbConfig_t);
  } else {
    return setError(clbInvalidArgument,
                    "config.size=%zu but this library expects %zu (or %zu, the struct "
                    "before verbsQpsPerConnection, or %zu, the struct before the verbs fields): start from "
                    "clbConfigInit",
                    in->size, sizeof(clbConfig_t), kConfigSizeV2, kConfigSizeV1);
  }
  return validateConfig(*out);
}

}  // namespace clb

extern "C" {

clbResult_t clbConfigInitSized(clbConfig_t* out, size_t bytes) {
  clb::clearError();
  if (!out) return clb::setError(clbInvalidArgument, "config is NULL");
  if (bytes != sizeof(clbConfig_t) && !clb::olderConfig(bytes))
    return clb::setError(clbInvalidArgument,
                         "a clbConfig_t of %zu bytes: this library knows %zu (current), %zu (the second version) "
                         "and %zu (the first version); rebuild against its colibri.h",
                         bytes, sizeof(clbConfig_t), clb::kConfigSizeV2, clb::kConfigSizeV1);
  clbConfig_t full;
  clbConfig_t* c = bytes == sizeof full ? out : &full;
  memset(c, 0, sizeof *c);
  c->size = sizeof *c;
  c->transport = clbTransportAuto;
  c->algorithm = clbAlgoAuto;
  c->logLevel = clbLogWarn;
  c->pipelineDepth = CLB_DEFAULT_PIPELINE_DEPTH;
  c->chunkBytes = CLB_DEFAULT_CHUNK_BYTES;
  c->directMaxBytes = CLB_DEFAULT_DIRECT_MAX_BYTES;
  c->stagingCapBytes = CLB_DEFAULT_STAGING_CAP_BYTES;
  c->timeoutMs = CLB_DEFAULT_TIMEOUT_MS;
  c->versionCheck = CLB_DEFAULT_VERSION_CHECK;
  c->verbsPort = CLB_DEFAULT_VERBS_PORT;
  c->verbsGidIndex = CLB_DEFAULT_VERBS_GID_INDEX;
  c->verbsTrafficClass = CLB_DEFAULT_VERBS_TRAFFIC_CLASS;
  c->verbsTimeout = CLB_DEFAULT_VERBS_TIMEOUT;
  c->verbsRetryCount = CLB_DEFAULT_VERBS_RETRY_COUNT;
  c->verbsQpsPerConnection = CLB_DEFAULT_VERBS_QPS_PER_CONNECTION;
  if (const char* v = getenv("COLIBRI_TRANSPORT"); v && *v) {
    int t = findName(v, kTransportNames, clbNumTransports);
    if (t < 0)
      return clb::setError(clbInvalidArgument, "COLIBRI_TRANSPORT='%s' is not one of auto, shm, socket, verbs", v);
    c->transport = t;
  }
  if (const char* v = getenv("COLIBRI_ALGORITHM"); v && *v) {
    int a = findName(v, kAlgoNames, clbAlgoDirect + 1);
    if (a < 0) return clb::setError(clbInvalidArgument, "COLIBRI_ALGORITHM='%s' is not one of auto, ring, direct", v);
    c->algorithm = a;
  }
  if (const char* v = getenv("COLIBRI_LOG_LEVEL"); v && *v) {
    int l = findName(v, kLogNames, 5);
    if (l < 0)
      return clb::setError(clbInvalidArgument, "COLIBRI_LOG_LEVEL='%s' is not one of off, error, warn, info, debug", v);
    c->logLevel = l;
  }
  int64_t x = c->pipelineDepth;
  if (clbResult_t rc = clb::envInt("COLIBRI_PIPELINE_DEPTH", clb::kMinDepth, clb::kMaxDepth, &x)) return rc;
  c->pipelineDepth = (int)x;
  if (clbResult_t rc = clb::envInt("COLIBRI_CHUNK_BYTES", clb::kMinChunk, clb::kMaxChunk, &c->chunkBytes)) return rc;
  if (clbResult_t rc = clb::envInt("COLIBRI_DIRECT_MAX_BYTES", 0, clb::kMaxDirect, &c->directMaxBytes)) return rc;
  if (clbResult_t rc = clb::envInt("COLIBRI_STAGING_CAP_BYTES", clb::kMinCap, clb::kMaxCap, &c->stagingCapBytes))
    return rc;
  if (clbResult_t rc = clb::envInt("COLIBRI_TIMEOUT_MS", 1, clb::kMaxTimeoutMs, &c->timeoutMs)) return rc;
  if (const char* v = getenv("COLIBRI_VERSION_CHECK"); v && *v) {
    int k = findName(v, kVersionCheckNames, clbNumVersionChecks);
    if (k < 0)
      return clb::setError(clbInvalidArgument, "COLIBRI_VERSION_CHECK='%s' is not one of warn, strict, exact", v);
    c->versionCheck = k;
  }
  if (const char* v = getenv("COLIBRI_VERBS_DEVICE"); v && *v) {
    if (strlen(v) >= sizeof c->verbsDevice)
      return clb::setError(clbInvalidArgument,
                           "environment variable COLIBRI_VERBS_DEVICE='%s' is %zu bytes long; "
                           "a device name may have at most %zu",
                           v, strlen(v), sizeof c->verbsDevice - 1);
    strcpy(c->verbsDevice, v);
  }
  struct {
    const char* name;
    int* field;
    int lo, hi;
  } ints[] = {
      {"COLIBRI_VERBS_PORT", &c->verbsPort, clb::kMinVerbsPort, clb::kMaxVerbsPort},
      {"COLIBRI_VERBS_GID_INDEX", &c->verbsGidIndex, clb::kMinVerbsGidIndex, clb::kMaxVerbsGidIndex},
      {"COLIBRI_VERBS_TRAFFIC_CLASS", &c->verbsTrafficClass, 0, clb::kMaxVerbsTrafficClass},
      {"COLIBRI_VERBS_TIMEOUT", &c->verbsTimeout, 0, clb::kMaxVerbsTimeout},
      {"COLIBRI_VERBS_RETRY_COUNT", &c->verbsRetryCount, 0, clb::kMaxVerbsRetryCount},
      {"COLIBRI_VERBS_QPS_PER_CONNECTION", &c->verbsQpsPerConnection, clb::kMinVerbsQpsPerConnection,
       clb::kMaxVerbsQpsPerConnection},
  };
  for (auto& f : ints) {
    int64_t x = *f.field;
    if (clbResult_t rc = clb::envInt(f.name, f.lo, f.hi, &x)) return rc;
    *f.field = (int)x;
  }
  if (c != out) {  // an earlier version's struct: its fields, its size
    memcpy(out, c, bytes);
    out->size = bytes;
  }
  return clbSuccess;
}

clbResult_t clbTransportFromName(const char* name, int* t) {
  clb::clearError();
  int v = name ? findName(name, kTransportNames, clbNumTransports) : -1;
  if (v < 0 || !t)
    return clb::setError(clbInvalidArgument, "unknown transport '%s': use auto, shm, socket or verbs",
                         name ? name : "(null)");
  *t = v;
  return clbSuccess;
}

clbResult_t clbAlgorithmFromName(const char* name, int* a) {
  clb::clearError();
  int v = name ? findName(name, kAlgoNames, clbNumAlgos) : -1;
  if (v < 0 || !a)
    return clb::setError(clbInvalidArgument, "unknown algorithm '%s': use auto, ring or direct",
                         name ? name : "(null)");
  *a = v;
  return clbSuccess;
}

const char* clbAlgorithmName(int a) { return a >= 0 && a < clbNumAlgos ? kAlgoNames[a] : "unknown"; }
const char* clbVersionCheckName(int v) { return v >= 0 && v < clbNumVersionChecks ? kVersionCheckNames[v] : "unknown"; }
const char* clbTransportName(int t) { return t >= 0 && t < clbNumTransports ? kTransportNames[t] : "unknown"; }

}  // extern "C"

// The exported name of programs built before clbConfigInit became a macro: the first version's
// struct (64 bytes), the only size they can have.
#undef clbConfigInit
clbResult_t clbConfigInit(clbConfig_t* config) { return clbConfigInitSized(config, clb::kConfigSizeV1); }
