// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
// For tests whose halves run in two processes: this test binary started again on one test,
// waiting for it with a limit, and whole-buffer reads and writes on the socketpair between them.
#pragma once

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace clb::test {

inline bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

// False when `ms` pass before all n bytes came, or the peer closed.
inline bool readAll(int fd, void* p, size_t n, int ms = 10000) {
  using namespace std::chrono;
  char* c = static_cast<char*>(p);
  const auto end = steady_clock::now() + milliseconds(ms);
  while (n) {
    pollfd pf{fd, POLLIN, 0};
    const int left = (int)duration_cast<milliseconds>(end - steady_clock::now()).count();
    if (left <= 0 || poll(&pf, 1, left) != 1) return false;
    ssize_t k = read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

// Starts /proc/self/exe on the tests matching `gtestFilter`, with this environment plus
// `extraEnv` ("NAME=value" entries, replacing inherited ones of the same name); the pid, or -1.
inline pid_t spawnSelf(const std::string& gtestFilter, const std::vector<std::string>& extraEnv) {
  std::vector<char*> env;
  for (char** e = environ; *e; e++) {
    bool replaced = false;
    for (const std::string& x : extraEnv) {
      const size_t eq = x.find('=') + 1;
      replaced = replaced || std::string(*e).compare(0, eq, x, 0, eq) == 0;
    }
    if (!replaced) env.push_back(*e);
  }
  for (const std::string& e : extraEnv) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  std::string filter = "--gtest_filter=" + gtestFilter;
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, const_cast<char*>(filter.c_str()), nullptr};
  pid_t pid;
  return posix_spawn(&pid, exe, nullptr, nullptr, argv, env.data()) == 0 ? pid : -1;
}

// Waits up to `ms` for `pid` and stores its wait status; false when it had to be killed.
inline bool waitOrKill(pid_t pid, int ms, int* status) {
  using namespace std::chrono;
  const auto end = steady_clock::now() + milliseconds(ms);
  pid_t w = 0;
  while ((w = waitpid(pid, status, WNOHANG)) == 0 && steady_clock::now() < end)
    std::this_thread::sleep_for(milliseconds(5));
  if (w != 0) return true;
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return false;
}

}  // namespace clb::test
