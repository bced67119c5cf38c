// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbCommRegister / clbCommDeregister where there is no GPU (the CI machine): bad arguments are
// refused by name, a registration that fails on one rank fails on every rank (rather than leaving
// the others waiting), and the communicator stays usable afterwards. On a GPU, the device test
// DeviceProcesses/*registered* and */mixed* runs the collectives on registered buffers.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "device/runtime.h"

namespace {

// Asked after a registration: whether it found a CUDA driver (it loads one where there is one; a
// build without the device runtime never does).
bool haveDriver() { return clb::cuda::driverInProcess(); }

// A build without the device runtime (COLIBRI_CUDA=OFF) refuses every registration on its own, on
// every rank alike (every rank runs the same library), before any agreement: nobody waits.
bool builtWithCuda() { return clb::cuda::checkBuiltWithCuda() == clbSuccess; }

struct Outcome {
  clbResult_t rc = clbSuccess;
  std::string msg;
  void* handle = reinterpret_cast<void*>(1);
  bool afterwards = false;  // a host allReduce after the failed registration gave the right sum
};

// n ranks as threads: each registers buffer `bufs[r]`, then runs one host allReduce.
std::vector<Outcome> registerOnEveryRank(const std::vector<void*>& bufs, size_t bytes) {
  const int n = (int)bufs.size();
  clbUniqueId id;
  EXPECT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<Outcome> out(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      cfg.timeoutMs = 20000;
      clbComm_t c = nullptr;
      if (clbCommInitRank(&c, &id, r, n, &cfg) != clbSuccess) {
        out[r].msg = std::string("init: ") + clbGetLastError();
        return;
      }
      out[r].rc = clbCommRegister(c, bufs[r], bytes, &out[r].handle);
      out[r].msg = clbGetLastError();
      int v = r + 1, sum = 0;
      out[r].afterwards =
          clbAllReduce(&v, &sum, 1, clbInt32, clbSum, c, nullptr) == clbSuccess && sum == n * (n + 1) / 2;
      clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  return out;
}

void expectRefusedForTheBuild(const std::vector<Outcome>& out) {
  for (size_t r = 0; r < out.size(); r++) {
    EXPECT_EQ(out[r].rc, clbUnsupported) << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find("built without CUDA"), std::string::npos) << out[r].msg;
    EXPECT_EQ(out[r].handle, nullptr) << "rank " << r;
    EXPECT_TRUE(out[r].afterwards) << "rank " << r;
  }
}

}  // namespace

TEST(Registration, NullCommunicatorAndHandleAreRefused) {
  int x = 0;
  void* h = nullptr;
  EXPECT_EQ(clbCommRegister(nullptr, &x, sizeof x, &h), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("communicator is NULL"), std::string::npos) << clbGetLastError();
  EXPECT_EQ(clbCommDeregister(nullptr, &x), clbInvalidArgument);
}

TEST(Registration, DeregisteringWhatWasNeverRegisteredIsRefused) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t c = nullptr;
  ASSERT_EQ(clbCommInitRank(&c, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(clbCommDeregister(c, nullptr), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("handle is NULL"), std::string::npos) << clbGetLastError();
  int x = 0;
  EXPECT_EQ(clbCommDeregister(c, &x), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("not a registration of this communicator"), std::string::npos)
      << clbGetLastError();
  EXPECT_EQ(clbCommDestroy(c), clbSuccess);
}

TEST(Registration, AFailureOnOneRankIsAFailureOnEveryRankAndNamesIt) {
  // Rank 1 passes a NULL buffer; rank 0 a host buffer, which fails too where there is no driver.
  std::vector<char> host(64);
  std::vector<Outcome> out = registerOnEveryRank({host.data(), nullptr}, host.size());
  if (!builtWithCuda()) return expectRefusedForTheBuild(out);
  for (int r = 0; r < 2; r++) {
    EXPECT_NE(out[r].rc, clbSuccess) << "rank " << r;
    EXPECT_EQ(out[r].handle, nullptr) << "rank " << r << ": the handle is cleared on failure";
    EXPECT_TRUE(out[r].afterwards) << "rank " << r << ": the communicator stays usable after a failed registration";
  }
  if (haveDriver()) {
    // Rank 0's host memory is refused by name, and rank 1 says which rank failed first.
    EXPECT_EQ(out[0].rc, clbInvalidArgument);
    EXPECT_NE(out[0].msg.find("host memory"), std::string::npos) << out[0].msg;
  } else {
    EXPECT_EQ(out[0].rc, clbUnsupported) << out[0].msg;
  }
  EXPECT_NE(out[1].msg.find("rank 0 could not register its buffer, so no rank did"), std::string::npos) << out[1].msg;
}

TEST(Registration, ANullBufferIsRefusedByNameOnItsRank) {
  std::vector<Outcome> out = registerOnEveryRank({nullptr}, 64);
  if (!builtWithCuda()) return expectRefusedForTheBuild(out);
  EXPECT_EQ(out[0].rc, clbInvalidArgument);
  EXPECT_NE(out[0].msg.find("pass device memory and a size above 0"), std::string::npos) << out[0].msg;
  EXPECT_TRUE(out[0].afterwards);
}

// Deregistration is collective from its first step: a handle that one rank does not hold (here
// rank 0's is made up, rank 1's NULL) is refused on every rank at once, each told which rank
// refused first, rather than the others waiting for that rank in the deregistration's barrier.
// (On a GPU, a registration that a live CUDA graph reads is refused the same way:
// DeviceRegisteredGraph.)
TEST(Registration, ADeregistrationRefusedOnOneRankIsRefusedOnEveryRankAtOnce) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  const int n = 2;
  std::vector<clbResult_t> rc(n);
  std::vector<std::string> msg(n);
  std::vector<char> afterwards(n);  // not vector<bool>: its bits share words the rank threads write
  std::vector<std::thread> ts;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      cfg.timeoutMs = 20000;
      clbComm_t c = nullptr;
      if (clbCommInitRank(&c, &id, r, n, &cfg) != clbSuccess) return;
      void* h = nullptr;
      (void)clbCommRegister(c, nullptr, 64, &h);  // refused on every rank; sets up what deregistration asks
      int madeUp = 0;
      rc[r] = clbCommDeregister(c, r == 0 ? (void*)&madeUp : nullptr);
      msg[r] = clbGetLastError();
      int v = r + 1, sum = 0;
      afterwards[r] = clbAllReduce(&v, &sum, 1, clbInt32, clbSum, c, nullptr) == clbSuccess && sum == 3;
      clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "a rank waited for the timeout";
  EXPECT_EQ(rc[0], clbInvalidArgument) << msg[0];
  EXPECT_NE(msg[0].find("not a registration of this communicator"), std::string::npos) << msg[0];
  EXPECT_EQ(rc[1], clbInvalidArgument) << msg[1];
  // Without the device runtime no registration can exist: each rank refuses its own handle alone.
  EXPECT_NE(msg[1].find(builtWithCuda() ? "no rank deregistered, because rank 0" : "handle is NULL"), std::string::npos)
      << msg[1];
  EXPECT_TRUE(afterwards[0] && afterwards[1]) << "the communicator stays usable after a refused deregistration";
}
