// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "device/watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"

namespace clb::cuda {

const char* collName(unsigned int coll) {
  switch (coll) {
    case CLB_DEV_ALLREDUCE: return "allReduce";
    case CLB_DEV_ALLGATHER: return "allGather";
    case CLB_DEV_REDUCESCATTER: return "reduceScatter";
    case CLB_DEV_BROADCAST: return "broadcast";
    case CLB_DEV_REDUCE: return "reduce";
  }
  return "a collective";
}

namespace {
const char* ranksIn(const volatile unsigned int* words, int nranks, unsigned long long call, char* buf, size_t bytes) {
  size_t at = 0;
  buf[0] = 0;
  for (int p = 0; p < nranks && p < CLB_MAX_DEVICE_RANKS && at + 8 < bytes; p++)
    if (words[p] == (unsigned int)call) at += snprintf(buf + at, bytes - at, "%s%d", at ? ", " : "", p);
  if (!at) snprintf(buf, bytes, "none known");
  return buf;
}
}  // namespace

const char* ranksWaitedFor(const volatile ClbDevHostStatus* s, int nranks, unsigned long long call, char* buf,
                           size_t bytes) {
  return ranksIn(s->waitingFor, nranks, call, buf, bytes);
}

const char* ranksTimedOutFor(const volatile ClbDevHostStatus* s, int nranks, unsigned long long call, char* buf,
                             size_t bytes) {
  return ranksIn(s->timedOutFor, nranks, call, buf, bytes);
}

namespace {

// A call's description as the kernels packed it (CLB_DEV_SIG): "allReduce of 4096 float32 (sum)".
std::string describeSig(unsigned long long sig) {
  const unsigned coll = sig & 0x7, type = (sig >> 3) & 0x1F, op = (sig >> 8) & 0x3F, root = (sig >> 14) & 0xFF;
  const unsigned long long count = sig >> 22;
  char b[160];
  if (coll == CLB_DEV_ALLREDUCE && root == CLB_DEV_SIG_BARRIER) return "barrier";
  if (coll == CLB_DEV_ALLREDUCE && root == CLB_DEV_SIG_WINDOW_BARRIER) return "barrier through windows";
  int at = snprintf(b, sizeof b, "%s of %llu %s%s", collName(coll), count, typeName((int)type),
                    coll == CLB_DEV_ALLGATHER || coll == CLB_DEV_REDUCESCATTER ? " per rank" : "");
  if (coll != CLB_DEV_BROADCAST && coll != CLB_DEV_ALLGATHER)
    at += snprintf(b + at, sizeof b - at, " (%s)", opName((int)op));
  if (root == CLB_DEV_SIG_WINDOW && coll != CLB_DEV_BROADCAST && coll != CLB_DEV_REDUCE)
    at += snprintf(b + at, sizeof b - at, " through windows");
  if (coll == CLB_DEV_BROADCAST || coll == CLB_DEV_REDUCE) snprintf(b + at, sizeof b - at, " with root %u", root);
  return b;
}

}  // namespace

clbResult_t deviceError(const volatile ClbDevHostStatus* s, int rank, int nranks, int64_t timeoutMs,
                        std::string* text) {
  std::atomic_thread_fence(std::memory_order_acquire);  // the fields the kernel wrote before `error`
  const unsigned long long call = s->errorCall;
  char b[512];
  if (s->errorKind == CLB_DEV_ERR_REPLAY) {
    snprintf(b, sizeof b,
             "rank %d's device call #%llu (%s) was captured in a CUDA graph while other ranks of this process share "
             "its GPU, and that graph was launched without clbGraphLaunch: such ranks replay their graphs through "
             "clbGraphLaunch (Java: Communicator.launchGraph) on every rank thread, which meets them before "
             "launching. The call did not run; the communicator cannot go on: destroy it",
             rank, call, collName(s->errorColl));
    *text = b;
    return clbInvalidUsage;
  }
  // A peer's call line that no call has: the peer failed this call itself, and says why.
  const unsigned long long peerSig = s->errorPeerSig;
  const bool gaveUp = peerSig == CLB_DEV_SIG_GAVEUP, replayed = peerSig == CLB_DEV_SIG_REPLAY,
             failed = peerSig == CLB_DEV_SIG_FAILED;
  if (s->errorKind == CLB_DEV_ERR_DISAGREE && (gaveUp || replayed || failed)) {
    snprintf(b, sizeof b,
             "rank %d's device call #%llu (%s) cannot finish: rank %d %s (see rank %d's error). The output of that "
             "call and of every later one on this communicator is undefined; destroy the communicator",
             rank, call, describeSig(s->errorSig).c_str(), (int)s->errorRank,
             gaveUp     ? "gave up waiting for the ranks in this call (its device wait timed out first)"
             : replayed ? "launched the CUDA graph holding its call without clbGraphLaunch"
                        : "will never make this call: its communicator failed before (a call it refused, or an error)",
             (int)s->errorRank);
    *text = b;
    return clbRemoteError;
  }
  if (s->errorKind == CLB_DEV_ERR_DISAGREE) {
    snprintf(b, sizeof b,
             "rank %d's device call #%llu (%s) is not rank %d's (%s): ranks must make the same calls in the same "
             "order with the same count, type, op and root. The output of that call and of every later one on this "
             "communicator is undefined; destroy the communicator",
             rank, call, describeSig(s->errorSig).c_str(), (int)s->errorRank, describeSig(s->errorPeerSig).c_str());
    *text = b;
    return clbRemoteError;
  }
  char ranks[128];
  snprintf(b, sizeof b,
           "a device wait of rank %d's device call #%llu (%s) timed out after %lld ms waiting for rank(s) %s (a peer "
           "died, hung, or made different calls): the output of that call and of every later one on this "
           "communicator is undefined; destroy the communicator",
           rank, call, collName(s->errorColl), (long long)timeoutMs,
           ranksTimedOutFor(s, nranks, call, ranks, sizeof ranks));
  *text = b;
  return clbTimeout;
}

namespace {

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Watched*> watched;
  bool running = false;
};

State& state() {
  static State* s = new State();  // never destroyed: the thread may outlive static destruction
  return *s;
}

void look(Watched* w) {
  const volatile ClbDevHostStatus* s = w->status;
  if (!s) return;  // a tick only (the point-to-point kernels': PeerDevice)
  char ranks[128];
  if (s->error && !w->saidError) {
    w->saidError = true;
    std::string text;
    deviceError(s, w->rank, w->nranks, w->timeoutMs, &text);
    CLB_LOG(clbLogError, "%s (clbCommGetAsyncError reports it)", text.c_str());
    return;
  }
  const unsigned long long stuck = s->stuckCall;
  if (w->warnMs > 0 && stuck && stuck != w->saidStuck && !s->error) {
    w->saidStuck = stuck;
    std::atomic_thread_fence(std::memory_order_acquire);  // what the kernel wrote before `stuckCall`
    CLB_WARN(
        "rank %d: device call #%llu (%s) has waited over %lld ms (of its %lld ms timeout) for rank(s) %s: is a "
        "rank stuck, dead or making other calls?",
        w->rank, stuck, collName(s->stuckColl), (long long)w->warnMs, (long long)w->timeoutMs,
        ranksWaitedFor(s, w->nranks, stuck, ranks, sizeof ranks));
  }
}

void loop() {
  State& st = state();
  std::unique_lock<std::mutex> g(st.mu);
  while (!st.watched.empty()) {
    for (Watched* w : st.watched) {
      if (w->tick) w->tick();
      look(w);
    }
    st.cv.wait_for(g, std::chrono::milliseconds(100));
  }
  st.running = false;
}

}  // namespace

void watchdogAdd(Watched* w) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  st.watched.push_back(w);
  if (!st.running) {
    st.running = true;
    std::thread(loop).detach();
  }
}

void watchdogRemove(Watched* w) {
  State& st = state();
  std::lock_guard<std::mutex> g(st.mu);
  st.watched.erase(std::remove(st.watched.begin(), st.watched.end(), w), st.watched.end());
  st.cv.notify_all();
}

}  // namespace clb::cuda
