// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Communicator lifecycle and the C ABI of communicators, errors and statistics (unique ids:
// unique_id.cc; the device helpers of a build without CUDA: device/no_cuda.cc).
#include "core/comm.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <new>
#include <shared_mutex>
#include <thread>

#include "bootstrap/agree.h"
#include "base/config.h"
#include "base/watch.h"
#include "bootstrap/crypto.h"
#include "base/live_handles.h"
#include "base/dtype.h"
#include "core/premul.h"
#include "bootstrap/tls.h"
#include "bootstrap/versions.h"
#include "transport/transport.h"

#include "device/runtime.h"

namespace clb {

clbResult_t checkTag(const MsgTag& got, const MsgTag& expect, int fromRank, int myRank) {
  if (got.op == expect.op && got.index == expect.index && got.bytes == expect.bytes) return clbSuccess;
  if (!(got.op == expect.op))
    return setError(clbRemoteError,
                    "rank %d is in %s but rank %d sent data for %s: every rank must make the same "
                    "collective calls in the same order with the same count, type, op and root",
                    myRank, describe(expect.op).c_str(), fromRank, describe(got.op).c_str());
  return setError(clbRemoteError,
                  "rank %d expected message %llu of %llu bytes from rank %d in %s, got message %llu of %llu "
                  "bytes: the ranks disagree on the call (count or options such as chunkBytes differ)",
                  myRank, (unsigned long long)expect.index, (unsigned long long)expect.bytes, fromRank,
                  describe(expect.op).c_str(), (unsigned long long)got.index, (unsigned long long)got.bytes);
}

namespace {

// The communicators alive in this process: made by clbCommInitRank(Abortable) or clbCommSplit and
// not destroyed yet (live_handles.h). Never freed: calls may come until the process exits.
LiveHandles<clbComm>& live() {
  static auto* s = new LiveHandles<clbComm>;
  return *s;
}

// `call`: the call to name first, or NULL.
clbResult_t notAlive(const char* call, const clbComm* c) {
  return setError(clbInvalidArgument,
                  "%s%scommunicator %p is not alive in this process: it was destroyed already (clbCommDestroy), "
                  "or was never made by clbCommInitRank or clbCommSplit; nothing was done: make a new one",
                  call ? call : "", call ? ": " : "", (const void*)c);
}

}  // namespace

void registerComm(const clbComm* c) { live().add(c); }

clbResult_t checkComm(clbComm* c) {
  if (!c) return setError(clbInvalidArgument, "communicator is NULL (was it created, or already destroyed?)");
  if (!live().contains(c)) return notAlive(nullptr, c);
  return clbSuccess;
}

clbResult_t tellRefusal(clbComm* c, clbResult_t rc, const char* call, uint32_t code, bool held, bool numbered) {
  if (!c || !live().contains(c)) return rc;
  const std::string why = lastError();
  // While another thread is in a call on c, this one is refused for that (a usage refusal, which
  // changes nothing), whatever its arguments: the call in progress goes on. Held, c stays (a
  // destroy from another thread is refused meanwhile).
  if (!held) CLB_CHECK(c->enterCall(code));
  // Suspended: every call is refused for that, whatever its arguments, and nothing changes.
  if (c->suspended.load()) {
    const clbResult_t usage = c->checkUsable();
    if (!held) c->leaveCall();
    return usage;
  }
  if (c->nranks < 2 || !c->carrier || c->failed.load() || c->aborted.load()) {
    if (!held) c->leaveCall();
    return setError(rc, "%s", why.c_str());
  }
  // A refused collective takes its number, as if it had been made: a peer that is still in the
  // calls before it (which ended on this rank) finishes them, and only its wait in this one ends
  // (the notices carry the number: Transport::waitNotice).
  if (numbered) c->seq.store(c->seq.load(std::memory_order_relaxed) + 1);
  // What the peers are told (markFailed takes the thread's last error), then what this rank says.
  const size_t n = strlen(call);
  if (why.compare(0, n, call) == 0 && why.compare(n, 1, ":") == 0)
    setError(rc, "rank %d refused %s", c->rank, why.c_str());
  else
    setError(rc, "rank %d refused its %s: %s", c->rank, call, why.c_str());
  c->markFailed(rc);
  if (!held) c->leaveCall();
  return setError(rc,
                  "%s. The communicator fails with it on every rank, its peers told at once (they would wait for "
                  "this call until their timeout): destroy (close) it and make a new one",
                  why.c_str());
}

clbResult_t refuseArguments(clbComm* c, clbResult_t rc, const char* call, uint32_t code, bool held, bool numbered) {
  // The refusals before anything moved; a failure midway (a timeout, a peer's failure, an abort)
  // marked c failed already, or comes from another thread's abort or destroy.
  const bool refusal = rc == clbInvalidArgument || rc == clbUnsupported || rc == clbOutOfMemory || rc == clbSystemError;
  return refusal ? tellRefusal(c, rc, call, code, held, numbered) : rc;
}

}  // namespace clb

