// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "device/launch_meet.h"

#include <map>
#include <mutex>

namespace clb {

namespace {
std::mutex gMeetsMutex;

std::map<std::string, std::weak_ptr<LaunchMeet>>& meets() {
  static auto* m = new std::map<std::string, std::weak_ptr<LaunchMeet>>();  // never destroyed: used until exit
  return *m;
}
}  // namespace

LaunchMeet::LaunchMeet(const std::vector<int>& ranks) : ranks_(ranks), m_(new Member[ranks.size()]) {}

std::shared_ptr<LaunchMeet> LaunchMeet::join(const std::string& key, const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> g(gMeetsMutex);
  auto& all = meets();
  for (auto it = all.begin(); it != all.end();) it = it->second.expired() ? all.erase(it) : std::next(it);
  if (auto it = all.find(key); it != all.end())
    if (auto m = it->second.lock(); m && m->ranks_ == ranks) return m;
  auto m = std::make_shared<LaunchMeet>(ranks);
  all[key] = m;
  return m;
}

int LaunchMeet::indexOf(int rank) const {
  for (size_t i = 0; i < ranks_.size(); i++)
    if (ranks_[i] == rank) return (int)i;
  return -1;
}

void LaunchMeet::bump() {
  word_.fetch_add(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) != 0) futexWakeAll(&word_);
}

bool LaunchMeet::everyone(uint64_t k, bool launchedPhase) const {
  for (size_t j = 0; j < ranks_.size(); j++)
    if ((launchedPhase ? m_[j].launched : m_[j].arrived).load(std::memory_order_acquire) < k) return false;
  return true;
}

std::string LaunchMeet::missing(uint64_t k, bool launchedPhase) const {
  std::string s;
  for (size_t j = 0; j < ranks_.size(); j++) {
    const auto& c = launchedPhase ? m_[j].launched : m_[j].arrived;
    if (c.load(std::memory_order_acquire) < k) s += (s.empty() ? "" : ", ") + std::to_string(ranks_[j]);
  }
  return s;
}

