// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Linked into each shipped library (libcolibri.so.0, libnccl.so.2, the verbs plugin), which link
// libstdc++ statically. libstdc++.a's locale code pulls in its std::random_device, which Debian 12's
// build calls arc4random with: glibc 2.36's, so the libraries would not load on glibc 2.34 and 2.35
// (RHEL 9, Ubuntu 22.04: NVIDIA's GH200 and DGX images), though no Colibri code uses
// random_device. This definition, hidden in each library, takes that reference instead: the same
// randomness, from getrandom() (glibc 2.25). scripts/check-glibc.sh holds the floor at 2.34.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
    if (errno != EINTR) break;  // no entropy source at all: libstdc++'s fallbacks do no better
  return v;
}
