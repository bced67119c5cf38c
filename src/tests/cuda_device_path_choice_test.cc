// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Which collective path a device call inside a node takes (choosePath over the registry and
// asksForRegistered, src/device/paths.h, as Device::run combines them), for every setting, node
// layout, size class, collective and registration state, against the decision as Device::run made
// it in one chain of conditions before the paths were put behind one interface (written out here):
// LL up to the LL size where the setting allows it; else in place where every rank is in one
// process with peer access (forced, or auto from directMin on, compared with the whole message),
// or between processes when every rank's buffers are registered (not for a reduce, not when staged
// is forced); else the copy engines where the staging is in host memory (unless staged is
// forced); else staged. Windows come before all of that: between processes with peer access, on a
// communicator holding registrations, an allReduce, allGather or reduceScatter of 1 to the LL size
// per rank goes direct (its kernel reads the peers' windows) where direct is forced; under auto it
// takes LL. The registry's order and each path's protocol and algorithm are checked too. No GPU
// needed: nothing is set up or launched.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
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

constexpr int kRanks = 4;  // the communicator's ranks: an allGather's or reduceScatter's message is 4 parts

// The path a call takes by the rules, decided the way Device::run decided it before its paths were
// put behind one interface (independent of the registry's code): `registeredAll` is what the
// registration agreement would answer if asked (every rank's buffers registered).
std::string expected(const char* forced, bool allInProcess, bool viaHost, bool haveRegistrations, bool registeredAll,
                     uint32_t coll, size_t llMax, size_t directMin, size_t perDest, size_t msg) {
  const std::string f = forced ? forced : "auto";
  const bool readPeers = allInProcess && !viaHost;
  const bool windowColl = coll == clb::kAllReduce || coll == clb::kAllGather || coll == clb::kReduceScatter;
  if (!allInProcess && !viaHost && haveRegistrations && windowColl && perDest >= 1 && perDest <= llMax && f == "direct")
    return "direct";
  std::string path = "staged";
  if (f == "ll" && perDest <= llMax)
    path = "ll";
  else if (f == "direct" && readPeers)
    path = "direct";
  else if (f == "auto") {
    if (perDest <= llMax)
      path = "ll";
    else if (readPeers && msg >= directMin)
      path = "direct";
  }
  const bool zeroCopy = path == "staged" && f != "staged" && !allInProcess && !viaHost && haveRegistrations &&
                        msg >= directMin && coll != clb::kReduce;
  if (zeroCopy && registeredAll) path = "direct";
  if (path == "staged" && viaHost && f != "staged") path = "copies";
  return path;
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
  s.layout.viaHost = true;
  s.settings.forced = "staged";
  CallShape c;
  c.perDest = c.msg = 1;
  EXPECT_TRUE(paths[0]->takes(c));
  EXPECT_TRUE(paths[3]->takes(c));
}

// Device::run's decision as it makes it: choosePath, then asksForRegistered, and with every
// rank's buffers registered choosePath again on the registered shape.
std::string decide(const std::vector<std::unique_ptr<CollectivePath>>& paths, CollectivePath* forced,
                   const DeviceShared& s, bool haveRegistrations, bool registeredAll, uint32_t coll, CallShape c) {
  c.windowed = clb::cuda::isWindowed(forced, s, haveRegistrations, c, coll);
  CollectivePath* path = clb::cuda::choosePath(paths, forced, s.settings.llMax, c);
  if (clb::cuda::asksForRegistered(*path, forced, s, haveRegistrations, c, coll) && registeredAll) {
    c.registered = true;
    path = clb::cuda::choosePath(paths, forced, s.settings.llMax, c);
  }
  return path->name();
}

TEST(DevicePathChoice, EverySettingLayoutSizeAndRegistrationTakesThePathTheRulesGive) {
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  DeviceShared s(one.comm);
  auto paths = clb::cuda::collectivePaths(s);
  const size_t llMax = 256 << 10, directMin = 1 << 20;
  s.settings.llMax = llMax;
  s.settings.directMin = directMin;
  const char* settings[] = {nullptr, "ll", "direct", "staged"};
  // Bytes per rank around both thresholds; the message is 1 or 4 times that (an allGather's or
  // reduceScatter's of 4 ranks), so that directMin is compared with the message, LL with the part.
  const size_t sizes[] = {0, 8, llMax, llMax + 1, directMin / 4, directMin - 1, directMin, 64u << 20};
  const uint32_t colls[] = {clb::kAllReduce, clb::kReduce, clb::kAllGather, clb::kReduceScatter, clb::kBroadcast};
  int checked = 0;
  std::set<std::string> seen;
  for (const char* forced : settings)
    for (int layout = 0; layout < 4; layout++)
      for (size_t perDest : sizes)
        for (uint32_t coll : colls)
          for (int regs = 0; regs < 3; regs++) {  // none; some, not every rank's; every rank's
            s.settings.forced = forced;
            s.layout.allInProcess = layout & 1;
            s.layout.viaHost = layout & 2;
            CollectivePath* forcedPath = nullptr;
            for (auto& p : paths)
              if (forced && !strcmp(p->name(), forced)) forcedPath = p.get();
            ASSERT_EQ(forcedPath == nullptr, forced == nullptr) << "no path is named " << forced;
            CallShape c;
            c.perDest = perDest;
            c.msg = perDest * (coll == clb::kAllGather || coll == clb::kReduceScatter ? kRanks : 1);
            const std::string want = expected(forced, s.layout.allInProcess, s.layout.viaHost, regs > 0, regs == 2,
                                              coll, llMax, directMin, c.perDest, c.msg);
            EXPECT_EQ(decide(paths, forcedPath, s, regs > 0, regs == 2, coll, c), want)
                << "setting " << (forced ? forced : "auto") << ", every rank in one process " << s.layout.allInProcess
                << ", via host " << s.layout.viaHost << ", " << perDest << " bytes per rank, message " << c.msg
                << ", collective " << coll << ", registrations " << regs;
            seen.insert(want);
            checked++;
          }
  EXPECT_EQ(checked, 4 * 4 * 8 * 5 * 3);
  EXPECT_EQ(seen, (std::set<std::string>{"ll", "direct", "copies", "staged"})) << "every path is taken somewhere";
}

}  // namespace
