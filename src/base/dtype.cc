// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Element conversions and host reduction loops. The accuracy contract is in dtype.h.
//
// Layout: each element type has a "codec" (storage type, accumulation type, load/store), each
// reduction op a small functor; the kernels are templates over both, so every inner loop is a
// plain element-wise loop that g++ -O3 auto-vectorizes (no per-element switch). Public entry
// points pick the kernel once per call from constant tables indexed by [type][op].
//
// Aliasing: dst may be exactly equal to any input (in-place), but must not partially overlap one.
// The pair loops are element-wise at the same index, so exact aliasing is harmless (and g++'s
// runtime alias check keeps the vector path for it); reduceMany works through a local block
// buffer, reading every input of a block before it writes that block of dst.

#include "base/dtype.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace clb {
namespace {

// ---------------------------------------------------------------------------------------------
// Conversions. Written branch-free so that the reduction loops of float16/bfloat16 vectorize; the
// public functions below are thin wrappers. (For float16, plain `c ? x : y` selects are turned
// into branches that g++ will not if-convert around the float operations, hence the explicit
// bit-mask selects.)

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// All ones if c, else zero; and a bitwise select by such a mask.
inline uint32_t maskIf(bool c) { return 0u - static_cast<uint32_t>(c); }
inline uint32_t select(uint32_t mask, uint32_t ifSet, uint32_t ifClear) { return (ifSet & mask) | (ifClear & ~mask); }

inline uint16_t halfFromFloat(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;  // |f|

  // Normal half (|f| >= 2^-14): rebias the exponent (127 -> 15) and round the 23-bit mantissa to
  // 10 bits, ties to even: add 0xfff plus the lowest kept bit, then drop 13 bits. A carry out of
  // the mantissa correctly bumps the exponent.
  const uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;

  // Subnormal half (|f| < 2^-14): the result is |f| / 2^-24 rounded to an integer. Adding 0.5f
  // (whose ulp is 2^-24) makes the FPU do exactly that rounding, ties to even in the default
  // rounding mode (which the library assumes throughout); the integer then sits in the low
  // mantissa bits. Rounding up to 1024 gives 0x400, the smallest normal, which is right. Float
  // subnormal inputs round to 0 either way, so flush-to-zero/denormals-are-zero modes do not
  // matter.
  const uint32_t subnormal = bitsOf(floatOf(a) + 0.5f) - 0x3f000000u;

  uint32_t h = select(maskIf(a < 0x38800000u), subnormal, normal);
  // 65520 = 65504 + half an ulp rounds (to even) up to 2^16, which is out of range: infinity.
  h = select(maskIf(a >= 0x477ff000u), 0x7c00u, h);
  // NaN: keep the top payload bits, force the quiet bit.
  h = select(maskIf(a > 0x7f800000u), 0x7e00u | ((a >> 13) & 0x3ffu), h);
  return static_cast<uint16_t>(sign | h);
}

inline float floatFromHalf(uint16_t hv) {
  const uint32_t h = hv;
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = h & 0x7c00u;
  const uint32_t mant = h & 0x03ffu;

  // Normal: shift into place and rebias the exponent (15 -> 127).
  uint32_t u = ((h & 0x7fffu) << 13) + 0x38000000u;
  // Subnormal or zero: mant * 2^-24, exact in float (and always a normal float or zero).
  const float subValue = static_cast<float>(static_cast<int32_t>(mant)) * 0x1p-24f;
  const uint32_t sub = bitsOf(subValue);
  u = select(maskIf(exp == 0), sub, u);
  // Infinity / NaN: all-ones exponent, payload kept, NaN made quiet.
  const uint32_t special = 0x7f800000u | (mant << 13) | (maskIf(mant != 0) & 0x00400000u);
  u = select(maskIf(exp == 0x7c00u), special, u);
  return floatOf(sign | u);
}

inline uint16_t bf16FromFloat(float f) {
  const uint32_t u = bitsOf(f);
  // bfloat16 is the top half of a float: round the low 16 bits away, ties to even. Overflow
  // carries into infinity and subnormals round the same way, so only NaN needs care (a payload
  // in the low bits alone could otherwise round to infinity): keep it NaN and quiet.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float floatFromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  return floatOf((u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u);
}

// ---------------------------------------------------------------------------------------------
// Codecs: Storage is what sits in memory, Acc what the arithmetic runs in.

template <typename T>
struct Native {
  using Storage = T;
  using Acc = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};

struct Half {
  using Storage = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return floatFromHalf(v); }
  static uint16_t store(float v) { return halfFromFloat(v); }
};

