// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// libnccl.so.2 on Colibri: NCCL's C interface (nccl.h, NCCL 2.28's binary interface) implemented
// over Colibri's own C ABI (libcolibri.so, found beside this library), natively: nothing is ever
// forwarded to an NVIDIA NCCL. Each call maps its arguments (NCCL's type and operation numbers
// differ from Colibri's) and its result; what Colibri does not do yet is refused with
// ncclInvalidUsage and a ncclGetLastError text that says so and what to do instead.
//
// An ncclComm_t wraps a Colibri communicator (clbComm_t) with what NCCL's interface adds around
// one: an init that completes later (inside a group: at its end; non-blocking: on a thread of its
// own). Host buffers with a NULL stream work as they do through Colibri's C ABI (an extension of
// NCCL's interface), so the interface is tested on machines without a GPU.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "base/live_handles.h"
#include "nccl/nccl.h"

#define NCCL_EXPORT extern "C" __attribute__((visibility("default")))

// What an ncclComm_t points to. Its Colibri communicator exists once its init has completed:
// at once for a blocking init outside a group, at ncclGroupEnd for an init (or split) inside a
// group (so that one thread can make several communicators of one clique, as nccl-tests -g N and
// NCCL's grouped init do), on a thread of its own for a non-blocking one (config.blocking = 0:
// the call returns ncclInProgress, ncclCommGetAsyncError says when it is done).
struct ncclComm {
  std::mutex mu;
  std::condition_variable done;
  clbComm_t c = nullptr;
  // ncclInProgress until the init has completed, then its result.
  ncclResult_t state = ncclInProgress;
  std::atomic<bool> ready{false};  // state is ncclSuccess for good: calls skip the lock
  bool waitsForGroupEnd = false;   // an init inside a group that has not ended yet
  std::string error;               // the init's failure, for ncclGetLastError
  std::thread worker;              // a non-blocking init's thread
  // Set (__atomic_store_n) by ncclCommAbort: the init's clbCommInitRankAbortable then returns at
  // once, freeing what it made.
  int abortFlag = 0;
  int waiters = 0;  // threads in of() waiting for the init (under mu): the wrapper outlives them

  // The init's outcome, once.
  void finish(clbComm_t made, ncclResult_t rc, const std::string& why) {
    std::lock_guard<std::mutex> g(mu);
    c = made;
    state = rc;
    error = why;
    waitsForGroupEnd = false;
    ready.store(rc == ncclSuccess, std::memory_order_release);
    done.notify_all();
  }
};

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(clbUniqueId), "an NCCL unique id carries a Colibri one as it is");

// The calling thread's last failure of this library's own (a refusal before any Colibri call);
// otherwise ncclGetLastError is Colibri's last error.
thread_local std::string tError;
thread_local bool tOwnError = false;

// The calling thread's group depth (ncclGroupStart / ncclGroupEnd), and the first collective or
// point-to-point call of its group that this library refused by itself (a type, an operation, a
// communicator): as in NCCL, and as Colibri does with its own refusals, the group's end then runs
// none of its calls and fails.
thread_local int tGroupDepth = 0;
thread_local ncclResult_t tGroupRefused = ncclSuccess;
thread_local std::string tGroupRefusal;

// NCCL's environment variables that have a Colibri meaning, set as the COLIBRI_* ones before the
// first call reaches Colibri (which reads those at init); a COLIBRI_* variable already set wins.
// docs/nccl-compat.md has the table.
void setIfUnset(const char* name, const std::string& value) {
  if (!value.empty() && !getenv(name)) setenv(name, value.c_str(), 0);
}

std::string env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

// NCCL_DEBUG=WARN (or INFO, TRACE): every failed call says why on stderr, as NCCL's WARN lines
// do, since clients answer a failure with "run with NCCL_DEBUG=WARN for details".
std::atomic<bool> gWarn{false};

void mapNcclVariables() {
  std::string debug = env("NCCL_DEBUG");
  for (char& c : debug) c = (char)toupper((unsigned char)c);
  gWarn = debug == "WARN" || debug == "INFO" || debug == "TRACE";
  if (debug == "VERSION" || debug == "WARN")
    setIfUnset("COLIBRI_LOG_LEVEL", "warn");
  else if (debug == "INFO")
    setIfUnset("COLIBRI_LOG_LEVEL", "info");
  else if (debug == "TRACE")
    setIfUnset("COLIBRI_LOG_LEVEL", "debug");
  if (debug == "VERSION" || debug == "INFO" || debug == "TRACE") {
    int v = 0;
    clbGetVersion(&v);
    fprintf(stderr, "NCCL INFO NCCL version %d.%d.%d+colibri%d.%d.%d (libnccl.so.2 of Colibri, not NVIDIA's NCCL)\n",
            NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, v / 10000, v / 100 % 100, v % 100);
  }
  // NCCL_IB_HCA: "mlx5_0:1,mlx5_1:1", "=mlx5_0" (exact) or "^mlx5_1" (all but): Colibri uses one
  // device, the first one named (an exclusion list names none).
  // NCCL matches names as prefixes unless "=" asks for exact ones: a name that ends in a digit
  // (mlx5_0) is taken as a whole device name, a bare prefix (mlx5) is not mapped.
  std::string hca = env("NCCL_IB_HCA");
  if (!hca.empty() && hca[0] != '^') {
    const bool exact = hca[0] == '=';
    if (exact) hca.erase(0, 1);
    hca = hca.substr(0, hca.find(','));
    const size_t colon = hca.find(':');
    const std::string name = hca.substr(0, colon);
    if (!name.empty() && (exact || isdigit((unsigned char)name.back()))) {
      if (colon != std::string::npos) setIfUnset("COLIBRI_VERBS_PORT", hca.substr(colon + 1));
      setIfUnset("COLIBRI_VERBS_DEVICE", name);
    }
  }
  // NCCL_SOCKET_IFNAME: the bootstrap's interface, by name prefix (as Colibri's), or "=name"
  // (exact: Colibri's prefix match takes the whole name); an exclusion list ("^docker") is not
  // mapped (Colibri has none: it then picks the default route's interface).
  if (std::string ifname = env("NCCL_SOCKET_IFNAME"); !ifname.empty() && ifname[0] != '^')
    setIfUnset("COLIBRI_SOCKET_IFNAME", ifname[0] == '=' ? ifname.substr(1) : ifname);
  setIfUnset("COLIBRI_VERBS_GID_INDEX", env("NCCL_IB_GID_INDEX"));
  setIfUnset("COLIBRI_VERBS_TRAFFIC_CLASS", env("NCCL_IB_TC"));
  setIfUnset("COLIBRI_VERBS_TIMEOUT", env("NCCL_IB_TIMEOUT"));
  setIfUnset("COLIBRI_VERBS_RETRY_COUNT", env("NCCL_IB_RETRY_CNT"));
  // NCCL takes up to 128 queue pairs per connection, Colibri 8.
  if (std::string q = env("NCCL_IB_QPS_PER_CONNECTION"); !q.empty())
    setIfUnset("COLIBRI_VERBS_QPS_PER_CONNECTION", std::to_string(std::min(8, std::max(1, atoi(q.c_str())))));
  if (env("NCCL_P2P_DISABLE") == "1") setIfUnset("COLIBRI_DEVICE_P2P", "off");
  if (env("NCCL_SHM_DISABLE") == "1") setIfUnset("COLIBRI_TRANSPORT", "socket");
}

