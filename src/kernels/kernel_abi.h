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

// ---- device collectives inside a node (src/kernels/collective.cu) ----
// Ranks (threads or processes, one GPU or several with peer access) see each other's staging
// buffers and flag blocks through CUDA IPC. A call is two kernels on the caller's stream:
// post (wait until peers released this parity's staging, copy the input in, announce it) and
// gather (wait for every rank's announcement, combine in rank order, release).
#define CLB_MAX_DEVICE_RANKS 16

struct ClbDevFlags {
  unsigned long long posted[CLB_MAX_DEVICE_RANKS];  // [p]: last call whose input rank p staged
  unsigned long long done[CLB_MAX_DEVICE_RANKS];    // [p]: last call rank p finished reading
  unsigned long long calls;                         // calls this rank completed (gather's last block)
  unsigned int blocks[4];                           // per-kernel block counters (post/gather x parity)
  unsigned int error;                               // nonzero: a wait timed out on this rank
};

// The call number is read on the device (this rank's `calls` + 1), not passed in: a call captured
// in a CUDA graph and replayed is a new call each time.
struct ClbDevCallArgs {
  // Per rank: its staging (two halves of `half` bytes; call number parity picks one), its flags.
  char* staging[CLB_MAX_DEVICE_RANKS];
  unsigned long long half;
  ClbDevFlags* flags[CLB_MAX_DEVICE_RANKS];
  unsigned int* hostError;  // mapped pinned host word: the host sees a timeout without a sync
  const void* in;           // post: inSlices slices of inBytes each, inStride apart, staged back to back
  unsigned long long inBytes, inStride;
  int inSlices;
  void* out;                // gather: destination (mode 1: rank p's block at out + p * outStride)
  unsigned long long outStride;
  unsigned long long timeoutNs;
  int rank, nranks;
  // gather: what to do with the staged inputs
  int mode;  // 0 reduce (elements at srcOffset of every rank), 1 gather (concatenate), 2 copy from root
  int type, op, root;
  unsigned long long count;      // mode 0: elements combined; mode 1 and 2: bytes copied per rank
  unsigned long long srcOffset;  // bytes into each staging (reduceScatter: rank * count * size)
};
