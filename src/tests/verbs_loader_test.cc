// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The libibverbs loader: a missing or foreign library is refused with the package to install; the
// environment's failures of ibv_get_device_list (no kernel support: ENOSYS; no permission; no
// device) each become a message that names the fix; the real library on this machine gives one of
// those answers, consistent with what sysfs shows. In this binary the name libibverbs.so.1 is the
// stand-in the tests link (tests/verbs_emu/), so the real library is loaded by its path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "transport/verbs/verbs_api.h"

namespace {

using clb::verbs::VerbsApi;

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

TEST(VerbsLoader, MissingLibraryNamesThePackageToInstall) {
  VerbsApi t{};
  EXPECT_EQ(clb::verbs::loadLibibverbsFrom("libibverbs-colibri-test-absent.so.1", &t), clbUnsupported);
  std::string msg = clb::lastError();
  EXPECT_TRUE(contains(msg, "cannot load libibverbs-colibri-test-absent.so.1")) << msg;
  EXPECT_TRUE(contains(msg, "libibverbs1")) << msg;
  EXPECT_TRUE(contains(msg, "rdma-core")) << msg;
  EXPECT_EQ(t.getDeviceList, nullptr) << "nothing filled on failure";
}

TEST(VerbsLoader, LibraryWithoutVerbsIsRefusedNamingTheMissingEntry) {
  VerbsApi t{};
  EXPECT_EQ(clb::verbs::loadLibibverbsFrom("libc.so.6", &t), clbUnsupported);
  std::string msg = clb::lastError();
  EXPECT_TRUE(contains(msg, "has no ibv_get_device_list")) << msg;
  EXPECT_TRUE(contains(msg, "rdma-core")) << msg;
}

// Fake libraries: ibv_get_device_list answering as each environment does.
int gFakeErrno = 0;
int gFakeCount = 0;
ibv_device gFakeDevice;
ibv_device* gFakeList[2] = {&gFakeDevice, nullptr};
bool gFreed = false;

ibv_device** fakeGetDeviceList(int* n) {
  *n = 0;
  if (gFakeErrno) {
    errno = gFakeErrno;
    return nullptr;
  }
  *n = gFakeCount;
  return gFakeList;
}
void fakeFreeDeviceList(ibv_device**) { gFreed = true; }

VerbsApi fakeApi() {
  VerbsApi t{};
  t.impl = "fake";
  t.getDeviceList = fakeGetDeviceList;
  t.freeDeviceList = fakeFreeDeviceList;
  return t;
}

TEST(VerbsLoader, DeviceListFailuresNameTheFix) {
  VerbsApi t = fakeApi();
  ibv_device** l = nullptr;
  int n = -1;

  gFakeErrno = ENOSYS;
  EXPECT_EQ(clb::verbs::listDevices(t, &l, &n), clbUnsupported);
  std::string msg = clb::lastError();
  EXPECT_TRUE(contains(msg, "ENOSYS")) << msg;
  EXPECT_TRUE(contains(msg, "no RDMA support")) << msg;
  EXPECT_TRUE(contains(msg, "modprobe ib_uverbs")) << msg;
  EXPECT_TRUE(contains(msg, "/dev/infiniband")) << "the container case: " << msg;
  EXPECT_EQ(l, nullptr);
  EXPECT_EQ(n, 0);

  gFakeErrno = EACCES;
  EXPECT_EQ(clb::verbs::listDevices(t, &l, &n), clbSystemError);
  msg = clb::lastError();
  EXPECT_TRUE(contains(msg, "no permission")) << msg;
  EXPECT_TRUE(contains(msg, "errno 13")) << msg;

  gFakeErrno = 0;
  gFakeCount = 0;
  gFreed = false;
  EXPECT_EQ(clb::verbs::listDevices(t, &l, &n), clbUnsupported);
  msg = clb::lastError();
  EXPECT_TRUE(contains(msg, "no RDMA device found")) << msg;
  EXPECT_TRUE(contains(msg, "ibv_devices")) << msg;
  EXPECT_TRUE(contains(msg, "ibverbs-providers")) << msg;
  EXPECT_TRUE(gFreed) << "the empty list is released";

  gFakeCount = 1;
  ASSERT_EQ(clb::verbs::listDevices(t, &l, &n), clbSuccess) << clb::lastError();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(l[0], &gFakeDevice);
}

// rdma-core's libibverbs.so.1 on this machine, by path ("" when there is none).
std::string systemLibibverbs() {
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                          "/lib/x86_64-linux-gnu", "/lib64"}) {
    std::string p = std::string(dir) + "/libibverbs.so.1";
    if (access(p.c_str(), F_OK) == 0) return p;
  }
  return "";
}

