// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The device settings as init reads them (base/config.cc). The LL limit counts as given only at a
// value other than its default: whether it is lowered through host memory (device/shared.cc) must
// follow from the value, which the ranks compare at init, and not from whether each rank's
// environment names it (a rank setting the default beside ranks that do not would otherwise take
// LL where they take the copies, and every rank would wait for the others until the timeout).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/config.h"

namespace {

struct LLCase {
  const char* value;  // COLIBRI_DEVICE_LL_MAX_BYTES, or null for unset
  int nranks;
  int64_t bytes;
  bool given;
};

TEST(DeviceConfig, TheLLLimitCountsAsGivenOnlyAtAValueOtherThanItsDefault) {
  const char* before = getenv("COLIBRI_DEVICE_LL_MAX_BYTES");
  const std::string saved = before ? before : "";
  const LLCase cases[] = {
      {nullptr, 4, 256 << 10, false},   // the default
      {"262144", 4, 256 << 10, false},  // the default, named
      {"196608", 8, 192 << 10, false},  // 8 ranks' default, named
      {"131072", 4, 128 << 10, true},
      {"262144", 8, 256 << 10, true},  // above 8 ranks' default
      {"0", 2, 0, true},
  };
  for (const LLCase& c : cases) {
    if (c.value)
      setenv("COLIBRI_DEVICE_LL_MAX_BYTES", c.value, 1);
    else
      unsetenv("COLIBRI_DEVICE_LL_MAX_BYTES");
    const clb::DeviceConfig d = clb::readDeviceConfig(c.nranks);
    const std::string what = std::string(c.value ? c.value : "unset") + " with " + std::to_string(c.nranks) + " ranks";
    EXPECT_TRUE(d.error.empty()) << what << ": " << d.error;
    EXPECT_EQ(d.llMaxBytes, c.bytes) << what;
    EXPECT_EQ(d.llMaxGiven, c.given) << what;
  }
  if (before)
    setenv("COLIBRI_DEVICE_LL_MAX_BYTES", saved.c_str(), 1);
  else
    unsetenv("COLIBRI_DEVICE_LL_MAX_BYTES");
}

// COLIBRI_DEVICE_GATE: auto by default, on and off as named, anything else the error the first
// device call reports (naming the values it takes).
TEST(DeviceConfig, TheGateSettingIsReadAndABadValueNamed) {
  const char* before = getenv("COLIBRI_DEVICE_GATE");
  const std::string saved = before ? before : "";
  unsetenv("COLIBRI_DEVICE_GATE");
  EXPECT_EQ(clb::readDeviceConfig(4).gate, clb::kDeviceGateAuto);
  const std::pair<const char*, int> named[] = {{"auto", clb::kDeviceGateAuto},
                                               {"on", clb::kDeviceGateOn},
                                               {"off", clb::kDeviceGateOff},
                                               {"OFF", clb::kDeviceGateOff}};
  for (const auto& [v, want] : named) {
    setenv("COLIBRI_DEVICE_GATE", v, 1);
    const clb::DeviceConfig d = clb::readDeviceConfig(4);
    EXPECT_TRUE(d.error.empty()) << v << ": " << d.error;
    EXPECT_EQ(d.gate, want) << v;
  }
  setenv("COLIBRI_DEVICE_GATE", "sometimes", 1);
  const clb::DeviceConfig bad = clb::readDeviceConfig(4);
  EXPECT_NE(bad.error.find("COLIBRI_DEVICE_GATE='sometimes' is not one of auto, on, off"), std::string::npos)
      << bad.error;
  EXPECT_EQ(bad.gate, clb::kDeviceGateAuto);
  if (before)
    setenv("COLIBRI_DEVICE_GATE", saved.c_str(), 1);
  else
    unsetenv("COLIBRI_DEVICE_GATE");
}

}  // namespace