using namespace clb;

clbComm::~clbComm() {
  // The order of old: the channels' device memory (a CommContext member, so destroyed after every
  // member of clbComm) lets go before the device runtime does, as it did when it was declared
  // after it; a channel of the carrier that still holds it keeps it until the carrier goes.
  peerDeviceMemory.reset();
  // The device objects (members of DeviceCommContext) go before those of clbComm (the transport
  // among them), while the whole communicator, which they may call, is alive.
  releaseDevice();
}

clbResult_t clbComm::refuseIfRevoked() const {
  if (!revoked) return clbSuccess;
  return setError(clbInvalidUsage,
                  "rank %d: the communicator was revoked (clbCommRevoke): make the next communicator with "
                  "clbCommShrink, or destroy it",
                  rank);
}

clbResult_t clbComm::checkUsable() const {
  CLB_CHECK(refuseIfRevoked());
  if (aborted) return setError(clbAborted, "the communicator was aborted: destroy it and create a new one");
  if (suspended)
    return setError(clbInvalidUsage,
                    "rank %d: the communicator is suspended (clbCommSuspend gave its memory back): call "
                    "clbCommResume on every rank before its next call; nothing was done",
                    rank);
  if (failed) {
    std::lock_guard<std::mutex> g(failureMutex);
    return setError(clbInvalidUsage,
                    "the communicator failed earlier and cannot be used: destroy it and create a "
                    "new one. The first failure was: %s",
                    failure.c_str());
  }
  return clbSuccess;
}

clbResult_t clbComm::refuseCall(uint32_t call, uint64_t current) const {
  const uint32_t other = (uint32_t)(current & 0xff);
  // A collective in progress is the one after those started before it: its number as describe() gives it.
  char inProgress[96];
  if (other >= kCallRegister || isPeerCall(other))
    snprintf(inProgress, sizeof inProgress, "%s", callName(other));
  else
    snprintf(inProgress, sizeof inProgress, "%s #%llu", callName(other), (unsigned long long)(current >> 8) + 1);
  if (call == kCallDestroy)
    return setError(clbInvalidUsage,
                    "rank %d: %s was called while another thread is in %s on this communicator, so nothing was "
                    "freed: make that call return first (clbCommAbort makes it return at once), then destroy",
                    rank, callName(call), inProgress);
  return setError(clbInvalidUsage,
                  "rank %d: %s was called while another thread is in %s on this communicator: a communicator takes "
                  "one call at a time (give each thread its own communicator, or serialize the calls)",
                  rank, callName(call), inProgress);
}

void clbComm::markFailed(clbResult_t code) {
  {
    std::lock_guard<std::mutex> g(failureMutex);
    if (failed.load()) return;
    failure = lastError();
    failureCode = code;
    failed.store(true);
  }
  // An abort stays an abort for the peers, whatever error it caused on this rank.
  if (carrier) carrier->announce(aborted ? PeerNotice::kAborted : PeerNotice::kFailed, failure.c_str());
}

