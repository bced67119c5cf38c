// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The core's side of the network plugin interface (colibri/net_plugin.h): what it gives a plugin
// (the process-wide clbNetCore_v1_t, and per communicator the clbNetHost_v1_t over its bootstrap,
// waits, memory accounting and options), the loader that finds and checks a plugin library, and
// the RingChannel over a plugin's channel (docs/architecture.md, "Network plugins").
#pragma once

#include <memory>
#include <string>

#include "colibri/net_plugin.h"
#include "core/comm.h"
#include "transport/channel.h"

namespace clb {

// The core's services for plugins: errors into the calling thread's last error, logs through the
// core's sink. Static, valid for the life of the process.
const clbNetCore_v1_t* netCore();

// Communicator `c`'s side of a connection (ctx is c, which must outlive every use).
clbNetHost_v1_t netHostFor(clbComm* c);

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

// Connects communicator `c`'s channel through `plugin` (collective; device NULL: host memory).
clbResult_t connectNetChannel(clbComm* c, const clbNetPlugin_v1_t* plugin, const clbNetDeviceMemory_v1_t* device,
                              std::unique_ptr<NetRingChannel>* out, std::string* describe);

}  // namespace clb
