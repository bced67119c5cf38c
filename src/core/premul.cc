// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// PreMulSum operations: the process's table of them, clbRedOpCreatePreMulSum and
// clbRedOpDestroy, and the host scratch of the calls that use them (core/premul.h).
#include "core/premul.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/dtype.h"
#include "device/runtime.h"

using namespace clb;

namespace {

// One table for the whole process rather than one per communicator: an operation's value then
// names one communicator's operation, so another communicator's (or a destroyed one) is refused
// by name instead of being taken for whatever this communicator made under the same number.
struct OpEntry {
  clbComm* comm;
  PreMul pm;
};

std::mutex gOpsMutex;
std::unordered_map<int, OpEntry> gOps;  // the live operations, by value
// Operations made so far in this process: the n-th gets clbNumOps + n (modulo the values there
// are), so a value is not handed out again before 2^31 - clbNumOps creations (PyTorch makes one
// per call) and a destroyed one can be told from one never made until then.
int64_t gCreated = 0;
constexpr int64_t kValues = (int64_t)clbMaxRedOp - clbNumOps;  // clbNumOps .. clbMaxRedOp - 1

// The live entry of op on c, or the refusal that names op (call: what the message starts with).
clbResult_t findLocked(clbComm* c, int op, const char* call, OpEntry** out) {
  auto it = gOps.find(op);
  if (it == gOps.end()) {
    if (op < clbNumOps || ((int64_t)op - clbNumOps >= gCreated && gCreated < kValues))
      return setError(clbInvalidArgument,
                      "%s: unknown reduction op %d: use a clbRedOp_t value (0..%d) or an operation made by "
                      "clbRedOpCreatePreMulSum on this communicator",
                      call, op, clbNumOps - 1);
    return setError(clbInvalidArgument,
                    "%s: op %d was destroyed (by clbRedOpDestroy, or with its communicator by clbCommDestroy): "
                    "make a new one with clbRedOpCreatePreMulSum",
                    call, op);
  }
  if (it->second.comm != c)
    return setError(clbInvalidArgument,
                    "%s: op %d was made on another communicator (rank %d of %d), and an operation from "
                    "clbRedOpCreatePreMulSum is valid only on the communicator it was made on: make one on this "
                    "communicator (rank %d of %d)",
                    call, op, it->second.comm->rank, it->second.comm->nranks, c->rank, c->nranks);
  *out = &it->second;
  return clbSuccess;
}

}  // namespace

clbResult_t clb::resolveOp(clbComm* c, int op, clbDataType_t type, const char* call, PreMul* pm) {
  *pm = PreMul{};
  // Built in (or negative), or an unknown type: the caller's checks refuse what is wrong, as always.
  if (op < clbNumOps || !validType(type)) return clbSuccess;
  std::lock_guard<std::mutex> g(gOpsMutex);
  OpEntry* e = nullptr;
  CLB_CHECK(findLocked(c, op, call, &e));
  if (e->pm.type != type)
    return setError(clbInvalidArgument,
                    "%s: op %d is a PreMulSum over %s but the call's type is %s: make the operation with the type of "
                    "the call's data",
                    call, op, typeName(e->pm.type), typeName(type));
  *pm = e->pm;
  return clbSuccess;
}

void clb::releaseOps(clbComm* c) {
  std::lock_guard<std::mutex> g(gOpsMutex);
  for (auto it = gOps.begin(); it != gOps.end();) it = it->second.comm == c ? gOps.erase(it) : std::next(it);
}

clbResult_t clb::hostScalar(clbComm* c, const PreMul& pm, uint64_t* bits) {
  *bits = 0;
  if (pm.residence == clbScalarHostImmediate) {
    *bits = pm.value;
    return clbSuccess;
  }
  const size_t esz = clbTypeSize(pm.type);
  // Device memory cannot be read from here: copied (only a process that loaded the driver can hold it).
  if (cuda::driverInProcess()) {
    bool onDevice = false;
    int ordinal = -1;
    CLB_CHECK(cuda::classifyPointer(pm.ptr, &onDevice, &ordinal));
    if (onDevice) {
      if (clbResult_t rc = cuda::readScalar(pm.ptr, esz, ordinal, bits))
        return setError(rc, "rank %d: reading the scalar of op %d from device memory: %s", c->rank, pm.handle,
                        lastError().c_str());
      return clbSuccess;
    }
  }
  memcpy(bits, pm.ptr, esz);
  return clbSuccess;
}

