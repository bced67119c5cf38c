// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Which collective path a device call inside a node takes (choosePath over the registry,
// src/device/paths.h), for every setting, node layout and size class, against a table written
// here from the rules docs/device.md states: LL up to the LL size where the setting allows it;
// else in place where every rank is in one process with peer access (forced, or auto from
// directMin on) or every rank's buffers are registered; else the copy engines where the staging is
// in host memory (unless staged is forced); else staged. The registry's order and each path's
// protocol and algorithm are checked too. No GPU needed: nothing is set up or launched.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.h"
#include "device/paths.h"

namespace {

using clb::cuda::Algorithm;
using clb::cuda::CallShape;
using clb::cuda::CollectivePath;
using clb::cuda::DeviceShared;
using clb::cuda::Protocol;

// The path the rules give (independent of the registry's code).
std::string expected(const char* forced, bool allInProcess, bool viaHost, size_t llMax, size_t directMin,
                     const CallShape& c) {
  const bool autoPath = forced == nullptr;
  const std::string f = forced ? forced : "";
  const bool readPeers = allInProcess && !viaHost;
  if ((autoPath || f == "ll") && c.perDest <= llMax) return "ll";
  if (c.registered) return "direct";
  if (readPeers && (f == "direct" || (autoPath && c.msg >= directMin))) return "direct";
  if (viaHost && f != "staged") return "copies";
  return "staged";
}

struct OneRank {
  clbComm_t comm = nullptr;
  OneRank() {
    clbUniqueId uid;
    EXPECT_EQ(clbGetUniqueId(&uid), clbSuccess) << clbGetLastError();
    EXPECT_EQ(clbCommInitRank(&comm, &uid, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  }
  ~OneRank() {
    if (comm) clbCommDestroy(comm);
  }
};

TEST(DevicePathChoice, TheRegistryHoldsEachProtocolsPathsInTheOrderAutoPrefersThem) {
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  DeviceShared s(one.comm);
  auto paths = clb::cuda::collectivePaths(s);
  std::vector<std::string> names;
  for (auto& p : paths) names.push_back(p->name());
  EXPECT_EQ(names, (std::vector<std::string>{"ll", "direct", "copies", "staged"}));
  EXPECT_EQ(paths[0]->protocol(), Protocol::kLines);
  EXPECT_EQ(paths[0]->algorithm(), Algorithm::kPush);
  EXPECT_EQ(paths[1]->algorithm(), Algorithm::kInPlace);
  EXPECT_EQ(paths[2]->algorithm(), Algorithm::kCopyEngines);
  EXPECT_EQ(paths[3]->algorithm(), Algorithm::kStaged);
  for (size_t i = 1; i < paths.size(); i++) EXPECT_EQ(paths[i]->protocol(), Protocol::kSimple) << names[i];
  // The last path of each protocol takes every call, whatever the node and the settings.
  s.viaHost = true;
  s.forced = "staged";
  CallShape c;
  c.perDest = c.msg = 1;
  EXPECT_TRUE(paths[0]->takes(c));
  EXPECT_TRUE(paths[3]->takes(c));
}

TEST(DevicePathChoice, EverySettingLayoutAndSizeTakesThePathTheRulesGive) {
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  DeviceShared s(one.comm);
  auto paths = clb::cuda::collectivePaths(s);
  const size_t llMax = 256 << 10, directMin = 1 << 20;
  s.llMax = llMax;
  s.directMin = directMin;
  const char* settings[] = {nullptr, "ll", "direct", "staged"};
  const size_t sizes[] = {0, 8, llMax, llMax + 1, directMin - 1, directMin, 64u << 20};
  int checked = 0;
  for (const char* forced : settings)
    for (int layout = 0; layout < 4; layout++)
      for (size_t perDest : sizes)
        for (int registered = 0; registered < 2; registered++) {
          s.forced = forced;
          s.allInProcess = layout & 1;
          s.viaHost = layout & 2;
          const CollectivePath* forcedPath = nullptr;
          for (auto& p : paths)
            if (forced && !strcmp(p->name(), forced)) forcedPath = p.get();
          ASSERT_EQ(forcedPath == nullptr, forced == nullptr) << "no path is named " << forced;
          CallShape c;
          c.perDest = perDest;
          c.msg = perDest;
          c.registered = registered;
          // Device::run gives registered buffers only to a call that would stage on the device
          // and was not forced to: between processes (not every rank in this one), with peer
          // access, beyond the LL sizes.
          if (registered &&
              (layout != 0 || (forced && !strcmp(forced, "staged")) ||
               expected(forced, false, false, llMax, directMin, CallShape{perDest, perDest, false}) != "staged" ||
               perDest < directMin))
            continue;
          const std::string want = expected(forced, s.allInProcess, s.viaHost, llMax, directMin, c);
          const CollectivePath* got = clb::cuda::choosePath(paths, forcedPath, llMax, c);
          ASSERT_NE(got, nullptr);
          EXPECT_EQ(got->name(), want) << "setting " << (forced ? forced : "auto") << ", every rank in one process "
                                       << s.allInProcess << ", via host " << s.viaHost << ", " << perDest
                                       << " bytes per rank, registered " << registered;
          checked++;
        }
  EXPECT_GT(checked, 100);
}

}  // namespace