clbResult_t clbComm::checkWait(int64_t startMs, const char* what, int peer) {
  if (aborted.load(std::memory_order_relaxed))
    return setError(clbAborted, "rank %d: the communicator was aborted (clbCommAbort) while waiting for %s", rank,
                    what);
  const int64_t now = nowMs();
  PeerNotice n;
  if (carrier && carrier->waitNotice(peer, &n)) {
    switch (n.kind) {
      case PeerNotice::kAborted:
        return setError(clbAborted, "rank %d aborted its communicator while rank %d waited for %s", n.origin, rank,
                        what);
      case PeerNotice::kClosed:
        return setError(clbRemoteError, "rank %d closed its communicator while rank %d waited for %s from it", n.origin,
                        rank, what);
      case PeerNotice::kGone:
        return setError(clbRemoteError, "rank %d (pid %d) exited or was killed while rank %d waited for %s", n.origin,
                        n.pid, rank, what);
      case PeerNotice::kFailed:
        if (n.reason)
          return setError(clbRemoteError,
                          "rank %d failed, so rank %d cannot finish (it waited for %s). Rank %d said: %.236s", n.origin,
                          rank, what, n.origin, n.reason);
        return setError(clbRemoteError,
                        "rank %d failed, so rank %d cannot finish (it waited for %s); see rank %d's error", n.origin,
                        rank, what, n.origin);
      case PeerNotice::kNone: break;  // a transport that says "notice" must say which: nothing ends the wait
    }
  }
  if (const int64_t cap = giveUpAtMs.load(std::memory_order_relaxed); cap && now > cap)
    return setError(clbTimeout,
                    "rank %d stopped waiting for %s: its communicator had failed, and its destroy waits "
                    "only a moment for what it sent",
                    rank, what);
  if (now - startMs > cfg.timeoutMs) {
    if (peer >= 0)
      return setError(clbTimeout,
                      "rank %d waited %lld ms for %s (rank %d, %s pid %d): is that rank stuck, or making "
                      "different calls? Raise the timeout with COLIBRI_TIMEOUT_MS if it is just slow",
                      rank, (long long)cfg.timeoutMs, what, peer, boot.peers()[peer].hostname, boot.peers()[peer].pid);
    return setError(clbTimeout,
                    "rank %d waited %lld ms for %s: is a peer stuck, or making different calls? Raise the "
                    "timeout with COLIBRI_TIMEOUT_MS if it is just slow",
                    rank, (long long)cfg.timeoutMs, what);
  }
  return clbSuccess;
}

clbResult_t clbComm::asyncStatus() {
  if (aborted.load())
    return setError(clbAborted, "rank %d: the communicator was aborted (clbCommAbort): destroy it", rank);
  if (failed.load()) {
    std::lock_guard<std::mutex> g(failureMutex);
    return setError(failureCode, "rank %d: a collective failed and the communicator cannot go on: %s", rank,
                    failure.c_str());
  }
  if (const clbResult_t rc = cuda::deviceStatus(this); rc != clbSuccess) return rc;
  PeerNotice n;
  if (carrier && carrier->statusNotice(&n)) {
    switch (n.kind) {
      case PeerNotice::kAborted: return setError(clbAborted, "rank %d aborted its communicator", n.origin);
      case PeerNotice::kGone:
        return setError(clbRemoteError, "rank %d (pid %d) exited or was killed without closing the communicator",
                        n.origin, n.pid);
      case PeerNotice::kFailed:
        if (n.reason)
          return setError(clbRemoteError, "rank %d failed, so this communicator cannot go on. Rank %d said: %.236s",
                          n.origin, n.origin, n.reason);
        return setError(clbRemoteError, "rank %d failed, so this communicator cannot go on; see rank %d's error",
                        n.origin, n.origin);
      case PeerNotice::kClosed:  // a peer that closed ended its part normally: no error of this one
      case PeerNotice::kNone: break;
    }
  }
  return clbSuccess;
}

