// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The core's side of the network plugin interface (see net_plugin.h).
#include "transport/net/net_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "bootstrap/net.h"

namespace clb {

namespace {

clbResult_t coreSetError(clbResult_t result, const char* text) { return setError(result, "%s", text ? text : ""); }
const char* coreLastError() { return lastError().c_str(); }
void coreBreadcrumb(const char* file, int line) { appendBreadcrumb(file, line); }
void coreLog(int level, const char* text) { log(level, "%s", text ? text : ""); }
int coreLogLevel() { return logLevel(); }

const clbNetCore_v1_t kCore = {CLB_NET_PLUGIN_VERSION,
                               sizeof(clbNetCore_v1_t),
                               coreSetError,
                               coreLastError,
                               coreBreadcrumb,
                               coreLog,
                               coreLogLevel};

CommContext* commOf(void* ctx) { return static_cast<CommContext*>(ctx); }

clbResult_t hostAllGather(void* ctx, void* buf, size_t bytesPerRank) {
  return commOf(ctx)->boot.allGather(buf, bytesPerRank);
}
clbResult_t hostCheckWait(void* ctx, int64_t startMs, const char* what, int peer) {
  return commOf(ctx)->checkWait(startMs, what, peer);
}
void hostAccount(void* ctx, int64_t hostDelta, int64_t deviceDelta) {
  CommContext* c = commOf(ctx);
  if (hostDelta) c->mem.addHost(hostDelta);
  if (deviceDelta) c->mem.addDevice(deviceDelta);
}
// The options a network plugin may ask for, by their clbConfig_t names.
int hostOption(void* ctx, const char* name, char* buf, size_t len) {
  std::string text;
  if (!name || !buf || !len || !optionText(commOf(ctx)->cfg, name, &text) || text.size() >= len) return -1;
  memcpy(buf, text.c_str(), text.size() + 1);
  return 0;
}

static_assert(sizeof(clbNetTag_v1_t) == sizeof(MsgTag) && sizeof(OpDesc) == CLB_NET_TAG_CALL_BYTES &&
                  offsetof(clbNetTag_v1_t, index) == offsetof(MsgTag, index) &&
                  offsetof(clbNetTag_v1_t, bytes) == offsetof(MsgTag, bytes) &&
                  std::is_trivially_copyable<MsgTag>::value,
              "clbNetTag_v1_t is MsgTag byte for byte");
const clbNetTag_v1_t* asNet(const MsgTag& t) { return reinterpret_cast<const clbNetTag_v1_t*>(&t); }

std::mutex gPluginMutex;
std::string gPluginDir;                                    // clbSetPluginDir
std::map<std::string, const clbNetPlugin_v1_t*> gPlugins;  // loaded and initialised

// Which jar carries a plugin, for the message when it is missing: the natives jar of the platform
// this library was built for (JavaCPP's platform names).
#if defined(__aarch64__)
#define CLB_JAR_PLATFORM "linux-arm64"
#else
#define CLB_JAR_PLATFORM "linux-x86_64"
#endif
const char* jarOf(const std::string& name) {
  return name == "verbs" ? "io.colibri:colibri-verbs (classifier " CLB_JAR_PLATFORM ")" : "the plugin's jar";
}

std::string folderOfCore() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&netCore), &info) && info.dli_fname) {
    // The real path: a program started as /proc/self/exe (or through a link) names that.
    char real[PATH_MAX];
    std::string f = realpath(info.dli_fname, real) ? real : info.dli_fname;
    size_t slash = f.rfind('/');
    if (slash != std::string::npos) return f.substr(0, slash);
  }
  return std::string();
}

