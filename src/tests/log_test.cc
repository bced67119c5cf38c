// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The log sink (clbSetLogCallback) and threshold (clbSetLogLevel): lines reach the callback with
// their level and nothing else, a line above the threshold is not even formatted, stderr is used
// when no callback is installed, and callbacks can be swapped while several threads log: once
// clbSetLogCallback returns, the previous callback is never running.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "colibri/colibri.h"
#include "base/error.h"

namespace {

struct Lines {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> got;

  static void collect(int level, const char* message, void* user) {
    auto* self = static_cast<Lines*>(user);
    std::lock_guard<std::mutex> g(self->mutex);
    self->got.emplace_back(level, message);
  }
  std::vector<std::pair<int, std::string>> take() {
    std::lock_guard<std::mutex> g(mutex);
    return std::move(got);
  }
};

// Every test leaves the process as it found it: stderr, and the threshold it had.
class Log : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(clbGetLogLevel(&level_), clbSuccess); }
  void TearDown() override {
    EXPECT_EQ(clbSetLogCallback(nullptr, nullptr), clbSuccess);
    EXPECT_EQ(clbSetLogLevel(level_), clbSuccess);
  }

 private:
  int level_ = clbLogWarn;
};

TEST_F(Log, LinesReachTheCallbackWithTheirLevelAndBareMessage) {
  Lines lines;
  ASSERT_EQ(clbSetLogLevel(clbLogDebug), clbSuccess);
  ASSERT_EQ(clbSetLogCallback(&Lines::collect, &lines), clbSuccess);
  EXPECT_STREQ(clbGetLastError(), "");
  testing::internal::CaptureStderr();
  CLB_LOG(clbLogError, "an error %d", 1);
  CLB_WARN("a warning %s", "two");
  CLB_INFO("info");
  CLB_DEBUG("debug %d", 4);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "with a callback, nothing goes to stderr";
  const std::vector<std::pair<int, std::string>> want = {
      {clbLogError, "an error 1"}, {clbLogWarn, "a warning two"}, {clbLogInfo, "info"}, {clbLogDebug, "debug 4"}};
  EXPECT_EQ(lines.take(), want);
}

TEST_F(Log, ALineOfTheCoreArrivesFromTheCall) {
  Lines lines;
  ASSERT_EQ(clbSetLogLevel(clbLogInfo), clbSuccess);
  ASSERT_EQ(clbSetLogCallback(&Lines::collect, &lines), clbSuccess);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess);
  bool ready = false;
  for (const auto& l : lines.take()) ready |= l.first == clbLogInfo && l.second.rfind("rank 0/1 ready", 0) == 0;
  EXPECT_TRUE(ready) << "no INFO line \"rank 0/1 ready ...\" from clbCommInitRank";
}

TEST_F(Log, ALineAboveTheThresholdIsNeitherFormattedNorDelivered) {
  Lines lines;
  ASSERT_EQ(clbSetLogCallback(&Lines::collect, &lines), clbSuccess);
  ASSERT_EQ(clbSetLogLevel(clbLogWarn), clbSuccess);
  int formatted = 0;
  CLB_INFO("info %d", ++formatted);
  CLB_DEBUG("debug %d", ++formatted);
  CLB_WARN("warn %d", ++formatted);
  EXPECT_EQ(formatted, 1) << "the arguments of lines above the threshold were evaluated";
  EXPECT_EQ(lines.take(), (std::vector<std::pair<int, std::string>>{{clbLogWarn, "warn 1"}}));
  ASSERT_EQ(clbSetLogLevel(clbLogOff), clbSuccess);
  CLB_LOG(clbLogError, "error");
  EXPECT_TRUE(lines.take().empty()) << "off lets nothing through";
  int level = -1;
  ASSERT_EQ(clbGetLogLevel(&level), clbSuccess);
  EXPECT_EQ(level, clbLogOff);
}

TEST_F(Log, WithoutACallbackLinesGoToStderrAsBefore) {
  ASSERT_EQ(clbSetLogLevel(clbLogInfo), clbSuccess);
  Lines lines;
  ASSERT_EQ(clbSetLogCallback(&Lines::collect, &lines), clbSuccess);
  ASSERT_EQ(clbSetLogCallback(nullptr, nullptr), clbSuccess);
  testing::internal::CaptureStderr();
  CLB_WARN("to stderr %d", 7);
  CLB_DEBUG("not at info");
  const std::string err = testing::internal::GetCapturedStderr();
  const std::regex line("[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} colibri WARN \\[pid " + std::to_string(getpid()) +
                        "\\] to stderr 7\n");
  EXPECT_TRUE(std::regex_match(err, line)) << err;
  EXPECT_TRUE(lines.take().empty());
}

