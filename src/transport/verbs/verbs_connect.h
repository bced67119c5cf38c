// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Opening and connecting one rank's verbs channel through the plugin interface's host
// (clbNetHost_v1_t: bootstrap allGather, waits, accounting, options). No core types: this is the
// code that libcolibri_verbs.so runs for clbNetPlugin_v1_t.connect (verbs_plugin.cc); the unit
// tests call it directly over the stand-in libibverbs.
#pragma once

#include <memory>
#include <string>

#include "colibri/net_plugin.h"
#include "transport/verbs/verbs_channel.h"

namespace clb {
namespace verbs {

// The channel options from the host: its slots, and the verbs* options read through
// host->option (the communicator's validated configuration). `deviceName` receives the device's
// name and o->deviceName points into it (NULL: the first device).
clbResult_t verbsOptionsFromHost(const clbNetHost_v1_t& host, VerbsOptions* o, std::string* deviceName);

// Creates this rank's channel with `api` (NULL: the caller could not get one, and `apiRc` with
// the thread's last error says why; the rank still takes part in the exchanges), exchanges every
// rank's set-up status and both connection infos with one host->allGather (rank r's send side
// goes to rank r+1's receive side), connects, and exchanges the connect status once more, so
// that all ranks fail together with the failing rank's message instead of one waiting for
// another. `device` non-NULL: device mode (GPUDirect RDMA), one page registered before the
// exchange so every rank learns whether every rank can. `*describe`: transportInfo's link line,
// "verbs: mlx5_0 port 1, GID index 3, path MTU 4096, traffic class 0, timeout 14, retry count 7"
// (then ", 2 queue pairs per link" when more than one) and the GPU memory plan.
clbResult_t connectVerbs(const VerbsApi* api, clbResult_t apiRc, const clbNetHost_v1_t& host,
                         const DeviceMemory* device, std::unique_ptr<VerbsChannel>* out, std::string* describe);

// What transportInfo says at init about device buffers (`mode`: the communicator's verbsGpuMemory,
// auto, dmabuf, peermem or host; whether libibverbs can register dma-bufs, whether nvidia_peermem
// is loaded).
std::string gpuMemoryPlan(const VerbsApi& api, const std::string& mode);
// Whether nvidia_peermem (or the older nv_peer_mem) is in /proc/modules.
bool peermemLoaded();

}  // namespace verbs
}  // namespace clb
