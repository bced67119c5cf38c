// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Consistency across ranks: ranks (threads here) that claim different Colibri, driver or NIC
// firmware versions fail init together with a message naming two ranks and their values, or, with
// versionCheck=warn, start and show the difference in clbCommInfo. Nobody hangs.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/versions.h"

namespace {

using clb::VersionOverride;

std::string realVersion() {
  return std::to_string(CLB_VERSION_MAJOR) + "." + std::to_string(CLB_VERSION_MINOR) + "." +
         std::to_string(CLB_VERSION_PATCH);
}

struct Outcome {
  clbResult_t rc = clbInternalError;
  std::string msg;   // last error when init failed
  std::string info;  // clbCommInfo when it succeeded
  int sum = -1;      // allReduce of 1 from every rank, when it succeeded
};

struct RankSetup {
  VersionOverride versions;
  int check;
};

// Starts one thread per rank; returns what each saw and how long the slowest took.
std::vector<Outcome> runRanks(const std::vector<RankSetup>& setup, int64_t timeoutMs, int64_t* slowestMs) {
  clbUniqueId id;
  EXPECT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  int n = (int)setup.size();
  std::vector<Outcome> out(n);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      clb::setVersionOverrideForThread(&setup[r].versions);
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      cfg.timeoutMs = timeoutMs;
      cfg.versionCheck = setup[r].check;
      clbComm_t c = nullptr;
      out[r].rc = clbCommInitRank(&c, &id, r, n, &cfg);
      clb::setVersionOverrideForThread(nullptr);
      if (out[r].rc != clbSuccess) {
        out[r].msg = clbGetLastError();
        return;
      }
      char buf[4096];
      clbCommInfo(c, buf, sizeof buf);
      out[r].info = buf;
      int one = 1;
      if (clbAllReduce(&one, &out[r].sum, 1, clbInt32, clbSum, c, nullptr) != clbSuccess) out[r].sum = -2;
      clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  *slowestMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::vector<RankSetup> same(int n, int check) {
  return std::vector<RankSetup>(n, RankSetup{{"", "580.159.04", "28.39.1002"}, check});
}

std::string infoLine(const std::string& info) {
  size_t at = info.find("versions: ");
  return at == std::string::npos ? "(no versions line in: " + info + ")" : info.substr(at, info.find('\n', at) - at);
}

// ---- reading the local values ----

TEST(Versions, ParsesBothDriverVersionFormats) {
  EXPECT_EQ(clb::parseNvidiaDriverVersion(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  9 20:32:41 UTC 2025\n"
                "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"),
            "580.159.04");
  EXPECT_EQ(clb::parseNvidiaDriverVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
                "(dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 06:54:38 UTC 2025\nGCC version:  gcc 12.2.0\n"),
            "580.65.06");
  EXPECT_EQ(clb::parseNvidiaDriverVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  575.57.08  Release Build\n"),
            "575.57.08");
  EXPECT_EQ(clb::parseNvidiaDriverVersion("NVRM version: something else entirely\nGCC version: 13.3.0\n"), "")
      << "only the NVRM line counts";
  EXPECT_EQ(clb::parseNvidiaDriverVersion(""), "");
}

TEST(Versions, ReadsDriverFileAndFirstNicFirmware) {
  char dir[] = "/tmp/colibri_versions_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string d = dir;
  EXPECT_EQ(clb::readNvidiaDriverVersion((d + "/no-such-file").c_str()), "none");
  FILE* f = fopen((d + "/version").c_str(), "w");
  fputs("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n", f);
  fclose(f);
  EXPECT_EQ(clb::readNvidiaDriverVersion((d + "/version").c_str()), "535.104.05");
  f = fopen((d + "/garbled").c_str(), "w");
  fputs("NVRM version: ???\n", f);
  fclose(f);
  EXPECT_EQ(clb::readNvidiaDriverVersion((d + "/garbled").c_str()), "unrecognized");

  std::string ib = d + "/infiniband";
  EXPECT_EQ(clb::readNicFirmware(ib.c_str()), "none") << "no class directory";
  mkdir(ib.c_str(), 0755);
  EXPECT_EQ(clb::readNicFirmware(ib.c_str()), "none") << "no device";
  for (const char* dev : {"mlx5_1", "mlx5_0"}) {
    mkdir((ib + "/" + dev).c_str(), 0755);
    f = fopen((ib + "/" + dev + "/fw_ver").c_str(), "w");
    fputs(std::string(dev) == "mlx5_0" ? "28.39.1002\n" : "20.31.1014\n", f);
    fclose(f);
  }
  EXPECT_EQ(clb::readNicFirmware(ib.c_str()), "28.39.1002") << "the first device by name";
  std::string cmd = "rm -rf " + d;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(Versions, LocalValuesHonourThreadOverride) {
  VersionOverride o{"9.8.7", "1.2.3", ""};
  clb::setVersionOverrideForThread(&o);
  clb::VersionInfo v = clb::localVersions(clbVersionCheckExact);
  clb::setVersionOverrideForThread(nullptr);
  EXPECT_STREQ(v.colibri, "9.8.7");
  EXPECT_STREQ(v.driver, "1.2.3");
  EXPECT_EQ(v.check, clbVersionCheckExact);
  clb::VersionInfo real = clb::localVersions(clbVersionCheckStrict);
  EXPECT_EQ(std::string(real.colibri), realVersion());
  EXPECT_EQ(std::string(real.firmware), std::string(v.firmware)) << "an empty override keeps the real value";
}

// ---- configuration ----

TEST(Versions, ConfigDefaultAndEnvironment) {
  clbConfig_t c;
  ASSERT_EQ(clbConfigInit(&c), clbSuccess);
  EXPECT_EQ(c.versionCheck, clbVersionCheckStrict);
  EXPECT_EQ(c.versionCheck, CLB_DEFAULT_VERSION_CHECK);
  setenv("COLIBRI_VERSION_CHECK", "EXACT", 1);
  EXPECT_EQ(clbConfigInit(&c), clbSuccess) << clbGetLastError();
  EXPECT_EQ(c.versionCheck, clbVersionCheckExact);
  setenv("COLIBRI_VERSION_CHECK", "warn", 1);
  EXPECT_EQ(clbConfigInit(&c), clbSuccess) << clbGetLastError();
  EXPECT_EQ(c.versionCheck, clbVersionCheckWarn);
  setenv("COLIBRI_VERSION_CHECK", "lenient", 1);
  EXPECT_EQ(clbConfigInit(&c), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("warn, strict, exact"), std::string::npos) << clbGetLastError();
  unsetenv("COLIBRI_VERSION_CHECK");
  EXPECT_STREQ(clbVersionCheckName(clbVersionCheckStrict), "strict");

  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbConfigInit(&c);
  c.versionCheck = 3;
  clbComm_t comm = nullptr;
  EXPECT_EQ(clbCommInitRank(&comm, &id, 0, 1, &c), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("versionCheck=3"), std::string::npos) << clbGetLastError();
}

// ---- across ranks ----

TEST(Versions, SameVersionsStartAndAreShownOnce) {
  int64_t ms = 0;
  auto out = runRanks(same(3, clbVersionCheckExact), 10000, &ms);
  for (int r = 0; r < 3; r++) {
    ASSERT_EQ(out[r].rc, clbSuccess) << "rank " << r << ": " << out[r].msg;
    EXPECT_EQ(out[r].sum, 3);
    EXPECT_EQ(infoLine(out[r].info),
              "versions: colibri " + realVersion() + ", driver 580.159.04, NIC firmware 28.39.1002 (all ranks)");
  }
}

TEST(Versions, StrictFailsEveryRankOnAnotherColibriVersionNamingBoth) {
  auto setup = same(3, clbVersionCheckStrict);
  setup[2].versions.colibri = "0.2.0";
  int64_t ms = 0;
  auto out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(out[r].rc, clbInvalidUsage) << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find("rank 0 has Colibri " + realVersion() + " but rank 2 has 0.2.0"), std::string::npos)
        << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find("run the same Colibri version on every rank"), std::string::npos) << out[r].msg;
    EXPECT_NE(out[r].msg.find(realVersion() + " on ranks 0,1, 0.2.0 on rank 2"), std::string::npos) << out[r].msg;
  }
  EXPECT_LT(ms, 5000) << "every rank should fail at once, not wait for the 10 s timeout";
}

