// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// FNV-1a, 64 bits: a digest that every rank computes alike from what it holds, so that ranks
// compare lists, call signatures or host names by one word instead of sending them whole. It is
// not a defence against anyone choosing inputs (the bootstrap's secret is, bootstrap/secure.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace clb {

class Fnv1a {
 public:
  Fnv1a& bytes(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; i++) h_ = (h_ ^ b[i]) * kPrime;
    return *this;
  }
  // The word's 8 bytes, least significant first (the same digest on any host).
  Fnv1a& word(uint64_t v) {
    for (int i = 0; i < 8; i++) h_ = (h_ ^ ((v >> (8 * i)) & 0xff)) * kPrime;
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  static constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t h_ = 1469598103934665603ull;  // the offset basis
};

}  // namespace clb
