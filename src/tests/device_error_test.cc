// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the host makes of what a kernel reported (deviceError, device/watchdog.cc), without a GPU:
// the status block filled in as the kernels fill it, for each kind of device error.
#include <gtest/gtest.h>

#include <string>

#include "device/watchdog.h"

namespace {

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

TEST(DeviceError, EachKindIsNamedWithItsCause) {
  std::string text;
  ClbDevHostStatus s{};
  s.error = 1;
  s.errorCall = 7;
  s.errorColl = CLB_DEV_ALLREDUCE;

  s.errorKind = CLB_DEV_ERR_TIMEOUT;
  s.timedOutFor[1] = 7;
  EXPECT_EQ(clb::cuda::deviceError(&s, 0, 2, 5000, &text), clbTimeout);
  EXPECT_TRUE(has(text, "timed out after 5000 ms waiting for rank(s) 1")) << text;

  s.errorKind = CLB_DEV_ERR_DISAGREE;
  s.errorRank = 1;
  s.errorSig = CLB_DEV_SIG(CLB_DEV_ALLREDUCE, clbFloat32, clbSum, 0, 1000);
  s.errorPeerSig = CLB_DEV_SIG(CLB_DEV_ALLREDUCE, clbFloat32, clbMax, 0, 1000);
  EXPECT_EQ(clb::cuda::deviceError(&s, 0, 2, 5000, &text), clbRemoteError);
  EXPECT_TRUE(has(text, "rank 0's device call #7 (allReduce of 1000 float32 (sum)) is not rank 1's")) << text;

  // A peer whose replay was refused (its call line says so): the cause named, not a disagreement.
  s.errorPeerSig = CLB_DEV_SIG_REPLAY;
  EXPECT_EQ(clb::cuda::deviceError(&s, 0, 2, 5000, &text), clbRemoteError);
  EXPECT_TRUE(has(text, "rank 1 launched the CUDA graph holding its call without clbGraphLaunch")) << text;

  // A peer whose gate timed out first.
  s.errorPeerSig = CLB_DEV_SIG_GAVEUP;
  EXPECT_EQ(clb::cuda::deviceError(&s, 0, 2, 5000, &text), clbRemoteError);
  EXPECT_TRUE(has(text, "rank 1 gave up waiting for the ranks in this call")) << text;

  // A peer whose communicator failed before this call (its host wrote the line).
  s.errorPeerSig = CLB_DEV_SIG_FAILED;
  EXPECT_EQ(clb::cuda::deviceError(&s, 0, 2, 5000, &text), clbRemoteError);
  EXPECT_TRUE(has(text, "rank 1 will never make this call: its communicator failed before")) << text;

  // The rank whose graph was launched without clbGraphLaunch.
  s.errorKind = CLB_DEV_ERR_REPLAY;
  EXPECT_EQ(clb::cuda::deviceError(&s, 1, 2, 5000, &text), clbInvalidUsage);
  EXPECT_TRUE(has(text, "rank 1's device call #7 (allReduce) was captured in a CUDA graph")) << text;
  EXPECT_TRUE(has(text, "through clbGraphLaunch (Java: Communicator.launchGraph)")) << text;
}

}  // namespace
