// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// libcolibri_verbs.so's one export: clbNetPlugin_v1 (colibri/net_plugin.h), the verbs ring
// channel behind the C plugin interface. The table is libibverbs.so.1, dlopen'ed on first use
// (verbs_loader.cc); errors and logs go to the core through the clbNetCore_v1_t of init
// (plugin_support.cc). A clbNetChannel is a VerbsChannel: the ring's, or one of a rank's
// point-to-point channels (peerOpen: both links to one peer, one device shared by the rank's).
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "colibri/net_plugin.h"
#include "base/error.h"
#include "transport/channel.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/verbs_connect.h"

namespace clb {

void setPluginCore(const clbNetCore_v1_t* core);  // plugin_support.cc

namespace verbs {
namespace {

static_assert(sizeof(clbNetTag_v1_t) == sizeof(MsgTag) && sizeof(OpDesc) == CLB_NET_TAG_CALL_BYTES &&
                  offsetof(clbNetTag_v1_t, index) == offsetof(MsgTag, index) &&
                  offsetof(clbNetTag_v1_t, bytes) == offsetof(MsgTag, bytes) &&
                  std::is_trivially_copyable<MsgTag>::value,
              "clbNetTag_v1_t is the core's MsgTag byte for byte");

VerbsChannel* of(clbNetChannel ch) { return reinterpret_cast<VerbsChannel*>(ch); }

MsgTag toTag(const clbNetTag_v1_t* t) {
  MsgTag m;
  memcpy(&m, t, sizeof m);
  return m;
}

void copyOut(const std::string& s, char* buf, size_t len) {
  if (!buf || !len) return;
  snprintf(buf, len, "%s", s.c_str());
}

clbResult_t pluginInit(const clbNetCore_v1_t* core) {
  if (!core || core->version != CLB_NET_PLUGIN_VERSION || core->size < sizeof(clbNetCore_v1_t)) {
    fprintf(stderr, "colibri verbs plugin: the core's interface is version %u (size %u), this plugin needs %d\n",
            core ? core->version : 0, core ? core->size : 0, CLB_NET_PLUGIN_VERSION);
    return clbInvalidUsage;
  }
  setPluginCore(core);
  return clbSuccess;
}

clbResult_t pluginConnect(const clbNetHost_v1_t* host, const clbNetDeviceMemory_v1_t* device, clbNetChannel* out,
                          char* describe, size_t describeLen) {
  if (out) *out = nullptr;
  if (!host || !out || host->version != CLB_NET_PLUGIN_VERSION || host->size < sizeof(clbNetHost_v1_t))
    return setError(clbInvalidArgument, "verbs plugin: connect without a host of interface version %d",
                    CLB_NET_PLUGIN_VERSION);
  const VerbsApi* api = nullptr;
  clbResult_t rc = loadLibibverbs(&api);
  std::unique_ptr<VerbsChannel> ch;
  std::string text;
  CLB_CHECK(connectVerbs(rc == clbSuccess ? api : nullptr, rc, *host, device, &ch, &text));
  copyOut(text, describe, describeLen);
  *out = reinterpret_cast<clbNetChannel>(ch.release());
  return clbSuccess;
}

void pluginDestroy(clbNetChannel ch) { delete of(ch); }

clbResult_t pluginPrepare(clbNetChannel ch, size_t maxBytes) { return of(ch)->prepare(maxBytes); }
clbResult_t pluginAcquireSend(clbNetChannel ch, size_t bytes, void** buf) { return of(ch)->acquireSend(bytes, buf); }
clbResult_t pluginPostSend(clbNetChannel ch, const clbNetTag_v1_t* tag) { return of(ch)->postSend(toTag(tag)); }
clbResult_t pluginWaitRecv(clbNetChannel ch, clbNetTag_v1_t* got, const void** buf) {
  MsgTag t;
  CLB_CHECK(of(ch)->waitRecvTag(&t, buf));
  memcpy(got, &t, sizeof t);
  return clbSuccess;
}
clbResult_t pluginReleaseRecv(clbNetChannel ch) { return of(ch)->releaseRecv(); }
clbResult_t pluginFinish(clbNetChannel ch) { return of(ch)->finish(); }
clbResult_t pluginTrim(clbNetChannel ch) { return of(ch)->trim(); }
clbResult_t pluginSendFrom(clbNetChannel ch, const void* src, const clbNetTag_v1_t* tag, int* sent) {
  bool s = false;
  clbResult_t rc = of(ch)->sendFrom(src, toTag(tag), &s);
  *sent = s ? 1 : 0;
  return rc;
}
clbResult_t pluginStats(clbNetChannel ch, clbNetStats_v1_t* out) {
  const VerbsChannel::UserRegStats st = of(ch)->userRegStats();
  memset(out, 0, sizeof *out);
  out->registeredBytes = of(ch)->registeredBytes();
  out->userRegs = st.cached;
  out->userRegBytes = st.cachedBytes;
  out->userRegHits = st.hits;
  return clbSuccess;
}

// The devices of the point-to-point channels, one per communicator (host->ctx), shared by its
// channels to every peer: one device context and protection domain per rank, however many peers.
std::mutex gPeerDevicesMutex;
std::map<void*, std::weak_ptr<VerbsDevice>> gPeerDevices;

// What a point-to-point channel tells its peer: the link to the peer and the link from it.
struct PeerInfo {
  VerbsConnInfo send, recv;
};

clbResult_t peerOpenWith(const clbNetHost_v1_t* host, const clbNetDeviceMemory_v1_t* device, int peer, size_t maxBytes,
                         clbNetChannel* out, void* info, size_t* infoLen) {
  if (out) *out = nullptr;
  if (!host || !out || !infoLen || host->version != CLB_NET_PLUGIN_VERSION || host->size < sizeof(clbNetHost_v1_t))
    return setError(clbInvalidArgument, "verbs plugin: peerOpen without a host of interface version %d",
                    CLB_NET_PLUGIN_VERSION);
  if (!info || *infoLen < sizeof(PeerInfo))
    return setError(clbInvalidArgument, "verbs plugin: peerOpen needs %zu bytes of info, got %zu", sizeof(PeerInfo),
                    *infoLen);
  if (peer < 0 || peer >= host->nranks || peer == host->rank)
    return setError(clbInvalidArgument, "verbs plugin: peerOpen with rank %d of %d, this rank being %d", peer,
                    host->nranks, host->rank);
  const VerbsApi* api = nullptr;
  CLB_CHECK(loadLibibverbs(&api));
  VerbsOptions o;
  std::string deviceName;
  CLB_CHECK(verbsOptionsFromHost(*host, &o, &deviceName));
  o.peer = peer;
  o.qpsPerConnection = 1;  // messages of a pair are a chunk at most: one queue pair each way
  o.device = device;       // NULL: host memory
  std::lock_guard<std::mutex> g(gPeerDevicesMutex);
  auto it = gPeerDevices.find(host->ctx);
  if (it != gPeerDevices.end()) o.sharedDevice = it->second.lock();
  std::unique_ptr<VerbsChannel> ch;
  CLB_CHECK(VerbsChannel::create(api, o, host, &ch));
  if (device) CLB_CHECK(ch->checkDeviceMemory(maxBytes));  // what cannot be had shows here, not at peerStart
  gPeerDevices[host->ctx] = ch->device();
  for (auto i = gPeerDevices.begin(); i != gPeerDevices.end();)  // communicators gone
    i = i->second.expired() ? gPeerDevices.erase(i) : std::next(i);
  PeerInfo mine{ch->sendSideInfo(), ch->recvSideInfo()};
  memcpy(info, &mine, sizeof mine);
  *infoLen = sizeof mine;
  *out = reinterpret_cast<clbNetChannel>(ch.release());
  return clbSuccess;
}

clbResult_t pluginPeerOpen(const clbNetHost_v1_t* host, int peer, clbNetChannel* out, void* info, size_t* infoLen) {
  return peerOpenWith(host, nullptr, peer, 0, out, info, infoLen);
}

clbResult_t pluginPeerOpenDevice(const clbNetHost_v1_t* host, const clbNetDeviceMemory_v1_t* device, int peer,
                                 size_t maxBytes, clbNetChannel* out, void* info, size_t* infoLen) {
  if (!device || !device->alloc || !device->release) {
    if (out) *out = nullptr;
    return setError(clbInvalidArgument, "verbs plugin: peerOpenDevice without device memory (alloc and release)");
  }
  return peerOpenWith(host, device, peer, maxBytes, out, info, infoLen);
}

clbResult_t pluginPeerConnect(clbNetChannel ch, const void* info, size_t infoLen) {
  if (!info || infoLen != sizeof(PeerInfo))
    return setError(clbRemoteError, "verbs plugin: the peer's connection info is %zu bytes, expected %zu", infoLen,
                    sizeof(PeerInfo));
  PeerInfo theirs;
  memcpy(&theirs, info, sizeof theirs);
  // This side's link to the peer meets the peer's link from this side, and the other way round.
  return of(ch)->connect(theirs.recv, theirs.send);
}

clbResult_t pluginPeerStart(clbNetChannel ch, size_t maxBytes) { return of(ch)->prepare(maxBytes); }
clbResult_t pluginTrySend(clbNetChannel ch, size_t bytes, void** buf) { return of(ch)->trySend(bytes, buf); }
clbResult_t pluginTryRecv(clbNetChannel ch, clbNetTag_v1_t* got, const void** buf) {
  MsgTag t;
  CLB_CHECK(of(ch)->tryRecvTag(&t, buf));
  if (*buf) memcpy(got, &t, sizeof t);
  return clbSuccess;
}

clbResult_t pluginDeviceSupport(clbNetDeviceSupport_v1_t* out) {
  memset(out, 0, sizeof *out);
  const VerbsApi* api = nullptr;
  CLB_CHECK(loadLibibverbs(&api));
  out->dmabuf = api->regDmabufMr ? 1 : 0;
  out->peermem = peermemLoaded() ? 1 : 0;
  return clbSuccess;
}

clbResult_t pluginDevicePlan(char* buf, size_t len) {
  const VerbsApi* api = nullptr;
  CLB_CHECK(loadLibibverbs(&api));
  // No communicator here: the process's COLIBRI_VERBS_GPU_MEMORY, as a communicator would default to.
  const char* env = getenv("COLIBRI_VERBS_GPU_MEMORY");
  copyOut(gpuMemoryPlan(*api, env && *env ? env : "auto"), buf, len);
  return clbSuccess;
}

}  // namespace
}  // namespace verbs
}  // namespace clb

extern "C" __attribute__((visibility("default"))) const clbNetPlugin_v1_t clbNetPlugin_v1 = {
    CLB_NET_PLUGIN_VERSION,
    sizeof(clbNetPlugin_v1_t),
    "verbs",
    clbTransportVerbs,
    "colibri verbs plugin " CLB_VERBS_PLUGIN_BUILD,
    clb::verbs::pluginInit,
    clb::verbs::pluginConnect,
    clb::verbs::pluginDestroy,
    clb::verbs::pluginPrepare,
    clb::verbs::pluginAcquireSend,
    clb::verbs::pluginPostSend,
    clb::verbs::pluginWaitRecv,
    clb::verbs::pluginReleaseRecv,
    clb::verbs::pluginFinish,
    clb::verbs::pluginTrim,
    clb::verbs::pluginSendFrom,
    clb::verbs::pluginStats,
    clb::verbs::pluginDeviceSupport,
    clb::verbs::pluginDevicePlan,
    clb::verbs::pluginPeerOpen,
    clb::verbs::pluginPeerConnect,
    clb::verbs::pluginPeerStart,
    clb::verbs::pluginTrySend,
    clb::verbs::pluginTryRecv,
    clb::verbs::pluginPeerOpenDevice,
};
