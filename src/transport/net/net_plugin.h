// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The core's side of the network plugin interface (colibri/net_plugin.h): what it gives a plugin
// (the process-wide clbNetCore_v1_t, and per communicator the clbNetHost_v1_t over its bootstrap,
// waits, memory accounting and options), the loader that finds and checks a plugin library, and
// the RingChannel over a plugin's channel (docs/architecture.md, "Network plugins").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "colibri/net_plugin.h"
#include "bootstrap/comm_context.h"
#include "transport/channel.h"

namespace clb {

// The core's services for plugins: errors into the calling thread's last error, logs through the
// core's sink. Static, valid for the life of the process.
const clbNetCore_v1_t* netCore();

// Communicator `c`'s side of a connection (ctx is c, which must outlive every use).
clbNetHost_v1_t netHostFor(CommContext* c);

// The plugin of network `name` ("verbs": libcolibri_verbs.so), loaded once per process and
// initialised: looked for in clbSetPluginDir's folder, else COLIBRI_PLUGIN_DIR, else the folder
// of libcolibri.so, else the dynamic linker's path. clbUnsupported naming the jar and the places
// looked in when there is none; clbInvalidUsage when the library is not a plugin of this
// interface version (its symbol, version or size). Thread-safe.
clbResult_t loadNetPlugin(const char* name, const clbNetPlugin_v1_t** out);
// The folder set by clbSetPluginDir ("" when none).
std::string netPluginDir();

// A plugin's connected channel as the core's RingChannel: the tag of every received message is
// compared here (checkTag), in the core's words. Destroys the channel with it.
class NetRingChannel : public RingChannel {
 public:
  NetRingChannel(const clbNetPlugin_v1_t* plugin, clbNetChannel ch, int prevRank, int rank)
      : p_(plugin), ch_(ch), prev_(prevRank), rank_(rank) {}
  ~NetRingChannel() override { p_->destroy(ch_); }
  const char* name() const override { return p_->name; }
  clbResult_t prepare(size_t maxBytes) override;
  clbResult_t acquireSend(size_t bytes, void** buf) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t waitRecv(const MsgTag& expect, const void** buf) override;
  clbResult_t releaseRecv() override;
  clbResult_t finish() override;
  clbResult_t trim() override;
  clbResult_t sendFrom(const void* src, const MsgTag& tag, bool* sent) override;
  const clbNetPlugin_v1_t* plugin() const { return p_; }
  clbNetChannel handle() const { return ch_; }

 private:
  const clbNetPlugin_v1_t* p_;
  clbNetChannel ch_;
  int prev_, rank_;
};

// Whether `plugin` has point-to-point channels (clbNetPlugin_v1_t::peerOpen and the rest), and
// whether it can open them in device mode too (peerOpenDevice).
bool netPluginHasPeers(const clbNetPlugin_v1_t* plugin);
bool netPluginHasDevicePeers(const clbNetPlugin_v1_t* plugin);

// A plugin's point-to-point channel with one peer as the core's PeerChannel, set up over `link`
// (the pair's TCP channel): each side opens its channel and sends its connection info, connects
// once the peer's info is in and says so, and starts (slots announced) once the peer has said so
// too, so nothing reaches a queue pair the peer has not connected yet. Until then this side's
// messages go over the link, so a send is as eager as over TCP (the peer need not be in a call);
// then it sends "switch" and moves the rest over the channel, and the peer reads the link up to
// that switch first. Nothing blocks: each call moves the set-up on as far as it can, so a batch
// that names its peers in any order never waits in a circle. The link stays open and is watched:
// its closing is how a peer that died is found (no queue pair says so while idle).
//
// Device mode (`device` given: this rank has GPU memory for channels, see PeerDeviceMemory): the
// channel's slots and staging are GPU memory (GPUDirect RDMA) if the peer's side can have them
// too. Each side's info message starts with a byte saying how it opened; a side that opened in
// device mode and finds the peer in host memory opens again in host memory and sends its info
// again, and a side in host memory skips a device-mode info (the host-memory one follows), so
// both end alike with no extra round trip when they already agree. A side whose device-mode open
// fails (registration refused) opens in host memory with a warning saying why.
class NetPeerChannel : public PeerChannel {
 public:
  NetPeerChannel(CommContext* c, const clbNetPlugin_v1_t* plugin, int peer, PeerChannel* link,
                 std::shared_ptr<PeerDeviceMemory> device = nullptr);
  ~NetPeerChannel() override;
  size_t maxMessageBytes() const override { return maxBytes_; }
  clbResult_t trySend(size_t bytes, void** buf, size_t* room) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t tryRecv(const MsgTag** tag, const void** buf) override;
  clbResult_t releaseRecv() override;
  clbResult_t progress(bool* sent) override;
  bool sendOnDevice() const override { return deviceSlots_ && !sendingLink_; }
  bool recvOnDevice() const override { return deviceSlots_ && !holdingLink_; }
  // This side's messages go over the plugin's channel (until then the TCP link is what to poll).
  bool ready() const { return switched_; }
  // The channel's slots are GPU memory (both sides agreed; meaningful once set up).
  bool deviceSlots() const { return deviceSlots_; }
  // Destroy of a healthy rank: every message posted over the channel acknowledged by the peer.
  clbResult_t finish() { return started_ ? p_->finish(ch_) : clbSuccess; }

 private:
  enum : uint64_t { kInfo = 1, kConnected = 2, kSwitch = 3 };  // set-up messages over the link
  // Their tags' call: no collective, call or point-to-point call has it (comm.h), so they are
  // never taken for data, nor data for them.
  static constexpr uint32_t kLinkSetUp = 0x4c494e4b;
  clbResult_t advance(bool receive = true);
  clbResult_t open(bool device);  // the plugin's channel, and this side's info message
  clbResult_t pump();
  clbResult_t
  watchLink();  // once switched both ways: the link closing (the peer died) or carrying anything is an error
  clbResult_t linkSend(const void* data, size_t bytes, uint64_t index, bool* sent);
  clbResult_t linkProgress(bool* sent);  // the link's writes; set-up messages a closed peer never took are no error
  CommContext* c_;
  const clbNetPlugin_v1_t* p_;
  int peer_;
  PeerChannel* link_;
  clbNetChannel ch_ = nullptr;
  std::shared_ptr<PeerDeviceMemory> device_;  // GPU memory for device mode, if this rank has it
  bool deviceSlots_ = false;                  // ch_ was opened in device mode
  // The set-up's steps: each side sends its info and, once it connected to the peer's, says so;
  // started (slots announced) once both have; then each sends "switch" and moves its messages
  // over the channel, those before it having gone over the link.
  bool sentInfo_ = false, gotInfo_ = false, sentConnected_ = false, gotConnected_ = false, started_ = false;
  bool switched_ = false, peerSwitched_ = false;
  bool sendingLink_ = false, holdingLink_ = false;  // a message of the link acquired / held
  bool linkDataUnsent_ = false;                     // a data message went to the link and may not be written out yet
  int64_t watchedMs_ = 0;
  size_t maxBytes_;
  std::vector<char> info_;
  MsgTag got_{};
};

// Connects communicator `c`'s channel through `plugin` (collective; device NULL: host memory).
clbResult_t connectNetChannel(CommContext* c, const clbNetPlugin_v1_t* plugin, const clbNetDeviceMemory_v1_t* device,
                              std::unique_ptr<NetRingChannel>* out, std::string* describe);

}  // namespace clb