clbResult_t LaunchMeet::arrive(CommContext* comm, const OpDesc& call, int64_t warnMs) {
  const int i = indexOf(comm->rank);
  if (i < 0) return setError(clbInternalError, "rank %d is not a member of its launch meeting", comm->rank);
  Member& me = m_[i];
  const uint64_t k = me.arrived.load(std::memory_order_relaxed) + 1;
  const int n = size();
  const uint64_t complete = 2 * k * (uint64_t)n;  // round_ when every member arrived at meeting k
  me.call = call;                                 // read by the others only after the meeting completes
  me.arrived.store(k, std::memory_order_release);
  // An arrival counts only while nobody gave up: once the bit is set round_ stops moving, so a
  // meeting that did not complete before it never does, and (round_ without the bit) >= complete
  // says for good that this meeting completed, whenever the bit was set (a later give-up, in
  // launched(), must not undo a meeting the others already went on from).
  for (uint64_t r = round_.load(std::memory_order_acquire);
       !(r & 1) && !round_.compare_exchange_weak(r, r + 2, std::memory_order_acq_rel);) {
  }
  bump();
  auto decided = [&] {
    const uint64_t r = round_.load(std::memory_order_acquire);
    return (r & 1) || r >= complete;
  };
  bool warned = warnMs <= 0;
  auto tick = [&](int64_t waitedMs) {
    if (warned || waitedMs < warnMs) return;
    warned = true;
    CLB_WARN(
        "rank %d has waited %lld ms (of its %lld ms timeout) in %s for rank(s) %s, which share its GPU and "
        "process, to make the same call: is one of those threads blocked, or making other calls? (One thread "
        "cannot issue the calls of several ranks of one GPU in turn.)",
        comm->rank, (long long)waitedMs, (long long)comm->cfg.timeoutMs, describe(call).c_str(),
        missing(k, false).c_str());
  };
  // A fixed `what`: the call's description is formatted only for the messages of a failed wait,
  // not on every call.
  clbResult_t rc = waitUntil(comm, decided, &word_, &waiters_, "the ranks sharing its GPU to enter the same call",
                             CommContext::kClosesAreFine, tick);
  uint64_t r = round_.load(std::memory_order_acquire);
  if (rc != clbSuccess) {
    // Give up, unless the meeting completed meanwhile: one compare-and-swap decides which.
    while (!(r & 1) && r < complete && !round_.compare_exchange_weak(r, r | 1, std::memory_order_acq_rel)) {
    }
    if ((r & ~1ull) >= complete) {
      rc = clbSuccess;  // everyone came after all: go on like the others
    } else {
      int none = -1;
      gaveUp_.compare_exchange_strong(none, comm->rank, std::memory_order_acq_rel);
      bump();
      if (rc == clbTimeout)
        rc = setError(clbTimeout,
                      "rank %d waited %lld ms in %s for rank(s) %s, which share its GPU and process, to make the "
                      "same call: is one of those threads stuck, or making different calls? (Nothing was launched. "
                      "One thread cannot issue the calls of several ranks of one GPU in turn: give each rank its "
                      "own thread, or set COLIBRI_DEVICE_MEET=off. Raise the timeout with COLIBRI_TIMEOUT_MS if it "
                      "is just slow.)",
                      comm->rank, (long long)comm->cfg.timeoutMs, describe(call).c_str(), missing(k, false).c_str());
      return rc;
    }
    r = round_.load(std::memory_order_acquire);
  }
  if ((r & ~1ull) < complete) {  // a member gave up before this meeting completed: nobody launches
    const std::string gone = missing(k, false);
    return setError(clbRemoteError,
                    "rank %d, which shares rank %d's GPU and process, stopped waiting for %s%s (see its error), so "
                    "%s cannot run: destroy the communicator",
                    gaveUp_.load(), comm->rank, gone.empty() ? "the others" : "rank(s) ", gone.c_str(),
                    describe(call).c_str());
  }
  for (int j = 0; j < n && rc == clbSuccess; j++) {
    const OpDesc& other = m_[j].call;
    if (!(other == call))
      rc = setError(clbInvalidUsage,
                    "rank %d called %s but rank %d, which shares its GPU and process, called %s: every rank must "
                    "make the same collective calls in the same order with the same count, type, op and root",
                    comm->rank, describe(call).c_str(), ranks_[j], describe(other).c_str());
  }
  if (rc != clbSuccess) {
    // Nothing launched. Leave only once every member has compared (its next call rewrites `call`).
    const std::string why = lastError();
    launched(comm);
    return setError(rc, "%s", why.c_str());
  }
  return clbSuccess;
}

clbResult_t LaunchMeet::launched(CommContext* comm) {
  const int i = indexOf(comm->rank);
  Member& me = m_[i];
  const uint64_t k = me.arrived.load(std::memory_order_relaxed);
  me.launched.store(k, std::memory_order_release);
  bump();
  auto all = [&] { return everyone(k, true); };
  clbResult_t rc = waitUntil(comm, all, &word_, &waiters_, "the ranks sharing its GPU to launch their kernels",
                             CommContext::kClosesAreFine);
  if (rc != clbSuccess) {  // no later meeting can complete
    int none = -1;
    gaveUp_.compare_exchange_strong(none, comm->rank, std::memory_order_acq_rel);
    round_.fetch_or(1, std::memory_order_acq_rel);
    bump();
  }
  if (rc == clbTimeout)
    rc = setError(clbTimeout,
                  "rank %d launched its kernels but rank(s) %s, which share its GPU and process, did not "
                  "within %lld ms (every rank had entered the call)",
                  comm->rank, missing(k, true).c_str(), (long long)comm->cfg.timeoutMs);
  return rc;
}

}  // namespace clb
