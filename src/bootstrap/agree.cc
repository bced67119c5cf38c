// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/agree.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "bootstrap/versions.h"

namespace clb {
namespace {

// Where a setting changes anything, judged from rank 0's resolved transport and algorithm (they
// are compared first: when they differ, that is the difference named).
enum Scope {
  kAlways,
  kRing,     // the ring algorithm may run (the algorithm is not direct)
  kShmAuto,  // transport shm with algorithm auto: it picks direct or ring by size
  kShm,      // transport shm: the device path's kernels on one host
  kVerbs,    // transport verbs
};

struct Resolved {
  int transport;  // auto resolved: shm when every rank is on one host, else socket
  int algorithm;  // auto stays auto on shm; off shm it is ring
};

// `transport`: rank 0's, so that a rank on another transport is named for that alone (its auto
// would resolve otherwise too).
Resolved resolve(const AgreedSettings& a, bool allOnOneHost, int transport) {
  Resolved r{resolveTransport(a.transport, allOnOneHost), a.algorithm};
  if (r.algorithm == clbAlgoAuto && transport != clbTransportShm) r.algorithm = clbAlgoRing;
  return r;
}

struct Item {
  const char* env;
  const char* option;  // the Options / clbConfig_t name
  Scope scope;
  // The value compared (resolved), and how a message shows it.
  int64_t (*value)(const AgreedSettings&, const Resolved&);
  std::string (*text)(const AgreedSettings&, const Resolved&);
};

std::string num(int64_t v) { return std::to_string(v); }

const Item kItems[] = {
    {"COLIBRI_TRANSPORT", "transport", kAlways,
     [](const AgreedSettings&, const Resolved& r) { return (int64_t)r.transport; },
     [](const AgreedSettings&, const Resolved& r) { return std::string(clbTransportName(r.transport)); }},
    {"COLIBRI_ALGORITHM", "algorithm", kAlways,
     [](const AgreedSettings&, const Resolved& r) { return (int64_t)r.algorithm; },
     [](const AgreedSettings&, const Resolved& r) { return std::string(clbAlgorithmName(r.algorithm)); }},
    {"COLIBRI_CHUNK_BYTES", "chunkBytes", kRing, [](const AgreedSettings& a, const Resolved&) { return a.chunkBytes; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.chunkBytes); }},
    // Depth 1 runs as 2 on every transport (two slots at least).
    {"COLIBRI_PIPELINE_DEPTH", "pipelineDepth", kRing,
     [](const AgreedSettings& a, const Resolved&) { return (int64_t)(a.pipelineDepth < 2 ? 2 : a.pipelineDepth); },
     [](const AgreedSettings& a, const Resolved&) { return num(a.pipelineDepth); }},
    {"COLIBRI_DIRECT_MAX_BYTES", "directMaxBytes", kShmAuto,
     [](const AgreedSettings& a, const Resolved&) { return a.directMaxBytes; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.directMaxBytes); }},
    {"COLIBRI_STAGING_CAP_BYTES", "stagingCapBytes", kShmAuto,
     [](const AgreedSettings& a, const Resolved&) { return a.stagingCapBytes; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.stagingCapBytes); }},
    {"COLIBRI_VERBS_QPS_PER_CONNECTION", "verbsQpsPerConnection", kVerbs,
     [](const AgreedSettings& a, const Resolved&) { return (int64_t)a.verbsQpsPerConnection; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.verbsQpsPerConnection); }},
    {"COLIBRI_VERBS_GPU_MEMORY", "verbsGpuMemory", kVerbs,
     [](const AgreedSettings& a, const Resolved&) { return (int64_t)a.verbsGpuMemory; },
     [](const AgreedSettings& a, const Resolved&) {
       return std::string(optionWord("verbsGpuMemory", a.verbsGpuMemory));
     }},
    {"COLIBRI_DEVICE_PATH", "devicePath", kShm,
     [](const AgreedSettings& a, const Resolved&) { return (int64_t)a.devicePath; },
     [](const AgreedSettings& a, const Resolved&) { return std::string(optionWord("devicePath", a.devicePath)); }},
    {"COLIBRI_DEVICE_LL_MAX_BYTES", "deviceLLMaxBytes", kShm,
     [](const AgreedSettings& a, const Resolved&) { return a.deviceLLMaxBytes; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.deviceLLMaxBytes); }},
    {"COLIBRI_DEVICE_DIRECT_MIN_BYTES", "deviceDirectMinBytes", kShm,
     [](const AgreedSettings& a, const Resolved&) { return a.deviceDirectMinBytes; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.deviceDirectMinBytes); }},
    {"COLIBRI_DEVICE_CHECK_CALLS", "deviceCheckCalls", kShm,
     [](const AgreedSettings& a, const Resolved&) { return (int64_t)a.deviceCheckCalls; },
     [](const AgreedSettings& a, const Resolved&) { return num(a.deviceCheckCalls); }},
};

