// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbDeviceInfo and clbDeviceCanAccessPeer (what the doctor reports per GPU). Without a driver
// (the CI machine) both return clbUnsupported with the driver's own message; with a GPU the fields
// are checked against the driver and imageFor.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "colibri/colibri.h"
#include "platform/cuda/driver.h"
#include "device/kernels.h"

using namespace clb;

namespace {

// The driver's message when it cannot be used (first line: no "at file:line" breadcrumbs), or ""
// when it can.
std::string driverProblem(const cuda::Driver** d) {
  if (cuda::driver(d) == clbSuccess) return "";
  std::string m = clbGetLastError();
  return m.substr(0, m.find('\n'));
}

int gpuCount() {
  int n = 0;
  return clbDeviceCount(&n) == clbSuccess ? n : 0;
}

}  // namespace

TEST(DeviceInfo, NullOutputsAreRefused) {
  EXPECT_EQ(clbDeviceInfo(0, nullptr), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("info (output) is NULL"), std::string::npos) << clbGetLastError();
  EXPECT_EQ(clbDeviceCanAccessPeer(0, 0, nullptr), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("canAccess (output) is NULL"), std::string::npos) << clbGetLastError();
}

TEST(DeviceInfo, WithoutDriverTheDriversMessage) {
  const cuda::Driver* d = nullptr;
  std::string why = driverProblem(&d);
  if (why.empty()) GTEST_SKIP() << "this machine has a usable CUDA driver";
  clbDeviceInfo_t info;
  memset(&info, 0x5a, sizeof info);
  EXPECT_EQ(clbDeviceInfo(0, &info), clbUnsupported);
  std::string m = clbGetLastError();
  EXPECT_EQ(m.substr(0, m.find('\n')), why);
  EXPECT_EQ(info.name[0], '\0') << "the output is cleared on failure";
  EXPECT_EQ(info.major, 0);

  int can = 7;
  EXPECT_EQ(clbDeviceCanAccessPeer(0, 1, &can), clbUnsupported);
  m = clbGetLastError();
  EXPECT_EQ(m.substr(0, m.find('\n')), why);
  EXPECT_EQ(can, 0);
  // The reason names what is missing (here: libcuda.so.1, or cuInit's error).
  EXPECT_TRUE(why.find("libcuda.so.1") != std::string::npos || why.find("cuInit") != std::string::npos ||
              why.find("lacks") != std::string::npos)
      << why;
}

TEST(DeviceInfo, EveryGpuAsTheDriverSeesIt) {
  const cuda::Driver* d = nullptr;
  std::string why = driverProblem(&d);
  if (!why.empty()) GTEST_SKIP() << "no GPU here: " << why;
  int n = gpuCount();
  ASSERT_GT(n, 0);
  for (int g = 0; g < n; g++) {
    clbDeviceInfo_t info;
    ASSERT_EQ(clbDeviceInfo(g, &info), clbSuccess) << clbGetLastError();
    EXPECT_GT(strlen(info.name), 0u);
    EXPECT_GE(info.major, 5);
    EXPECT_STREQ(info.image, cuda::imageFor(info.major, info.minor));
    EXPECT_EQ(info.driverVersion, d->version);
    EXPECT_GE(info.driverVersion, 12000);
    unsigned dom = 0, bus = 0, dev = 0, fn = 9;
    char extra = 0;
    EXPECT_EQ(sscanf(info.pciBusId, "%4x:%2x:%2x.%1u%c", &dom, &bus, &dev, &fn, &extra), 4) << info.pciBusId;
    EXPECT_EQ(strlen(info.pciBusId), 12u) << info.pciBusId;
    EXPECT_TRUE(info.gpuDirectRdma >= -1 && info.gpuDirectRdma <= 1);
    EXPECT_TRUE(info.dmaBuf >= -1 && info.dmaBuf <= 1);
    printf("GPU %d: %s, compute capability %d.%d, PCI %s, image %s, driver %d, GPUDirect RDMA %d, dma-buf %d\n", g,
           info.name, info.major, info.minor, info.pciBusId, info.image, info.driverVersion, info.gpuDirectRdma,
           info.dmaBuf);
    int can = 0;
    ASSERT_EQ(clbDeviceCanAccessPeer(g, g, &can), clbSuccess) << clbGetLastError();
    EXPECT_EQ(can, 1);
    for (int p = 0; p < n; p++) {
      ASSERT_EQ(clbDeviceCanAccessPeer(g, p, &can), clbSuccess) << clbGetLastError();
      EXPECT_TRUE(can == 0 || can == 1);
    }
  }
  clbDeviceInfo_t info;
  EXPECT_EQ(clbDeviceInfo(n, &info), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("does not exist"), std::string::npos) << clbGetLastError();
  int can = 0;
  EXPECT_EQ(clbDeviceCanAccessPeer(0, -1, &can), clbInvalidArgument);
}