extern "C" {

const char* clbGetErrorString(clbResult_t r) {
  switch (r) {
    case clbSuccess: return "success";
    case clbInvalidArgument: return "invalid argument";
    case clbInvalidUsage: return "invalid usage";
    case clbSystemError: return "system error";
    case clbInternalError: return "internal error";
    case clbRemoteError: return "remote error";
    case clbTimeout: return "timeout";
    case clbAborted: return "aborted";
    case clbAuthError: return "authentication error";
    case clbUnsupported: return "unsupported";
    case clbOutOfMemory: return "out of memory";
    default: return "unknown result code";
  }
}

const char* clbGetLastError(void) { return lastError().c_str(); }

clbResult_t clbGetVersion(int* version) {
  clearError();
  if (!version) return setError(clbInvalidArgument, "version is NULL");
  *version = CLB_VERSION_CODE;
  return clbSuccess;
}

size_t clbTypeSize(clbDataType_t t) {
  switch (t) {
    case clbInt8:
    case clbUint8: return 1;
    case clbFloat16:
    case clbBfloat16: return 2;
    case clbInt32:
    case clbUint32:
    case clbFloat32: return 4;
    case clbInt64:
    case clbUint64:
    case clbFloat64: return 8;
    default: return 0;
  }
}

// `detail`: the transport's link line ("" if none).
static void buildInfo(clbComm* c, const std::string& detail) {
  char b[1024];
  int n = snprintf(b, sizeof b,
                   "colibri %d.%d.%d rank %d/%d\ntransport: %s (%s)%s%s\nring: chunk %lld bytes, depth %d\n"
                   "direct: %s, up to %lld bytes\nstaging cap: %lld bytes\ntimeout: %lld ms\n",
                   CLB_VERSION_MAJOR, CLB_VERSION_MINOR, CLB_VERSION_PATCH, c->rank, c->nranks,
                   clbTransportName(c->transport), c->allOnOneHost ? "all ranks on one host" : "ranks on several hosts",
                   detail.empty() ? "" : "\nlink: ", detail.c_str(), (long long)c->cfg.chunkBytes, c->cfg.pipelineDepth,
                   c->carrier && c->carrier->direct() ? "available" : "unavailable (needs shm)",
                   (long long)c->cfg.directMaxBytes, (long long)c->cfg.stagingCapBytes, (long long)c->cfg.timeoutMs);
  c->info.assign(b, n < (int)sizeof b ? n : sizeof b - 1);
  switch (c->boot.tlsMode()) {
    case TlsMode::kOff: c->info += "tls: off\n"; break;
    case TlsMode::kBootstrap: c->info += "tls: bootstrap (the connections to the root)\n"; break;
    case TlsMode::kAll:
      c->info += "tls: all (every connection";
      if (TlsSession* s = c->boot.nextCtl().tls()) c->info += ", " + s->describe();
      c->info += ")\n";
      break;
  }
  c->info += describeVersions(c->boot.peers());
}

}  // extern "C": the steps below are C++ (comm.h)

clbResult_t clb::newComm(int rank, int nranks, const clbConfig_t* config, std::unique_ptr<clbComm>* out,
                         bool joinWhenRefused) {
  clbConfig_t cfg;
  std::string refused;
  if (clbResult_t rc = resolveConfig(config, &cfg)) {
    // A rank of several whose configuration is refused still joins, with its valid settings, only to
    // say so: the root refuses its hello and every rank fails at once instead of waiting for it.
    if (!joinWhenRefused || nranks < 2 || rc != clbInvalidArgument) return rc;
    refused = lastError().substr(0, lastError().find('\n'));  // the message, not where it was set
    salvageConfig(config, &cfg);  // the valid values (its timeout, say), the defaults for the rest
  }
  setLogLevelIfLower(cfg.logLevel);
  std::unique_ptr<clbComm> c(new (std::nothrow) clbComm());
  if (!c) return setError(clbOutOfMemory, "cannot allocate a communicator");
  c->rank = rank;
  c->nranks = nranks;
  c->cfg = cfg;
  c->refusedSettings = refused;
  c->versions = localVersions(cfg.versionCheck);
  c->deviceCfg = readDeviceConfig(cfg, nranks);
  c->agreed = agreedSettings(c->cfg, c->deviceCfg, refused.empty());
  *out = std::move(c);
  return clbSuccess;
}