TEST(Versions, WarnStartsDespiteAnotherColibriVersionAndShowsIt) {
  auto setup = same(3, clbVersionCheckWarn);
  setup[1].versions.colibri = "0.2.0";
  int64_t ms = 0;
  auto out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 3; r++) {
    ASSERT_EQ(out[r].rc, clbSuccess) << "rank " << r << ": " << out[r].msg;
    EXPECT_EQ(out[r].sum, 3);
    EXPECT_EQ(infoLine(out[r].info), "versions: colibri DIFFERS: " + realVersion() +
                                         " on ranks 0,2, 0.2.0 on rank 1; driver 580.159.04 on all ranks; "
                                         "NIC firmware 28.39.1002 on all ranks");
  }
}

TEST(Versions, DriverDifferenceWarnsUnderStrictAndFailsUnderExact) {
  auto setup = same(2, clbVersionCheckStrict);
  setup[1].versions.driver = "575.57.08";
  int64_t ms = 0;
  auto out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(out[r].rc, clbSuccess) << "strict (the default) only warns about the driver: " << out[r].msg;
    EXPECT_NE(infoLine(out[r].info).find("driver DIFFERS: 580.159.04 on rank 0, 575.57.08 on rank 1"),
              std::string::npos)
        << out[r].info;
  }
  for (auto& s : setup) s.check = clbVersionCheckExact;
  out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(out[r].rc, clbInvalidUsage) << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find("rank 0 has NVIDIA driver 580.159.04 but rank 1 has 575.57.08"), std::string::npos)
        << out[r].msg;
    EXPECT_NE(out[r].msg.find("install the same NVIDIA driver on every node"), std::string::npos) << out[r].msg;
  }
  EXPECT_LT(ms, 5000);
}