// Every entry point starts with one: NCCL's variables mapped (once), the previous call's own error
// gone.
struct Entry {
  Entry() {
    static std::once_flag once;
    std::call_once(once, mapNcclVariables);
    tOwnError = false;
  }
};

// The collectives and the point-to-point calls start with this one instead: inside a group, a
// refusal of theirs is the group's too (refuse()); a query's (ncclCommCount...) is not.
thread_local bool tGroupCall = false;
struct CallEntry : Entry {
  CallEntry() { tGroupCall = true; }
  ~CallEntry() { tGroupCall = false; }
};

void warn(ncclResult_t code, const char* why) {
  if (code != ncclSuccess && code != ncclInProgress && gWarn)
    fprintf(stderr, "NCCL WARN [Colibri, pid %d] %s\n", (int)getpid(), why && *why ? why : "(no reason recorded)");
}

ncclResult_t refuse(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t refuse(ncclResult_t code, const char* fmt, ...) {
  char b[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  tError = b;
  tOwnError = true;
  warn(code, b);
  if (tGroupCall && tGroupDepth > 0 && tGroupRefused == ncclSuccess) {
    tGroupRefused = code;
    tGroupRefusal = b;
    // Colibri's group (which holds the group's other calls) is refused with it: its end runs
    // nothing, and the peers of its other communicators hear this reason.
    clbGroupRefuse(b);
  }
  return code;
}

ncclResult_t code(clbResult_t rc) {
  switch (rc) {
    case clbSuccess: return ncclSuccess;
    case clbInvalidArgument: return ncclInvalidArgument;
    case clbInvalidUsage: return ncclInvalidUsage;
    case clbSystemError: return ncclSystemError;
    case clbInternalError: return ncclInternalError;
    case clbRemoteError:
    case clbTimeout:
    case clbAborted: return ncclRemoteError;
    case clbAuthError: return ncclInvalidUsage;
    case clbUnsupported: return ncclInvalidUsage;
    case clbOutOfMemory: return ncclSystemError;
    default: return ncclInternalError;
  }
}

// A Colibri call's outcome as NCCL's, said on stderr when it failed and NCCL_DEBUG asks.
ncclResult_t result(clbResult_t rc) {
  const ncclResult_t r = code(rc);
  if (r != ncclSuccess) warn(r, clbGetLastError());
  return r;
}

// The handles alive: made by an init or a split and not destroyed (or aborted) yet. A handle not
// among them is refused by every call (a second ncclCommDestroy, a call after it) instead of read.
// A destroy or an abort takes its handle out first (claim), so that of two, one frees it and the
// other finds it gone; it puts it back when it frees nothing. The lookup is read-mostly
// (base/live_handles.h). Never freed: calls may come until the process exits.
clb::LiveHandles<ncclComm>& live() {
  static auto* s = new clb::LiveHandles<ncclComm>;
  return *s;
}

void addLive(const ncclComm* comm) { live().add(comm); }
bool claim(const ncclComm* comm) { return live().remove(comm); }
bool alive(const ncclComm* comm) { return live().contains(comm); }

// The refusal (ncclInvalidArgument, said why) of a NULL handle, or of one that is not alive; `call`
// names the call.
ncclResult_t refuseDead(const char* call, const ncclComm* comm) {
  if (!comm)
    return refuse(ncclInvalidArgument,
                  "%s: comm is NULL: pass a communicator made by ncclCommInitRank or "
                  "ncclCommSplit",
                  call);
  return refuse(ncclInvalidArgument,
                "%s: comm %p is not alive in this process: it was destroyed already "
                "(ncclCommDestroy or ncclCommAbort), or was never made by ncclCommInitRank or ncclCommSplit; "
                "nothing was done: make a new one",
                call, (const void*)comm);
}

// A call's communicator: Colibri's, once its init has completed (waiting for a non-blocking init
// that runs); nullptr with *rc set (and the reason for ncclGetLastError, naming `call`) when there
// is none.
clbComm_t of(ncclComm_t comm, ncclResult_t* rc, const char* call) {
  if (!alive(comm)) {
    *rc = refuseDead(call, comm);
    return nullptr;
  }
  if (comm->ready.load(std::memory_order_acquire)) return comm->c;
  std::unique_lock<std::mutex> g(comm->mu);
  if (comm->waitsForGroupEnd) {
    *rc = refuse(ncclInvalidUsage,
                 "this communicator's init was called inside a group and completes at the "
                 "group's ncclGroupEnd: call ncclGroupEnd before using it");
    return nullptr;
  }
  comm->waiters++;
  comm->done.wait(g, [&] { return comm->state != ncclInProgress; });
  if (--comm->waiters == 0) comm->done.notify_all();  // a destroy or abort may wait for the last
  if (comm->state != ncclSuccess) {
    *rc = refuse(comm->state, "this communicator's init failed: %s", comm->error.c_str());
    return nullptr;
  }
  return comm->c;
}

// An init or a split that runs later, at the end of the calling thread's outermost group; it
// returns its result and says why it failed.
using Init = std::function<ncclResult_t(std::string* why)>;
thread_local std::vector<Init> tGroupInits;

// Runs an init (job makes the communicator, or fails) now, at the group's end or on a thread of
// its own, as the caller's context asks; `comm` (nullptr for a split this rank takes no part in)
// gets its outcome. Returns what the NCCL call returns.
ncclResult_t startInit(ncclComm* comm, bool blocking, std::function<clbResult_t(clbComm_t*)> job) {
  Init run = [comm, job](std::string* why) {
    clbComm_t made = nullptr;
    const clbResult_t rc = job(&made);
    const ncclResult_t r = result(rc);
    *why = rc == clbSuccess ? "" : clbGetLastError();
    if (comm) comm->finish(made, r, *why);
    return r;
  };
  if (tGroupDepth > 0) {
    if (comm) comm->waitsForGroupEnd = true;
    tGroupInits.push_back(run);
    return ncclSuccess;
  }
  if (!blocking) {
    comm->worker = std::thread([run] {
      std::string why;
      run(&why);
    });
    return ncclInProgress;
  }
  std::string why;
  const ncclResult_t r = run(&why);
  if (r != ncclSuccess) tError = why, tOwnError = true;
  return r;
}

// A config the caller did not make with NCCL_CONFIG_INITIALIZER (NULL is fine: the defaults).
bool badConfig(const ncclConfig_t* config, ncclResult_t* rc) {
  if (!config || (config->magic == 0xcafebeef && config->size >= offsetof(ncclConfig_t, blocking) + sizeof(int)))
    return false;
  *rc = refuse(ncclInvalidArgument, "config was not set up with NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)",
               config->magic, config->size);
  return true;
}

const char* typeName(ncclDataType_t t) {
  return t == ncclFloat8e4m3 ? "ncclFloat8e4m3" : t == ncclFloat8e5m2 ? "ncclFloat8e5m2" : "this type";
}

// NCCL's type as Colibri's. `reduces`: the call does arithmetic on the elements; a call that only
// moves them moves fp8 as bytes.
bool type(ncclDataType_t t, bool reduces, clbDataType_t* out, ncclResult_t* rc) {
  switch (t) {
    case ncclInt8: *out = clbInt8; return true;
    case ncclUint8: *out = clbUint8; return true;
    case ncclInt32: *out = clbInt32; return true;
    case ncclUint32: *out = clbUint32; return true;
    case ncclInt64: *out = clbInt64; return true;
    case ncclUint64: *out = clbUint64; return true;
    case ncclFloat16: *out = clbFloat16; return true;
    case ncclFloat32: *out = clbFloat32; return true;
    case ncclFloat64: *out = clbFloat64; return true;
    case ncclBfloat16: *out = clbBfloat16; return true;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      if (!reduces) {
        *out = clbUint8;
        return true;
      }
      *rc = refuse(ncclInvalidArgument,
                   "datatype %s: Colibri does not reduce fp8 elements yet; reduce them as "
                   "ncclBfloat16 or ncclFloat16 (calls that only move data take fp8)",
                   typeName(t));
      return false;
    default:
      *rc = refuse(ncclInvalidArgument, "datatype %d is not an ncclDataType_t (0 .. %d)", (int)t, ncclNumTypes - 1);
      return false;
  }
}

// NCCL's operation as Colibri's: the built-in ones are numbered differently (NCCL's max is 2 and
// min 3, Colibri's the other way round); those made by ncclRedOpCreatePreMulSum are Colibri's own
// values (clbNumOps and up, as NCCL's are ncclNumOps and up), which Colibri checks against the
// call's communicator and type.
bool op(ncclRedOp_t o, clbRedOp_t* out, ncclResult_t* rc) {
  switch (o) {
    case ncclSum: *out = clbSum; return true;
    case ncclProd: *out = clbProd; return true;
    case ncclMax: *out = clbMax; return true;
    case ncclMin: *out = clbMin; return true;
    case ncclAvg: *out = clbAvg; return true;
    default:
      if ((int)o >= (int)ncclNumOps) {
        *out = static_cast<clbRedOp_t>(o);
        return true;
      }
      *rc = refuse(ncclInvalidArgument,
                   "reduction operation %d: pass ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg "
                   "or an operation made by ncclRedOpCreatePreMulSum",
                   (int)o);
      return false;
  }
}

ncclResult_t unsupported(const char* call, const char* instead) {
  return refuse(ncclInvalidUsage, "%s is not supported by Colibri's libnccl.so.2 yet: %s", call, instead);
}

// The CUDA device current on the calling thread (libcuda, looked up at run time: this library
// links no CUDA); 0 without a context or a driver.
void* cudaDriver() {
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return lib;
}

int currentDevice() {
  using GetDevice = int (*)(int*);
  static GetDevice get = cudaDriver() ? reinterpret_cast<GetDevice>(dlsym(cudaDriver(), "cuCtxGetDevice")) : nullptr;
  int dev = 0;
  if (!get || get(&dev) != 0) return 0;
  return dev;
}

}  // namespace

namespace {
// A refusal of a call's arguments here, before Colibri sees the call: as Colibri does with those it
// refuses, the communicator `c` (when the call has one) fails and the peers are told at once,
// naming this rank and the reason (clbCommRefuse), for they would wait for this call until their
// timeout (a communicator of one rank has none: it goes on). Returns `bad`, with the message that
// says so; or, while another thread is in a call on `c`, that usage refusal, which changes nothing.
// `collective`: the call is numbered among the collective calls (Colibri's five), not point-to-point.
ncclResult_t tellPeers(clbComm_t c, ncclResult_t bad, const char* call, bool collective) {
  if (!c) return bad;
  const std::string why = tError;
  const clbResult_t rc = clbCommRefuse(c, call, collective, why.c_str());
  tError = clbGetLastError();
  if (tGroupRefusal == why) tGroupRefusal = tError;  // the group's end says it as this call did
  return rc == clbInvalidUsage ? ncclInvalidUsage : bad;
}
}  // namespace

// NCCL_TYPE's choices, by name: whether an op applies to the type (else the call only moves
// data), and whether the call is numbered among the collectives (tellPeers).
constexpr bool kReduces = true, kMoves = false;
constexpr bool kCollective = true, kNotCollective = false;

// A call's arguments as Colibri's, or the call returns the refusal (and `c`, the call's
// communicator or NULL, fails with it: tellPeers; `collective` as there).
#define NCCL_TYPE(c, t, reduces, collective, out)                                      \
  clbDataType_t out;                                                                   \
  {                                                                                    \
    ncclResult_t bad = ncclSuccess;                                                    \
    if (!type(t, reduces, &out, &bad)) return tellPeers(c, bad, __func__, collective); \
  }
#define NCCL_COMM(comm, out)                           \
  clbComm_t out;                                       \
  {                                                    \
    ncclResult_t bad = ncclSuccess;                    \
    if (!(out = of(comm, &bad, __func__))) return bad; \
  }
#define NCCL_OP(c, o, out)                                            \
  clbRedOp_t out;                                                     \
  {                                                                   \
    ncclResult_t bad = ncclSuccess;                                   \
    if (!op(o, &out, &bad)) return tellPeers(c, bad, __func__, true); \
  }

// ---- versions, errors ----

NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  Entry e;
  if (!version) return refuse(ncclInvalidArgument, "version (output) is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the Colibri developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

NCCL_EXPORT const char* ncclGetLastError(ncclComm_t) { return tOwnError ? tError.c_str() : clbGetLastError(); }

// ---- communicators ----

NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  Entry e;
  if (!id) return refuse(ncclInvalidArgument, "uniqueId (output) is NULL");
  return result(clbGetUniqueId(reinterpret_cast<clbUniqueId*>(id)));
}

NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t* config) {
  Entry e;
  if (!comm) return refuse(ncclInvalidArgument, "comm (output) is NULL");
  *comm = nullptr;
  if (ncclResult_t bad = ncclSuccess; badConfig(config, &bad)) return bad;
  clbUniqueId id;
  memcpy(&id, &commId, sizeof id);
  auto* w = new ncclComm;
  const bool blocking = !config || config->blocking != 0;
  const int* abortFlag = &w->abortFlag;  // ncclCommAbort ends a non-blocking init through it
  const ncclResult_t rc = startInit(w, blocking, [id, rank, nranks, abortFlag](clbComm_t* made) {
    return clbCommInitRankAbortable(made, &id, rank, nranks, nullptr, abortFlag);
  });
  if (rc != ncclSuccess && rc != ncclInProgress) {
    delete w;
    return rc;
  }
  addLive(w);
  *comm = w;
  return rc;
}

NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId* commIds, ncclConfig_t* config) {
  Entry e;
  if (nId < 1 || !commIds)
    return refuse(ncclInvalidArgument, "ncclCommInitRankScalable needs at least one unique id (nId %d)", nId);
  // Colibri's bootstrap scales by itself: every rank meets at the first id.
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  Entry e;
  if (!comms) return refuse(ncclInvalidArgument, "comms (output) is NULL");
  if (ndev < 1) return refuse(ncclInvalidArgument, "ndev is %d: ncclCommInitAll needs at least one device", ndev);
  (void)devlist;  // a Colibri communicator takes its GPU from the buffers of its calls
  ncclUniqueId id;
  if (ncclResult_t rc = ncclGetUniqueId(&id); rc != ncclSuccess) return rc;
  // One thread per rank: each init waits for the others.
  std::vector<ncclResult_t> rcs(ndev, ncclSuccess);
  std::vector<std::string> errs(ndev);
  std::vector<std::thread> ts;
  for (int r = 0; r < ndev; r++)
    ts.emplace_back([&, r] {
      rcs[r] = ncclCommInitRank(&comms[r], ndev, id, r);
      if (rcs[r] != ncclSuccess) errs[r] = ncclGetLastError(nullptr);
    });
  for (auto& t : ts) t.join();
  clbUniqueIdRelease(reinterpret_cast<clbUniqueId*>(&id));
  for (int r = 0; r < ndev; r++)
    if (rcs[r] != ncclSuccess) {
      for (int p = 0; p < ndev; p++)
        if (comms[p]) ncclCommDestroy(comms[p]), comms[p] = nullptr;
      return refuse(rcs[r], "rank %d of ncclCommInitAll: %s", r, errs[r].c_str());
    }
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  Entry e;
  ncclResult_t rc = ncclSuccess;
  if (!of(comm, &rc, __func__)) return rc;
  // Colibri's calls are complete on the host when they return (device work is on the caller's
  // streams): nothing is left to flush.
  return ncclSuccess;
}

