// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks as threads for the native tests: one communicator per thread, a body per rank.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"

extern char** environ;

namespace clbtest {

// The library's log lines while it lives: installed as the log callback (clbSetLogCallback) at
// `level`, the callback and the level before put back at its end.
class LogLines {
 public:
  explicit LogLines(int level = clbLogInfo) {
    clbGetLogLevel(&before_);
    clbSetLogLevel(level);
    clbSetLogCallback(&LogLines::collect, this);
  }
  ~LogLines() {
    clbSetLogCallback(nullptr, nullptr);
    clbSetLogLevel(before_);
  }
  LogLines(const LogLines&) = delete;
  LogLines& operator=(const LogLines&) = delete;
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> g(mutex_);
    return got_;
  }
  // The first line that holds every fragment, or "".
  std::string find(std::initializer_list<const char*> fragments) {
    for (const std::string& l : lines()) {
      bool all = true;
      for (const char* f : fragments) all = all && l.find(f) != std::string::npos;
      if (all) return l;
    }
    return "";
  }

 private:
  static void collect(int, const char* message, void* user) {
    auto* self = static_cast<LogLines*>(user);
    std::lock_guard<std::mutex> g(self->mutex_);
    self->got_.emplace_back(message);
  }
  std::mutex mutex_;
  std::vector<std::string> got_;
  int before_ = clbLogWarn;
};

// Creates nranks communicators, each from clbConfigInit changed by configure(rank, cfg), and runs
// body(rank, comm) on every rank that initialized; returns each rank's init error ("" when it
// succeeded; never empty on failure).
inline std::vector<std::string> runThreadRanks(int nranks, const std::function<void(int, clbConfig_t*)>& configure,
                                               const std::function<void(int, clbComm_t)>& body) {
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) return std::vector<std::string>(nranks, clbGetLastError());
  std::vector<std::thread> ts;
  std::vector<std::string> errors(nranks);
  for (int r = 0; r < nranks; r++) {
    ts.emplace_back([&, r] {
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      configure(r, &cfg);
      clbComm_t comm = nullptr;
      if (clbCommInitRank(&comm, &id, r, nranks, &cfg) != clbSuccess) {
        errors[r] = clbGetLastError();
        if (errors[r].empty()) errors[r] = "(failed without a message)";
        return;
      }
      body(r, comm);
      clbCommDestroy(comm);
    });
  }
  for (auto& t : ts) t.join();
  return errors;
}

// This test binary's command line with --gtest_filter=`filter`, and the environment plus `extra`
// ("NAME=value" entries, which replace the inherited ones of those names): argv and envp, ready
// for exec (made before a fork, so that the child only has to call execve).
struct SelfCommand {
  SelfCommand(const std::string& filter, const std::vector<std::string>& extra) : envs(extra) {
    for (char** e = environ; *e; e++) {
      bool replaced = false;
      for (const std::string& x : extra) replaced = replaced || !strncmp(*e, x.c_str(), x.find('=') + 1);
      if (!replaced) envs.push_back(*e);
    }
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    args = {"/proc/self/exe", "--gtest_filter=" + filter};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
  }
  std::vector<std::string> envs, args;
  std::vector<char*> envp, argv;
};

// Starts this test binary again with --gtest_filter=`filter` and the environment plus `extra`
// (SelfCommand); -1 if it cannot.
inline pid_t spawnSelf(const std::string& filter, const std::vector<std::string>& extra) {
  SelfCommand c(filter, extra);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, c.argv.data(), c.envp.data()) != 0) return -1;
  return pid;
}

// How much slower than the Release build this test binary runs: COLIBRI_TEST_SLOWDOWN (default 1;
// scripts/sanitize.sh sets it for the sanitizer builds). A test that bounds how soon something
// shows ("at once, not at the timeout") multiplies its bound by it, so the bound keeps its
// meaning under the sanitizers' slowdown instead of the test being left out there.
inline int slowdown() {
  const char* v = getenv("COLIBRI_TEST_SLOWDOWN");
  const int f = v ? atoi(v) : 1;
  return f >= 1 ? f : 1;
}

// A unique id as text (for a rank process's environment), and back.
inline std::string hex(const clbUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : std::string(id.internal, sizeof id.internal)) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

inline clbUniqueId unhex(const std::string& s) {
  clbUniqueId id;
  for (size_t i = 0; i < sizeof id.internal; i++) id.internal[i] = (char)std::stoi(s.substr(2 * i, 2), nullptr, 16);
  return id;
}

// Waits for every rank process in `pids` to end, each expected to exit with 0; past `deadline` the
// ones still running are killed, and each such rank is a failure.
inline void expectRanksEnd(const std::vector<pid_t>& pids, std::chrono::steady_clock::time_point deadline) {
  for (size_t r = 0; r < pids.size(); r++) {
    int status = 0;
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) kill(p, SIGKILL);
        waitpid(pids[r], &status, 0);
        ADD_FAILURE() << "rank process " << r << " did not end";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank process " << r << " status " << status << " (its output is above)";
  }
}

// One all-reduce over `comm` of every member's (id + 1) * 1000 + i + salt, where this rank's id is
// `me` (its rank in the communicator the members are numbered in: a parent's, for a shrunk or grown
// one), checked element by element against the sum over `members`: "" when right, "failed: " and
// the error when the call failed, else what differed.
inline std::string sumOver(clbComm_t comm, int me, const std::vector<int>& members, int salt, size_t count = 3001) {
  std::vector<int64_t> in(count), out(count, -1);
  for (size_t i = 0; i < count; i++) in[i] = (me + 1) * 1000 + (int64_t)i + salt;
  if (clbAllReduce(in.data(), out.data(), count, clbInt64, clbSum, comm, nullptr) != clbSuccess)
    return std::string("failed: ") + clbGetLastError();
  for (size_t i = 0; i < count; i++) {
    int64_t want = 0;
    for (int p : members) want += (p + 1) * 1000 + (int64_t)i + salt;
    if (out[i] != want)
      return "element " + std::to_string(i) + ": got " + std::to_string(out[i]) + " want " + std::to_string(want);
  }
  return "";
}

// A coordinator's grow id (clbCommGetUniqueId) into *id, handed out through `to` even when making
// it failed (then zeros), so that whoever waits for it fails at once instead of waiting.
inline clbResult_t makeGrowId(clbComm_t comm, std::promise<clbUniqueId>& to, clbUniqueId* id) {
  memset(id, 0, sizeof *id);
  const clbResult_t rc = clbCommGetUniqueId(comm, id);
  to.set_value(*id);
  return rc;
}

}  // namespace clbtest
