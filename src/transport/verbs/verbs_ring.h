// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Transport verbs at communicator init: this rank's VerbsChannel, connected through the
// bootstrap. Declared without <infiniband/verbs.h> so that createTransport compiles either way.
#pragma once

#include <memory>
#include <string>

#include "colibri/net_plugin.h"
#include "core/comm.h"

namespace clb {
class RingChannel;
class Transport;
namespace verbs {
struct VerbsOptions;
using DeviceMemory = clbNetDeviceMemory_v1_t;  // as in verbs_channel.h
struct VerbsApi;
}

// The channel options from a communicator's (validated) configuration: verbsDevice, verbsPort,
// verbsGidIndex, verbsTrafficClass, verbsTimeout, verbsRetryCount, verbsQpsPerConnection.
// deviceName points into `cfg`.
void verbsOptionsFromConfig(const clbConfig_t& cfg, verbs::VerbsOptions* o);

// Creates the verbs ring channel of `c` (nranks > 1, bootstrap up): the table from
// selectVerbsApi (COLIBRI_VERBS_EMULATOR=1: the emulator), then verbs::connectVerbs over the
// communicator's plugin host (netHostFor: options from c->cfg, connection infos through the
// bootstrap, every rank's outcome exchanged, so all ranks fail together instead of one waiting
// for another). `*describe`: "verbs: colibri_emu0 port 1, GID index 1, path MTU 4096,
// traffic class 0, timeout 14, retry count 7" (then ", 2 queue pairs per link" when more than
// one) or the real device's.
clbResult_t createVerbsRing(clbComm* c, std::unique_ptr<RingChannel>* out, std::string* describe);
// The verbs transport (createTransport): that ring, described as above in transportInfo, with
// the socket transport's failure notices (LinkTransport: the bootstrap's connections carry them).
clbResult_t createVerbsTransport(clbComm* c, std::unique_ptr<Transport>* out);

// The same, for a channel in device mode (GPUDirect RDMA: slots and staging in GPU memory from
// `device`, which must outlive the channel; one page of it registered before the connection, so
// that every rank learns whether every rank can): created lazily by the device path at the first
// device collective between hosts, a collective step. device == NULL: createVerbsRing.
clbResult_t createVerbsChannel(clbComm* c, const verbs::DeviceMemory* device, std::unique_ptr<RingChannel>* out,
                               std::string* describe);

}  // namespace clb
