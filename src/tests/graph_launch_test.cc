// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbGraphLaunch's refusals, which need no GPU: each names what was wrong, and a communicator it
// refuses stays usable. The replays themselves (rank threads meeting around them) run on the GPU
// in cuda_shared_gpu_test.cc.
#include <gtest/gtest.h>

#include <string>

#include "colibri/colibri.h"

namespace {

bool has(const char* text, const char* part) { return std::string(text).find(part) != std::string::npos; }

TEST(GraphLaunch, BadArgumentsAreNamed) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  int fake = 0;
  void* exec = &fake;  // never launched: every case below is refused first
  clbComm_t two[2] = {comm, comm};
  clbComm_t withNull[2] = {comm, nullptr};
  struct Case {
    void* exec;
    const clbComm_t* comms;
    int n;
    const char* says;
  } cases[] = {
      {nullptr, &comm, 1, "graphExec is NULL"},
      {exec, &comm, -1, "ncomms=-1 is not in 0..64"},
      {exec, &comm, 65, "ncomms=65 is not in 0..64"},
      {exec, nullptr, 1, "comms is NULL with ncomms=1"},
      {exec, two, 2, "comms[0] and comms[1] are the same communicator"},
      {exec, withNull, 2, "comms[1]: "},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(clbGraphLaunch(c.exec, nullptr, c.comms, c.n), clbInvalidArgument) << c.says;
    EXPECT_TRUE(has(clbGetLastError(), c.says)) << "want \"" << c.says << "\", got: " << clbGetLastError();
  }
  // The communicator was not taken by the refusals.
  int64_t a = 3, b = 0;
  ASSERT_EQ(clbAllReduce(&a, &b, 1, clbInt64, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(b, 3);
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess);
  EXPECT_EQ(clbGraphLaunch(exec, nullptr, &comm, 1), clbInvalidArgument) << "a destroyed communicator";
}

// Without a CUDA driver (CI) a well-formed call says so instead of launching anything.
TEST(GraphLaunch, WithoutADriverItIsUnsupported) {
  int devices = 0;
  if (clbDeviceCount(&devices) == clbSuccess) GTEST_SKIP() << "a CUDA driver is here";
  int fake = 0;
  EXPECT_EQ(clbGraphLaunch(&fake, nullptr, nullptr, 0), clbUnsupported);
  EXPECT_NE(std::string(clbGetLastError()), "");
}

}  // namespace
