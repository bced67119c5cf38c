// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// selectVerbsApi: libibverbs or, with COLIBRI_VERBS_EMULATOR set, the verbs emulator. Core only
// (libcolibri.so and the unit tests), not in libcolibri_verbs.so, whose table is always the
// real libibverbs. Goes away when the emulator becomes a stand-in libibverbs.so.1 for tests
// (issue 15, step 3; docs/architecture.md, "Network plugins").
#include "core/config.h"
#include "core/error.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_emu.h"

namespace clb {
namespace verbs {

bool emulatorRequested() { return envFlag("COLIBRI_VERBS_EMULATOR", false); }

clbResult_t selectVerbsApi(const VerbsApi** api) {
  if (emulatorRequested()) {
    *api = emu::api();
    CLB_INFO("RDMA transport: COLIBRI_VERBS_EMULATOR is set, using the verbs emulator (no RDMA hardware)");
    return clbSuccess;
  }
  return loadLibibverbs(api);
}

}  // namespace verbs
}  // namespace clb