Bootstrap::TableCheck clb::initTableCheck(clbComm* c) {
  // Every rank has the same table and takes the same decision on it (at init once the table is
  // gathered on the tree and checked, at a split before the child's ring connects): all fail, or
  // none does.
  const int rank = c->rank;
  return [rank](const std::vector<RankInfo>& table) {
    CLB_CHECK(checkVersions(table, rank));
    return checkAgreedSettings(table);
  };
}

static clbResult_t initComm(clbComm* c, const IdData& id) {
  clbResult_t rc =
      c->boot.init(id, c->rank, c->nranks, c->cfg.timeoutMs, &c->aborted, &c->versions, &c->agreed, initTableCheck(c));
  // A rank that joined only to say its configuration was refused reports that, whatever the
  // bootstrap made of it (the root refuses it at its hello and tells every rank).
  if (rc != clbSuccess && !c->refusedSettings.empty())
    return setError(clbInvalidArgument,
                    "rank %d: %s; every rank of the communicator refuses it, rather than wait for this rank until "
                    "the timeout: fix the setting",
                    c->rank, c->refusedSettings.c_str());
  CLB_CHECK(rc);
  return finishInit(c);
}

clbResult_t clb::finishInit(clbComm* c) {
  CLB_CHECK(createTransport(c, &c->ownedCarrier));
  c->carrier = c->ownedCarrier.get();
  const std::string detail = c->carrier ? c->carrier->describe() : std::string();
  buildInfo(c, detail);
  CLB_INFO("rank %d/%d ready: transport %s%s%s", c->rank, c->nranks, clbTransportName(c->transport),
           detail.empty() ? "" : ", ", detail.c_str());
  return clbSuccess;
}

namespace {

bool raised(const int* flag) { return flag && __atomic_load_n(flag, __ATOMIC_ACQUIRE); }

}  // namespace