namespace {
// Waits for an init that runs on a thread of its own (a non-blocking one), and for the calls
// waiting in of() to have seen its outcome; false for an init that waits for its group's end
// (there is nothing to free before it has run).
bool settle(ncclComm_t comm) {
  {
    std::lock_guard<std::mutex> g(comm->mu);
    if (comm->waitsForGroupEnd) return false;
  }
  if (comm->worker.joinable() && comm->worker.get_id() != std::this_thread::get_id()) comm->worker.join();
  std::unique_lock<std::mutex> g(comm->mu);
  comm->done.wait(g, [&] { return comm->waiters == 0; });
  return true;
}
}  // namespace

NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  Entry e;
  if (!comm) return ncclSuccess;
  if (!claim(comm)) return refuseDead("ncclCommDestroy", comm);
  if (!settle(comm)) {
    addLive(comm);
    return refuse(ncclInvalidUsage,
                  "ncclCommDestroy: this communicator's init completes at its group's "
                  "ncclGroupEnd: end the group first");
  }
  if (comm->c) {
    const clbResult_t rc = clbCommDestroy(comm->c);
    if (rc != clbSuccess) {  // a call in progress on another thread: nothing freed
      addLive(comm);
      return result(rc);
    }
  }
  delete comm;
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  Entry e;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return refuse(ncclInvalidArgument, "ncclCommRevoke: revokeFlags=%d: pass NCCL_REVOKE_DEFAULT (0)", revokeFlags);
  NCCL_COMM(comm, c);
  // Synchronous here: the calls in progress return once they see it (they poll the abort flag),
  // and the communicator is ready for ncclCommShrink and ncclCommDestroy at once.
  return result(clbCommRevoke(c));
}

NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  Entry e;
  if (!comm) return ncclSuccess;
  if (!claim(comm)) return refuseDead("ncclCommAbort", comm);
  {
    std::lock_guard<std::mutex> g(comm->mu);
    if (comm->waitsForGroupEnd) {
      addLive(comm);
      return refuse(ncclInvalidUsage,
                    "ncclCommAbort: this communicator's init completes at its group's "
                    "ncclGroupEnd: end the group first");
    }
  }
  // A non-blocking init still running is stopped (its clbCommInitRankAbortable returns within
  // about 100 ms, having freed what it made) and waited for.
  __atomic_store_n(&comm->abortFlag, 1, __ATOMIC_RELEASE);
  settle(comm);
  if (!comm->c) {
    delete comm;
    return ncclSuccess;
  }
  // Another thread may be inside a call on comm (that is what abort is for): the abort makes it
  // return, and Colibri's destroy refuses (frees nothing) until it has, so it is tried again. No
  // other destroy or abort of this handle runs (this one claimed it).
  clbCommAbort(comm->c);
  for (int waited = 0;; waited++) {
    const clbResult_t rc = clbCommDestroy(comm->c);
    if (rc == clbSuccess) {
      delete comm;
      return ncclSuccess;
    }
    if (rc != clbInvalidUsage || waited == 30000) {
      addLive(comm);  // aborted, not freed: a later destroy may still free it
      return result(rc);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace {
// A call refused by the drop-in on one rank of a collective creation over a parent (a split's, a
// grow's or a shrink's bad config) takes its part there anyway, through `takePart` (Colibri's call with no
// output, which refuses it on every rank at once): now, or inside a group at the group's end
// (where the group's other calls of the same creation run), failing that end too. The refusal's
// message stays the drop-in's.
void refuseWithParent(std::function<void()> takePart) {
  const std::string why = tError;
  if (tGroupDepth > 0) {
    tGroupInits.push_back([takePart, why](std::string* out) {
      takePart();
      *out = why;
      return ncclInvalidArgument;
    });
    return;
  }
  takePart();
  tError = why;
}
}  // namespace

namespace {
// A split's or a shrink's new communicator `w` (NULL where the rank gets none) made by `job` as an
// init is (startInit), and handed out through `newcomm` once it is started.
ncclResult_t startChild(ncclComm* w, bool blocking, ncclComm_t* newcomm, std::function<clbResult_t(clbComm_t*)> job) {
  const ncclResult_t rc = startInit(w, blocking || !w, std::move(job));
  if (rc != ncclSuccess && rc != ncclInProgress) {
    delete w;
    return rc;
  }
  if (w) addLive(w);
  if (newcomm) *newcomm = w;
  return rc;
}
}  // namespace

NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  Entry e;
  if (newcomm) *newcomm = nullptr;
  ncclResult_t rc = ncclSuccess;
  if (badConfig(config, &rc)) {
    // The split is collective over the parent: its other ranks are told at once, and it goes on.
    const std::string why = tError;
    ncclResult_t dead = ncclSuccess;
    clbComm_t parent = of(comm, &dead, __func__);
    tError = why;  // the config is what this call got wrong first
    if (!parent) return rc;
    // Inside a group the split runs at the group's end, with the group's other splits and inits
    // (one thread may drive every rank's): so does its refusal, which fails the group's end too.
    refuseWithParent([parent, why] { clbCommSplitRefuse(parent, why.c_str()); });
    return rc;
  }
  clbComm_t parent = of(comm, &rc, __func__);
  if (!parent) return rc;
  // A bad color or a NULL newcomm goes to clbCommSplit as it is: its first exchange refuses it on
  // every rank at once, naming this one, and the parent stays usable (refused here alone, the
  // other ranks would wait for this one until the timeout, and their parent would fail). A rank
  // that takes no part still takes part in the split (it is collective over the parent), and gets
  // no communicator. NCCL_SPLIT_NOCOLOR is CLB_SPLIT_NOCOLOR (-1).
  const bool valid = newcomm && (color >= 0 || color == NCCL_SPLIT_NOCOLOR);
  ncclComm* w = valid && color >= 0 ? new ncclComm : nullptr;
  const bool blocking = !config || config->blocking != 0;
  const bool hasOut = newcomm != nullptr;
  return startChild(w, blocking, newcomm, [parent, color, key, hasOut](clbComm_t* made) {
    return clbCommSplit(parent, color, key, nullptr, hasOut ? made : nullptr);
  });
}

NCCL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  Entry e;
  ncclResult_t rc = ncclSuccess;
  clbComm_t c = of(comm, &rc, __func__);
  if (!c) return rc;
  if (!uniqueId) return refuse(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId (output) is NULL");
  return result(clbCommGetUniqueId(c, reinterpret_cast<clbUniqueId*>(uniqueId)));
}

NCCL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                      ncclComm_t* newcomm, ncclConfig_t* config) {
  Entry e;
  if (newcomm) *newcomm = nullptr;
  ncclResult_t rc = ncclSuccess;
  clbComm_t parent = nullptr;
  if (comm && !(parent = of(comm, &rc, __func__))) return rc;
  if (badConfig(config, &rc)) {
    // An existing rank meets the others in the grow: it takes its part with no output, which
    // refuses the grow on every existing rank at once (they would wait until the timeout). Inside
    // a group, at the group's end with the group's other calls (one thread may drive every rank's).
    if (!parent) return rc;
    clbUniqueId id{};
    const bool hasId = uniqueId != nullptr;
    if (hasId) memcpy(&id, uniqueId, sizeof id);
    refuseWithParent([parent, nRanks, id, hasId, rank] {
      (void)clbCommGrow(parent, nRanks, hasId ? &id : nullptr, rank, nullptr, nullptr);
    });
    return rc;
  }
  // Arguments are checked by clbCommGrow: on an existing rank its exchange refuses a bad one on every
  // existing rank at once (a NULL newcomm too), on a new rank before it connects.
  ncclComm* w = newcomm ? new ncclComm : nullptr;
  const bool blocking = !config || config->blocking != 0;
  clbUniqueId id{};
  const bool hasId = uniqueId != nullptr, hasOut = newcomm != nullptr;
  if (hasId) memcpy(&id, uniqueId, sizeof id);
  // ncclCommAbort(newcomm) ends a non-blocking grow that waits for ranks, as it ends an init.
  const int* abortFlag = w ? &w->abortFlag : nullptr;
  return startChild(w, blocking, newcomm, [parent, nRanks, id, hasId, rank, hasOut, abortFlag](clbComm_t* made) {
    return clbCommGrowAbortable(parent, nRanks, hasId ? &id : nullptr, rank, nullptr, hasOut ? made : nullptr,
                                abortFlag);
  });
}

NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  Entry e;
  if (newcomm) *newcomm = nullptr;
  ncclResult_t rc = ncclSuccess;
  clbComm_t parent = nullptr;
  if (badConfig(config, &rc)) {
    // The survivors meet in the shrink: this one takes its part with no output, which refuses it on
    // every survivor at once (they would wait for it until the timeout otherwise).
    // Inside a group, at the group's end with the group's other calls.
    const std::string why = tError;
    ncclResult_t dead = ncclSuccess;
    parent = of(comm, &dead, __func__);
    tError = why;
    if (!parent) return rc;
    std::vector<int> excluded;
    if (excludeRanksList && excludeRanksCount > 0)
      excluded.assign(excludeRanksList, excludeRanksList + excludeRanksCount);
    const bool listGiven = excludeRanksList != nullptr;
    refuseWithParent([parent, excluded, listGiven, excludeRanksCount, shrinkFlags] {
      // Refused: NCCL_SHRINK_ABORT aborts nothing.
      (void)clbCommShrink(parent, listGiven ? excluded.data() : nullptr, excludeRanksCount, nullptr, nullptr,
                          shrinkFlags & ~NCCL_SHRINK_ABORT);
    });
    return rc;
  }
  if (!(parent = of(comm, &rc, __func__))) return rc;
  // NCCL_SHRINK_ABORT is CLB_SHRINK_ABORT; the list, the flags and a NULL newcomm are checked by
  // clbCommShrink (a NULL newcomm refused on every survivor at once).
  ncclComm* w = newcomm ? new ncclComm : nullptr;
  const bool blocking = !config || config->blocking != 0;
  std::vector<int> excluded;
  if (excludeRanksList && excludeRanksCount > 0)
    excluded.assign(excludeRanksList, excludeRanksList + excludeRanksCount);
  const bool listGiven = excludeRanksList != nullptr, hasOut = newcomm != nullptr;
  return startChild(w, blocking, newcomm,
                    [parent, excluded, excludeRanksCount, listGiven, hasOut, shrinkFlags](clbComm_t* made) {
                      return clbCommShrink(parent, listGiven ? excluded.data() : nullptr, excludeRanksCount, nullptr,
                                           hasOut ? made : nullptr, shrinkFlags);
                    });
}

NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  Entry e;
  if (!asyncError) return refuse(ncclInvalidArgument, "asyncError (output) is NULL");
  if (!alive(comm)) return refuseDead("ncclCommGetAsyncError", comm);
  {
    // An init still running (non-blocking) is in progress; one that failed is this
    // communicator's error.
    std::lock_guard<std::mutex> g(comm->mu);
    if (comm->state != ncclSuccess) {
      *asyncError = comm->state;
      return ncclSuccess;
    }
  }
  clbResult_t err = clbSuccess;
  const clbResult_t rc = clbCommGetAsyncError(comm->c, &err);
  *asyncError = code(err);  // polled (PyTorch's watchdog asks often): not said on stderr at each poll
  return result(rc);
}

NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  Entry e;
  NCCL_COMM(comm, c);
  return result(clbCommCount(c, count));
}

NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  Entry e;
  NCCL_COMM(comm, c);
  return result(clbCommRank(c, rank));
}

NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  Entry e;
  if (!alive(comm)) return refuseDead("ncclCommCuDevice", comm);
  if (!device) return refuse(ncclInvalidArgument, "device (output) is NULL");
  // A Colibri communicator takes its GPU from its calls' buffers; the device current on the
  // calling thread is the one NCCL's callers set before their init.
  *device = currentDevice();
  return ncclSuccess;
}

// ---- memory ----

// NCCL's registration is local (each rank, any time, e.g. PyTorch's allocator hook per segment);
// Colibri's is collective. A local call cannot make a collective one, so these register nothing:
// a buffer that is not registered costs speed (staging between processes), never correctness.
// The handle is a token that deregistration gives back.
NCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  Entry e;
  if (!alive(comm)) return refuseDead("ncclCommRegister", comm);
  if (!handle) return refuse(ncclInvalidArgument, "handle (output) is NULL");
  if (!buff || size == 0)
    return refuse(ncclInvalidArgument, "buffer %p of %zu bytes: pass memory and a size", buff, size);
  if (size > UINTPTR_MAX - reinterpret_cast<uintptr_t>(buff))
    return refuse(ncclInvalidArgument,
                  "ncclCommRegister: buffer [%p, +%zu bytes) runs past the end of the address "
                  "space (the address plus the size wraps around): pass the size of the memory the buffer holds",
                  buff, size);
  *handle = new char(0);
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  Entry e;
  if (!alive(comm)) return refuseDead("ncclCommDeregister", comm);
  delete static_cast<char*>(handle);
  return ncclSuccess;
}

// A window (ncclCommWindowRegister): Colibri's registration of the buffer (clbCommRegister, which is
// collective like NCCL's windows, so a refusal on one rank is a refusal on all), and what
// ncclWinGetUserPtr gives back. Colibri reads registered peer buffers in place whatever the
// window's flags; it needs no equal sizes, so it does not compare them.
struct ncclWindow_vidmem {
  ncclComm_t comm;
  void* buff;
  size_t size;
  void* handle;  // clbCommRegister's
};

