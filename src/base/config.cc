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

constexpr const char* kTransportNames[] = {"auto", "shm", "socket", "verbs"};
static_assert(sizeof(kTransportNames) / sizeof(kTransportNames[0]) == clbNumTransports,
              "a name for every clbTransport_t (colibri.h), in its order");
constexpr const char* kAlgoNames[] = {"auto", "ring", "direct", "none"};
constexpr const char* kLogNames[] = {"off", "error", "warn", "info", "debug"};
constexpr const char* kVersionCheckNames[] = {"warn", "strict", "exact"};
constexpr const char* kDevicePaths[] = {"auto", "ll", "staged", "direct"};
constexpr const char* kDeviceLaunches[] = {"auto", "graph", "kernel"};
constexpr const char* kDeviceGates[] = {"auto", "on", "off"};
constexpr const char* kOffOn[] = {"off", "on"};
constexpr const char* kOffAuto[] = {"off", "auto"};
constexpr const char* kGpuMemories[] = {"auto", "dmabuf", "peermem", "host"};

int findName(const char* v, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(v, names[i]) == 0) return i;
  return -1;
}

// How a field is stored and its text read.
enum class Kind {
  kInt,        // an int in lo..hi
  kInt64,      // an int64_t in lo..hi
  kInt64Auto,  // an int64_t in lo..hi, or -1 written "auto"
  kWords,      // an int, the index of one of `words` (lo..hi: the ones that may be set)
  kText,       // a NUL-terminated char array of `hi` + 1 bytes
};

// One knob of clbConfig_t: the one table that clbConfigInit (defaults, then the environment),
// validateConfig, clbConfigSet / clbConfigGet and clbConfigOptionName read. Its names and ranges
// are io.colibri.Option's too (a test of colibri-native compares them, default by default and
// bound by bound), and docs/configuration.md's table is generated from that.
struct Spec {
  const char* name;  // the field, and the Java option's camel name
  const char* env;   // its COLIBRI_* variable
  Kind kind;
  size_t offset;
  int64_t lo, hi, dflt;
  const char* const* words;
};

