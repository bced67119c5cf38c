// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The configuration's one table (base/config.cc) as the C ABI shows it: every knob by name
// (clbConfigSet / clbConfigGet / clbConfigOptionName), from its COLIBRI_* variable
// (clbConfigInit), checked by clbCommInitRank; and the device settings that init resolves from it
// (readDeviceConfig). The Java side compares its io.colibri.Option table with this one
// (colibri-native's ConfigMappingTest).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "colibri/colibri.h"
#include "tests/test_tls.h"

namespace {

using clbtest::ScopedEnv;

std::string get(const clbConfig_t& c, const char* name) {
  char b[128];
  if (clbConfigGet(&c, name, b, sizeof b) != clbSuccess) return std::string("error: ") + clbGetLastError();
  return b;
}

clbConfig_t defaults() {
  clbConfig_t c;
  clb::defaultConfig(&c);
  return c;
}

std::vector<std::string> optionNames() {
  std::vector<std::string> names;
  for (int i = 0; clbConfigOptionName(i); i++) names.push_back(clbConfigOptionName(i));
  return names;
}

TEST(ConfigTable, ListsEveryFieldOnceInTheOrderOfTheStruct) {
  const std::vector<std::string> names = optionNames();
  const std::vector<std::string> want = {"transport",
                                         "algorithm",
                                         "logLevel",
                                         "pipelineDepth",
                                         "chunkBytes",
                                         "directMaxBytes",
                                         "stagingCapBytes",
                                         "timeoutMs",
                                         "versionCheck",
                                         "verbsPort",
                                         "verbsGidIndex",
                                         "verbsTrafficClass",
                                         "verbsTimeout",
                                         "verbsRetryCount",
                                         "verbsDevice",
                                         "verbsQpsPerConnection",
                                         "devicePath",
                                         "deviceLaunch",
                                         "deviceGate",
                                         "deviceMeet",
                                         "deviceP2P",
                                         "deviceP2PInPlace",
                                         "deviceCheckCalls",
                                         "stuckWarnPercent",
                                         "verbsGpuMemory",
                                         "deviceLLMaxBytes",
                                         "deviceDirectMinBytes"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(clbConfigOptionName(-1), nullptr);
  EXPECT_EQ(clbConfigOptionName((int)want.size()), nullptr);
}

// docs/configuration.md's table of knobs (generated from io.colibri.Option, whose defaults and
// ranges colibri-native's ConfigMappingTest compares with this library's) has a row for every
// knob of the native table, with its variable: the C, Java and documented tables are one.
TEST(ConfigTable, EveryKnobHasItsRowInTheDocumentedTable) {
  std::ifstream f(std::string(CLB_TEST_DOCS_DIR) + "/configuration.md");
  ASSERT_TRUE(f.good()) << "cannot read " << CLB_TEST_DOCS_DIR << "/configuration.md";
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<std::string> rows;
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("| `", 0) == 0) rows.push_back(line);
  for (int i = 0; clbConfigOptionName(i); i++) {
    const std::string name = clbConfigOptionName(i), var = clb::optionVariable(i);
    bool found = false;
    for (const std::string& r : rows) {
      const bool named = r.rfind("| `" + name + "` |", 0) == 0 || r.find("`colibri." + name + "`") != std::string::npos;
      found = found || (named && r.find("| `" + var + "` |") != std::string::npos);
    }
    EXPECT_TRUE(found) << name << " / " << var << ": no row of docs/configuration.md names both";
  }
  EXPECT_EQ(clb::optionVariable(-1), nullptr);
}

TEST(ConfigTable, DefaultsAreTheDocumentedOnes) {
  const clbConfig_t c = defaults();
  EXPECT_EQ(c.size, sizeof(clbConfig_t));
  EXPECT_EQ(get(c, "transport"), "auto");
  EXPECT_EQ(get(c, "algorithm"), "auto");
  EXPECT_EQ(get(c, "logLevel"), "warn");
  EXPECT_EQ(get(c, "pipelineDepth"), std::to_string(CLB_DEFAULT_PIPELINE_DEPTH));
  EXPECT_EQ(get(c, "chunkBytes"), std::to_string(CLB_DEFAULT_CHUNK_BYTES));
  EXPECT_EQ(get(c, "timeoutMs"), std::to_string(CLB_DEFAULT_TIMEOUT_MS));
  EXPECT_EQ(get(c, "versionCheck"), "strict");
  EXPECT_EQ(get(c, "verbsDevice"), "");
  EXPECT_EQ(get(c, "verbsGidIndex"), "-1");
  EXPECT_EQ(get(c, "devicePath"), "auto");
  EXPECT_EQ(get(c, "deviceLaunch"), "auto");
  EXPECT_EQ(get(c, "deviceGate"), "auto");
  EXPECT_EQ(get(c, "deviceMeet"), "on");
  EXPECT_EQ(get(c, "deviceP2P"), "auto");
  EXPECT_EQ(get(c, "deviceP2PInPlace"), "on");
  EXPECT_EQ(get(c, "deviceCheckCalls"), "0");
  EXPECT_EQ(get(c, "stuckWarnPercent"), "50");
  EXPECT_EQ(get(c, "verbsGpuMemory"), "auto");
  EXPECT_EQ(get(c, "deviceLLMaxBytes"), "auto");
  EXPECT_EQ(get(c, "deviceDirectMinBytes"), "0");
  EXPECT_EQ(clb::validateConfig(c), clbSuccess) << clbGetLastError();
}

TEST(ConfigTable, SetTakesEveryKnobByNameAndGetGivesItBack) {
  clbConfig_t c = defaults();
  const std::pair<const char*, const char*> values[] = {
      {"transport", "socket"},        {"algorithm", "direct"},         {"logLevel", "debug"},
      {"pipelineDepth", "64"},        {"chunkBytes", "4096"},          {"directMaxBytes", "0"},
      {"stagingCapBytes", "65536"},   {"timeoutMs", "86400000"},       {"versionCheck", "exact"},
      {"verbsPort", "255"},           {"verbsGidIndex", "-1"},         {"verbsTrafficClass", "104"},
      {"verbsTimeout", "31"},         {"verbsRetryCount", "0"},        {"verbsDevice", "mlx5_1"},
      {"verbsQpsPerConnection", "8"}, {"devicePath", "staged"},        {"deviceLaunch", "kernel"},
      {"deviceGate", "off"},          {"deviceMeet", "off"},           {"deviceP2P", "off"},
      {"deviceP2PInPlace", "off"},    {"deviceCheckCalls", "1"},       {"stuckWarnPercent", "0"},
      {"verbsGpuMemory", "peermem"},  {"deviceLLMaxBytes", "1048576"}, {"deviceDirectMinBytes", "9223372036854775807"},
  };
  ASSERT_EQ(sizeof values / sizeof values[0], optionNames().size()) << "a value for every knob";
  for (const auto& [name, value] : values) {
    ASSERT_EQ(clbConfigSet(&c, name, value), clbSuccess) << name << ": " << clbGetLastError();
    EXPECT_EQ(get(c, name), value) << name;
  }
  EXPECT_EQ(clb::validateConfig(c), clbSuccess) << clbGetLastError();
  EXPECT_EQ(c.transport, clbTransportSocket);
  EXPECT_EQ(c.devicePath, clb::kDevicePathStaged);
  EXPECT_EQ(c.deviceMeet, 0);
  EXPECT_EQ(c.verbsGpuMemory, clb::kGpuMemoryPeermem);
  EXPECT_EQ(c.deviceDirectMinBytes, INT64_MAX);
  EXPECT_STREQ(c.verbsDevice, "mlx5_1");
  // Words in any case; "auto" back to the default of deviceLLMaxBytes; an empty device name.
  ASSERT_EQ(clbConfigSet(&c, "devicePath", "LL"), clbSuccess) << clbGetLastError();
  EXPECT_EQ(get(c, "devicePath"), "ll");
  ASSERT_EQ(clbConfigSet(&c, "deviceLLMaxBytes", "auto"), clbSuccess) << clbGetLastError();
  EXPECT_EQ(c.deviceLLMaxBytes, -1);
  ASSERT_EQ(clbConfigSet(&c, "deviceLLMaxBytes", "0"), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbConfigSet(&c, "deviceLLMaxBytes", "-1"), clbSuccess) << clbGetLastError();
  EXPECT_EQ(get(c, "deviceLLMaxBytes"), "auto");
  ASSERT_EQ(clbConfigSet(&c, "verbsDevice", ""), clbSuccess) << clbGetLastError();
  EXPECT_EQ(get(c, "verbsDevice"), "");
  for (size_t i = 0; i < sizeof c.verbsDevice; i++) ASSERT_EQ(c.verbsDevice[i], 0) << "NUL-padded, byte " << i;
}

TEST(ConfigTable, SetRefusesWhatIsNotValidAndLeavesTheFieldAsItWas) {
  clbConfig_t c = defaults();
  const std::string tooLong(64, 'd');
  struct Bad {
    const char* name;
    const char* value;
    const char* says;
  } bad[] = {
      {"chunkBytes", "4095", "chunkBytes='4095' is not an integer in 4096..67108864"},
      {"chunkBytes", "1M", "is not an integer in"},
      {"chunkBytes", "", "is not an integer in"},
      {"chunkBytes", " 4096", "is not an integer in"},
      {"chunkBytes", "\t8192", "is not an integer in"},
      {"verbsDevice", "mlx5_0\nfoo", "verbsDevice holds a control character"},
      {"pipelineDepth", "65", "1..64"},
      {"timeoutMs", "0", "1..86400000"},
      {"verbsGidIndex", "-2", "-1..255"},
      {"transport", "tcp", "transport='tcp' is not one of auto, shm, socket, verbs"},
      {"algorithm", "none", "is not one of auto, ring, direct"},
      {"devicePath", "fast", "devicePath='fast' is not one of auto, ll, staged, direct"},
      {"deviceMeet", "maybe", "is not one of off, on"},
      {"deviceLLMaxBytes", "1048577", "is not auto (-1) or an integer in 0..1048576"},
      {"deviceLLMaxBytes", "-2", "is not auto (-1) or an integer in 0..1048576"},
      {"stuckWarnPercent", "100", "0..99"},
      {"deviceCheckCalls", "2", "0..1"},
      {"verbsDevice", tooLong.c_str(), "is 64 bytes long; it may have at most 63"},
  };
  const clbConfig_t before = c;
  for (const Bad& b : bad) {
    EXPECT_EQ(clbConfigSet(&c, b.name, b.value), clbInvalidArgument) << b.name << "=" << b.value;
    EXPECT_NE(std::string(clbGetLastError()).find(b.says), std::string::npos) << clbGetLastError();
    EXPECT_EQ(memcmp(&c, &before, sizeof c), 0) << b.name << "=" << b.value << " changed the config";
  }
  EXPECT_EQ(clbConfigSet(&c, "chunk_bytes", "4096"), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("no option 'chunk_bytes'; the options are transport, algorithm"),
            std::string::npos)
      << clbGetLastError();
  EXPECT_EQ(clbConfigSet(&c, nullptr, "1"), clbInvalidArgument);
  EXPECT_EQ(clbConfigSet(&c, "chunkBytes", nullptr), clbInvalidArgument);
  EXPECT_EQ(clbConfigSet(nullptr, "chunkBytes", "4096"), clbInvalidArgument);
  clbConfig_t old = c;
  old.size = clb::kConfigSizeV3;
  EXPECT_EQ(clbConfigSet(&old, "chunkBytes", "4096"), clbInvalidArgument) << "an earlier struct has no device fields";
  char small[4];
  EXPECT_EQ(clbConfigGet(&c, "stagingCapBytes", small, sizeof small), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("needs 9 bytes"), std::string::npos) << clbGetLastError();
  EXPECT_EQ(clbConfigGet(&c, "nope", small, sizeof small), clbInvalidArgument);
}

TEST(ConfigTable, ValidateRefusesAFieldOutOfRangeByName) {
  clbConfig_t c = defaults();
  c.deviceGate = 3;
  EXPECT_EQ(clb::validateConfig(c), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("config deviceGate=3 is out of range 0..2"), std::string::npos)
      << clbGetLastError();
  c = defaults();
  c.deviceLLMaxBytes = -2;
  EXPECT_EQ(clb::validateConfig(c), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("deviceLLMaxBytes=-2 is out of range 0..1048576 (or -1: auto)"),
            std::string::npos)
      << clbGetLastError();
}

// clbConfigInit reads every knob's COLIBRI_* variable, the device ones included; a bad value is
// refused naming the variable.
TEST(ConfigTable, InitReadsEveryVariable) {
  {
    ScopedEnv env({{"COLIBRI_DEVICE_PATH", "Direct"},
                   {"COLIBRI_DEVICE_GATE", "on"},
                   {"COLIBRI_DEVICE_MEET", "off"},
                   {"COLIBRI_DEVICE_LL_MAX_BYTES", "65536"},
                   {"COLIBRI_VERBS_GPU_MEMORY", "host"},
                   {"COLIBRI_STUCK_WARN_PERCENT", "20"}});
    clbConfig_t c;
    ASSERT_EQ(clbConfigInit(&c), clbSuccess) << clbGetLastError();
    EXPECT_EQ(c.devicePath, clb::kDevicePathDirect);
    EXPECT_EQ(c.deviceGate, clb::kDeviceGateOn);
    EXPECT_EQ(c.deviceMeet, 0);
    EXPECT_EQ(c.deviceLLMaxBytes, 65536);
    EXPECT_EQ(c.verbsGpuMemory, clb::kGpuMemoryHost);
    EXPECT_EQ(c.stuckWarnPercent, 20);
  }
  const std::pair<const char*, const char*> bad[] = {
      {"COLIBRI_DEVICE_GATE", "COLIBRI_DEVICE_GATE='sometimes' is not one of auto, on, off"},
      {"COLIBRI_STUCK_WARN_PERCENT", "COLIBRI_STUCK_WARN_PERCENT='sometimes' is not an integer in 0..99"},
      {"COLIBRI_DEVICE_LL_MAX_BYTES", "COLIBRI_DEVICE_LL_MAX_BYTES='sometimes' is not auto (-1) or an integer in"},
  };
  for (const auto& [var, says] : bad) {
    ScopedEnv e({{var, "sometimes"}});
    clbConfig_t c;
    EXPECT_EQ(clbConfigInit(&c), clbInvalidArgument) << var;
    EXPECT_NE(std::string(clbGetLastError()).find(says), std::string::npos) << clbGetLastError();
  }
}

// A caller built against the third clbConfig_t (152 bytes: up to verbsQpsPerConnection) gets the
// device settings from the defaults and the environment, never from the bytes past its struct.
TEST(ConfigTable, StructOfTheThirdVersionGetsTheDeviceSettingsFromTheEnvironment) {
  ScopedEnv path({{"COLIBRI_DEVICE_PATH", "ll"}});
  std::vector<unsigned char> buf(sizeof(clbConfig_t) + 16, 0xAB);
  auto* old = reinterpret_cast<clbConfig_t*>(buf.data());
  ASSERT_EQ(clbConfigInitSized(old, clb::kConfigSizeV3), clbSuccess) << clbGetLastError();
  EXPECT_EQ(old->size, clb::kConfigSizeV3);
  for (size_t i = clb::kConfigSizeV3; i < buf.size(); i++) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  old->verbsQpsPerConnection = 2;
  memset(buf.data() + offsetof(clbConfig_t, devicePath), 0xAB, 4);  // garbage in its padding
  clbConfig_t used;
  ASSERT_EQ(clb::resolveConfig(old, &used), clbSuccess) << clbGetLastError();
  EXPECT_EQ(used.size, sizeof(clbConfig_t));
  EXPECT_EQ(used.verbsQpsPerConnection, 2) << "the caller's own field";
  EXPECT_EQ(used.devicePath, clb::kDevicePathLL) << "the environment";
  EXPECT_EQ(used.deviceGate, clb::kDeviceGateAuto) << "the default";
}

struct LLCase {
  int64_t value;  // deviceLLMaxBytes (-1: auto)
  int nranks;
  int64_t bytes;
  bool given;
};

// The LL limit counts as given only at a value other than its default: whether it is lowered
// through host memory (device/shared.cc) must follow from the value, which the ranks compare at
// init, and not from whether each rank set it (a rank setting the default beside ranks that do
// not would otherwise take LL where they take the copies, and every rank would wait for the
// others until the timeout).
TEST(DeviceConfig, TheLLLimitCountsAsGivenOnlyAtAValueOtherThanItsDefault) {
  const LLCase cases[] = {
      {-1, 4, 256 << 10, false},      // auto
      {262144, 4, 256 << 10, false},  // the default, named
      {196608, 8, 192 << 10, false},  // 8 ranks' default, named
      {131072, 4, 128 << 10, true},
      {262144, 8, 256 << 10, true},  // above 8 ranks' default
      {0, 2, 0, true},
  };
  for (const LLCase& k : cases) {
    clbConfig_t c = defaults();
    c.deviceLLMaxBytes = k.value;
    const clb::DeviceConfig d = clb::readDeviceConfig(c, k.nranks);
    const std::string what = std::to_string(k.value) + " with " + std::to_string(k.nranks) + " ranks";
    EXPECT_EQ(d.llMaxBytes, k.bytes) << what;
    EXPECT_EQ(d.llMaxGiven, k.given) << what;
  }
}

TEST(DeviceConfig, EveryDeviceFieldReachesTheDeviceSettings) {
  clbConfig_t c = defaults();
  clb::DeviceConfig d = clb::readDeviceConfig(c, 4);
  EXPECT_EQ(d.path, clb::kDevicePathAuto);
  EXPECT_FALSE(d.meetOff);
  EXPECT_EQ(d.launch, clb::kDeviceLaunchAuto);
  EXPECT_EQ(d.gate, clb::kDeviceGateAuto);
  EXPECT_FALSE(d.p2pOff);
  EXPECT_FALSE(d.p2pInPlaceOff);
  EXPECT_FALSE(d.checkCalls);
  EXPECT_EQ(d.stuckWarnPercent, 50);
  EXPECT_EQ(d.gpuMemoryText, "auto");
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, const char*>>{{"devicePath", "direct"},
                                                        {"deviceMeet", "off"},
                                                        {"deviceLaunch", "graph"},
                                                        {"deviceGate", "off"},
                                                        {"deviceP2P", "off"},
                                                        {"deviceP2PInPlace", "off"},
                                                        {"deviceCheckCalls", "1"},
                                                        {"stuckWarnPercent", "7"},
                                                        {"verbsGpuMemory", "dmabuf"},
                                                        {"deviceDirectMinBytes", "1048576"}})
    ASSERT_EQ(clbConfigSet(&c, name, value), clbSuccess) << clbGetLastError();
  d = clb::readDeviceConfig(c, 4);
  EXPECT_EQ(d.path, clb::kDevicePathDirect);
  EXPECT_TRUE(d.meetOff);
  EXPECT_EQ(d.launch, clb::kDeviceLaunchGraph);
  EXPECT_EQ(d.gate, clb::kDeviceGateOff);
  EXPECT_TRUE(d.p2pOff);
  EXPECT_TRUE(d.p2pInPlaceOff);
  EXPECT_TRUE(d.checkCalls);
  EXPECT_EQ(d.stuckWarnPercent, 7);
  EXPECT_EQ(d.gpuMemory, clb::kGpuMemoryDmabuf);
  EXPECT_EQ(d.gpuMemoryText, "dmabuf");
  EXPECT_EQ(d.directMinBytes, 1 << 20);
}

}  // namespace
