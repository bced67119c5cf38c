// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Tests of core/dtype: float16/bfloat16 conversions against a reference written here in double
// arithmetic (never the code under test), and every type x op of the reductions against a plain
// element-by-element reference.

#include "base/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using clb::bfloat16ToFloat;
using clb::floatToBfloat16;
using clb::floatToHalf;
using clb::halfToFloat;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- Reference formats --------------------------------------------------------------------------
// A binary format with `mantBits` stored mantissa bits and exponent bias `bias` in 16 bits total
// (sign, exponent, mantissa): float16 is (10, 15), bfloat16 is (7, 127).

struct Format {
  int mantBits;
  int bias;
  int expMax() const { return (1 << (15 - mantBits)) - 1; }  // all-ones exponent field
  uint16_t infBits() const { return static_cast<uint16_t>(expMax() << mantBits); }
};
constexpr Format kHalf{10, 15};
constexpr Format kBf16{7, 127};

bool isNanBits(Format fmt, uint16_t v) {
  return ((v & 0x7fff) >> fmt.mantBits) == fmt.expMax() && (v & ((1 << fmt.mantBits) - 1)) != 0;
}

// Value of a 16-bit pattern as a double (exact).
double refDecode(Format fmt, uint16_t v) {
  const int e = (v & 0x7fff) >> fmt.mantBits;
  const int m = v & ((1 << fmt.mantBits) - 1);
  const double sign = (v & 0x8000) ? -1.0 : 1.0;
  if (e == fmt.expMax()) {
    return m ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  }
  if (e == 0) return sign * std::ldexp(m, 1 - fmt.bias - fmt.mantBits);
  return sign * std::ldexp((1 << fmt.mantBits) + m, e - fmt.bias - fmt.mantBits);
}

// Nearest representable pattern of x, ties to even, computed by scaling to an integer count of
// ulps: x / ulp is exact in double for every float input, and nearbyint rounds it ties-to-even.
uint16_t refEncode(Format fmt, double x) {
  if (std::isnan(x)) return static_cast<uint16_t>(fmt.infBits() | (1 << (fmt.mantBits - 1)));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double ax = std::fabs(x);
  if (std::isinf(ax)) return sign | fmt.infBits();
  const int minExp = 1 - fmt.bias;  // exponent of the smallest normal
  int e;
  std::frexp(ax, &e);  // ax = f * 2^e, f in [0.5, 1)
  e -= 1;              // ax = g * 2^e, g in [1, 2)
  if (ax == 0 || e < minExp) {
    // Subnormal range: count in units of the smallest subnormal. Rounding may reach the
    // smallest normal, whose pattern is the next integer anyway.
    const double q = std::nearbyint(std::ldexp(ax, fmt.bias - 1 + fmt.mantBits));
    return sign | static_cast<uint16_t>(q);
  }
  double q = std::nearbyint(std::ldexp(ax, fmt.mantBits - e));  // in [2^m, 2^(m+1)]
  if (q == std::ldexp(1.0, fmt.mantBits + 1)) {
    q /= 2;
    ++e;
  }
  const int biased = e + fmt.bias;
  if (biased >= fmt.expMax()) return sign | fmt.infBits();
  const int mant = static_cast<int>(q) - (1 << fmt.mantBits);
  return sign | static_cast<uint16_t>((biased << fmt.mantBits) | mant);
}

uint16_t refHalf(double x) { return refEncode(kHalf, x); }
uint16_t refBf16(double x) { return refEncode(kBf16, x); }

// Checks one float against the reference for both formats.
void checkEncode(float f) {
  const uint16_t h = floatToHalf(f), b = floatToBfloat16(f);
  if (std::isnan(f)) {
    EXPECT_TRUE(isNanBits(kHalf, h) && (h & 0x0200)) << std::hex << bitsOf(f) << " -> " << h;
    EXPECT_TRUE(isNanBits(kBf16, b) && (b & 0x0040)) << std::hex << bitsOf(f) << " -> " << b;
    EXPECT_EQ(h & 0x8000, (bitsOf(f) >> 16) & 0x8000);
    EXPECT_EQ(b & 0x8000, (bitsOf(f) >> 16) & 0x8000);
    return;
  }
  ASSERT_EQ(h, refHalf(f)) << "float16 of " << std::hexfloat << f << ", bits " << std::hex << bitsOf(f);
  ASSERT_EQ(b, refBf16(f)) << "bfloat16 of " << std::hexfloat << f << ", bits " << std::hex << bitsOf(f);
}

// ---- Conversion tests ---------------------------------------------------------------------------

TEST(DtypeConvert, HalfToFloatExhaustive) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const uint16_t h = static_cast<uint16_t>(v);
    const float f = halfToFloat(h);
    if (isNanBits(kHalf, h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << v;
      ASSERT_TRUE(bitsOf(f) & 0x00400000u) << "NaN not quiet for " << std::hex << v;
      ASSERT_EQ(bitsOf(f) >> 31, v >> 15);
      continue;
    }
    ASSERT_EQ(bitsOf(f), bitsOf(static_cast<float>(refDecode(kHalf, h)))) << std::hex << v;
  }
}

