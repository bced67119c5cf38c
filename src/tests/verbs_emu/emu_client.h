// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The tests' handle on the verbs emulator. The emulator lives in the stand-in libibverbs.so.1
// (libibverbs_standin.cc), which the test binary links: its soname makes it the process's
// libibverbs, so the verbs plugin and the unit tests reach the same emulated NICs. Its knobs,
// faults and statistics are the library's colibri_emu_* symbols; this header gives them the
// names of verbs_emu.h in namespace clbtest::emu (tests write `namespace emu = clbtest::emu;`).
#pragma once

#include "tests/verbs_emu/verbs_emu.h"

// The hooks, declared once: libibverbs_standin.cc defines them against these declarations.
#define CLB_EMU_HOOK extern "C" __attribute__((visibility("default")))
CLB_EMU_HOOK const clb::verbs::VerbsApi* colibri_emu_api(void);
CLB_EMU_HOOK void colibri_emu_config(clb::verbs::emu::Config* out);
CLB_EMU_HOOK void colibri_emu_configure(const clb::verbs::emu::Config* c);
CLB_EMU_HOOK void colibri_emu_reset_config(void);
CLB_EMU_HOOK int colibri_emu_is_emulated(ibv_context* c);
CLB_EMU_HOOK uint32_t colibri_emu_node_id(ibv_context* c);
CLB_EMU_HOOK int colibri_emu_set_port_state(ibv_context* c, int up);
CLB_EMU_HOOK int colibri_emu_drop_packets(ibv_qp* qp, int count);
CLB_EMU_HOOK int colibri_emu_query_stats(ibv_qp* qp, clb::verbs::emu::QpStats* out);
CLB_EMU_HOOK void colibri_emu_set_device_copy(clb::verbs::emu::DeviceCopy copy);
CLB_EMU_HOOK clb::verbs::emu::DeviceCopy colibri_emu_device_copy(void);
CLB_EMU_HOOK int colibri_emu_live_qps(ibv_qp** out, int max);

namespace clbtest {
namespace emu {

using clb::verbs::emu::Config;
using clb::verbs::emu::DeviceCopy;
using clb::verbs::emu::QpStats;

// The emulator's own table (the plugin reaches the same functions through the ibv_* exports).
inline const clb::verbs::VerbsApi* api() { return colibri_emu_api(); }
inline Config config() {
  Config c;
  colibri_emu_config(&c);
  return c;
}
inline void configure(const Config& c) { colibri_emu_configure(&c); }
// Back to the environment's knobs (read again at the next use): call after setenv/unsetenv.
inline void resetConfig() { colibri_emu_reset_config(); }
inline bool isEmulated(ibv_context* c) { return colibri_emu_is_emulated(c) != 0; }
inline uint32_t nodeId(ibv_context* c) { return colibri_emu_node_id(c); }
inline int setPortState(ibv_context* c, bool up) { return colibri_emu_set_port_state(c, up ? 1 : 0); }
inline int dropPackets(ibv_qp* qp, int count) { return colibri_emu_drop_packets(qp, count); }
inline int queryStats(ibv_qp* qp, QpStats* out) { return colibri_emu_query_stats(qp, out); }
// The stand-in installs a copy through the CUDA driver on a CUDA build: restore what deviceCopy()
// returned when done.
inline void setDeviceCopy(DeviceCopy copy) { colibri_emu_set_device_copy(copy); }
inline DeviceCopy deviceCopy() { return colibri_emu_device_copy(); }
// The queue pairs of this process that are not destroyed, oldest first: up to `max` into `out`;
// returns how many there are.
inline int liveQps(ibv_qp** out, int max) { return colibri_emu_live_qps(out, max); }

}  // namespace emu
}  // namespace clbtest
