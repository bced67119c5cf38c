// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// What the PreMulSum tests share (premul_test.cc on host buffers, cuda_premul_test.cc on device
// buffers): per type, the inputs and scalars of each rank and the arithmetic of the library
// written out, for exact references. With one or two ranks the scalars round (0.1, -1.3), and the
// sum of two scaled inputs is the same whichever path adds them (one rounding, and addition
// commutes); with three ranks the scalars are dyadic (0.75, -1.25, 2.5) and the inputs small
// integers, so every product and every partial sum is exact and no path's order of additions
// (ring, direct, the device kernels, a reduce's steps) matters.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "colibri/colibri.h"
#include "base/dtype.h"

namespace clbtest::premul {

inline uint64_t mix(int rank, size_t i) {
  uint64_t x = (uint64_t)(rank + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 29);
}

// Small integers in [-m, m].
inline int64_t small(int rank, size_t i, int m) { return (int64_t)(mix(rank, i) % (uint64_t)(2 * m + 1)) - m; }

inline const double kRounding[2] = {0.1, -1.3};       // one or two ranks
inline const double kDyadic[3] = {0.75, -1.25, 2.5};  // three ranks: exact products and sums
inline const int32_t kIntScalars[3] = {123456789, -987654321, 31337};

// Per type: storage S, how the library computes (in Acc, rounded once by store), the inputs and
// the scalars of each rank.
struct F32 {
  using S = float;
  using Acc = float;
  static constexpr clbDataType_t kType = clbFloat32;
  static S input(int r, size_t i, bool exact) {
    return exact ? (float)small(r, i, 1000) : (float)((int64_t)(mix(r, i) >> 12) % 2000001 - 1000000) / 1024.0f;
  }
  static S scalar(int r, bool exact) { return (float)(exact ? kDyadic[r] : kRounding[r]); }
  static S junk() { return 99.0f; }
  static S mul(S x, S s) { return x * s; }
  static Acc load(S v) { return v; }
  static S store(Acc a) { return a; }
  static Acc add(Acc a, Acc b) { return a + b; }
};

struct F64 {
  using S = double;
  using Acc = double;
  static constexpr clbDataType_t kType = clbFloat64;
  static S input(int r, size_t i, bool exact) {
    return exact ? (double)small(r, i, 1000) : (double)((int64_t)(mix(r, i) >> 12) % 2000001 - 1000000) / 4096.0;
  }
  static S scalar(int r, bool exact) { return exact ? kDyadic[r] : kRounding[r]; }
  static S junk() { return 99.0; }
  static S mul(S x, S s) { return x * s; }
  static Acc load(S v) { return v; }
  static S store(Acc a) { return a; }
  static Acc add(Acc a, Acc b) { return a + b; }
};

// bfloat16: multiplied and added in float32, rounded once to bfloat16 (the accuracy contract).
struct BF16 {
  using S = uint16_t;
  using Acc = float;
  static constexpr clbDataType_t kType = clbBfloat16;
  static S input(int r, size_t i, bool exact) {
    return clb::floatToBfloat16(exact ? (float)small(r, i, 8) : (float)small(r, i, 1000) / 16.0f);
  }
  static S scalar(int r, bool exact) { return clb::floatToBfloat16((float)(exact ? kDyadic[r] : kRounding[r])); }
  static S junk() { return clb::floatToBfloat16(99.0f); }
  static S mul(S x, S s) {
    const float p = clb::bfloat16ToFloat(x) * clb::bfloat16ToFloat(s);
    return clb::floatToBfloat16(p);
  }
  static Acc load(S v) { return clb::bfloat16ToFloat(v); }
  static S store(Acc a) { return clb::floatToBfloat16(a); }
  static Acc add(Acc a, Acc b) { return a + b; }
};

// int32: products and sums wrap around.
struct I32 {
  using S = int32_t;
  using Acc = int32_t;
  static constexpr clbDataType_t kType = clbInt32;
  static S input(int r, size_t i, bool) { return (int32_t)(uint32_t)mix(r, i); }
  static S scalar(int r, bool) { return kIntScalars[r]; }
  static S junk() { return 7777; }
  static S mul(S x, S s) { return (int32_t)((uint32_t)x * (uint32_t)s); }
  static Acc load(S v) { return v; }
  static S store(Acc a) { return a; }
  static Acc add(Acc a, Acc b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
};

template <class S>
bool same(S a, S b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

template <class S>
std::string show(S v) {
  if constexpr (std::is_same_v<S, uint16_t>)
    return std::to_string(clb::bfloat16ToFloat(v)) + " (bf16)";
  else
    return std::to_string(v);
}

// Whether the ranks' scalars are the dyadic ones (see above).
inline bool exactFor(int nranks) { return nranks >= 3; }

// Element i of the sum over n ranks of their scaled inputs, as the library computes it.
template <class R>
typename R::S sumAt(int n, size_t i) {
  const bool exact = exactFor(n);
  typename R::Acc acc = R::load(R::mul(R::input(0, i, exact), R::scalar(0, exact)));
  for (int p = 1; p < n; p++) acc = R::add(acc, R::load(R::mul(R::input(p, i, exact), R::scalar(p, exact))));
  return R::store(acc);
}

}  // namespace clbtest::premul
