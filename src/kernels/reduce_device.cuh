// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Device-side arithmetic shared by every kernel: element conversion and the reduction loop, with
// the host loops' exact numbers (src/base/dtype.h): float16 and bfloat16 combine in float32 and
// round once (round to nearest even); integers wrap; integer avg truncates toward zero; min/max
// propagate NaN and return the second operand on ties.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/kernel_abi.h"

namespace clbk {

enum { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };

template <typename S>
struct Conv {  // storage type -> accumulation type
  using A = S;
  __device__ static A load(S v) { return v; }
  __device__ static S store(A v) { return v; }
};
template <>
struct Conv<__half> {
  using A = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct Conv<__nv_bfloat16> {
  using A = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <typename A>
struct Wrap {
  using U = A;
};
template <>
struct Wrap<int8_t> {
  using U = uint32_t;
};
template <>
struct Wrap<uint8_t> {
  using U = uint32_t;
};
template <>
struct Wrap<int32_t> {
  using U = uint32_t;
};
template <>
struct Wrap<int64_t> {
  using U = uint64_t;
};

template <typename A>
__device__ __forceinline__ A combine(A a, A b, int op) {
  constexpr bool integral = A(1) / A(2) == A(0);
  if (op == kSum || op == kAvg) {
    if constexpr (integral)
      return static_cast<A>(static_cast<typename Wrap<A>::U>(a) + static_cast<typename Wrap<A>::U>(b));
    else
      return a + b;
  }
  if (op == kProd) {
    if constexpr (integral)
      return static_cast<A>(static_cast<typename Wrap<A>::U>(a) * static_cast<typename Wrap<A>::U>(b));
    else
      return a * b;
  }
  if (op == kMin) return (a < b || a != a) ? a : b;
  return (a > b || a != a) ? a : b;
}

// Loads that bypass L1 (cached in L2 only). Staging is written by other ranks' kernels while this
// kernel runs; L1 is not coherent, so a line another kernel on this SM read two calls ago could
// otherwise be served stale. (Seen on the H200: rare wrong elements in allGather before this.)
template <typename T>
__device__ __forceinline__ T loadCg(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "size");
  T v;
  if constexpr (sizeof(T) == 1) {
    unsigned char b = __ldcg(reinterpret_cast<const unsigned char*>(p));
    memcpy(&v, &b, 1);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short b = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&v, &b, 2);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int b = __ldcg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&v, &b, 4);
  } else if constexpr (sizeof(T) == 8) {
    unsigned long long b = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&v, &b, 8);
  } else {
    uint4 b = __ldcg(reinterpret_cast<const uint4*>(p));
    memcpy(&v, &b, 16);
  }
  return v;
}

// What one reduction combines: dst[i] = (srcs[0] + offset)[i] op ... op (srcs[k-1] + offset)[i].
// `srcs` points into shared (or global) memory, never at a local array: a kernel whose threads
// index an array of their own gets a stack frame, and the driver reserves that frame for every
// thread the GPU can hold (bytes x 2048 x SMs: 288 B would be 74 MiB on an H200) for as long as the
// context lives. The check in src/tests/kernel_frames.cmake holds every kernel to its ceiling.
template <typename S>
struct ReduceRange {
  S* dst;
  const char* const* srcs;
  unsigned long long offset;  // bytes, added to every source
  unsigned long long n;
  int k;
  int op;
  int nranks;  // avg's divisor
  bool avg;    // divide (op == avg and this is the last step)
  __device__ const S* src(int s) const { return reinterpret_cast<const S*>(srcs[s] + offset); }
};

// One element: the sources combined left to right in the accumulation type, rounded once.
template <typename S>
__device__ __forceinline__ S reduceOne(const ReduceRange<S>& r, unsigned long long i) {
  using C = Conv<S>;
  using A = typename C::A;
  A acc = C::load(loadCg(r.src(0) + i));
  for (int s = 1; s < r.k; s++) acc = combine<A>(acc, C::load(loadCg(r.src(s) + i)), r.op);
  if (r.avg) acc = static_cast<A>(acc / static_cast<A>(r.nranks));
  return C::store(acc);
}