TEST(DtypeConvert, HalfRoundTripExhaustive) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const uint16_t h = static_cast<uint16_t>(v);
    const uint16_t back = floatToHalf(halfToFloat(h));
    if (isNanBits(kHalf, h)) {
      ASSERT_TRUE(isNanBits(kHalf, back)) << std::hex << v;
      ASSERT_EQ(back, h | 0x0200) << "NaN payload/sign not kept for " << std::hex << v;
    } else {
      ASSERT_EQ(back, h) << std::hex << v;
    }
  }
}

TEST(DtypeConvert, Bfloat16ToFloatExhaustive) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const uint16_t b = static_cast<uint16_t>(v);
    const float f = bfloat16ToFloat(b);
    if (isNanBits(kBf16, b)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << v;
      ASSERT_TRUE(bitsOf(f) & 0x00400000u) << "NaN not quiet for " << std::hex << v;
      ASSERT_EQ(bitsOf(f) >> 31, v >> 15);
      continue;
    }
    ASSERT_EQ(bitsOf(f), bitsOf(static_cast<float>(refDecode(kBf16, b)))) << std::hex << v;
  }
}

TEST(DtypeConvert, Bfloat16RoundTripExhaustive) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const uint16_t b = static_cast<uint16_t>(v);
    const uint16_t back = floatToBfloat16(bfloat16ToFloat(b));
    if (isNanBits(kBf16, b)) {
      ASSERT_EQ(back, b | 0x0040) << "NaN payload/sign not kept for " << std::hex << v;
    } else {
      ASSERT_EQ(back, b) << std::hex << v;
    }
  }
}

TEST(DtypeConvert, HalfKnownValues) {
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(floatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // tie with 2^16 rounds to even: overflow
  EXPECT_EQ(floatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(floatToHalf(HUGE_VALF), 0x7c00);
  EXPECT_EQ(floatToHalf(-HUGE_VALF), 0xfc00);
  // Ties to even in the normal range: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
  EXPECT_EQ(floatToHalf(2047.0f + 0.5f), 0x67ff + 1);  // 2047.5: tie between 2047 (odd), 2048
  // Mantissa carry into the exponent: 2 - 2^-12 rounds up to 2.
  EXPECT_EQ(floatToHalf(2.0f - 0x1p-12f), 0x4000);
  // Subnormals: smallest is 2^-24.
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // tie with 0 goes to even (0)
  EXPECT_EQ(floatToHalf(-0x1p-25f), 0x8000);
  EXPECT_EQ(floatToHalf(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);         // 1.5 ulps: tie, to even (2)
  EXPECT_EQ(floatToHalf(5 * 0x1p-25f), 0x0002);         // 2.5 ulps: tie, to even (2)
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);             // smallest normal
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-25f), 0x0400);  // tie between 0x3ff (odd) and 0x400
  EXPECT_EQ(floatToHalf(std::nextafter(0x1p-14f - 0x1p-25f, 0.0f)), 0x03ff);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  // NaN: quiet out, including from a signaling float NaN with only low payload bits.
  EXPECT_EQ(floatToHalf(floatOf(0x7f800001u)), 0x7e00);
  EXPECT_EQ(floatToHalf(floatOf(0xffc00000u)), 0xfe00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);

  EXPECT_EQ(bitsOf(halfToFloat(0x7c00)), 0x7f800000u);
  EXPECT_EQ(bitsOf(halfToFloat(0xfc00)), 0xff800000u);
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(bitsOf(halfToFloat(0x7c01)), 0x7fc02000u);  // signaling half NaN comes out quiet
}

TEST(DtypeConvert, Bfloat16KnownValues) {
  EXPECT_EQ(floatToBfloat16(0.0f), 0x0000);
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + 0x1p-8f), 0x3f80);      // tie, to even
  EXPECT_EQ(floatToBfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(floatToBfloat16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3f81);
  EXPECT_EQ(floatToBfloat16(2.0f - 0x1p-9f), 0x4000);                     // carry into the exponent
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f7f7fffu)), 0x7f7f);               // just below the tie
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f7f8000u)), 0x7f80);               // tie with odd 0x7f7f: to inf
  EXPECT_EQ(floatToBfloat16(-HUGE_VALF), 0xff80);
  // Subnormals (bfloat16 shares float's exponent range).
  EXPECT_EQ(floatToBfloat16(0x1p-133f), 0x0001);
  EXPECT_EQ(floatToBfloat16(0x1p-134f), 0x0000);  // tie to even (0)
  EXPECT_EQ(floatToBfloat16(3 * 0x1p-134f), 0x0002);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::min()), 0x0080);
  EXPECT_EQ(floatToBfloat16(floatOf(0x007fffffu)), 0x0080);  // largest float subnormal rounds up
  // NaN: a payload only in the low 16 bits must not turn into infinity.
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(floatToBfloat16(floatOf(0xff80ffffu)), 0xffc0);
  EXPECT_EQ(floatToBfloat16(floatOf(0x7fffffffu)), 0x7fff);

  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x7f80)), 0x7f800000u);
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x7f81)), 0x7fc10000u);  // signaling NaN comes out quiet
  EXPECT_EQ(bfloat16ToFloat(0x0001), 0x1p-133f);
}

// Every midpoint between adjacent finite values (and its float neighbours), plus every value and
// its neighbours: all rounding boundaries of both formats, including subnormal/normal and the
// overflow edge.
void checkBoundaries(Format fmt) {
  for (uint32_t v = 0; v < fmt.infBits(); ++v) {
    const double lo = refDecode(fmt, static_cast<uint16_t>(v));
    const double hi = v + 1 < fmt.infBits() ? refDecode(fmt, static_cast<uint16_t>(v + 1))
                                            : std::ldexp(1.0, fmt.expMax() - fmt.bias);  // first value past max
    const float mid = static_cast<float>((lo + hi) / 2);                                 // exact in float
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const float lof = static_cast<float>(lo);
    for (float f : {lof, std::nextafter(lof, 0.0f), std::nextafter(lof, HUGE_VALF), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, HUGE_VALF)}) {
      checkEncode(f);
      checkEncode(-f);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(DtypeConvert, HalfRoundingBoundaries) { checkBoundaries(kHalf); }
TEST(DtypeConvert, Bfloat16RoundingBoundaries) { checkBoundaries(kBf16); }

TEST(DtypeConvert, RandomFloatsAgainstReference) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = rng();
    checkEncode(floatOf(u));
    if (HasFatalFailure()) return;
  }
  // Concentrated where float16 lives (|f| in about [2^-26, 2^17]).
  std::uniform_int_distribution<uint32_t> near(0x32800000u, 0x48000000u);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = near(rng) | (rng() & 0x80000000u);
    checkEncode(floatOf(u));
    if (HasFatalFailure()) return;
  }
}

TEST(DtypeConvert, NamesAndValidity) {
  const char* types[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                         "uint64", "float16", "bfloat16", "float32", "float64"};
  for (int t = 0; t < clbNumTypes; ++t) {
    EXPECT_TRUE(clb::validType(t));
    EXPECT_STREQ(clb::typeName(t), types[t]);
  }
  const char* ops[] = {"sum", "prod", "min", "max", "avg"};
  for (int o = 0; o < clbNumOps; ++o) {
    EXPECT_TRUE(clb::validOp(o));
    EXPECT_STREQ(clb::opName(o), ops[o]);
  }
  EXPECT_FALSE(clb::validType(-1));
  EXPECT_FALSE(clb::validType(clbNumTypes));
  EXPECT_FALSE(clb::validOp(-1));
  EXPECT_FALSE(clb::validOp(clbNumOps));
  EXPECT_NE(clb::typeName(99), nullptr);
  EXPECT_NE(clb::opName(-3), nullptr);
}

// ---- Reduction reference ------------------------------------------------------------------------

size_t elemSize(clbDataType_t t) {
  switch (t) {
    case clbInt8:
    case clbUint8: return 1;
    case clbFloat16:
    case clbBfloat16: return 2;
    case clbInt32:
    case clbUint32:
    case clbFloat32: return 4;
    default: return 8;
  }
}

bool isSignedInt(clbDataType_t t) { return t == clbInt8 || t == clbInt32 || t == clbInt64; }
bool isInt(clbDataType_t t) { return t <= clbUint64; }

// Raw element i of a buffer, zero-extended to 64 bits.
uint64_t rawGet(clbDataType_t t, const std::vector<uint8_t>& buf, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, buf.data() + i * elemSize(t), elemSize(t));  // little-endian host
  return v;
}

void rawSet(clbDataType_t t, std::vector<uint8_t>& buf, size_t i, uint64_t v) {
  std::memcpy(buf.data() + i * elemSize(t), &v, elemSize(t));
}

// Integer reference in 64-bit arithmetic; wrap = truncate to the type's width.
uint64_t truncBits(clbDataType_t t, uint64_t v) {
  const int bits = static_cast<int>(elemSize(t)) * 8;
  return bits == 64 ? v : (v & ((uint64_t{1} << bits) - 1));
}

int64_t signExtend(clbDataType_t t, uint64_t v) {
  const int bits = static_cast<int>(elemSize(t)) * 8;
  if (bits == 64) return static_cast<int64_t>(v);
  const uint64_t m = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>((v ^ m) - m);
}

bool intLess(clbDataType_t t, uint64_t a, uint64_t b) {
  return isSignedInt(t) ? signExtend(t, a) < signExtend(t, b) : a < b;
}

uint64_t refIntOp(clbDataType_t t, clbRedOp_t op, uint64_t a, uint64_t b) {
  switch (op) {
    case clbSum:
    case clbAvg: return truncBits(t, a + b);
    case clbProd: return truncBits(t, a * b);
    case clbMin: return intLess(t, a, b) ? a : b;
    case clbMax: return intLess(t, b, a) ? a : b;
    default: return 0;
  }
}

uint64_t refIntAvg(clbDataType_t t, uint64_t sum, int nranks) {
  if (isSignedInt(t)) return truncBits(t, static_cast<uint64_t>(signExtend(t, sum) / nranks));
  return sum / static_cast<uint64_t>(nranks);
}

// Floats: float16/bfloat16/float32 accumulate in float, float64 in double (the contract).
double loadFloat(clbDataType_t t, uint64_t raw) {
  switch (t) {
    case clbFloat16: return refDecode(kHalf, static_cast<uint16_t>(raw));
    case clbBfloat16: return refDecode(kBf16, static_cast<uint16_t>(raw));
    case clbFloat32: return floatOf(static_cast<uint32_t>(raw));
    default: {
      double d;
      std::memcpy(&d, &raw, 8);
      return d;
    }
  }
}

uint64_t storeFloat(clbDataType_t t, double v) {
  switch (t) {
    case clbFloat16: return refHalf(v);
    case clbBfloat16: return refBf16(v);
    case clbFloat32: return bitsOf(static_cast<float>(v));
    default: {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      return u;
    }
  }
}

template <typename A>
A refFloatOp(clbRedOp_t op, A a, A b) {
  switch (op) {
    case clbSum:
    case clbAvg: return a + b;
    case clbProd: return a * b;
    case clbMin:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<A>::quiet_NaN();
      return a < b ? a : b;  // ties (e.g. -0, +0): the second operand
    case clbMax:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<A>::quiet_NaN();
      return a > b ? a : b;
    default: return 0;
  }
}

// Element i of the reduction of `ins` left to right: accumulate, divide for avg when `final`,
// round once.
template <typename A>
uint64_t refFloatReduce(clbDataType_t t, clbRedOp_t op, const std::vector<std::vector<uint8_t>>& ins, size_t i,
                        bool final, int nranks) {
  A acc = static_cast<A>(loadFloat(t, rawGet(t, ins[0], i)));
  for (size_t j = 1; j < ins.size(); ++j) {
    acc = refFloatOp<A>(op, acc, static_cast<A>(loadFloat(t, rawGet(t, ins[j], i))));
  }
  if (final && op == clbAvg) acc = acc / static_cast<A>(nranks);
  return storeFloat(t, acc);
}

std::vector<uint8_t> refReduce(clbDataType_t t, clbRedOp_t op, const std::vector<std::vector<uint8_t>>& ins, size_t n,
                               bool final, int nranks) {
  std::vector<uint8_t> out(n * elemSize(t));
  for (size_t i = 0; i < n; ++i) {
    uint64_t r;
    if (isInt(t)) {
      r = rawGet(t, ins[0], i);
      for (size_t j = 1; j < ins.size(); ++j) r = refIntOp(t, op, r, rawGet(t, ins[j], i));
      if (final && op == clbAvg) r = refIntAvg(t, r, nranks);
    } else if (t == clbFloat64) {
      r = refFloatReduce<double>(t, op, ins, i, final, nranks);
    } else {
      r = refFloatReduce<float>(t, op, ins, i, final, nranks);
    }
    rawSet(t, out, i, r);
  }
  return out;
}

bool isNanRaw(clbDataType_t t, uint64_t v) {
  switch (t) {
    case clbFloat16: return isNanBits(kHalf, static_cast<uint16_t>(v));
    case clbBfloat16: return isNanBits(kBf16, static_cast<uint16_t>(v));
    case clbFloat32: return std::isnan(floatOf(static_cast<uint32_t>(v)));
    case clbFloat64: {
      double d;
      std::memcpy(&d, &v, 8);
      return std::isnan(d);
    }
    default: return false;
  }
}

// Bitwise equality, except that any NaN matches any NaN.
void expectSame(clbDataType_t t, const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, size_t n,
                const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = rawGet(t, want, i), g = rawGet(t, got, i);
    if (isNanRaw(t, w) && isNanRaw(t, g)) continue;
    ASSERT_EQ(w, g) << what << ": element " << i << " of " << n;
  }
}

// Random inputs: full-range integers with their extremes; floats with a sprinkling of NaN, inf,
// signed zeros and subnormals, otherwise moderate magnitudes so that sums and products stay
// interesting.
std::vector<uint8_t> randomInput(clbDataType_t t, size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> buf(n * elemSize(t));
  std::uniform_real_distribution<double> mag(-8.0, 8.0);
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = rng();
    const unsigned pick = static_cast<unsigned>(rng() % 64);
    if (isInt(t)) {
      if (pick == 0) v = isSignedInt(t) ? (uint64_t{1} << (elemSize(t) * 8 - 1)) : 0;  // min
      if (pick == 1) v = isSignedInt(t) ? (uint64_t{1} << (elemSize(t) * 8 - 1)) - 1 : ~uint64_t{0};
      if (pick == 2) v = static_cast<uint64_t>(-static_cast<int64_t>(rng() % 10));  // small < 0
      if (pick == 3) v = rng() % 10;
    } else {
      double d = std::ldexp(mag(rng), static_cast<int>(rng() % 16) - 8);
      if (pick == 0) d = std::numeric_limits<double>::quiet_NaN();
      if (pick == 1) d = (rng() & 1) ? HUGE_VAL : -HUGE_VAL;
      if (pick == 2) d = (rng() & 1) ? 0.0 : -0.0;
      if (pick == 3 && t == clbFloat16) d = std::ldexp(static_cast<double>(rng() % 1024), -24);
      if (pick == 3 && t == clbBfloat16) d = std::ldexp(static_cast<double>(rng() % 128), -133);
      if (pick == 4 && t != clbFloat64)
        v = rng();  // any bit pattern at all
      else
        v = storeFloat(t, d);
    }
    rawSet(t, buf, i, v);
  }
  return buf;
}

// ---- Reduction tests, every type x op -----------------------------------------------------------

class DtypeReduce : public testing::TestWithParam<std::tuple<int, int>> {
 protected:
  clbDataType_t type() const { return static_cast<clbDataType_t>(std::get<0>(GetParam())); }
  clbRedOp_t op() const { return static_cast<clbRedOp_t>(std::get<1>(GetParam())); }
};

// Sizes around vector widths and the reduceMany block of 1024 elements.
const size_t kSizes[] = {0, 1, 3, 17, 64, 1023, 1025, 2500};

TEST_P(DtypeReduce, Pair) {
  const clbDataType_t t = type();
  std::mt19937_64 rng(1000 + std::get<0>(GetParam()) * 10 + std::get<1>(GetParam()));
  for (size_t n : kSizes) {
    const auto a = randomInput(t, n, rng), b = randomInput(t, n, rng);
    const auto want = refReduce(t, op(), {a, b}, n, false, 1);
    std::vector<uint8_t> dst(n * elemSize(t) + 1);
    clb::reducePair(dst.data(), a.data(), b.data(), n, t, op());
    expectSame(t, want, dst, n, "separate dst n=" + std::to_string(n));
    // In place: dst == a, dst == b, dst == a == b.
    auto da = a;
    clb::reducePair(da.data(), da.data(), b.data(), n, t, op());
    expectSame(t, want, da, n, "dst==a");
    auto db = b;
    clb::reducePair(db.data(), a.data(), db.data(), n, t, op());
    expectSame(t, want, db, n, "dst==b");
    auto dd = a;
    clb::reducePair(dd.data(), dd.data(), dd.data(), n, t, op());
    expectSame(t, refReduce(t, op(), {a, a}, n, false, 1), dd, n, "dst==a==b");
    // Misaligned pointers (offset by one byte is not allowed for the element type, so use an
    // odd element offset).
    if (n > 1) {
      std::vector<uint8_t> out((n - 1) * elemSize(t));
      clb::reducePair(out.data(), a.data() + elemSize(t), b.data() + elemSize(t), n - 1, t, op());
      std::vector<uint8_t> wantTail(want.begin() + elemSize(t), want.end());
      expectSame(t, wantTail, out, n - 1, "offset");
    }
    if (HasFatalFailure()) return;
  }
}

TEST_P(DtypeReduce, PairFinal) {
  const clbDataType_t t = type();
  std::mt19937_64 rng(2000 + std::get<0>(GetParam()) * 10 + std::get<1>(GetParam()));
  for (int nranks : {1, 2, 3, 7}) {
    for (size_t n : kSizes) {
      const auto a = randomInput(t, n, rng), b = randomInput(t, n, rng);
      const auto want = refReduce(t, op(), {a, b}, n, true, nranks);
      std::vector<uint8_t> dst(n * elemSize(t));
      clb::reducePairFinal(dst.data(), a.data(), b.data(), n, t, op(), nranks);
      const std::string what = "nranks=" + std::to_string(nranks) + " n=" + std::to_string(n);
      expectSame(t, want, dst, n, what);
      auto da = a;
      clb::reducePairFinal(da.data(), da.data(), b.data(), n, t, op(), nranks);
      expectSame(t, want, da, n, what + " dst==a");
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(DtypeReduce, Many) {
  const clbDataType_t t = type();
  std::mt19937_64 rng(3000 + std::get<0>(GetParam()) * 10 + std::get<1>(GetParam()));
  for (int k = 1; k <= 5; ++k) {
    for (size_t n : kSizes) {
      std::vector<std::vector<uint8_t>> ins;
      for (int j = 0; j < k; ++j) ins.push_back(randomInput(t, n, rng));
      const int nranks = k;
      const auto want = refReduce(t, op(), ins, n, true, nranks);
      std::vector<const void*> srcs;
      for (auto& in : ins) srcs.push_back(in.data());
      std::vector<uint8_t> dst(n * elemSize(t));
      clb::reduceMany(dst.data(), srcs.data(), k, n, t, op(), nranks);
      const std::string what = "k=" + std::to_string(k) + " n=" + std::to_string(n);
      expectSame(t, want, dst, n, what);
      // dst may be any of the sources.
      for (int j = 0; j < k; ++j) {
        auto copies = ins;
        std::vector<const void*> s2;
        for (auto& in : copies) s2.push_back(in.data());
        clb::reduceMany(copies[j].data(), s2.data(), k, n, t, op(), nranks);
        expectSame(t, want, copies[j], n, what + " dst==srcs[" + std::to_string(j) + "]");
      }
      if (HasFatalFailure()) return;
    }
  }
}

std::string paramName(const testing::TestParamInfo<std::tuple<int, int>>& info) {
  return std::string(clb::typeName(std::get<0>(info.param))) + "_" + clb::opName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, DtypeReduce,
                         testing::Combine(testing::Range(0, static_cast<int>(clbNumTypes)),
                                          testing::Range(0, static_cast<int>(clbNumOps))),
                         paramName);

// ---- Specific semantics -------------------------------------------------------------------------

template <typename T>
T pair1(T a, T b, clbDataType_t t, clbRedOp_t op) {
  T d;
  clb::reducePair(&d, &a, &b, 1, t, op);
  return d;
}

template <typename T>
T final1(T a, T b, clbDataType_t t, clbRedOp_t op, int nranks) {
  T d;
  clb::reducePairFinal(&d, &a, &b, 1, t, op, nranks);
  return d;
}

TEST(DtypeSemantics, IntegerWraparound) {
  EXPECT_EQ(pair1<int8_t>(127, 1, clbInt8, clbSum), -128);
  EXPECT_EQ(pair1<int8_t>(-128, -1, clbInt8, clbSum), 127);
  EXPECT_EQ(pair1<int8_t>(16, 16, clbInt8, clbProd), 0);
  EXPECT_EQ(pair1<int8_t>(-128, -1, clbInt8, clbProd), -128);
  EXPECT_EQ(pair1<uint8_t>(255, 1, clbUint8, clbSum), 0);
  EXPECT_EQ(pair1<uint8_t>(16, 17, clbUint8, clbProd), 16);  // 272 mod 256
  EXPECT_EQ(pair1<int32_t>(INT32_MAX, 1, clbInt32, clbSum), INT32_MIN);
  EXPECT_EQ(pair1<int32_t>(65536, 65536, clbInt32, clbProd), 0);
  EXPECT_EQ(pair1<uint32_t>(0xffffffffu, 0xffffffffu, clbUint32, clbProd), 1u);
  EXPECT_EQ(pair1<int64_t>(INT64_MAX, 1, clbInt64, clbSum), INT64_MIN);
  EXPECT_EQ(pair1<int64_t>(INT64_MIN, -1, clbInt64, clbProd), INT64_MIN);
  EXPECT_EQ(pair1<uint64_t>(~uint64_t{0}, 2, clbUint64, clbProd), ~uint64_t{0} - 1);
  EXPECT_EQ(pair1<uint64_t>(uint64_t{1} << 32, uint64_t{1} << 32, clbUint64, clbProd), 0u);
  EXPECT_EQ(pair1<uint64_t>(0x123456789abcdefull, 0xfedcba987654321ull, clbUint64, clbProd),
            0x123456789abcdefull * 0xfedcba987654321ull);
}

TEST(DtypeSemantics, IntegerAvgTruncatesTowardZero) {
  EXPECT_EQ(final1<int32_t>(-7, 0, clbInt32, clbAvg, 3), -2);
  EXPECT_EQ(final1<int32_t>(-4, -4, clbInt32, clbAvg, 3), -2);  // -8/3
  EXPECT_EQ(final1<int32_t>(7, 0, clbInt32, clbAvg, 3), 2);
  EXPECT_EQ(final1<int8_t>(-7, 0, clbInt8, clbAvg, 3), -2);
  EXPECT_EQ(final1<int64_t>(-7, 0, clbInt64, clbAvg, 3), -2);
  EXPECT_EQ(final1<int8_t>(100, 100, clbInt8, clbAvg, 2), -28);                    // wrapped sum -56, then / 2
  EXPECT_EQ(final1<uint8_t>(200, 100, clbUint8, clbAvg, 3), 14);                   // wrapped sum 44, then / 3
  EXPECT_EQ(final1<uint32_t>(0xfffffffau, 0, clbUint32, clbAvg, 3), 0x55555553u);  // unsigned
  EXPECT_EQ(final1<int8_t>(100, 50, clbInt8, clbAvg, 200), 0);                     // large nranks is not truncated
  EXPECT_EQ(final1<int8_t>(-100, -50, clbInt8, clbAvg, 300), 0);
  // Other ops ignore nranks.
  EXPECT_EQ(final1<int32_t>(-7, 1, clbInt32, clbSum, 3), -6);
  EXPECT_EQ(final1<int32_t>(-7, 1, clbInt32, clbMin, 3), -7);
  // reducePair never divides, even for avg.
  EXPECT_EQ(pair1<int32_t>(-7, 1, clbInt32, clbAvg), -6);
}

// avg divides many values by many rank counts, extremes included, for every integer type (the
// division of 8- and 32-bit types goes through double in the implementation).
TEST(DtypeSemantics, IntegerAvgManyDivisors) {
  std::mt19937_64 rng(77);
  std::vector<int> divisors;
  for (int d = 1; d <= 130; ++d) divisors.push_back(d);
  for (int d : {255, 256, 257, 1000, 4096, 65535, 65536, 1000003, (1 << 30) + 1, INT32_MAX}) {
    divisors.push_back(d);
  }
  for (int t = clbInt8; t <= clbUint64; ++t) {
    const clbDataType_t type = static_cast<clbDataType_t>(t);
    const size_t n = 600;
    std::vector<uint8_t> in = randomInput(type, n, rng);
    const int bits = static_cast<int>(elemSize(type)) * 8;
    const uint64_t top = uint64_t{1} << (bits - 1);
    // Extremes and their neighbours, and values just around multiples of small divisors.
    const uint64_t special[] = {0,
                                1,
                                top - 1,
                                top,
                                top + 1,
                                truncBits(type, ~uint64_t{0}),
                                truncBits(type, ~uint64_t{0} - 1),
                                6,
                                7,
                                8,
                                truncBits(type, -6),
                                truncBits(type, -7),
                                truncBits(type, -8)};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; ++i) rawSet(type, in, i, special[i]);
    for (int d : divisors) {
      std::vector<uint8_t> out(in.size());
      const void* srcs[1] = {in.data()};
      clb::reduceMany(out.data(), srcs, 1, n, type, clbAvg, d);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(rawGet(type, out, i), refIntAvg(type, rawGet(type, in, i), d))
            << clb::typeName(t) << " value " << rawGet(type, in, i) << " / " << d;
      }
    }
  }
}

TEST(DtypeSemantics, FloatAvg) {
  EXPECT_EQ(final1<float>(1.0f, 0.0f, clbFloat32, clbAvg, 3), 1.0f / 3.0f);
  EXPECT_EQ(final1<double>(1.0, 0.0, clbFloat64, clbAvg, 3), 1.0 / 3.0);
  // Halves: (1 + 1) / 3 in float, rounded once to half.
  EXPECT_EQ(final1<uint16_t>(0x3c00, 0x3c00, clbFloat16, clbAvg, 3), refHalf(2.0f / 3.0f));
  EXPECT_EQ(final1<uint16_t>(0x3f80, 0x3f80, clbBfloat16, clbAvg, 3), refBf16(2.0f / 3.0f));
  // The sum is not rounded to half before the division: 65504 + 65504 overflows half, not float.
  EXPECT_EQ(final1<uint16_t>(0x7bff, 0x7bff, clbFloat16, clbAvg, 2), 0x7bff);
  EXPECT_EQ(pair1<uint16_t>(0x7bff, 0x7bff, clbFloat16, clbSum), 0x7c00);
}

TEST(DtypeSemantics, MinMaxNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (clbRedOp_t op : {clbMin, clbMax}) {
    EXPECT_TRUE(std::isnan(pair1<float>(nan, 1.0f, clbFloat32, op)));
    EXPECT_TRUE(std::isnan(pair1<float>(1.0f, nan, clbFloat32, op)));
    EXPECT_TRUE(std::isnan(pair1<float>(nan, nan, clbFloat32, op)));
    EXPECT_TRUE(std::isnan(pair1<float>(nan, -HUGE_VALF, clbFloat32, op)));
    EXPECT_TRUE(std::isnan(pair1<double>(1.0, std::nan(""), clbFloat64, op)));
    EXPECT_TRUE(std::isnan(pair1<double>(std::nan(""), 1.0, clbFloat64, op)));
    EXPECT_TRUE(isNanBits(kHalf, pair1<uint16_t>(0x7e00, 0x3c00, clbFloat16, op)));
    EXPECT_TRUE(isNanBits(kHalf, pair1<uint16_t>(0x3c00, 0x7c01, clbFloat16, op)));
    EXPECT_TRUE(isNanBits(kBf16, pair1<uint16_t>(0x3f80, 0x7fc0, clbBfloat16, op)));
    EXPECT_TRUE(isNanBits(kBf16, pair1<uint16_t>(0xffc0, 0x3f80, clbBfloat16, op)));
    // reduceMany: a NaN anywhere, including first or last.
    for (int where = 0; where < 4; ++where) {
      float v[4] = {1.0f, -2.0f, 3.0f, 0.5f};
      v[where] = nan;
      const void* srcs[4] = {&v[0], &v[1], &v[2], &v[3]};
      float d = 0;
      clb::reduceMany(&d, srcs, 4, 1, clbFloat32, op, 4);
      EXPECT_TRUE(std::isnan(d)) << "NaN at " << where;
    }
  }
  EXPECT_EQ(pair1<float>(-HUGE_VALF, 1.0f, clbFloat32, clbMin), -HUGE_VALF);
  EXPECT_EQ(pair1<float>(-HUGE_VALF, 1.0f, clbFloat32, clbMax), 1.0f);
  EXPECT_EQ(pair1<int8_t>(-128, 127, clbInt8, clbMin), -128);
  EXPECT_EQ(pair1<uint8_t>(0, 255, clbUint8, clbMax), 255);
  EXPECT_EQ(pair1<uint64_t>(~uint64_t{0}, 1, clbUint64, clbMin), 1u);
  EXPECT_EQ(pair1<int64_t>(-1, 1, clbInt64, clbMin), -1);
}

TEST(DtypeSemantics, HalfPairRoundsEachStepManyRoundsOnce) {
  // 2048 + 1 + 1 in float16 (ulp 2 at 2048): pairwise, 2049 ties back to 2048 at each step;
  // reduceMany sums 2050 in float32 and rounds once.
  const uint16_t big = floatToHalf(2048.0f), one = 0x3c00;
  uint16_t step = pair1<uint16_t>(big, one, clbFloat16, clbSum);
  step = pair1<uint16_t>(step, one, clbFloat16, clbSum);
  EXPECT_EQ(halfToFloat(step), 2048.0f);
  const uint16_t v[3] = {big, one, one};
  const void* srcs[3] = {&v[0], &v[1], &v[2]};
  uint16_t d = 0;
  clb::reduceMany(&d, srcs, 3, 1, clbFloat16, clbSum, 3);
  EXPECT_EQ(halfToFloat(d), 2050.0f);
  clb::reduceMany(&d, srcs, 3, 1, clbFloat16, clbAvg, 3);
  EXPECT_EQ(d, refHalf(2050.0f / 3.0f));
  // Same for bfloat16 (ulp 2 at 256).
  const uint16_t bbig = floatToBfloat16(256.0f), bone = 0x3f80;
  const uint16_t bv[3] = {bbig, bone, bone};
  const void* bsrcs[3] = {&bv[0], &bv[1], &bv[2]};
  clb::reduceMany(&d, bsrcs, 3, 1, clbBfloat16, clbSum, 3);
  EXPECT_EQ(bfloat16ToFloat(d), 258.0f);
}

TEST(DtypeSemantics, ManyIsLeftToRight) {
  // float32: (1e8 + 1) - 1e8 + ... depends on order; check the left-to-right result.
  const float v[3] = {1e8f, 1.0f, -1e8f};
  const void* srcs[3] = {&v[0], &v[1], &v[2]};
  float d = -1;
  clb::reduceMany(&d, srcs, 3, 1, clbFloat32, clbSum, 3);
  EXPECT_EQ(d, (1e8f + 1.0f) + -1e8f);
  EXPECT_EQ(d, 0.0f);
}

TEST(DtypeSemantics, ManySingleInputAvg) {
  const int32_t v[3] = {-7, 7, 9};
  const void* srcs[1] = {v};
  int32_t d[3];
  clb::reduceMany(d, srcs, 1, 3, clbInt32, clbAvg, 3);
  EXPECT_EQ(d[0], -2);
  EXPECT_EQ(d[1], 2);
  EXPECT_EQ(d[2], 3);
}

TEST(DtypeSemantics, AliasingInPlace) {
  std::vector<float> a(1000), b(1000);
  for (int i = 0; i < 1000; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i);
  }
  clb::reducePair(a.data(), a.data(), b.data(), a.size(), clbFloat32, clbSum);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a[i], 3.0f * i);
  clb::reducePair(b.data(), a.data(), b.data(), b.size(), clbFloat32, clbProd);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(b[i], 6.0f * i * i);
  std::vector<uint16_t> h(1000, 0x3c00);
  clb::reducePair(h.data(), h.data(), h.data(), h.size(), clbFloat16, clbSum);
  for (uint16_t v : h) ASSERT_EQ(v, 0x4000);
}

}  // namespace