// Opens `path` and checks its clbNetPlugin_v1; *why says what was wrong (then NULL).
const clbNetPlugin_v1_t* openPlugin(const std::string& path, const std::string& name, std::string* why, bool* found) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    // Not there, or there but unloadable (another architecture, a missing dependency): a path is
    // looked at on disk; for a bare name the linker's message is all there is.
    struct stat st;
    *found = path.find('/') != std::string::npos ? stat(path.c_str(), &st) == 0 : e && !strstr(e, "No such file");
    *why = e ? e : "dlopen failed";
    return nullptr;
  }
  *found = true;
  auto* p = static_cast<const clbNetPlugin_v1_t*>(dlsym(h, CLB_NET_PLUGIN_SYMBOL_V1));
  char b[512];
  if (!p) {
    snprintf(b, sizeof b, "%s has no symbol %s: it is not a Colibri network plugin of interface version %d",
             path.c_str(), CLB_NET_PLUGIN_SYMBOL_V1, CLB_NET_PLUGIN_VERSION);
  } else if (p->version != CLB_NET_PLUGIN_VERSION || p->size < CLB_NET_PLUGIN_V1_BASE_SIZE) {
    snprintf(b, sizeof b,
             "%s implements the network plugin interface version %u (struct of %u bytes), this "
             "libcolibri needs version %d (%zu bytes): use the plugin of the same Colibri release (for Java, the "
             "colibri-verbs jar of colibri-native's version)",
             path.c_str(), p->version, p->size, CLB_NET_PLUGIN_VERSION, (size_t)CLB_NET_PLUGIN_V1_BASE_SIZE);
    p = nullptr;
  } else if (!p->name || name != p->name) {
    snprintf(b, sizeof b, "%s is the network plugin \"%s\", not \"%s\"", path.c_str(), p->name ? p->name : "",
             name.c_str());
    p = nullptr;
  } else {
    return p;  // the handle stays open for the life of the process
  }
  *why = b;
  dlclose(h);
  return nullptr;
}

}  // namespace

std::string netPluginDir() {
  std::lock_guard<std::mutex> g(gPluginMutex);
  return gPluginDir;
}

clbResult_t loadNetPlugin(const char* name, const clbNetPlugin_v1_t** out) {
  *out = nullptr;
  std::lock_guard<std::mutex> g(gPluginMutex);
  auto it = gPlugins.find(name);
  if (it != gPlugins.end()) {
    *out = it->second;
    return clbSuccess;
  }
  const std::string file = std::string("libcolibri_") + name + ".so";
  std::vector<std::string> places;
  if (!gPluginDir.empty()) places.push_back(gPluginDir + "/" + file);
  if (const char* env = getenv("COLIBRI_PLUGIN_DIR"); env && *env) places.push_back(std::string(env) + "/" + file);
  if (std::string core = folderOfCore(); !core.empty()) places.push_back(core + "/" + file);
  places.push_back(file);  // the dynamic linker's search path
  std::string looked;
  for (const std::string& path : places) {
    std::string why;
    bool found = false;
    const clbNetPlugin_v1_t* p = openPlugin(path, name, &why, &found);
    if (!p && found) return setError(clbInvalidUsage, "transport %s: %s", name, why.c_str());
    if (!p) {
      looked += looked.empty() ? path : ", " + path;
      continue;
    }
    if (p->transport <= clbTransportAuto || p->transport >= clbNumTransports)
      return setError(clbInvalidUsage,
                      "transport %s: %s says it provides transport %d, which this libcolibri does "
                      "not have",
                      name, path.c_str(), p->transport);
    clbResult_t rc = p->init(netCore());
    if (rc != clbSuccess) {
      appendBreadcrumb(__FILE__, __LINE__);
      return rc;
    }
    CLB_DEBUG("transport %s: loaded %s (%s)", name, path.c_str(), p->build ? p->build : "");
    gPlugins[name] = p;
    *out = p;
    return clbSuccess;
  }
  return setError(clbUnsupported,
                  "transport %s needs the network plugin %s, which was not found (looked for %s): from Java, add "
                  "%s to the classpath next to colibri-native; from C, put %s beside libcolibri.so or point "
                  "COLIBRI_PLUGIN_DIR (or clbSetPluginDir) at its folder",
                  name, file.c_str(), looked.c_str(), jarOf(name), file.c_str());
}

