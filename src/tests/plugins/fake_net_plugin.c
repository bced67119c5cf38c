/* Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 *
 * Network plugins that the loader must refuse (src/tests/net_plugin_test.cc), built in C to show
 * that the interface is C: FAKE_KIND 1 exports clbNetPlugin_v1 with interface version 99,
 * FAKE_KIND 2 a version 1 plugin that says it is "other", FAKE_KIND 3 no plugin symbol at all. */
#include "colibri/net_plugin.h"

#if FAKE_KIND == 1
__attribute__((visibility("default"))) const clbNetPlugin_v1_t clbNetPlugin_v1 = {
    .version = 99, .size = sizeof(clbNetPlugin_v1_t), .name = "fakev99", .transport = clbTransportVerbs};
#elif FAKE_KIND == 2
__attribute__((visibility("default"))) const clbNetPlugin_v1_t clbNetPlugin_v1 = {
    .version = CLB_NET_PLUGIN_VERSION, .size = sizeof(clbNetPlugin_v1_t), .name = "other",
    .transport = clbTransportVerbs};
#else
__attribute__((visibility("default"))) int clbSomethingElse = 1;
#endif
