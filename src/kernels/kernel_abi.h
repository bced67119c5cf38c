// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The contract between the host core and the device kernels, shared by both sides. Kernels are
// built once per compute capability into a cubin (plus a PTX fallback) and loaded by the driver
// at run time (src/core/cuda/kernels.cc): nothing here links against the CUDA runtime.
#pragma once

#define CLB_KERNEL_ABI_VERSION 1
// Inputs one reduction kernel launch can combine (ranks on one node beyond that take more passes).
#define CLB_MAX_KERNEL_SRCS 16

// Kernel parameter block of clb_reduce_<type>: dst[i] = srcs[0][i] op ... op srcs[k-1][i], left
// to right, in the accumulation type (float32 for float16/bfloat16), rounded once; with
// `divide` set and op == avg the result is divided by nranks before rounding (the ring's last
// step, and the direct path). Same numbers as the host loops in src/core/dtype.cc, bit for bit.
struct ClbReduceArgs {
  void* dst;
  const void* srcs[CLB_MAX_KERNEL_SRCS];
  int k;
  int op;      // clbRedOp_t
  int nranks;  // for avg
  int divide;  // 1: apply avg's division
  unsigned long long n;
};