bool applies(Scope s, const Resolved& r) {
  switch (s) {
    case kAlways: return true;
    case kRing: return r.algorithm != clbAlgoDirect;
    case kShmAuto: return r.transport == clbTransportShm && r.algorithm == clbAlgoAuto;
    case kShm: return r.transport == clbTransportShm;
    case kVerbs: return r.transport == clbTransportVerbs;
  }
  return true;
}

}  // namespace

int resolveTransport(int t, bool allOnOneHost) {
  return t == clbTransportAuto ? (allOnOneHost ? clbTransportShm : clbTransportSocket) : t;
}

AgreedSettings agreedSettings(const clbConfig_t& cfg, const DeviceConfig& device, bool valid) {
  AgreedSettings a;
  memset(&a, 0, sizeof a);
  a.transport = cfg.transport;
  a.algorithm = cfg.algorithm;
  a.pipelineDepth = cfg.pipelineDepth;
  a.verbsQpsPerConnection = cfg.verbsQpsPerConnection;
  a.chunkBytes = cfg.chunkBytes;
  a.directMaxBytes = cfg.directMaxBytes;
  a.stagingCapBytes = cfg.stagingCapBytes;
  a.verbsGpuMemory = device.gpuMemory;
  a.devicePath = device.path;
  a.deviceCheckCalls = device.checkCalls ? 1 : 0;
  a.deviceLLMaxBytes = device.llMaxBytes;
  a.deviceDirectMinBytes = device.directMinBytes;
  a.settingsValid = valid ? 1 : 0;
  return a;
}

clbResult_t checkAgreedSettings(const std::vector<RankInfo>& peers) {
  const int n = (int)peers.size();
  if (n < 2) return clbSuccess;
  bool oneHost = true;
  for (const RankInfo& p : peers) oneHost = oneHost && p.hostHash == peers[0].hostHash;
  std::vector<Resolved> res(n);
  const int transport0 = resolveTransport(peers[0].agreed.transport, oneHost);
  for (int r = 0; r < n; r++) res[r] = resolve(peers[r].agreed, oneHost, transport0);
  const Item* first = nullptr;
  int other = -1;
  std::string alsoDiffer;
  for (const Item& it : kItems) {
    if (!applies(it.scope, res[0])) continue;
    const int64_t ref = it.value(peers[0].agreed, res[0]);
    int r = 1;
    while (r < n && it.value(peers[r].agreed, res[r]) == ref) r++;
    if (r == n) continue;
    if (first) {
      alsoDiffer += std::string(alsoDiffer.empty() ? "" : ", ") + it.env;
      continue;
    }
    first = &it;
    other = r;
  }
  if (!first) return clbSuccess;
  std::string all;
  if (n > 2) {
    std::vector<std::string> values;
    for (int r = 0; r < n; r++) values.push_back(first->text(peers[r].agreed, res[r]));
    all = " (" + valuesByRank(values) + ")";
  }
  const std::string setting = first->option ? std::string(first->option) + " / " + first->env : first->env;
  return setError(clbInvalidUsage,
                  "%s differs across ranks: rank 0 resolved %s, rank %d resolved %s%s (set %s alike "
                  "on every rank)%s%s",
                  first->env, first->text(peers[0].agreed, res[0]).c_str(), other,
                  first->text(peers[other].agreed, res[other]).c_str(), all.c_str(), setting.c_str(),
                  alsoDiffer.empty() ? "" : "; these differ too: ", alsoDiffer.c_str());
}

}  // namespace clb
