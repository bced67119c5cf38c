// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The core's side of the network plugin interface (colibri/net_plugin.h): what it gives a plugin
// (the process-wide clbNetCore_v1_t, and per communicator the clbNetHost_v1_t over its bootstrap,
// waits, memory accounting and options). The loader and the RingChannel over a plugin channel
// come with the next steps of issue 15 (docs/architecture.md, "Network plugins").
#pragma once

#include "colibri/net_plugin.h"
#include "core/comm.h"

namespace clb {

// The core's services for plugins: errors into the calling thread's last error, logs through the
// core's sink. Static, valid for the life of the process.
const clbNetCore_v1_t* netCore();

// Communicator `c`'s side of a connection (ctx is c, which must outlive every use).
clbNetHost_v1_t netHostFor(clbComm* c);

}  // namespace clb