#define CLB_FIELD(f) offsetof(clbConfig_t, f)
constexpr Spec kSpecs[] = {
    {"transport", "COLIBRI_TRANSPORT", Kind::kWords, CLB_FIELD(transport), 0, clbNumTransports - 1, clbTransportAuto,
     kTransportNames},
    // "none" is only reported (a call that moved nothing), never forced.
    {"algorithm", "COLIBRI_ALGORITHM", Kind::kWords, CLB_FIELD(algorithm), 0, clbAlgoDirect, clbAlgoAuto, kAlgoNames},
    {"logLevel", "COLIBRI_LOG_LEVEL", Kind::kWords, CLB_FIELD(logLevel), 0, clbLogDebug, clbLogWarn, kLogNames},
    {"pipelineDepth", "COLIBRI_PIPELINE_DEPTH", Kind::kInt, CLB_FIELD(pipelineDepth), clb::kMinDepth, clb::kMaxDepth,
     CLB_DEFAULT_PIPELINE_DEPTH, nullptr},
    {"chunkBytes", "COLIBRI_CHUNK_BYTES", Kind::kInt64, CLB_FIELD(chunkBytes), clb::kMinChunk, clb::kMaxChunk,
     CLB_DEFAULT_CHUNK_BYTES, nullptr},
    {"directMaxBytes", "COLIBRI_DIRECT_MAX_BYTES", Kind::kInt64, CLB_FIELD(directMaxBytes), 0, clb::kMaxDirect,
     CLB_DEFAULT_DIRECT_MAX_BYTES, nullptr},
    {"stagingCapBytes", "COLIBRI_STAGING_CAP_BYTES", Kind::kInt64, CLB_FIELD(stagingCapBytes), clb::kMinCap,
     clb::kMaxCap, CLB_DEFAULT_STAGING_CAP_BYTES, nullptr},
    {"timeoutMs", "COLIBRI_TIMEOUT_MS", Kind::kInt64, CLB_FIELD(timeoutMs), 1, clb::kMaxTimeoutMs,
     CLB_DEFAULT_TIMEOUT_MS, nullptr},
    {"versionCheck", "COLIBRI_VERSION_CHECK", Kind::kWords, CLB_FIELD(versionCheck), 0, clbNumVersionChecks - 1,
     CLB_DEFAULT_VERSION_CHECK, kVersionCheckNames},
    {"verbsPort", "COLIBRI_VERBS_PORT", Kind::kInt, CLB_FIELD(verbsPort), clb::kMinVerbsPort, clb::kMaxVerbsPort,
     CLB_DEFAULT_VERBS_PORT, nullptr},
    {"verbsGidIndex", "COLIBRI_VERBS_GID_INDEX", Kind::kInt, CLB_FIELD(verbsGidIndex), clb::kMinVerbsGidIndex,
     clb::kMaxVerbsGidIndex, CLB_DEFAULT_VERBS_GID_INDEX, nullptr},
    {"verbsTrafficClass", "COLIBRI_VERBS_TRAFFIC_CLASS", Kind::kInt, CLB_FIELD(verbsTrafficClass), 0,
     clb::kMaxVerbsTrafficClass, CLB_DEFAULT_VERBS_TRAFFIC_CLASS, nullptr},
    {"verbsTimeout", "COLIBRI_VERBS_TIMEOUT", Kind::kInt, CLB_FIELD(verbsTimeout), 0, clb::kMaxVerbsTimeout,
     CLB_DEFAULT_VERBS_TIMEOUT, nullptr},
    {"verbsRetryCount", "COLIBRI_VERBS_RETRY_COUNT", Kind::kInt, CLB_FIELD(verbsRetryCount), 0,
     clb::kMaxVerbsRetryCount, CLB_DEFAULT_VERBS_RETRY_COUNT, nullptr},
    {"verbsDevice", "COLIBRI_VERBS_DEVICE", Kind::kText, CLB_FIELD(verbsDevice), 0, CLB_VERBS_DEVICE_BYTES - 1, 0,
     nullptr},
    {"verbsQpsPerConnection", "COLIBRI_VERBS_QPS_PER_CONNECTION", Kind::kInt, CLB_FIELD(verbsQpsPerConnection),
     clb::kMinVerbsQpsPerConnection, clb::kMaxVerbsQpsPerConnection, CLB_DEFAULT_VERBS_QPS_PER_CONNECTION, nullptr},
    {"devicePath", "COLIBRI_DEVICE_PATH", Kind::kWords, CLB_FIELD(devicePath), 0, 3, clb::kDevicePathAuto,
     kDevicePaths},
    {"deviceLaunch", "COLIBRI_DEVICE_LAUNCH", Kind::kWords, CLB_FIELD(deviceLaunch), 0, 2, clb::kDeviceLaunchAuto,
     kDeviceLaunches},
    {"deviceGate", "COLIBRI_DEVICE_GATE", Kind::kWords, CLB_FIELD(deviceGate), 0, 2, clb::kDeviceGateAuto,
     kDeviceGates},
    {"deviceMeet", "COLIBRI_DEVICE_MEET", Kind::kWords, CLB_FIELD(deviceMeet), 0, 1, 1, kOffOn},
    {"deviceP2P", "COLIBRI_DEVICE_P2P", Kind::kWords, CLB_FIELD(deviceP2P), 0, 1, 1, kOffAuto},
    {"deviceP2PInPlace", "COLIBRI_DEVICE_P2P_IN_PLACE", Kind::kWords, CLB_FIELD(deviceP2PInPlace), 0, 1, 1, kOffOn},
    {"deviceCheckCalls", "COLIBRI_DEVICE_CHECK_CALLS", Kind::kInt, CLB_FIELD(deviceCheckCalls), 0, 1, 0, nullptr},
    {"stuckWarnPercent", "COLIBRI_STUCK_WARN_PERCENT", Kind::kInt, CLB_FIELD(stuckWarnPercent), 0, 99,
     CLB_DEFAULT_STUCK_WARN_PERCENT, nullptr},
    {"verbsGpuMemory", "COLIBRI_VERBS_GPU_MEMORY", Kind::kWords, CLB_FIELD(verbsGpuMemory), 0, 3, clb::kGpuMemoryAuto,
     kGpuMemories},
    {"deviceLLMaxBytes", "COLIBRI_DEVICE_LL_MAX_BYTES", Kind::kInt64Auto, CLB_FIELD(deviceLLMaxBytes), 0,
     clb::kMaxDeviceLLMaxBytes, -1, nullptr},
    {"deviceDirectMinBytes", "COLIBRI_DEVICE_DIRECT_MIN_BYTES", Kind::kInt64, CLB_FIELD(deviceDirectMinBytes), 0,
     INT64_MAX, clb::kDefaultDeviceDirectMinBytes, nullptr},
};
#undef CLB_FIELD
constexpr int kNumSpecs = sizeof kSpecs / sizeof kSpecs[0];

