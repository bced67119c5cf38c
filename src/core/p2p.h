// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Groups (clbGroupStart / clbGroupEnd) and the calls made of point-to-point messages (core/p2p.cc).
// A group is this thread's: between its start and its end every call (sends, receives, the calls
// made of them, collectives, barriers; on one communicator or several) is checked and recorded,
// and the outermost end runs them. The collectives' entry points (core/collectives.cc) ask here
// whether to record instead of run.
#pragma once

#include "core/comm.h"
#include "core/premul.h"

namespace clb {

// Whether this thread is between clbGroupStart and its clbGroupEnd.
bool inGroup();
// Records a collective (or, with root kBarrierRoot, a barrier) of this thread's group, checked
// by the caller as far as it can be before it runs (the rest when the group ends). `op` is what
// it computes with, `pm` its PreMulSum as taken when it was called (core/premul.h).
clbResult_t recordCollective(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                             clbRedOp_t op, int root, void* stream, const PreMul& pm = PreMul());
// Runs a collective recorded in a group, at the group's end (core/collectives.cc): as the public
// call would, with the operation it took when it was recorded.
clbResult_t runRecordedCollective(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count,
                                  clbDataType_t type, clbRedOp_t op, int root, void* stream, const PreMul& pm);
// A reduce on device memory of ranks that share a host (core/collectives.cc): a device collective
// (the all-reduce kernels, the root alone writing), capturable; `op` as the caller gave it.
clbResult_t reduceOnDevice(clbComm* c, const void* send, void* recv, size_t count, clbDataType_t type, clbRedOp_t op,
                           int root, void* stream);
// A call refused inside a group is the group's too (its end runs nothing): returns rc.
clbResult_t refuseInGroup(clbResult_t rc);

}  // namespace clb
