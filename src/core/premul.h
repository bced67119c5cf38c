// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// PreMulSum reduction operations (clbRedOpCreatePreMulSum, clbRedOpDestroy): the process's table
// of the operations made, and the host side of their arithmetic (what a call takes of one,
// PreMul, is a call descriptor: base/call.h).
// A call with such an operation scales this rank's input by the rank's scalar into memory of its
// own (recv where that is the call's only output, else a scratch buffer of the communicator) and
// then runs as a sum: core/collectives.cc (allReduce, reduceScatter) and core/p2p.cc (reduce) do
// that, with the loop of base/dtype.cc on host buffers and device/scale.cc's kernel on device
// buffers. Simple rather than fused: the sum's paths (ring, direct, the device kernels, the
// point-to-point batch) stay as they are, for one more pass over the input.
#pragma once

#include <cstdint>

#include "base/call.h"
#include "core/comm.h"

namespace clb {

// The operation of a reduction `call` on c with elements of `type`: a built-in op passes with
// pm->on false (the caller checks it as it always did); an operation made by
// clbRedOpCreatePreMulSum on c for `type` fills *pm; anything else is refused with
// clbInvalidArgument naming op (destroyed, another communicator's, another type, never made).
clbResult_t resolveOp(clbComm* c, int op, clbDataType_t type, const char* call, PreMul* pm);

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