// Every byte of clbConfig_t after `size` is one knob's (the struct has no padding): a field added
// to it without a row here fails this.
constexpr size_t fieldBytes(const Spec& s) {
  return s.kind == Kind::kText ? (size_t)s.hi + 1 : s.kind == Kind::kInt || s.kind == Kind::kWords ? 4 : 8;
}
constexpr size_t specBytes(int i) { return i == kNumSpecs ? 0 : fieldBytes(kSpecs[i]) + specBytes(i + 1); }
static_assert(specBytes(0) + sizeof(size_t) == sizeof(clbConfig_t), "every field of clbConfig_t has its row in kSpecs");

const Spec* findSpec(const char* name) {
  for (const Spec& s : kSpecs)
    if (name && strcmp(s.name, name) == 0) return &s;
  return nullptr;
}

int64_t getField(const clbConfig_t* c, const Spec& s) {
  const char* p = reinterpret_cast<const char*>(c) + s.offset;
  if (s.kind == Kind::kInt || s.kind == Kind::kWords) return *reinterpret_cast<const int*>(p);
  return *reinterpret_cast<const int64_t*>(p);
}

void setField(clbConfig_t* c, const Spec& s, int64_t v) {
  char* p = reinterpret_cast<char*>(c) + s.offset;
  if (s.kind == Kind::kInt || s.kind == Kind::kWords)
    *reinterpret_cast<int*>(p) = (int)v;
  else
    *reinterpret_cast<int64_t*>(p) = v;
}

std::string wordList(const Spec& s) {
  std::string list;
  for (int64_t k = s.lo; k <= s.hi; k++) list += std::string(k > s.lo ? ", " : "") + s.words[k];
  return list;
}

// What a knob takes, in words: "auto, shm, socket, verbs", "an integer in 1..64", ...
std::string validText(const Spec& s) {
  switch (s.kind) {
    case Kind::kWords: return "one of " + wordList(s);
    case Kind::kText: return "a text of at most " + std::to_string(s.hi) + " bytes";
    case Kind::kInt64Auto: return "auto (-1) or an integer in " + std::to_string(s.lo) + ".." + std::to_string(s.hi);
    default: return "an integer in " + std::to_string(s.lo) + ".." + std::to_string(s.hi);
  }
}

