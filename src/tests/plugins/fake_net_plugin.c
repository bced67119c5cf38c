/* Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 *
 * Network plugins for the loader's tests (src/tests/net_plugin_test.cc), built in C to show that
 * the interface is C: FAKE_KIND 1 exports clbNetPlugin_v1 with interface version 99, FAKE_KIND 2
 * a version 1 plugin that says it is "other", FAKE_KIND 3 no plugin symbol at all (all three
 * refused), FAKE_KIND 4 a version 1 table as the first release had it, ending before the
 * point-to-point functions (loaded, without point-to-point channels). */
#include "colibri/net_plugin.h"

#if FAKE_KIND == 4
static clbResult_t oldInit(const clbNetCore_v1_t* core) {
  (void)core;
  return clbSuccess;
}
__attribute__((visibility("default"))) const clbNetPlugin_v1_t clbNetPlugin_v1 = {
    .version = CLB_NET_PLUGIN_VERSION, .size = CLB_NET_PLUGIN_V1_BASE_SIZE, .name = "oldv1",
    .transport = clbTransportVerbs, .init = oldInit};
#endif

#if FAKE_KIND == 1
__attribute__((visibility("default"))) const clbNetPlugin_v1_t clbNetPlugin_v1 = {
    .version = 99, .size = sizeof(clbNetPlugin_v1_t), .name = "fakev99", .transport = clbTransportVerbs};
#elif FAKE_KIND == 2
__attribute__((visibility("default"))) const clbNetPlugin_v1_t clbNetPlugin_v1 = {
    .version = CLB_NET_PLUGIN_VERSION, .size = sizeof(clbNetPlugin_v1_t), .name = "other",
    .transport = clbTransportVerbs};
#elif FAKE_KIND == 3
__attribute__((visibility("default"))) int clbSomethingElse = 1;
#endif
