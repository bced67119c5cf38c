// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The network plugin loader (src/transport/net/net_plugin.cc): where it looks, what it refuses and
// how it says so, and the verbs plugin (libcolibri_verbs.so, built beside the tests) loading
// through it.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "colibri/colibri.h"
#include "colibri/net_plugin.h"
#include "base/error.h"
#include "tests/test_paths.h"
#include "transport/net/net_plugin.h"

namespace {

std::string lastError() { return clb::lastError(); }

class PluginDir {
 public:
  explicit PluginDir(const std::string& dir) { clbSetPluginDir(dir.c_str()); }
  ~PluginDir() { clbSetPluginDir(nullptr); }
};

TEST(NetPlugin, MissingPluginNamesTheFileTheJarAndWhereItLooked) {
  setenv("COLIBRI_PLUGIN_DIR", "/nonexistent-colibri-plugins", 1);
  const clbNetPlugin_v1_t* p = nullptr;
  EXPECT_EQ(clb::loadNetPlugin("nosuchnet", &p), clbUnsupported);
  EXPECT_EQ(p, nullptr);
  const std::string e = lastError();
  EXPECT_NE(e.find("libcolibri_nosuchnet.so"), std::string::npos) << e;
  EXPECT_NE(e.find("/nonexistent-colibri-plugins/libcolibri_nosuchnet.so"), std::string::npos) << e;
  EXPECT_NE(e.find("COLIBRI_PLUGIN_DIR"), std::string::npos) << e;
  EXPECT_NE(e.find("classpath"), std::string::npos) << e;
  unsetenv("COLIBRI_PLUGIN_DIR");
}

TEST(NetPlugin, PluginDirIsLookedInFirst) {
  // clbSetPluginDir's folder comes first; a file missing there only moves on to the next place.
  const clbNetPlugin_v1_t* p = nullptr;
  PluginDir dir("/nonexistent-colibri-plugins");
  ASSERT_EQ(clb::loadNetPlugin("nosuchnet", &p), clbUnsupported);
  EXPECT_NE(lastError().find("/nonexistent-colibri-plugins/libcolibri_nosuchnet.so"), std::string::npos) << lastError();
}

TEST(NetPlugin, OtherInterfaceVersionIsRefusedNamingBoth) {
  PluginDir dir(clbtest::testPluginDir());
  const clbNetPlugin_v1_t* p = nullptr;
  EXPECT_EQ(clb::loadNetPlugin("fakev99", &p), clbInvalidUsage);
  const std::string e = lastError();
  EXPECT_NE(e.find("libcolibri_fakev99.so implements the network plugin interface version 99"), std::string::npos) << e;
  EXPECT_NE(e.find("needs version 1"), std::string::npos) << e;
  EXPECT_NE(e.find("same Colibri release"), std::string::npos) << e;
}

// A plugin built before point-to-point channels existed (its table ends where the first release's
// did) still loads, and the core sees that it has none (its pairs' messages then go over TCP);
// the verbs plugin of this build has them.
TEST(NetPlugin, APluginOfTheFirstReleaseLoadsWithoutPointToPoint) {
  PluginDir dir(clbtest::testPluginDir());
  const clbNetPlugin_v1_t* p = nullptr;
  ASSERT_EQ(clb::loadNetPlugin("oldv1", &p), clbSuccess) << lastError();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->size, (uint32_t)CLB_NET_PLUGIN_V1_BASE_SIZE);
  EXPECT_FALSE(clb::netPluginHasPeers(p));
  EXPECT_FALSE(clb::netPluginHasDevicePeers(p)) << "its table ends long before peerOpenDevice";
}

TEST(NetPlugin, LibraryWithoutThePluginSymbolIsRefused) {
  PluginDir dir(clbtest::testPluginDir());
  const clbNetPlugin_v1_t* p = nullptr;
  EXPECT_EQ(clb::loadNetPlugin("nosymbol", &p), clbInvalidUsage);
  EXPECT_NE(lastError().find("has no symbol clbNetPlugin_v1"), std::string::npos) << lastError();
}

TEST(NetPlugin, PluginOfAnotherNameIsRefused) {
  PluginDir dir(clbtest::testPluginDir());
  const clbNetPlugin_v1_t* p = nullptr;
  EXPECT_EQ(clb::loadNetPlugin("wrongname", &p), clbInvalidUsage);
  EXPECT_NE(lastError().find("is the network plugin \"other\", not \"wrongname\""), std::string::npos) << lastError();
}

TEST(NetPlugin, VerbsPluginLoadsFromBesideTheCoreAndExportsOnlyItsTable) {
  const clbNetPlugin_v1_t* p = nullptr;
  ASSERT_EQ(clb::loadNetPlugin("verbs", &p), clbSuccess) << lastError();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->version, (uint32_t)CLB_NET_PLUGIN_VERSION);
  EXPECT_EQ(p->size, sizeof(clbNetPlugin_v1_t));
  EXPECT_STREQ(p->name, "verbs");
  EXPECT_EQ(p->transport, clbTransportVerbs);
  for (auto* f : {(void*)p->init,          (void*)p->connect,    (void*)p->destroy,  (void*)p->prepare,
                  (void*)p->acquireSend,   (void*)p->postSend,   (void*)p->waitRecv, (void*)p->releaseRecv,
                  (void*)p->finish,        (void*)p->trim,       (void*)p->sendFrom, (void*)p->stats,
                  (void*)p->deviceSupport, (void*)p->devicePlan, (void*)p->peerOpen, (void*)p->peerConnect,
                  (void*)p->peerStart,     (void*)p->trySend,    (void*)p->tryRecv,  (void*)p->peerOpenDevice})
    EXPECT_NE(f, nullptr);
  EXPECT_TRUE(clb::netPluginHasPeers(p));
  EXPECT_TRUE(clb::netPluginHasDevicePeers(p));
  const clbNetPlugin_v1_t* again = nullptr;
  ASSERT_EQ(clb::loadNetPlugin("verbs", &again), clbSuccess);
  EXPECT_EQ(again, p) << "loaded once per process";
  // Its errors are the core's: a failure inside the plugin lands in this thread's last error.
  clbNetDeviceSupport_v1_t ds;
  if (p->deviceSupport(&ds) != clbSuccess) {
    EXPECT_NE(lastError().find("libibverbs"), std::string::npos) << lastError();
  }
}

}  // namespace