// Reads `text` as a value of `s` into *out (not a kText); false when it is not valid.
bool parseValue(const Spec& s, const char* text, int64_t* out) {
  if (s.kind == Kind::kWords) {
    const int i = findName(text, s.words + s.lo, (int)(s.hi - s.lo + 1));
    if (i < 0) return false;
    *out = s.lo + i;
    return true;
  }
  if (s.kind == Kind::kInt64Auto && strcasecmp(text, "auto") == 0) {  // -1 too, as a number
    *out = -1;
    return true;
  }
  if (!(*text == '-' || *text == '+' || (*text >= '0' && *text <= '9'))) return false;  // strtoll skips spaces
  char* end = nullptr;
  errno = 0;
  const long long x = strtoll(text, &end, 10);
  if (errno || end == text || *end) return false;
  if ((x < s.lo || x > s.hi) && !(s.kind == Kind::kInt64Auto && x == -1)) return false;
  *out = x;
  return true;
}

// A text value with a control character (a newline in a device name would reach logs and lookups).
bool hasControl(const char* v) {
  for (; *v; v++)
    if ((unsigned char)*v < 0x20 || *v == 0x7f) return true;
  return false;
}

// Sets knob `s` of `c` from `v`, the text of its COLIBRI_* variable (fromEnv) or of clbConfigSet;
// a value that is not valid leaves the field as it was and is refused, worded for where it came
// from.
clbResult_t setFromText(clbConfig_t* c, const Spec& s, const char* v, bool fromEnv) {
  const char* from = fromEnv ? "environment variable " : "clbConfigSet: ";
  const char* name = fromEnv ? s.env : s.name;
  if (s.kind == Kind::kText) {
    if (strlen(v) > (size_t)s.hi)
      return clb::setError(clbInvalidArgument, "%s%s='%s' is %zu bytes long; %s have at most %lld", from, name, v,
                           strlen(v), fromEnv ? "a device name may" : "it may", (long long)s.hi);
    if (hasControl(v)) return clb::setError(clbInvalidArgument, "%s%s holds a control character", from, name);
    char* field = reinterpret_cast<char*>(c) + s.offset;
    memset(field, 0, s.hi + 1);
    memcpy(field, v, strlen(v));
    return clbSuccess;
  }
  int64_t x = 0;
  if (!parseValue(s, v, &x))  // a variable's words are named bare: "COLIBRI_TLS='yes' is not one of ..."
    return clb::setError(clbInvalidArgument, "%s%s='%s' is not %s", fromEnv && s.kind == Kind::kWords ? "" : from, name,
                         v, validText(s).c_str());
  setField(c, s, x);
  return clbSuccess;
}

// The value of one knob from its COLIBRI_* variable, when that is set and not empty.
clbResult_t applyEnvironment(clbConfig_t* c, const Spec& s) {
  const char* v = getenv(s.env);
  return v && *v ? setFromText(c, s, v, true) : clbSuccess;
}

// The arguments every clbConfigSet / clbConfigGet checks: a config of this version, and `other`.
clbResult_t checkArgs(const char* call, const clbConfig_t* c, const void* other, const char* otherName) {
  if (!c || !other) return clb::setError(clbInvalidArgument, "%s: %s is NULL", call, c ? otherName : "config");
  if (c->size != sizeof(clbConfig_t))
    return clb::setError(clbInvalidArgument,
                         "%s: config.size=%zu, but it takes the full struct of this library (%zu bytes): make it with "
                         "clbConfigInitSized(&c, sizeof(clbConfig_t)) against this colibri.h",
                         call, c->size, sizeof(clbConfig_t));
  return clbSuccess;
}

}  // namespace