struct Bf16 {
  using Storage = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return floatFromBf16(v); }
  static uint16_t store(float v) { return bf16FromFloat(v); }
};

// ---------------------------------------------------------------------------------------------
// Arithmetic on an accumulation type. Integers wrap: the operation runs in an unsigned type at
// least as wide as int (so that neither signed overflow nor promotion of narrow unsigned types to
// int can be undefined), and the result is converted back modulo 2^width (defined in C++20 and
// by g++/clang before it).

template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename A>
inline A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<WrapType<A>>(a) + static_cast<WrapType<A>>(b));
  } else {
    return a + b;
  }
}

template <typename A>
inline A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<WrapType<A>>(a) * static_cast<WrapType<A>>(b));
  } else {
    return a * b;
  }
}

// avg's final step: sum / nranks, once.
//  * Floats: one division in the accumulation type (not a multiply by 1/nranks, which would round
//    twice).
//  * Integers up to 32 bits: C division, truncating toward zero, computed as a double division
//    then a truncating conversion, because SIMD has no integer division and this vectorizes. It is
//    exact: |sum| < 2^32 and 1 <= nranks < 2^31, so if q = sum/nranks is not an integer it lies
//    at least 1/nranks from the nearest integer, while the rounding error of the double quotient
//    is at most |q| * 2^-53 <= 2^-21 / nranks; truncating the double gives trunc(q).
//  * 64-bit integers: plain C division (signed for int64).
template <typename A>
using DivType = std::conditional_t<(std::is_integral_v<A> && sizeof(A) <= 4), double, A>;

template <typename A>
inline A divide(A sum, DivType<A> nranks) {
  return static_cast<A>(static_cast<DivType<A>>(sum) / nranks);
}