// The reduction loop. When every pointer is 16-byte aligned, each thread moves 16 bytes per
// source per step (memory-bound kernels need wide loads); the per-element order and rounding are
// exactly those of the scalar loop, so results do not depend on alignment.
template <typename S>
__device__ __forceinline__ void reduceRange(const ReduceRange<S>& r, unsigned long long i0, unsigned long long stride) {
  using C = Conv<S>;
  using A = typename C::A;
  constexpr int V = 16 / sizeof(S);
  uintptr_t align = reinterpret_cast<uintptr_t>(r.dst);
  for (int s = 0; s < r.k; s++) align |= reinterpret_cast<uintptr_t>(r.src(s));
  unsigned long long done = 0;
  if (align % 16 == 0) {
    const unsigned long long nv = r.n / V;
    for (unsigned long long v = i0; v < nv; v += stride) {
      union Vec {
        uint4 raw;
        S e[V];
      };
      Vec in;
      in.raw = loadCg(reinterpret_cast<const uint4*>(r.src(0)) + v);
      A acc[V];
#pragma unroll
      for (int j = 0; j < V; j++) acc[j] = C::load(in.e[j]);
      for (int s = 1; s < r.k; s++) {
        in.raw = loadCg(reinterpret_cast<const uint4*>(r.src(s)) + v);
#pragma unroll
        for (int j = 0; j < V; j++) acc[j] = combine<A>(acc[j], C::load(in.e[j]), r.op);
      }
      Vec out;
#pragma unroll
      for (int j = 0; j < V; j++) {
        if (r.avg) acc[j] = static_cast<A>(acc[j] / static_cast<A>(r.nranks));
        out.e[j] = C::store(acc[j]);
      }
      reinterpret_cast<uint4*>(r.dst)[v] = out.raw;
    }
    done = nv * V;
  }
  for (unsigned long long i = done + i0; i < r.n; i += stride) r.dst[i] = reduceOne<S>(r, i);
}

// PreMulSum's scaling: every element times one scalar, read once per thread (a replayed graph
// reads its value at each replay), multiplied as combine's prod does (integers wrap) in the
// accumulation type and rounded once. 16 bytes per thread and step where every pointer allows;
// the same numbers either way.
template <typename S>
__device__ __forceinline__ void scaleRange(const ClbScaleArgs& args, unsigned long long i0, unsigned long long stride) {
  using C = Conv<S>;
  using A = typename C::A;
  constexpr int V = 16 / sizeof(S);
  S sv;
  if (args.scalar)
    sv = *static_cast<const S*>(args.scalar);
  else
    memcpy(&sv, &args.value, sizeof(S));
  const A s = C::load(sv);
  S* dst = static_cast<S*>(args.dst);
  const S* src = static_cast<const S*>(args.src);
  unsigned long long done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16) == 0) {
    const unsigned long long nv = args.n / V;
    for (unsigned long long v = i0; v < nv; v += stride) {
      union Vec {
        uint4 raw;
        S e[V];
      };
      Vec in, out;
      in.raw = reinterpret_cast<const uint4*>(src)[v];
#pragma unroll
      for (int j = 0; j < V; j++) out.e[j] = C::store(combine<A>(C::load(in.e[j]), s, kProd));
      reinterpret_cast<uint4*>(dst)[v] = out.raw;
    }
    done = nv * V;
  }
  for (unsigned long long i = done + i0; i < args.n; i += stride)
    dst[i] = C::store(combine<A>(C::load(src[i]), s, kProd));
}

__device__ __forceinline__ void copyRange(void* dst, const void* src, unsigned long long bytes, unsigned long long tid,
                                          unsigned long long stride) {
  if (((uintptr_t)dst | (uintptr_t)src) % 16 == 0) {
    const unsigned long long vecs = bytes / 16;
    for (unsigned long long i = tid; i < vecs; i += stride)
      reinterpret_cast<uint4*>(dst)[i] = loadCg(reinterpret_cast<const uint4*>(src) + i);
    for (unsigned long long i = vecs * 16 + tid; i < bytes; i += stride)
      static_cast<char*>(dst)[i] = loadCg(static_cast<const char*>(src) + i);
  } else {
    for (unsigned long long i = tid; i < bytes; i += stride)
      static_cast<char*>(dst)[i] = loadCg(static_cast<const char*>(src) + i);
  }
}

}  // namespace clbk