namespace clb {

bool envFlag(const char* name, bool dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  return strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

bool optionText(const clbConfig_t& c, const char* name, std::string* out) {
  const Spec* s = findSpec(name);
  if (!s) return false;
  if (s->kind == Kind::kText) {
    const char* field = reinterpret_cast<const char*>(&c) + s->offset;
    out->assign(field, strnlen(field, s->hi + 1));
    return true;
  }
  const int64_t v = getField(&c, *s);
  if (s->kind == Kind::kWords && v >= 0 && v <= s->hi)
    *out = s->words[v];
  else if (s->kind == Kind::kInt64Auto && v == -1)
    *out = "auto";
  else
    *out = std::to_string(v);
  return true;
}

const char* optionWord(const char* name, int64_t v) {
  const Spec* s = findSpec(name);
  return s && s->kind == Kind::kWords && v >= 0 && v <= s->hi ? s->words[v] : "a value that is not valid";
}

const char* optionVariable(int i) { return i >= 0 && i < kNumSpecs ? kSpecs[i].env : nullptr; }

void defaultConfig(clbConfig_t* c) {
  memset(c, 0, sizeof *c);
  c->size = sizeof *c;
  for (const Spec& s : kSpecs)
    if (s.kind != Kind::kText) setField(c, s, s.dflt);
}

void salvageConfig(const clbConfig_t* in, clbConfig_t* out) {
  defaultConfig(out);
  if (!in) {
    for (const Spec& s : kSpecs)
      if (applyEnvironment(out, s) != clbSuccess) clearError();
    return;
  }
  if (in->size != sizeof(clbConfig_t)) return;  // an older or unknown struct: the defaults
  for (const Spec& s : kSpecs) {
    const char* src = reinterpret_cast<const char*>(in) + s.offset;
    if (s.kind == Kind::kText) {
      if (memchr(src, 0, s.hi + 1)) memcpy(reinterpret_cast<char*>(out) + s.offset, src, s.hi + 1);
      continue;
    }
    const int64_t v = getField(in, s);
    if ((v >= s.lo && v <= s.hi) || (s.kind == Kind::kInt64Auto && v == -1)) setField(out, s, v);
  }
}

DeviceConfig readDeviceConfig(const clbConfig_t& c, int nranks) {
  DeviceConfig d;
  d.path = c.devicePath;
  d.meetOff = c.deviceMeet == 0;
  d.launch = c.deviceLaunch;
  d.gate = c.deviceGate;
  d.p2pOff = c.deviceP2P == 0;
  d.p2pInPlaceOff = c.deviceP2PInPlace == 0;
  d.checkCalls = c.deviceCheckCalls != 0;
  d.directMinBytes = c.deviceDirectMinBytes;
  d.stuckWarnPercent = c.stuckWarnPercent;
  // LL lines carry 8 data bytes in 16, in two halves: the buffer is 4 x ranks x llMax bytes. By
  // default at most 256 KiB per destination and 6 MiB in all (192 KiB with 8 ranks).
  const int64_t llByDefault =
      std::min<int64_t>(kDefaultDeviceLLMaxBytes, kDeviceLLBufferCap / (4 * (int64_t)nranks) / 4096 * 4096);
  d.llMaxBytes = c.deviceLLMaxBytes < 0 ? llByDefault : c.deviceLLMaxBytes;
  // Decided from the value, which the ranks compare at init, not from whether it was set: a rank
  // that sets the default and one that does not must lower it alike (shared.cc).
  d.llMaxGiven = d.llMaxBytes != llByDefault;
  d.gpuMemory = c.verbsGpuMemory;
  d.gpuMemoryText = kGpuMemories[c.verbsGpuMemory];
  return d;
}

clbResult_t validateConfig(const clbConfig_t& c) {
  if (c.size != sizeof(clbConfig_t))
    return setError(clbInvalidArgument, "config.size=%zu but this library expects %zu: start from clbConfigInit",
                    c.size, sizeof(clbConfig_t));
  for (const Spec& s : kSpecs) {
    if (s.kind == Kind::kText) {
      if (!memchr(reinterpret_cast<const char*>(&c) + s.offset, 0, s.hi + 1))
        return setError(clbInvalidArgument,
                        "config %s is not a NUL-terminated string within its %lld bytes "
                        "(device names up to %lld bytes)",
                        s.name, (long long)s.hi + 1, (long long)s.hi);
      continue;
    }
    const int64_t v = getField(&c, s);
    if ((v < s.lo || v > s.hi) && !(s.kind == Kind::kInt64Auto && v == -1))
      return setError(clbInvalidArgument, "config %s=%lld is out of range %lld..%lld%s", s.name, (long long)v,
                      (long long)s.lo, (long long)s.hi, s.kind == Kind::kInt64Auto ? " (or -1: auto)" : "");
  }
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
    {kConfigSizeV3, offsetof(clbConfig_t, devicePath), "third version", "the device settings"},
    {kConfigSizeV2, kConfigSizeV2, "second version", "verbsQpsPerConnection and the device settings"},
    {kConfigSizeV1, offsetof(clbConfig_t, verbsPort), "first version", "the verbs and device settings"},
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
                    "config.size=%zu but this library expects %zu (or %zu, the struct before the device "
                    "settings, %zu, the struct before verbsQpsPerConnection, or %zu, the struct before the verbs "
                    "fields): start from clbConfigInit",
                    in->size, sizeof(clbConfig_t), kConfigSizeV3, kConfigSizeV2, kConfigSizeV1);
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
                         "a clbConfig_t of %zu bytes: this library knows %zu (current), %zu (the third version), %zu "
                         "(the second version) and %zu (the first version); rebuild against its colibri.h",
                         bytes, sizeof(clbConfig_t), clb::kConfigSizeV3, clb::kConfigSizeV2, clb::kConfigSizeV1);
  clbConfig_t full;
  clbConfig_t* c = bytes == sizeof full ? out : &full;
  clb::defaultConfig(c);
  for (const Spec& s : kSpecs)
    if (clbResult_t rc = applyEnvironment(c, s)) return rc;
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

clbResult_t clbConfigSet(clbConfig_t* c, const char* name, const char* value) {
  clb::clearError();
  if (clbResult_t rc = checkArgs("clbConfigSet", c, value, "value")) return rc;
  const Spec* s = findSpec(name);
  if (!s) {
    std::string all;
    for (const Spec& k : kSpecs) all += std::string(all.empty() ? "" : ", ") + k.name;
    return clb::setError(clbInvalidArgument, "clbConfigSet: no option '%s'; the options are %s", name ? name : "(null)",
                         all.c_str());
  }
  return setFromText(c, *s, value, false);
}

clbResult_t clbConfigGet(const clbConfig_t* c, const char* name, char* buf, size_t bytes) {
  clb::clearError();
  if (clbResult_t rc = checkArgs("clbConfigGet", c, buf, "buf")) return rc;
  std::string text;
  if (!clb::optionText(*c, name, &text))
    return clb::setError(clbInvalidArgument, "clbConfigGet: no option '%s'", name ? name : "(null)");
  if (text.size() >= bytes)
    return clb::setError(clbInvalidArgument, "clbConfigGet: %s needs %zu bytes with its NUL, buf has %zu", name,
                         text.size() + 1, bytes);
  memcpy(buf, text.c_str(), text.size() + 1);
  return clbSuccess;
}

const char* clbConfigOptionName(int i) { return i >= 0 && i < kNumSpecs ? kSpecs[i].name : nullptr; }

const char* clbAlgorithmName(int a) { return a >= 0 && a < clbNumAlgos ? kAlgoNames[a] : "unknown"; }
const char* clbVersionCheckName(int v) { return v >= 0 && v < clbNumVersionChecks ? kVersionCheckNames[v] : "unknown"; }
const char* clbTransportName(int t) { return t >= 0 && t < clbNumTransports ? kTransportNames[t] : "unknown"; }

}  // extern "C"

// The exported name of programs built before clbConfigInit became a macro: the first version's
// struct (64 bytes), the only size they can have.
#undef clbConfigInit
clbResult_t clbConfigInit(clbConfig_t* config) { return clbConfigInitSized(config, clb::kConfigSizeV1); }
