// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Groups (clbGroupStart / clbGroupEnd) and the calls made of point-to-point messages (core/p2p.cc).
// A group is this thread's: between its start and its end every call (sends, receives, the calls
// made of them, collectives, barriers; on one communicator or several) is checked and recorded,
// and the outermost end runs them. The collectives' entry points (core/collectives.cc) ask here
// whether to record instead of run.
#pragma once

#include "core/comm.h"

namespace clb {

// Whether this thread is between clbGroupStart and its clbGroupEnd.
bool inGroup();
// Records a collective (or, with root kBarrierRoot, a barrier) of this thread's group; the
// arguments are checked when the group ends and runs it.
clbResult_t recordCollective(clbComm* c, uint32_t coll, const void* send, void* recv, size_t count, clbDataType_t type,
                             clbRedOp_t op, int root, void* stream);

}  // namespace clb