extern "C" {

clbResult_t clbCommInitRank(clbComm_t* comm, const clbUniqueId* id, int rank, int nranks, const clbConfig_t* config) {
  return clbCommInitRankAbortable(comm, id, rank, nranks, config, nullptr);
}

clbResult_t clbCommInitRankAbortable(clbComm_t* comm, const clbUniqueId* id, int rank, int nranks,
                                     const clbConfig_t* config, const int* abortFlag) {
  clearError();
  if (!comm) return setError(clbInvalidArgument, "comm (output) is NULL");
  *comm = nullptr;
  if (nranks < 1) return setError(clbInvalidArgument, "nranks=%d: a communicator needs at least 1 rank", nranks);
  if (nranks > CLB_MAX_RANKS)
    return setError(clbInvalidArgument, "nranks=%d: a communicator has at most %d ranks (CLB_MAX_RANKS)", nranks,
                    CLB_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return setError(clbInvalidArgument, "rank=%d is out of range for nranks=%d: use 0..%d", rank, nranks, nranks - 1);
  IdData d;
  CLB_CHECK(decodeId(id, &d));
  std::unique_ptr<clbComm> c;
  clbResult_t rc = newComm(rank, nranks, config, &c, /*joinWhenRefused=*/true);
  if (rc != clbSuccess) {
    wipe(&d, sizeof d);
    return rc;
  }
  {
    // The caller's abort flag copied into the communicator's, which every wait of the init watches
    // (the bootstrap's and the transport's).
    std::optional<Watch> watch;
    if (abortFlag) {
      std::atomic<bool>* aborted = &c->aborted;
      watch.emplace([abortFlag] { return raised(abortFlag); }, [aborted] { aborted->store(true); });
    }
    rc = raised(abortFlag) ? setError(clbAborted, "it was aborted before it began") : initComm(c.get(), d);
  }
  wipe(&d, sizeof d);
  if (rc == clbSuccess && raised(abortFlag)) {
    // Aborted as it completed: the peers have this rank in their communicators, so it goes as an
    // aborted one does (they are told).
    c->aborted.store(true);
    if (c->carrier) c->carrier->announce(PeerNotice::kAborted, "aborted during its init");
    registerComm(c.get());  // destroyed as any communicator made
    clbCommDestroy(c.release());
    rc = setError(clbAborted, "it was aborted as it completed");
  }
  if (rc != clbSuccess) {
    appendBreadcrumb(__FILE__, __LINE__);
    std::string msg = lastError();
    c.reset();
    if (raised(abortFlag))
      return setError(clbAborted,
                      "rank %d of %d: the init was aborted (its abort flag was set) and freed what it "
                      "made: %s",
                      rank, nranks, msg.c_str());
    setError(rc, "%s", msg.c_str());
    return rc;
  }
  registerComm(c.get());
  *comm = c.release();
  return clbSuccess;
}

clbResult_t clbCommDestroy(clbComm_t c) {
  clearError();
  if (!c) return clbSuccess;
  {
    // Taken for good: nothing gives the communicator back, it is freed below. Under the lock of the
    // communicators alive, so that of two destroys one frees it and the other finds it gone.
    std::unique_lock<std::shared_mutex> g(live().mutex());
    if (!live().containsLocked(c)) return notAlive("clbCommDestroy", c);
    CLB_CHECK(c->enterCall(kCallDestroy));
    live().removeLocked(c);
  }
  releaseOps(c);
  if (c->carrier)
    c->carrier->close(c->aborted ? PeerNotice::kAborted : c->failed ? PeerNotice::kFailed : PeerNotice::kClosed);
  cuda::releaseCallMemory(c, false);
  c->carrier = nullptr;
  c->ownedCarrier.reset();
  c->boot.close();
  trimHostScratch(c);
  for (clb::IdData& d : c->growIds) {  // a grow id's root that still waits serves no grow now
    releaseRoot(d);
    wipe(&d, sizeof d);
  }
  delete c;
  clearError();
  return clbSuccess;
}

clbResult_t clbCommAbort(clbComm_t c) {
  clearError();
  CLB_CHECK(checkComm(c));
  c->aborted.store(true);
  if (c->carrier) c->carrier->announce(PeerNotice::kAborted, "aborted");
  return clbSuccess;
}

clbResult_t clbCommRevoke(clbComm_t c) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (c->revoked.exchange(true))
    return setError(clbInvalidUsage, "rank %d: the communicator was revoked already", c->rank);
  c->aborted.store(true);  // the calls in progress end, as at an abort; the peers are told
  if (c->carrier) c->carrier->announce(PeerNotice::kAborted, "revoked");
  return clbSuccess;
}

clbResult_t clbCommFail(clbComm_t c, const char* reason) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!reason || !*reason)
    return setError(clbInvalidArgument,
                    "reason is NULL or empty: say why the communicator cannot go on (its peers "
                    "are told)");
  setError(clbInvalidArgument, "%.400s", reason);
  c->markFailed(clbInvalidArgument);
  clearError();
  return clbSuccess;
}

clbResult_t clbCommRefuse(clbComm_t c, const char* callName, int collective, const char* reason) {
  // Copied before clearError (refusalReason); a NULL or empty name still refuses.
  const std::string why = refusalReason(reason, 400);
  const std::string named = callName && *callName ? std::string(callName, strnlen(callName, 100)) : "call";
  const char* call = named.c_str();
  clearError();
  CLB_CHECK(checkComm(c));
  setError(clbInvalidArgument, "%s", why.c_str());
  const clbResult_t rc = tellRefusal(c, clbInvalidArgument, call,
                                     collective ? uint32_t{kAllReduce} : uint32_t{kCallPeers}, false, collective != 0);
  // The reason (and what became of the communicator) with the call it is about.
  if (rc == clbInvalidArgument) setError(rc, "%.100s: %s", call, lastError().c_str());
  return rc;
}

clbResult_t clbCommGetAsyncError(clbComm_t c, clbResult_t* asyncError) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!asyncError) return setError(clbInvalidArgument, "asyncError (output) is NULL");
  *asyncError = c->asyncStatus();
  return clbSuccess;
}