clbResult_t NetRingChannel::prepare(size_t maxBytes) { return p_->prepare(ch_, maxBytes); }
clbResult_t NetRingChannel::acquireSend(size_t bytes, void** buf) { return p_->acquireSend(ch_, bytes, buf); }
clbResult_t NetRingChannel::postSend(const MsgTag& tag) { return p_->postSend(ch_, asNet(tag)); }
clbResult_t NetRingChannel::waitRecv(const MsgTag& expect, const void** buf) {
  MsgTag got;
  CLB_CHECK(p_->waitRecv(ch_, reinterpret_cast<clbNetTag_v1_t*>(&got), buf));
  return checkTag(got, expect, prev_, rank_);
}
clbResult_t NetRingChannel::releaseRecv() { return p_->releaseRecv(ch_); }
clbResult_t NetRingChannel::finish() { return p_->finish(ch_); }
clbResult_t NetRingChannel::trim() { return p_->trim(ch_); }
clbResult_t NetRingChannel::sendFrom(const void* src, const MsgTag& tag, bool* sent) {
  int s = 0;
  clbResult_t rc = p_->sendFrom(ch_, src, asNet(tag), &s);
  *sent = s != 0;
  return rc;
}

bool netPluginHasPeers(const clbNetPlugin_v1_t* p) {
  return p && p->size >= offsetof(clbNetPlugin_v1_t, tryRecv) + sizeof(p->tryRecv) && p->peerOpen && p->peerConnect &&
         p->peerStart && p->trySend && p->tryRecv;
}

bool netPluginHasDevicePeers(const clbNetPlugin_v1_t* p) {
  return netPluginHasPeers(p) && p->size >= offsetof(clbNetPlugin_v1_t, peerOpenDevice) + sizeof(p->peerOpenDevice) &&
         p->peerOpenDevice;
}

NetPeerChannel::NetPeerChannel(CommContext* c, const clbNetPlugin_v1_t* plugin, int peer, PeerChannel* link,
                               std::shared_ptr<PeerDeviceMemory> device)
    : c_(c),
      p_(plugin),
      peer_(peer),
      link_(link),
      device_(netPluginHasDevicePeers(plugin) ? std::move(device) : nullptr) {
  // Both directions' slots (pipelineDepth each, a tag before each payload) and the channel's
  // control block within this pair's share of the staging cap, at most a chunk each, as for the
  // TCP channel; both ranks compute the same.
  const int64_t depth = std::max(2, c->cfg.pipelineDepth);
  const int64_t share = c->cfg.stagingCapBytes / std::max(1, c->nranks - 1);
  const int64_t slot =
      std::max<int64_t>(4096, ((share - (16 << 10)) / (2 * depth) - (int64_t)sizeof(MsgTag)) / 4096 * 4096);
  maxBytes_ = (size_t)std::min<int64_t>(slot, std::max<int64_t>(4096, c->cfg.chunkBytes));
}

NetPeerChannel::~NetPeerChannel() {
  if (ch_) p_->destroy(ch_);
}

// One set-up message over the TCP link (kInfo: the connection info, kConnected, kSwitch).
clbResult_t NetPeerChannel::linkSend(const void* data, size_t bytes, uint64_t index, bool* sent) {
  *sent = false;
  void* buf = nullptr;
  size_t room = 0;
  if (const clbResult_t rc = link_->trySend(bytes, &buf, &room); rc != clbSuccess) {
    // A peer that closed its side has taken what it needed of this channel (it ended its calls,
    // or failed): the set-up goes no further, what it sent before can still be read, and a call
    // that needs it hears of the closed link there. Not an error of the batch that only moves
    // its set-up on (seen: a rank that finished an all-to-all failing in its last progress).
    if (!link_->closedByPeer()) return rc;
    clearError();
    return clbSuccess;
  }
  if (!buf) return clbSuccess;
  if (room < bytes)
    return setError(clbInternalError, "rank %d: %zu bytes of room for a %zu-byte set-up message", c_->rank, room,
                    bytes);
  memcpy(buf, data, bytes);
  MsgTag tag{};
  tag.op.coll = kLinkSetUp;
  tag.index = index;
  tag.bytes = bytes;
  CLB_CHECK(link_->postSend(tag));
  *sent = true;
  return clbSuccess;
}

