// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// clbGetLastError is the message of the thread's last failed call, and empty after a call that
// succeeded: a message left over from an earlier failure must not be read as this call's.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "colibri/colibri.h"

namespace {

// Leaves a message in the thread's slot: a call that fails.
void failSomething() {
  int rank = 0;
  ASSERT_EQ(clbCommRank(nullptr, &rank), clbInvalidArgument);
  ASSERT_NE(std::string(clbGetLastError()), "");
}

TEST(LastError, EmptyAfterEveryCallThatSucceeds) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbConfig_t cfg;
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  int i = 0;
  clbMemStats_t st;
  char info[512];
  float v[4] = {1, 2, 3, 4};
  struct Case {
    const char* name;
    std::function<clbResult_t()> call;
  } cases[] = {
      {"clbGetVersion", [&] { return clbGetVersion(&i); }},
      {"clbConfigInit", [&] { return clbConfigInit(&cfg); }},
      {"clbTransportFromName", [&] { return clbTransportFromName("socket", &i); }},
      {"clbAlgorithmFromName", [&] { return clbAlgorithmFromName("ring", &i); }},
      {"clbCommRank", [&] { return clbCommRank(comm, &i); }},
      {"clbCommCount", [&] { return clbCommCount(comm, &i); }},
      {"clbCommMemStats", [&] { return clbCommMemStats(comm, &st); }},
      {"clbCommLastAlgorithm", [&] { return clbCommLastAlgorithm(comm, &i); }},
      {"clbCommInfo", [&] { return clbCommInfo(comm, info, sizeof info); }},
      {"clbCommGetAsyncError",
       [&] {
         clbResult_t a;
         return clbCommGetAsyncError(comm, &a);
       }},
      {"clbAllReduce", [&] { return clbAllReduce(v, v, 4, clbFloat32, clbSum, comm, nullptr); }},
      {"clbCommTrim", [&] { return clbCommTrim(comm); }},
  };
  for (const Case& c : cases) {
    failSomething();
    EXPECT_EQ(c.call(), clbSuccess) << c.name << ": " << clbGetLastError();
    EXPECT_EQ(std::string(clbGetLastError()), "") << c.name << " succeeded but left the earlier message";
  }
  failSomething();
  EXPECT_EQ(clbCommAbort(comm), clbSuccess);
  EXPECT_EQ(std::string(clbGetLastError()), "") << "clbCommAbort succeeded but left the earlier message";
  failSomething();
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess);
  EXPECT_EQ(std::string(clbGetLastError()), "") << "clbCommDestroy";
}

}  // namespace
