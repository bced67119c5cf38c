// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Settings that every rank must share: the ones that change the schedule of a collective, the
// wire protocol between two ranks, the layout of a buffer one rank reads in another's memory, or
// which transport connects them (docs/configuration.md, "Settings that must agree across ranks").
// Each rank puts what it resolved into its entry of the bootstrap's table (AgreedSettings); on
// receipt of the table every rank compares everyone's, so every rank takes the same decision: all
// fail init naming the first setting that differs, two ranks and their values, or all go on. No
// message of its own: it rides on the table the bootstrap sends anyway.
#pragma once

#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "base/config.h"

namespace clb {

// What this rank resolved: from its configuration and its device settings. `valid` false: the
// rank's configuration was refused, and it joins with its valid settings only to say so.
AgreedSettings agreedSettings(const clbConfig_t& cfg, const DeviceConfig& device, bool valid = true);

// The transport `t` (clbTransport_t) stands for: auto is shm when every rank is on one host,
// else socket. The one place auto is resolved (the agreement and the transport factory).
int resolveTransport(int t, bool allOnOneHost);

// Compares every rank's settings (peers[r].agreed) where they matter: the transport as each rank
// resolves it (auto: shm when every rank is on one host, else socket), the algorithm (auto is ring
// off shm), and the rest only where the resolved transport and algorithm use them. A difference is
// clbInvalidUsage: "COLIBRI_TRANSPORT differs across ranks: rank 0 resolved shm, rank 1 resolved
// socket (set transport / COLIBRI_TRANSPORT alike on every rank)", with every rank's value when
// there are more than two, and the names of the other settings that differ too.
// A rank whose configuration was refused never gets here: the root refuses its hello and tells
// every rank (bootstrap.cc, Root::join).
clbResult_t checkAgreedSettings(const std::vector<RankInfo>& peers);

}  // namespace clb