// The set-up messages at the head of the link, taken in turn; stops at a data message (the peer's,
// sent before it switched: tryRecv's), when nothing is there, or at the peer's switch: after it
// the link carries nothing for this channel, and a peer that has closed it since is no error
// (its messages are in the channel: seen as a rank failing right after reading the switch, once
// in about 40 runs of PeerProcesses over the verbs stand-in; watchLink() looks after the link from
// then on).
clbResult_t NetPeerChannel::pump() {
  for (;;) {
    if (holdingLink_ || peerSwitched_) return clbSuccess;  // a data message is being read, or no more come
    const MsgTag* tag = nullptr;
    const void* buf = nullptr;
    CLB_CHECK(link_->tryRecv(&tag, &buf));
    if (!buf || tag->op.coll != kLinkSetUp) return clbSuccess;
    const uint64_t index = tag->index;
    const uint64_t want = !gotInfo_ ? kInfo : !gotConnected_ ? kConnected : kSwitch;
    if (index != want || peerSwitched_) {
      link_->releaseRecv();
      return setError(clbRemoteError,
                      "rank %d: rank %d sent set-up message %llu of its %s point-to-point channel, "
                      "expected %llu",
                      c_->rank, peer_, (unsigned long long)index, p_->name, (unsigned long long)want);
    }
    if (index == kInfo) {
      // [how the peer opened: 1 device mode, 0 host memory | the plugin's connection info]
      std::vector<char> theirs(static_cast<const char*>(buf), static_cast<const char*>(buf) + tag->bytes);
      CLB_CHECK(link_->releaseRecv());
      if (theirs.empty() || (theirs[0] != 0 && theirs[0] != 1))
        return setError(clbRemoteError,
                        "rank %d: rank %d sent a set-up message of its %s point-to-point channel "
                        "that says neither host nor device memory",
                        c_->rank, peer_, p_->name);
      const bool theirDevice = theirs[0] == 1;
      if (theirDevice && !deviceSlots_) continue;  // it opens again in host memory and says so next
      if (deviceSlots_ && !theirDevice) {
        CLB_INFO("rank %d: point-to-point channel with rank %d in host memory (rank %d has no GPU memory for it)",
                 c_->rank, peer_, peer_);
        CLB_CHECK(open(false));
      }
      CLB_CHECK(p_->peerConnect(ch_, theirs.data() + 1, theirs.size() - 1));
      gotInfo_ = true;
    } else {
      CLB_CHECK(link_->releaseRecv());
      if (index == kConnected)
        gotConnected_ = true;
      else
        peerSwitched_ = true;
    }
  }
}

clbResult_t NetPeerChannel::open(bool device) {
  if (ch_) p_->destroy(ch_);
  ch_ = nullptr;
  deviceSlots_ = false;
  sentInfo_ = false;  // (again: after a device-mode open the peer did not take)
  const clbNetHost_v1_t host = netHostFor(c_);
  info_.assign(1024, 0);
  size_t len = info_.size() - 1;
  if (device) {
    if (p_->peerOpenDevice(&host, &device_->nic, peer_, maxBytes_, &ch_, info_.data() + 1, &len) == clbSuccess) {
      deviceSlots_ = true;
    } else {
      CLB_WARN(
          "rank %d: point-to-point channel with rank %d in host memory: its GPU memory could not be set up "
          "for %s (%s)",
          c_->rank, peer_, p_->name, lastError().c_str());
      clearError();
      ch_ = nullptr;
      len = info_.size() - 1;
    }
  }
  if (!ch_) CLB_CHECK(p_->peerOpen(&host, peer_, &ch_, info_.data() + 1, &len));
  info_[0] = deviceSlots_ ? 1 : 0;
  info_.resize(len + 1);
  return clbSuccess;
}