clbResult_t clbCommRank(clbComm_t c, int* rank) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!rank) return setError(clbInvalidArgument, "rank (output) is NULL");
  *rank = c->rank;
  return clbSuccess;
}

clbResult_t clbCommCount(clbComm_t c, int* n) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!n) return setError(clbInvalidArgument, "nranks (output) is NULL");
  *n = c->nranks;
  return clbSuccess;
}

clbResult_t clbCommMemStats(clbComm_t c, clbMemStats_t* s) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!s) return setError(clbInvalidArgument, "stats (output) is NULL");
  s->hostBytes = c->mem.host.load();
  s->hostPeakBytes = c->mem.hostPeak.load();
  s->deviceBytes = c->mem.device.load();
  s->devicePeakBytes = c->mem.devicePeak.load();
  return clbSuccess;
}

clbResult_t clbCommTrim(clbComm_t c) {
  clearError();
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallTrim);
  CLB_CHECK(call.result());
  CLB_CHECK(c->refuseIfRevoked());
  if (c->failed || c->aborted) return clbSuccess;
  if (c->carrier) CLB_CHECK(c->carrier->trim());
  trimHostScratch(c);  // PreMulSum's scaled inputs (host buffers): made again by the next such call
  CLB_CHECK(cuda::trimCallMemory(c));
  return clbSuccess;
}

clbResult_t clbCommSuspend(clbComm_t c) {
  clearError();
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallSuspend);
  CLB_CHECK(call.result());
  CLB_CHECK(c->refuseIfRevoked());
  // A usage refusal changes nothing (a peer's suspend waits for this rank's as for any call it
  // does not make, until its timeout).
  if (c->suspended)
    return setError(clbInvalidUsage,
                    "rank %d: the communicator is suspended already: call clbCommResume before suspending it again",
                    c->rank);
  // A communicator that failed or was aborted, here or on a peer (its notice came), cannot: the
  // peers were told, or told this rank, so none waits in the exchange below for the other.
  CLB_CHECK(c->asyncStatus());
  // Collective: every rank says whether it can (a refusal on one is a refusal on all, nothing freed
  // anywhere), and no rank frees its memory before every rank's last call was launched, nor goes on
  // before every rank freed its own (a peer's kernels read it).
  struct Can {
    int32_t code;
    char why[252];
  };
  std::vector<Can> all(c->nranks);
  memset(all.data(), 0, all.size() * sizeof(Can));
  // The driver releases a destroyed graph's holds on a thread of its own, a little after
  // cudaGraphDestroy returns: a suspend right after the application destroyed its graphs waits
  // for that (at most kGraphReleaseWaitMs) instead of failing once and going through when tried
  // again. Graphs that still exist keep their holds, and the suspend is refused after the wait.
  constexpr int64_t kGraphReleaseWaitMs = 500;
  for (const int64_t until = nowMs() + kGraphReleaseWaitMs; c->capturedCallHolds->load() > 0 && nowMs() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (const int graphs = c->capturedCallHolds->load(); graphs > 0)
    all[c->rank].code = setError(clbInvalidUsage,
                                 "rank %d: %d call(s) of this communicator were captured in CUDA graphs that still "
                                 "exist, whose replays use the device memory that clbCommSuspend would give back: "
                                 "destroy those graphs and their instantiations (cudaGraphDestroy, "
                                 "cudaGraphExecDestroy) before suspending, and capture the calls again after "
                                 "clbCommResume",
                                 c->rank, graphs);
  else if (const size_t regs = cuda::registrationCount(c))
    all[c->rank].code = setError(clbInvalidUsage,
                                 "rank %d holds %zu registration(s) of buffers (clbCommRegister, "
                                 "ncclCommWindowRegister), whose mappings of the peers' buffers clbCommSuspend would "
                                 "give back: deregister them on every rank before suspending",
                                 c->rank, regs);
  snprintf(all[c->rank].why, sizeof all[c->rank].why, "%s", lastError().c_str());
  if (c->nranks > 1) {
    if (clbResult_t rc = c->boot.allGather(all.data(), sizeof(Can)); rc != clbSuccess) {
      c->markFailed(rc);
      return rc;
    }
  }
  for (int p = 0; p < c->nranks; p++)
    if (all[p].code != clbSuccess)
      return setError((clbResult_t)all[p].code, "%s%.252s", p == c->rank ? "" : "no rank suspended, because ",
                      all[p].why);
  clearError();
  cuda::releaseCallMemory(c, true);
  // No graph with a captured call exists (checked above) and the objects its replays moved on
  // are gone: the next calls start afresh, as before any capture.
  c->captured.store(false, std::memory_order_relaxed);
  // A failure here still reaches the barrier, which the peers wait in.
  const clbResult_t trimmed = c->carrier ? c->carrier->trim() : clbSuccess;
  const std::string trimError = trimmed != clbSuccess ? lastError() : std::string();
  trimHostScratch(c);
  if (c->nranks > 1) {
    if (clbResult_t rc = c->boot.barrier(); rc != clbSuccess) {
      c->markFailed(rc);
      return rc;
    }
  }
  if (trimmed != clbSuccess) {
    setError(trimmed, "rank %d: clbCommSuspend could not give its staging back: %s", c->rank, trimError.c_str());
    c->markFailed(trimmed);
    return trimmed;
  }
  c->suspended = true;
  CLB_INFO("rank %d: suspended (device memory held now: %lld bytes, host: %lld)", c->rank,
           (long long)c->mem.device.load(), (long long)c->mem.host.load());
  return clbSuccess;
}