TEST(VerbsLoader, TheProcessLibraryIsLoadedOnce) {
  const VerbsApi* api = nullptr;
  ASSERT_EQ(clb::verbs::loadLibibverbs(&api), clbSuccess) << clb::lastError();
  const VerbsApi* again = nullptr;
  ASSERT_EQ(clb::verbs::loadLibibverbs(&again), clbSuccess);
  EXPECT_EQ(again, api) << "loaded once per process";
}

TEST(VerbsLoader, RealLibraryOnThisMachineAnswersConsistentlyWithSysfs) {
  const std::string path = systemLibibverbs();
  static VerbsApi real{};
  const VerbsApi* api = &real;
  clbResult_t rc = clb::verbs::loadLibibverbsFrom(path.empty() ? "libibverbs-not-installed.so.1" : path.c_str(), &real);
  if (rc != clbSuccess) {
    // No rdma-core here: the message must say what to install.
    std::string msg = clb::lastError();
    EXPECT_EQ(rc, clbUnsupported);
    EXPECT_TRUE(contains(msg, "libibverbs1")) << msg;
    return;
  }
  EXPECT_STREQ(api->impl, "libibverbs");
  const void* required[] = {
      (void*)api->getDeviceList, (void*)api->freeDeviceList, (void*)api->getDeviceName, (void*)api->openDevice,
      (void*)api->closeDevice,   (void*)api->queryDevice,    (void*)api->queryPort,     (void*)api->queryGid,
      (void*)api->allocPd,       (void*)api->deallocPd,      (void*)api->regMr,         (void*)api->deregMr,
      (void*)api->createCq,      (void*)api->destroyCq,      (void*)api->createQp,      (void*)api->modifyQp,
      (void*)api->queryQp,       (void*)api->destroyQp,      (void*)api->postSend,      (void*)api->postRecv,
      (void*)api->pollCq,        (void*)api->wcStatusStr,    (void*)api->reqNotifyCq,   (void*)api->getCqEvent};
  for (const void* f : required) EXPECT_NE(f, nullptr);
  EXPECT_STREQ(api->wcStatusStr(IBV_WC_SUCCESS), "success");

  ibv_device** list = nullptr;
  int n = 0;
  rc = clb::verbs::listDevices(*api, &list, &n);
  std::string msg = clb::lastError();
  bool kernelSupport = access("/sys/class/infiniband_verbs", F_OK) == 0;
  if (!kernelSupport) {
    // This machine and the CI machine: libibverbs installed, no RDMA in the kernel.
    EXPECT_EQ(rc, clbUnsupported);
    EXPECT_TRUE(contains(msg, "ENOSYS")) << msg;
    EXPECT_TRUE(contains(msg, "modprobe ib_uverbs")) << msg;
  } else if (rc != clbSuccess) {
    EXPECT_EQ(rc, clbUnsupported);
    EXPECT_TRUE(contains(msg, "no RDMA device found")) << msg;
  } else {
    ASSERT_GT(n, 0);
    EXPECT_NE(api->getDeviceName(list[0]), nullptr);
    api->freeDeviceList(list);
  }
}

TEST(VerbsLoader, CompletionHintsAndNames) {
  using namespace clb::verbs;
  EXPECT_TRUE(contains(wcStatusHint(IBV_WC_RETRY_EXC_ERR), "GID")) << wcStatusHint(IBV_WC_RETRY_EXC_ERR);
  EXPECT_TRUE(contains(wcStatusHint(IBV_WC_RETRY_EXC_ERR), "PSN"));
  EXPECT_TRUE(contains(wcStatusHint(IBV_WC_REM_ACCESS_ERR), "rkey"));
  EXPECT_TRUE(contains(wcStatusHint(IBV_WC_RNR_RETRY_EXC_ERR), "receive"));
  EXPECT_TRUE(contains(wcStatusHint(IBV_WC_WR_FLUSH_ERR), "earlier"));
  for (int s = IBV_WC_SUCCESS; s <= IBV_WC_GENERAL_ERR; s++) {
    ASSERT_NE(wcStatusHint((ibv_wc_status)s), nullptr);
    EXPECT_GT(strlen(wcStatusHint((ibv_wc_status)s)), 5u);
  }
  EXPECT_STREQ(qpStateName(IBV_QPS_RTS), "RTS");
  EXPECT_STREQ(portStateName(IBV_PORT_ACTIVE), "ACTIVE");
  EXPECT_EQ(mtuBytes(IBV_MTU_256), 256);
  EXPECT_EQ(mtuBytes(IBV_MTU_4096), 4096);
  EXPECT_EQ(mtuBytes((ibv_mtu)0), 0);
  EXPECT_EQ(mtuBytes((ibv_mtu)6), 0);
}

}  // namespace