TEST_F(Log, CommunicatorInitStillRaisesTheThresholdToItsConfig) {
  ASSERT_EQ(clbSetLogLevel(clbLogError), clbSuccess);
  clbConfig_t cfg;
  ASSERT_EQ(clbConfigInit(&cfg), clbSuccess);
  cfg.logLevel = clbLogInfo;
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  Lines lines;
  ASSERT_EQ(clbSetLogCallback(&Lines::collect, &lines), clbSuccess);
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, &cfg), clbSuccess) << clbGetLastError();
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess);
  int level = -1;
  ASSERT_EQ(clbGetLogLevel(&level), clbSuccess);
  EXPECT_EQ(level, clbLogInfo);
  EXPECT_FALSE(lines.take().empty());
}

TEST_F(Log, BadArgumentsAreRefused) {
  EXPECT_EQ(clbSetLogLevel(-1), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("log level -1"), std::string::npos) << clbGetLastError();
  EXPECT_EQ(clbSetLogLevel(clbLogDebug + 1), clbInvalidArgument);
  EXPECT_EQ(clbGetLogLevel(nullptr), clbInvalidArgument);
}

// A callback that logs, installs a callback or throws: the line goes to stderr, the call is
// refused, the exception is lost; nothing recurses or crashes.
struct Misbehaving {
  std::atomic<int> calls{0};
  clbResult_t setFromInside = clbSuccess;
  static void call(int level, const char* message, void* user) {
    auto* self = static_cast<Misbehaving*>(user);
    if (self->calls++ == 0) {
      CLB_WARN("logged from inside the callback");
      self->setFromInside = clbSetLogCallback(nullptr, nullptr);
    }
    throw std::runtime_error("a callback that throws");
  }
};

TEST_F(Log, ACallbackThatLogsSwapsOrThrowsDoesNoHarm) {
  Misbehaving m;
  ASSERT_EQ(clbSetLogLevel(clbLogWarn), clbSuccess);
  ASSERT_EQ(clbSetLogCallback(&Misbehaving::call, &m), clbSuccess);
  testing::internal::CaptureStderr();
  CLB_WARN("first");
  CLB_WARN("second");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(m.calls.load(), 2) << "the line from inside went into the callback again, or a line was lost";
  EXPECT_EQ(m.setFromInside, clbInvalidUsage);
  EXPECT_NE(err.find("colibri WARN"), std::string::npos) << err;
  EXPECT_NE(err.find("logged from inside the callback"), std::string::npos) << err;
  EXPECT_EQ(err.find("first"), std::string::npos) << err;
}

// While 4 threads log, the main thread swaps between two callbacks and none. Each callback's
// record is marked dead as soon as clbSetLogCallback has swapped it out; a callback takes a while
// (20 us) and looks at its record when it ends: dead means it was still running after the swap.
// Each installed callback must also be called.
struct Counted {
  std::atomic<bool> alive{false};
  std::atomic<long> calls{0};
  std::atomic<long> afterRemoval{0};
  static void call(int, const char*, void* user) {
    auto* self = static_cast<Counted*>(user);
    self->calls++;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
    if (!self->alive.load()) self->afterRemoval++;
  }
};

TEST_F(Log, CallbacksSwapSafelyWhileThreadsLog) {
  ASSERT_EQ(clbSetLogLevel(clbLogInfo), clbSuccess);
  std::atomic<bool> stop{false};
  std::atomic<long> emitted{0};
  testing::internal::CaptureStderr();  // the lines of the rounds without a callback
  std::vector<std::thread> loggers;
  for (int t = 0; t < 4; t++)
    loggers.emplace_back([&, t] {
      for (long n = 0; !stop.load(); n++) {
        CLB_INFO("thread %d line %ld", t, n);
        emitted++;
        if (n % 8 == 7) std::this_thread::sleep_for(std::chrono::microseconds(5));  // bounds the stderr rounds' output
      }
    });
  Counted a, b;
  Counted* installed = nullptr;
  long swapsWithCalls = 0;
  const int rounds = 240;
  for (int i = 0; i < rounds; i++) {
    Counted* next = i % 3 == 2 ? nullptr : i % 3 == 0 ? &a : &b;
    if (next) next->alive = true;
    const long before = next ? next->calls.load() : 0;
    ASSERT_EQ(clbSetLogCallback(next ? &Counted::call : nullptr, next), clbSuccess);
    if (installed) installed->alive = false;  // swapped out: must not be called from now on
    installed = next;
    if (next) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (next->calls.load() == before && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      swapsWithCalls += next->calls.load() > before;
    } else {
      std::this_thread::yield();
    }
  }
  ASSERT_EQ(clbSetLogCallback(nullptr, nullptr), clbSuccess);
  if (installed) installed->alive = false;
  const long afterUninstall = a.calls.load() + b.calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  for (std::thread& t : loggers) t.join();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(a.afterRemoval.load() + b.afterRemoval.load(), 0)
      << "a callback ran after clbSetLogCallback swapped it out";
  EXPECT_EQ(a.calls.load() + b.calls.load(), afterUninstall) << "a callback ran after it was removed";
  EXPECT_EQ(swapsWithCalls, rounds - rounds / 3) << "an installed callback got no line";
  EXPECT_GT(emitted.load(), 0);
}

}  // namespace