namespace {

// The windows alive (made and not deregistered): a handle not among them is refused, not read.
// Never freed: calls may come until the process exits.
clb::LiveHandles<ncclWindow_vidmem>& windows() {
  static auto* w = new clb::LiveHandles<ncclWindow_vidmem>;
  return *w;
}

// `win` when it is a window alive of `comm`, else NULL with the refusal in *rc; taken out of the
// set where `take` (a deregistration that is refused puts it back).
ncclWindow_t windowOf(ncclComm_t comm, ncclWindow_t win, bool take, const char* call, ncclResult_t* rc) {
  std::unique_lock<std::shared_mutex> g(windows().mutex());
  if (!windows().containsLocked(win)) {
    *rc = refuse(ncclInvalidArgument,
                 "%s: window %p is not a window alive in this process (deregistered already, or never made by "
                 "ncclCommWindowRegister)",
                 call, (void*)win);
    return nullptr;
  }
  if (win->comm != comm) {
    *rc = refuse(ncclInvalidArgument, "%s: window %p belongs to communicator %p, not to %p", call, (void*)win,
                 (void*)win->comm, (void*)comm);
    return nullptr;
  }
  if (take) windows().removeLocked(win);
  return win;
}

}  // namespace

NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                int winFlags) {
  Entry e;
  (void)winFlags;  // every window is read in place where the path can (docs/nccl-compat.md)
  if (win) *win = nullptr;
  NCCL_COMM(comm, c);
  // A NULL `win` goes to clbCommRegister as a NULL handle, which it refuses on every rank at once.
  void* handle = nullptr;
  if (ncclResult_t rc = result(clbCommRegister(c, buff, size, win ? &handle : nullptr)); rc != ncclSuccess) return rc;
  auto* made = new ncclWindow_vidmem{comm, buff, size, handle};
  windows().add(made);
  *win = made;
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  Entry e;
  NCCL_COMM(comm, c);
  ncclResult_t rc = ncclSuccess;
  if (!windowOf(comm, win, true, "ncclCommWindowDeregister", &rc)) {
    // This rank's part of the collective all the same, so that its peers are refused at once
    // instead of waiting for it; then its own reason again as the last error.
    (void)clbCommDeregister(c, nullptr);
    windowOf(comm, win, false, "ncclCommWindowDeregister", &rc);
    return rc;
  }
  rc = result(clbCommDeregister(c, win->handle));
  if (rc != ncclSuccess) {
    windows().add(win);  // refused on every rank (a live graph reads through it, say): the window stays
    return rc;
  }
  delete win;
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  Entry e;
  if (!outUserPtr) return refuse(ncclInvalidArgument, "ncclWinGetUserPtr: outUserPtr (output) is NULL");
  ncclResult_t rc = ncclSuccess;
  if (!windowOf(comm, win, false, "ncclWinGetUserPtr", &rc)) return rc;
  *outUserPtr = win->buff;
  return ncclSuccess;
}

// ---- suspend, memory statistics, properties (NCCL 2.29) ----

NCCL_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  Entry e;
  NCCL_COMM(comm, c);
  if (!(flags & NCCL_SUSPEND_MEM)) return ncclSuccess;  // as NCCL: only the memory flag does anything
  return result(clbCommSuspend(c));
}

NCCL_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  Entry e;
  NCCL_COMM(comm, c);
  return result(clbCommResume(c));
}

NCCL_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  Entry e;
  NCCL_COMM(comm, c);
  if (!value) return refuse(ncclInvalidArgument, "ncclCommMemStats: value (output) is NULL");
  clbMemStats_t m;
  if (ncclResult_t rc = result(clbCommMemStats(c, &m)); rc != ncclSuccess) return rc;
  int suspended = 0;
  if (ncclResult_t rc = result(clbCommSuspended(c, &suspended)); rc != ncclSuccess) return rc;
  // Every byte of device memory Colibri holds for calls is given back by a suspend but the GPU
  // memory of point-to-point channels between hosts, which it counts with the rest: reported as
  // suspendable, none as persistent.
  const uint64_t device = m.deviceBytes > 0 ? (uint64_t)m.deviceBytes : 0;
  switch (stat) {
    case ncclStatGpuMemSuspend: *value = device; return ncclSuccess;
    case ncclStatGpuMemSuspended: *value = suspended ? 1 : 0; return ncclSuccess;
    case ncclStatGpuMemPersist: *value = 0; return ncclSuccess;
    case ncclStatGpuMemTotal: *value = device; return ncclSuccess;
  }
  return refuse(ncclInvalidArgument,
                "ncclCommMemStats: stat %d is not an ncclCommMemStat_t (ncclStatGpuMemSuspend 0 .. "
                "ncclStatGpuMemTotal 3)",
                (int)stat);
}

NCCL_EXPORT ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  Entry e;
  NCCL_COMM(comm, c);
  if (!props) return refuse(ncclInvalidArgument, "ncclCommQueryProperties: props (output) is NULL");
  if (props->magic != NCCL_API_MAGIC || props->size < offsetof(ncclCommProperties_t, rank))
    return refuse(ncclInvalidUsage,
                  "ncclCommQueryProperties: props was not set up with NCCL_COMM_PROPERTIES_INITIALIZER (magic 0x%x, "
                  "size %zu)",
                  props->magic, props->size);
  int rank = 0, nranks = 0;
  if (ncclResult_t rc = result(clbCommRank(c, &rank)); rc != ncclSuccess) return rc;
  if (ncclResult_t rc = result(clbCommCount(c, &nranks)); rc != ncclSuccess) return rc;
  // Each field only where the caller's struct has it (an older layout is shorter): from the
  // field's end, as NCCL 2.29's layouts keep their common fields at the same offsets.
  const size_t have = props->size;
  auto put = [&](size_t offset, const void* v, size_t bytes) {
    if (offset + bytes <= have) memcpy(reinterpret_cast<char*>(props) + offset, v, bytes);
  };
  const int dev = currentDevice(), unknown = -1, none = NCCL_GIN_TYPE_NONE, zero = 0;
  const bool no = false;
  put(offsetof(ncclCommProperties_t, rank), &rank, sizeof rank);
  put(offsetof(ncclCommProperties_t, nRanks), &nranks, sizeof nranks);
  put(offsetof(ncclCommProperties_t, cudaDev), &dev, sizeof dev);
  put(offsetof(ncclCommProperties_t, nvmlDev), &unknown, sizeof unknown);  // NVML's numbering is not looked up
  put(offsetof(ncclCommProperties_t, deviceApiSupport), &no, sizeof no);   // NCCL's device API: refused
  put(offsetof(ncclCommProperties_t, multimemSupport), &no, sizeof no);    // no NVLink SHARP (multicast)
  put(offsetof(ncclCommProperties_t, ginType), &none, sizeof(ncclGinType_t));
  put(offsetof(ncclCommProperties_t, nLsaTeams), &zero, sizeof zero);
  put(offsetof(ncclCommProperties_t, hostRmaSupport), &no, sizeof no);
  put(offsetof(ncclCommProperties_t, railedGinType), &none, sizeof(ncclGinType_t));
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  Entry e;
  if (!ptr) return refuse(ncclInvalidArgument, "ptr (output) is NULL");
  return result(clbDeviceAlloc(ptr, size, currentDevice()));
}

NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  Entry e;
  if (!ptr) return ncclSuccess;
  return result(clbDeviceFree(ptr));
}

// ---- reduction operations ----

// PreMulSum: Colibri's (clbRedOpCreatePreMulSum): each rank scales its input by its own scalar,
// then the ranks sum; NCCL's scalar residences have Colibri's values.
NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  Entry e;
  if (!op) return refuse(ncclInvalidArgument, "op (output) is NULL");
  NCCL_COMM(comm, c);
  NCCL_TYPE(nullptr, datatype, kReduces, kNotCollective, t);  // no peer waits on making an operation
  clbRedOp_t made = clbSum;
  const clbResult_t rc = clbRedOpCreatePreMulSum(&made, scalar, t, (int)residence, c);
  if (rc != clbSuccess) return result(rc);
  *op = static_cast<ncclRedOp_t>(made);
  return ncclSuccess;
}

NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  Entry e;
  NCCL_COMM(comm, c);
  if ((int)op < (int)ncclNumOps)
    return refuse(ncclInvalidArgument,
                  "op %d is a built-in operation: only those made by ncclRedOpCreatePreMulSum "
                  "are destroyed",
                  (int)op);
  return result(clbRedOpDestroy(static_cast<clbRedOp_t>(op), c));
}

// ---- collectives and point-to-point ----

NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t o, ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kReduces, kCollective, t);
  NCCL_OP(c, o, p);
  return result(clbAllReduce(sendbuff, recvbuff, count, t, p, c, stream));
}

NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t o, ncclComm_t comm,
                                           cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kReduces, kCollective, t);
  NCCL_OP(c, o, p);
  return result(clbReduceScatter(sendbuff, recvbuff, recvcount, t, p, c, stream));
}

NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t o, int root, ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kReduces, kCollective, t);
  NCCL_OP(c, o, p);
  return result(clbReduce(sendbuff, recvbuff, count, t, p, root, c, stream));
}

NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                       ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kCollective, t);
  return result(clbAllGather(sendbuff, recvbuff, sendcount, t, c, stream));
}

NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kCollective, t);
  return result(clbBroadcast(sendbuff, recvbuff, count, t, root, c, stream));
}

NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kNotCollective, t);
  // In place too (sendbuff == recvbuff): Colibri copies the input aside on the call's stream.
  return result(clbAllToAll(sendbuff, recvbuff, count, t, c, stream));
}

NCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kNotCollective, t);
  return result(clbGather(sendbuff, recvbuff, count, t, root, c, stream));
}

NCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kNotCollective, t);
  return result(clbScatter(sendbuff, recvbuff, count, t, root, c, stream));
}

NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kNotCollective, t);
  return result(clbSend(sendbuff, count, t, peer, c, stream));
}

NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  CallEntry e;
  NCCL_COMM(comm, c);
  NCCL_TYPE(c, datatype, kMoves, kNotCollective, t);
  return result(clbRecv(recvbuff, count, t, peer, c, stream));
}

// ---- groups ----

NCCL_EXPORT ncclResult_t ncclGroupStart(void) {
  Entry e;
  const ncclResult_t rc = result(clbGroupStart());
  if (rc == ncclSuccess) tGroupDepth++;
  return rc;
}

// The outermost end first completes the group's inits and splits, all at once (one thread each:
// each waits for its clique's other ranks, which may be among them), then issues the group's calls
// (none of which is on those communicators: a call on one is refused until its init completes).
NCCL_EXPORT ncclResult_t ncclGroupEnd(void) {
  Entry e;
  if (tGroupDepth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without a ncclGroupStart");
  ncclResult_t initRc = ncclSuccess;
  std::string initError;
  if (--tGroupDepth == 0 && !tGroupInits.empty()) {
    std::vector<Init> inits;
    inits.swap(tGroupInits);
    std::vector<ncclResult_t> rcs(inits.size(), ncclSuccess);
    std::vector<std::string> whys(inits.size());
    std::vector<std::thread> ts;
    // Threads of their own also for one init: this thread is still inside Colibri's group, which
    // would record the bootstrap's calls of a split instead of running them.
    for (size_t i = 0; i < inits.size(); i++) ts.emplace_back([&, i] { rcs[i] = inits[i](&whys[i]); });
    for (auto& t : ts) t.join();
    for (size_t i = 0; i < inits.size() && initRc == ncclSuccess; i++)
      if (rcs[i] != ncclSuccess) initRc = rcs[i], initError = whys[i];
  }
  const ncclResult_t rc = result(clbGroupEnd());
  ncclResult_t refused = ncclSuccess;
  std::string refusal;
  if (tGroupDepth == 0) {
    std::swap(refused, tGroupRefused);
    refusal.swap(tGroupRefusal);
  }
  if (initRc != ncclSuccess) return refuse(initRc, "a communicator's init in this group failed: %s", initError.c_str());
  if (refused != ncclSuccess)
    return refuse(refused, "nothing in this group ran, because one of its calls was refused: %s", refusal.c_str());
  return rc;
}

NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  Entry e;
  return unsupported("ncclGroupSimulateEnd", "end the group with ncclGroupEnd");
}

// ---- the device-side API ----

NCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  Entry e;
  return unsupported("ncclDevCommCreate (NCCL's device-side API)", "use the host API's collectives");
}

NCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*) {
  Entry e;
  return unsupported("ncclDevCommDestroy (NCCL's device-side API)", "use the host API's collectives");
}
