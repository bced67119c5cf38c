// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs emulator as a stand-in libibverbs.so.1 (src/tests/verbs_emu/, a test library that
// this binary links), found by the unchanged production loader inside the verbs network plugin
// (libcolibri_verbs.so), which the core loads for transport verbs: neither the core nor the plugin
// knows it is an emulator.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "base/error.h"
#include "tests/test_paths.h"
#include "tests/test_ranks.h"
#include "transport/verbs/verbs_api.h"

namespace {

TEST(VerbsStandin, ExportsWhatTheProductionLoaderLooksUp) {
  clb::verbs::VerbsApi api{};
  ASSERT_EQ(clb::verbs::loadLibibverbsFrom(clbtest::verbsEmuLib().c_str(), &api), clbSuccess) << clb::lastError();
  EXPECT_STREQ(api.impl, "libibverbs");
  EXPECT_NE(api.regDmabufMr, nullptr);
  EXPECT_NE(api.queryGidEx, nullptr);
  int n = 0;
  ibv_device** list = api.getDeviceList(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_STREQ(api.getDeviceName(list[0]), "colibri_emu0");
  api.freeDeviceList(list);
  void* h = dlopen(clbtest::verbsEmuLib().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  for (const char* hook : {"colibri_emu_configure", "colibri_emu_reset_config", "colibri_emu_set_device_copy",
                           "colibri_emu_query_stats", "colibri_emu_set_port_state", "colibri_emu_drop_packets"})
    EXPECT_NE(dlsym(h, hook), nullptr) << hook;
}

TEST(VerbsStandin, IsTheProcessLibibverbs) {
  // Linked by the test binary, so the name libibverbs.so.1 (what the plugin's loader opens) is
  // already taken by it.
  void* byName = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* byPath = dlopen(clbtest::verbsEmuLib().c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(byName, nullptr) << "libibverbs.so.1 is not loaded";
  EXPECT_EQ(byName, byPath) << "libibverbs.so.1 is not the stand-in " << clbtest::verbsEmuLib();
  EXPECT_NE(dlsym(byName, "colibri_emu_api"), nullptr);
}

TEST(VerbsStandin, TransportVerbsRunsThroughThePluginOverIt) {
  const int n = 3;
  auto errors = clbtest::runThreadRanks(
      n,
      [](int, clbConfig_t* cfg) {
        cfg->transport = clbTransportVerbs;
        cfg->chunkBytes = 4096;
        cfg->timeoutMs = 20000;
      },
      [&](int r, clbComm_t comm) {
        char b[4096];
        ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess) << clbGetLastError();
        const std::string info = b;
        EXPECT_NE(info.find("verbs: colibri_emu0 port 1, GID index"), std::string::npos) << info;
        const size_t count = 10000;  // several chunks per rank
        std::vector<int32_t> in(count), out(count, -7);
        for (size_t i = 0; i < count; i++) in[i] = (int32_t)((r + 1) * 1000 + i % 977);
        ASSERT_EQ(clbAllReduce(in.data(), out.data(), count, clbInt32, clbSum, comm, nullptr), clbSuccess)
            << clbGetLastError();
        for (size_t i = 0; i < count; i++) {
          int32_t want = 0;
          for (int p = 0; p < n; p++) want += (int32_t)((p + 1) * 1000 + i % 977);
          ASSERT_EQ(out[i], want) << "rank " << r << " element " << i;
        }
      });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace
