// Element types and host reductions: conversion of float16/bfloat16, and the reduction loops used
// by every host algorithm. The accuracy contract (docs/semantics.md) lives here:
//  * pairwise reduce (ring step): each element is computed in float32 for float16/bfloat16 (and in
//    the type itself for float32/float64) and rounded once to the element type per step.
//  * many-input reduce (direct path): inputs are combined in the order given, accumulating in
//    float32 for float16/bfloat16, rounded once at the end.
//  * integers wrap around (two's complement) on sum and prod; avg = wrapped sum / nranks with
//    truncation toward zero; float avg = sum / nranks computed in the accumulation type.
//  * min/max: if either input is NaN the result is NaN.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/colibri.h"

namespace clb {

// IEEE binary16 and bfloat16 conversions, round-to-nearest-even; NaN stays NaN (quiet), infinities
// and signed zeros are kept, subnormals are handled exactly.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBfloat16(float f);
float bfloat16ToFloat(uint16_t b);

bool validType(int datatype);
bool validOp(int op);
const char* typeName(int datatype);
// "sum" ... "avg" for the built-in ops, "premulsum" for kOpPreMulSum, else "unknown".
const char* opName(int op);

// What a call's descriptor (OpDesc::op, its message tags) says for a PreMulSum operation
// (core/premul.h): the arithmetic is clbSum on scaled inputs, but a rank in a plain sum and one in a
// PreMulSum make different calls, which the tags then tell apart. Never a user's op value.
constexpr int kOpPreMulSum = clbNumOps;

// dst[i] = src[i] * scalar for i < n, scalar pointing to one element of `type`: in the type itself
// for float32/float64, in float32 rounded once to the type for float16/bfloat16 (the product of
// two such values is exact in float32, except for bfloat16 products beyond float32's range),
// wrapping for integers; the device's scaling kernel gives the same bits. dst may equal src.
void scaleInto(void* dst, const void* src, size_t n, clbDataType_t type, const void* scalar);

// dst[i] = a[i] (op) b[i] for i < n. dst may equal a or b. For clbAvg this is a plain sum; the
// division happens in reduceFinal. `scale` is ignored.
void reducePair(void* dst, const void* a, const void* b, size_t n, clbDataType_t type, clbRedOp_t op);

// Like reducePair, and for clbAvg divides the combined value by nranks before rounding (the last
// step of a ring reduction). For other ops identical to reducePair.
void reducePairFinal(void* dst, const void* a, const void* b, size_t n, clbDataType_t type, clbRedOp_t op, int nranks);

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[k-1][i], left to right, k >= 1; for clbAvg
// the result is divided by nranks at the end. dst may equal any src.
void reduceMany(void* dst, const void* const* srcs, int k, size_t n, clbDataType_t type, clbRedOp_t op, int nranks);

}  // namespace clb