clbResult_t clb::hostScratch(clbComm* c, size_t bytes, void** out) {
  if (c->preMulHostBytes < bytes) {
    trimHostScratch(c);
    // The input's size, rounded up a little so that a count that creeps up does not reallocate
    // at every call.
    const size_t want = (bytes + 4095) & ~(size_t)4095;
    c->preMulHost.reset(new (std::nothrow) char[want]);
    if (!c->preMulHost)
      return setError(clbOutOfMemory, "rank %d: no %zu bytes of host memory for the scaled input of a PreMulSum",
                      c->rank, want);
    c->preMulHostBytes = want;
    c->mem.addHost((int64_t)want);
  }
  *out = c->preMulHost.get();
  return clbSuccess;
}

void clb::trimHostScratch(clbComm* c) {
  if (!c->preMulHost) return;
  c->preMulHost.reset();
  c->mem.addHost(-(int64_t)c->preMulHostBytes);
  c->preMulHostBytes = 0;
}

extern "C" {

clbResult_t clbRedOpCreatePreMulSum(clbRedOp_t* op, void* scalar, clbDataType_t datatype, int residence,
                                    clbComm_t comm) {
  clearError();
  CLB_CHECK(checkComm(comm));
  if (!op) return setError(clbInvalidArgument, "clbRedOpCreatePreMulSum: op (output) is NULL");
  if (!validType(datatype))
    return setError(clbInvalidArgument,
                    "clbRedOpCreatePreMulSum: unknown data type %d (datatype): use a clbDataType_t "
                    "value",
                    (int)datatype);
  if (residence != clbScalarDevice && residence != clbScalarHostImmediate)
    return setError(clbInvalidArgument,
                    "clbRedOpCreatePreMulSum: residence %d is not a clbScalarResidence_t: use clbScalarHostImmediate "
                    "(1: the scalar is read now, from host memory) or clbScalarDevice (0: read when each call runs)",
                    residence);
  if (!scalar)
    return setError(clbInvalidArgument, "clbRedOpCreatePreMulSum: scalar is NULL: pass the address of one %s element",
                    typeName(datatype));
  PreMul pm;
  pm.on = true;
  pm.residence = residence;
  pm.type = datatype;
  if (residence == clbScalarHostImmediate) {
    if (cuda::driverInProcess()) {
      bool onDevice = false;
      int ordinal = -1;
      CLB_CHECK(cuda::classifyPointer(scalar, &onDevice, &ordinal));
      if (onDevice)
        return setError(clbInvalidArgument,
                        "clbRedOpCreatePreMulSum: scalar %p is device memory but residence is clbScalarHostImmediate "
                        "(read now, on the host): pass clbScalarDevice for a scalar in device memory",
                        scalar);
    }
    memcpy(&pm.value, scalar, clbTypeSize(datatype));
  } else {
    pm.ptr = scalar;
  }
  std::lock_guard<std::mutex> g(gOpsMutex);
  int value = 0;
  do {  // past the values still alive, once they wrapped around
    value = clbNumOps + (int)(gCreated % kValues);
    gCreated++;
  } while (gOps.count(value));
  pm.handle = value;
  gOps.emplace(value, OpEntry{comm, pm});
  *op = static_cast<clbRedOp_t>(value);
  return clbSuccess;
}

clbResult_t clbRedOpDestroy(clbRedOp_t op, clbComm_t comm) {
  clearError();
  CLB_CHECK(checkComm(comm));
  if (validOp(op))
    return setError(clbInvalidArgument,
                    "clbRedOpDestroy: op %d (%s) is a built-in operation: only operations made by "
                    "clbRedOpCreatePreMulSum are destroyed",
                    (int)op, opName(op));
  std::lock_guard<std::mutex> g(gOpsMutex);
  OpEntry* e = nullptr;
  CLB_CHECK(findLocked(comm, (int)op, "clbRedOpDestroy", &e));
  gOps.erase((int)op);
  return clbSuccess;
}

}  // extern "C"