struct OpSum {
  template <typename A>
  static A apply(A a, A b) {
    return add(a, b);
  }
};
struct OpProd {
  template <typename A>
  static A apply(A a, A b) {
    return mul(a, b);
  }
};
// min/max. For floats a NaN in either input wins: `a != a` is true only for NaN, and when b is
// NaN the comparison is false so b is taken. On ties (including -0 vs +0) b is returned.
struct OpMin {
  template <typename A>
  static A apply(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return a < b ? a : b;
    } else {
      return (a < b || a != a) ? a : b;
    }
  }
};
struct OpMax {
  template <typename A>
  static A apply(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return a > b ? a : b;
    } else {
      return (a > b || a != a) ? a : b;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Kernels. kAvg selects the final division by nranks (the op itself is then OpSum).

template <typename C, typename Op, bool kAvg>
void pairKernel(void* dstv, const void* av, const void* bv, size_t n, int nranks) {
  using S = typename C::Storage;
  using A = typename C::Acc;
  S* dst = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  if constexpr (kAvg) {
    const DivType<A> div = static_cast<DivType<A>>(nranks);
    for (size_t i = 0; i < n; ++i) {
      dst[i] = C::store(divide(Op::apply(C::load(a[i]), C::load(b[i])), div));
    }
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = C::store(Op::apply(C::load(a[i]), C::load(b[i])));
  }
}

// Elements per block of reduceMany's accumulator (4 KiB of float, 8 KiB of double): small enough
// for the stack and L1, large enough that the per-block loop overhead does not show.
constexpr size_t kManyBlock = 1024;

template <typename C, typename Op, bool kAvg>
void manyKernel(void* dstv, const void* const* srcs, int k, size_t n, int nranks) {
  using S = typename C::Storage;
  using A = typename C::Acc;
  if (k <= 2) {  // One pass, no trip through the block buffer.
    if (k == 2) {
      pairKernel<C, Op, kAvg>(dstv, srcs[0], srcs[1], n, nranks);
      return;
    }
    S* dst = static_cast<S*>(dstv);
    const S* s = static_cast<const S*>(srcs[0]);
    const DivType<A> div = static_cast<DivType<A>>(nranks);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kAvg) {
        dst[i] = C::store(divide(C::load(s[i]), div));
      } else {
        dst[i] = C::store(C::load(s[i]));
      }
    }
    return;
  }
  // k >= 3. Per block: the first two inputs go into acc, then two more per pass (half the traffic
  // through acc of one per pass), and the last one or two are fused with the final store. Every
  // pass is a simple element-wise loop; the order of combination stays left to right.
  const DivType<A> div = static_cast<DivType<A>>(nranks);
  auto finish = [div](A v) {
    if constexpr (kAvg) {
      return C::store(divide(v, div));
    } else {
      return C::store(v);
    }
  };
  A acc[kManyBlock];
  for (size_t base = 0; base < n; base += kManyBlock) {
    const size_t m = std::min(kManyBlock, n - base);
    auto src = [srcs, base](int j) { return static_cast<const S*>(srcs[j]) + base; };
    {
      const S* s0 = src(0);
      const S* s1 = src(1);
      for (size_t i = 0; i < m; ++i) acc[i] = Op::apply(C::load(s0[i]), C::load(s1[i]));
    }
    int j = 2;
    for (; k - j > 2; j += 2) {
      const S* s0 = src(j);
      const S* s1 = src(j + 1);
      for (size_t i = 0; i < m; ++i) {
        acc[i] = Op::apply(Op::apply(acc[i], C::load(s0[i])), C::load(s1[i]));
      }
    }
    S* d = static_cast<S*>(dstv) + base;
    const S* s0 = src(j);
    if (k - j == 2) {
      const S* s1 = src(j + 1);
      for (size_t i = 0; i < m; ++i) {
        d[i] = finish(Op::apply(Op::apply(acc[i], C::load(s0[i])), C::load(s1[i])));
      }
    } else {
      for (size_t i = 0; i < m; ++i) d[i] = finish(Op::apply(acc[i], C::load(s0[i])));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Dispatch tables, rows in clbDataType_t order, columns in clbRedOp_t order.

using PairFn = void (*)(void*, const void*, const void*, size_t, int);
using ManyFn = void (*)(void*, const void* const*, int, size_t, int);

// Per type: the kernels of each op. For reducePair avg is a plain sum; the division by nranks
// happens only in reducePairFinal and reduceMany.
struct TypeKernels {
  PairFn pair[clbNumOps];
  PairFn pairFinal[clbNumOps];
  ManyFn many[clbNumOps];
};

template <typename C>
constexpr TypeKernels kernelsFor() {
  return {{&pairKernel<C, OpSum, false>, &pairKernel<C, OpProd, false>, &pairKernel<C, OpMin, false>,
           &pairKernel<C, OpMax, false>, &pairKernel<C, OpSum, false>},
          {&pairKernel<C, OpSum, false>, &pairKernel<C, OpProd, false>, &pairKernel<C, OpMin, false>,
           &pairKernel<C, OpMax, false>, &pairKernel<C, OpSum, true>},
          {&manyKernel<C, OpSum, false>, &manyKernel<C, OpProd, false>, &manyKernel<C, OpMin, false>,
           &manyKernel<C, OpMax, false>, &manyKernel<C, OpSum, true>}};
}

// Indexed by clbDataType_t.
constexpr TypeKernels kKernels[clbNumTypes] = {kernelsFor<Native<int8_t>>(),
                                               kernelsFor<Native<uint8_t>>(),
                                               kernelsFor<Native<int32_t>>(),
                                               kernelsFor<Native<uint32_t>>(),
                                               kernelsFor<Native<int64_t>>(),
                                               kernelsFor<Native<uint64_t>>(),
                                               kernelsFor<Half>(),
                                               kernelsFor<Bf16>(),
                                               kernelsFor<Native<float>>(),
                                               kernelsFor<Native<double>>()};

// PreMulSum's scaling: every element multiplied by one scalar of the element type (read once),
// with mul's wrapping for integers; float16/bfloat16 multiply in float32 and round once.
template <typename C>
void scaleKernel(void* dstv, const void* srcv, size_t n, const void* scalarv) {
  using S = typename C::Storage;
  using A = typename C::Acc;
  S sv;
  std::memcpy(&sv, scalarv, sizeof sv);
  const A s = C::load(sv);
  S* dst = static_cast<S*>(dstv);
  const S* src = static_cast<const S*>(srcv);
  for (size_t i = 0; i < n; ++i) dst[i] = C::store(mul(C::load(src[i]), s));
}

using ScaleFn = void (*)(void*, const void*, size_t, const void*);

// Indexed by clbDataType_t.
constexpr ScaleFn kScale[clbNumTypes] = {&scaleKernel<Native<int8_t>>,
                                         &scaleKernel<Native<uint8_t>>,
                                         &scaleKernel<Native<int32_t>>,
                                         &scaleKernel<Native<uint32_t>>,
                                         &scaleKernel<Native<int64_t>>,
                                         &scaleKernel<Native<uint64_t>>,
                                         &scaleKernel<Half>,
                                         &scaleKernel<Bf16>,
                                         &scaleKernel<Native<float>>,
                                         &scaleKernel<Native<double>>};

// Callers validate type and op before they get here; out-of-range values make the reductions do
// nothing rather than index past the tables. nranks only matters for clbAvg, where it must be
// >= 1; a bad value is treated as 1 instead of dividing by zero.
inline bool dispatchable(clbDataType_t type, clbRedOp_t op) {
  return validType(static_cast<int>(type)) && validOp(static_cast<int>(op));
}

inline int safeRanks(int nranks) { return nranks < 1 ? 1 : nranks; }

const char* const kTypeNames[clbNumTypes] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                             "uint64", "float16", "bfloat16", "float32", "float64"};
const char* const kOpNames[clbNumOps] = {"sum", "prod", "min", "max", "avg"};

}  // namespace

uint16_t floatToHalf(float f) { return halfFromFloat(f); }
float halfToFloat(uint16_t h) { return floatFromHalf(h); }
uint16_t floatToBfloat16(float f) { return bf16FromFloat(f); }
float bfloat16ToFloat(uint16_t b) { return floatFromBf16(b); }

bool validType(int datatype) { return datatype >= 0 && datatype < clbNumTypes; }
bool validOp(int op) { return op >= 0 && op < clbNumOps; }

const char* typeName(int datatype) { return validType(datatype) ? kTypeNames[datatype] : "unknown"; }
const char* opName(int op) { return validOp(op) ? kOpNames[op] : op == kOpPreMulSum ? "premulsum" : "unknown"; }

void scaleInto(void* dst, const void* src, size_t n, clbDataType_t type, const void* scalar) {
  if (!validType(static_cast<int>(type))) return;
  kScale[type](dst, src, n, scalar);
}

void reducePair(void* dst, const void* a, const void* b, size_t n, clbDataType_t type, clbRedOp_t op) {
  if (!dispatchable(type, op)) return;
  kKernels[type].pair[op](dst, a, b, n, 1);
}

void reducePairFinal(void* dst, const void* a, const void* b, size_t n, clbDataType_t type, clbRedOp_t op, int nranks) {
  if (!dispatchable(type, op)) return;
  kKernels[type].pairFinal[op](dst, a, b, n, safeRanks(nranks));
}

void reduceMany(void* dst, const void* const* srcs, int k, size_t n, clbDataType_t type, clbRedOp_t op, int nranks) {
  if (!dispatchable(type, op) || k < 1) return;
  kKernels[type].many[op](dst, srcs, k, n, safeRanks(nranks));
}

}  // namespace clb
