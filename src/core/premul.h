// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// PreMulSum reduction operations (clbRedOpCreatePreMulSum, clbRedOpDestroy): the process's table
// of the operations made, what a call takes of one (PreMul), and the host side of its arithmetic.
// A call with such an operation scales this rank's input by the rank's scalar into memory of its
// own (recv where that is the call's only output, else a scratch buffer of the communicator) and
// then runs as a sum: core/collectives.cc (allReduce, reduceScatter) and core/p2p.cc (reduce) do
// that, with the loop of base/dtype.cc on host buffers and device/scale.cc's kernel on device
// buffers. Simple rather than fused: the sum's paths (ring, direct, the device kernels, the
// point-to-point batch) stay as they are, for one more pass over the input.
#pragma once

#include <cstdint>

#include "core/comm.h"

namespace clb {

// What a call takes of its operation when it is made (inside a group: when it is recorded), so
// that the operation may be destroyed as soon as the call has returned, as NCCL allows (PyTorch
// destroys its operation right after the call, also inside a group).
struct PreMul {
  bool on = false;  // a PreMulSum: scale, then sum
  int handle = 0;   // the operation's value, for messages
  int residence = clbScalarHostImmediate;
  clbDataType_t type = clbFloat32;
  uint64_t value = 0;          // host immediate: the scalar, one element of `type` in the first bytes
  const void* ptr = nullptr;   // device residence: where it is read when the call runs
};

// The operation of a reduction `call` on c with elements of `type`: a built-in op passes with
// pm->on false (the caller checks it as it always did); an operation made by
// clbRedOpCreatePreMulSum on c for `type` fills *pm; anything else is refused with
// clbInvalidArgument naming op (destroyed, another communicator's, another type, never made).
clbResult_t resolveOp(clbComm* c, int op, clbDataType_t type, const char* call, PreMul* pm);
// The op a call computes with once its input is scaled: clbSum for a PreMulSum, else op itself.
inline clbRedOp_t arithmeticOp(int op, const PreMul& pm) { return pm.on ? clbSum : static_cast<clbRedOp_t>(op); }
// clbCommDestroy: the operations made on c are gone (their values then say "destroyed").
void releaseOps(clbComm* c);

// Host buffers: the scalar's bytes for a call running now (immediate; else read from its
// pointer: host memory, or device memory copied to the host).
clbResult_t hostScalar(clbComm* c, const PreMul& pm, uint64_t* bits);
// Host buffers: c's scratch for scaled inputs, at least `bytes`, for the call that holds c (host
// calls are synchronous and one at a time, so one buffer serves them all). Grown on demand,
// counted in memStats; trimHostScratch (clbCommTrim, clbCommDestroy) frees it.
clbResult_t hostScratch(clbComm* c, size_t bytes, void** out);
void trimHostScratch(clbComm* c);

}  // namespace clb