TEST(Versions, FirmwareDifferenceFailsUnderExact) {
  auto setup = same(2, clbVersionCheckExact);
  setup[0].versions.firmware = "20.31.1014";
  int64_t ms = 0;
  auto out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(out[r].rc, clbInvalidUsage) << out[r].msg;
    EXPECT_NE(out[r].msg.find("rank 0 has NIC firmware 20.31.1014 but rank 1 has 28.39.1002"), std::string::npos)
        << out[r].msg;
  }
}

TEST(Versions, StrictestSettingOfAnyRankAppliesSoNobodyIsLeftWaiting) {
  auto setup = same(3, clbVersionCheckWarn);
  setup[1].check = clbVersionCheckExact;
  setup[2].versions.driver = "575.57.08";
  int64_t ms = 0;
  auto out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(out[r].rc, clbInvalidUsage) << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find("rank 0 has NVIDIA driver 580.159.04 but rank 2 has 575.57.08"), std::string::npos)
        << out[r].msg;
  }
  EXPECT_NE(out[0].msg.find("versionCheck=exact (set on rank 1; this rank has warn"), std::string::npos) << out[0].msg;
  EXPECT_LT(ms, 5000);
}

TEST(Versions, RanksWithoutDriverOrNicAreNotCompared) {
  auto setup = same(3, clbVersionCheckExact);
  setup[0].versions.driver = "none";    // a host-only rank
  setup[2].versions.firmware = "none";  // a node without RDMA NIC
  int64_t ms = 0;
  auto out = runRanks(setup, 10000, &ms);
  for (int r = 0; r < 3; r++) {
    ASSERT_EQ(out[r].rc, clbSuccess) << out[r].msg;
    EXPECT_NE(infoLine(out[r].info).find("driver DIFFERS: none on rank 0, 580.159.04 on ranks 1,2"), std::string::npos)
        << out[r].info;
  }
}

}  // namespace