clbResult_t NetPeerChannel::advance(bool receive) {
  if (!ch_) CLB_CHECK(open(device_ != nullptr));
  // Every step that can go now, at every call: each side sends its info, connects once the peer's
  // is in and says so, starts once the peer has said so too, then sends the switch and moves its
  // messages over the channel from there on. A closed link (the peer gone) shows at any step.
  if (!sentInfo_) CLB_CHECK(linkSend(info_.data(), info_.size(), kInfo, &sentInfo_));
  if (receive) CLB_CHECK(pump());
  if (sentInfo_ && gotInfo_ && !sentConnected_) {  // "connected" never goes before this side's info
    const char yes = 1;
    CLB_CHECK(linkSend(&yes, 1, kConnected, &sentConnected_));
  }
  if (sentConnected_ && gotConnected_ && !started_) {
    CLB_CHECK(p_->peerStart(ch_, maxBytes_));
    started_ = true;
    watchedMs_ = nowMs();
  }
  if (started_ && !switched_ && !sendingLink_) {
    // Only once the peer's slots are announced (it starts at its own call): a switched side
    // whose sends found no room would wait for the peer again.
    void* room = nullptr;
    CLB_CHECK(p_->trySend(ch_, 0, &room));
    const char yes = 1;
    if (room) CLB_CHECK(linkSend(&yes, 1, kSwitch, &switched_));
    if (switched_)
      CLB_INFO("rank %d: point-to-point channel with rank %d over %s%s", c_->rank, peer_, p_->name,
               deviceSlots_ ? (", slots in GPU memory: " + device_->name).c_str() : "");
  }
  bool sent = false;
  return linkProgress(&sent);
}

clbResult_t NetPeerChannel::linkProgress(bool* sent) {
  const clbResult_t rc = link_->progress(sent);
  if (rc == clbSuccess) {
    if (*sent) linkDataUnsent_ = false;
    return clbSuccess;
  }
  // Left unwritten for a peer that closed its side: set-up messages only (no data since the
  // link last had nothing queued), which the peer no longer needs (linkSend).
  if (linkDataUnsent_ || !link_->closedByPeer()) return rc;
  clearError();
  *sent = true;
  return clbSuccess;
}

clbResult_t NetPeerChannel::watchLink() {
  if (!peerSwitched_) return pump();  // the peer's messages still come over the link: tryRecv reads it
  const int64_t now = nowMs();
  if (now - watchedMs_ < 2) return clbSuccess;
  watchedMs_ = now;
  const MsgTag* tag = nullptr;
  const void* buf = nullptr;
  CLB_CHECK(link_->tryRecv(&tag, &buf));
  if (buf)
    return setError(clbRemoteError,
                    "rank %d: rank %d sent a message over the TCP link of their %s point-to-point "
                    "channel after switching to it",
                    c_->rank, peer_, p_->name);
  return clbSuccess;
}

clbResult_t NetPeerChannel::trySend(size_t bytes, void** buf, size_t* room) {
  *buf = nullptr;
  if (!switched_) CLB_CHECK(advance());
  bytes = std::min(bytes, maxBytes_);
  if (!switched_) {
    // Not switched yet: over the link, at once, as the TCP transport would (the peer need not be
    // in a call for the send to go).
    CLB_CHECK(link_->trySend(bytes, buf, room));
    if (*buf) {
      *room = std::min(*room, bytes);
      sendingLink_ = true;
    }
    return clbSuccess;
  }
  CLB_CHECK(p_->trySend(ch_, bytes, buf));
  *room = bytes;
  if (!*buf) CLB_CHECK(watchLink());  // no room: is the peer still there?
  return clbSuccess;
}

