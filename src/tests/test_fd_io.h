// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
// Whole-buffer reads and writes on a file descriptor, for tests whose two halves run in two
// processes and exchange connection info over a socketpair.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>

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

}  // namespace clb::test