clbResult_t clbCommResume(clbComm_t c) {
  clearError();
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallSuspend);
  CLB_CHECK(call.result());
  CLB_CHECK(c->refuseIfRevoked());
  if (!c->suspended)
    return setError(clbInvalidUsage, "rank %d: the communicator is not suspended (clbCommSuspend): nothing to resume",
                    c->rank);
  c->suspended = false;
  return clbSuccess;
}

clbResult_t clbCommSuspended(clbComm_t c, int* suspended) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!suspended) return setError(clbInvalidArgument, "suspended (output) is NULL");
  *suspended = c->suspended.load() ? 1 : 0;
  return clbSuccess;
}

clbResult_t clbCommLastAlgorithm(clbComm_t c, int* a) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!a) return setError(clbInvalidArgument, "algorithm (output) is NULL");
  *a = c->lastAlgo.load();
  return clbSuccess;
}

clbResult_t clbCommInfo(clbComm_t c, char* buf, size_t bytes) {
  clearError();
  CLB_CHECK(checkComm(c));
  if (!buf || bytes == 0) return setError(clbInvalidArgument, "buffer is NULL or empty");
  const std::string dev = cuda::describe(c);
  snprintf(buf, bytes, "%s%s", c->info.c_str(), dev.c_str());
  return clbSuccess;
}

clbResult_t clbCommRegister(clbComm_t c, void* buff, size_t bytes, void** handle) {
  clearError();
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallRegister);
  CLB_CHECK(call.result());
  CLB_CHECK(c->refuseIfRevoked());
  if (handle) *handle = nullptr;
  CLB_CHECK(c->checkUsable());
  return cuda::registerBuffer(c, buff, bytes, handle);
}

clbResult_t clbCommDeregister(clbComm_t c, void* handle) {
  clearError();
  CLB_CHECK(checkComm(c));
  CallScope call(c, kCallDeregister);
  CLB_CHECK(call.result());
  CLB_CHECK(c->refuseIfRevoked());
  bool taken = false;
  const clbResult_t rc = cuda::deregisterBuffer(c, handle, &taken);
  if (taken) return rc;
  if (!handle) return setError(clbInvalidArgument, "handle is NULL: pass what clbCommRegister returned");
  return setError(clbInvalidArgument, "rank %d: %p is not a registration of this communicator (it has none)", c->rank,
                  handle);
}

}  // extern "C"