clbResult_t NetPeerChannel::postSend(const MsgTag& tag) {
  if (sendingLink_) {
    sendingLink_ = false;
    linkDataUnsent_ = true;
    return link_->postSend(tag);
  }
  return p_->postSend(ch_, asNet(tag));
}

clbResult_t NetPeerChannel::tryRecv(const MsgTag** tag, const void** buf) {
  *buf = nullptr;
  if (!peerSwitched_) {
    // The peer's messages before its switch come over the link, between the set-up messages
    // (one may arrive between pump and the read: then it is pumped too).
    if (!switched_) CLB_CHECK(advance());
    for (;;) {
      CLB_CHECK(pump());
      if (peerSwitched_) break;
      CLB_CHECK(link_->tryRecv(tag, buf));
      if (!*buf) return clbSuccess;
      if ((*tag)->op.coll == kLinkSetUp) continue;
      holdingLink_ = true;
      return clbSuccess;
    }
  }
  CLB_CHECK(p_->tryRecv(ch_, reinterpret_cast<clbNetTag_v1_t*>(&got_), buf));
  *tag = &got_;
  if (*buf) return clbSuccess;
  // Nothing came: is the peer still there? One that closed its side after its last message
  // (acknowledged before it closed) left that message here: looked for once more before the
  // closed link counts.
  const clbResult_t watched = watchLink();
  if (watched == clbSuccess) return clbSuccess;
  const std::string why = lastError();
  CLB_CHECK(p_->tryRecv(ch_, reinterpret_cast<clbNetTag_v1_t*>(&got_), buf));
  if (!*buf) return setError(watched, "%s", why.c_str());
  clearError();
  return clbSuccess;
}

clbResult_t NetPeerChannel::releaseRecv() {
  if (holdingLink_) {
    holdingLink_ = false;
    return link_->releaseRecv();
  }
  return p_->releaseRecv(ch_);
}

clbResult_t NetPeerChannel::progress(bool* sent) {
  // What went over the link must be written out (the channel's writes need no call). Nothing is
  // read here: a peer that took its messages and closed its side is no error of this batch.
  CLB_CHECK(linkProgress(sent));
  if (!switched_) CLB_CHECK(advance(false));
  return clbSuccess;
}

clbResult_t connectNetChannel(CommContext* c, const clbNetPlugin_v1_t* plugin, const clbNetDeviceMemory_v1_t* device,
                              std::unique_ptr<NetRingChannel>* out, std::string* describe) {
  const clbNetHost_v1_t host = netHostFor(c);  // copied by the plugin
  clbNetChannel ch = nullptr;
  char text[1024] = "";
  CLB_CHECK(plugin->connect(&host, device, &ch, text, sizeof text));
  *describe = text;
  *out = std::make_unique<NetRingChannel>(plugin, ch, (c->rank + c->nranks - 1) % c->nranks, c->rank);
  return clbSuccess;
}

const clbNetCore_v1_t* netCore() { return &kCore; }

clbNetHost_v1_t netHostFor(CommContext* c) {
  clbNetHost_v1_t h{};
  h.version = CLB_NET_PLUGIN_VERSION;
  h.size = sizeof(clbNetHost_v1_t);
  h.ctx = c;
  h.rank = c->rank;
  h.nranks = c->nranks;
  h.timeoutMs = c->cfg.timeoutMs;
  h.stagingCapBytes = c->cfg.stagingCapBytes;
  h.slots = c->cfg.pipelineDepth < 2 ? 2 : c->cfg.pipelineDepth;
  h.allGather = hostAllGather;
  h.checkWait = hostCheckWait;
  h.account = hostAccount;
  h.option = hostOption;
  return h;
}

}  // namespace clb

using namespace clb;

extern "C" CLB_API clbResult_t clbSetPluginDir(const char* dir) {
  clearError();
  std::lock_guard<std::mutex> g(gPluginMutex);
  gPluginDir = dir ? dir : "";
  return clbSuccess;
}
