// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "device/peer_meet.h"

#include <chrono>
#include <deque>
#include <set>

namespace clb {

namespace {
std::mutex gPeerMeetsMutex;

std::map<uint64_t, std::weak_ptr<PeerMeet>>& peerMeets() {
  static auto* m = new std::map<uint64_t, std::weak_ptr<PeerMeet>>();  // never destroyed: used until exit
  return *m;
}

std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

std::string sizes(const std::vector<uint64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 4; i++) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 4) s += ", ...";
  return s;
}

// "2 sends (1024, 1024 bytes)"
std::string messages(const std::vector<uint64_t>& v, const char* what) {
  std::string s = std::to_string(v.size()) + " " + what + (v.size() == 1 ? "" : "s");
  if (!v.empty()) s += " (" + sizes(v) + " bytes)";
  return s;
}
}  // namespace

std::shared_ptr<PeerMeet> PeerMeet::join(uint64_t session) {
  std::lock_guard<std::mutex> g(gPeerMeetsMutex);
  auto& all = peerMeets();
  for (auto it = all.begin(); it != all.end();) it = it->second.expired() ? all.erase(it) : std::next(it);
  if (auto it = all.find(session); it != all.end())
    if (auto m = it->second.lock()) return m;
  auto m = std::make_shared<PeerMeet>();
  all[session] = m;
  return m;
}

const PeerMeet::Edge* PeerMeet::edgeTo(const Member& m, int peer) const {
  for (const Edge& e : m.edges)
    if (e.peer == peer) return &e;
  return nullptr;
}

std::vector<int> PeerMeet::reach(int start, std::vector<int>* missing, std::string* mismatch) const {
  std::vector<int> seen{start};
  std::set<int> visited{start}, absent;
  std::deque<int> todo{start};
  while (!todo.empty()) {
    const int y = todo.front();
    todo.pop_front();
    const Member& my = members_.at(y);
    if (my.state == Member::kRefused && mismatch->empty()) *mismatch = my.failure;
    for (const Edge& e : my.edges) {
      auto it = members_.find(e.peer);
      // A refusal counts once for each of its peers: for their calls that paired with the refused one.
      const bool there = it != members_.end() && (it->second.state == Member::kArrived ||
                                                  (it->second.state == Member::kRefused && it->second.untold.count(y)));
      const Edge* back = there ? edgeTo(it->second, y) : nullptr;
      if (!back) {  // not in the call that pairs with y's yet
        absent.insert(e.peer);
        continue;
      }
      if (mismatch->empty() && (e.sends != back->recvs || e.recvs != back->sends)) {
        const bool sendsDiffer = e.sends != back->recvs;
        const std::vector<uint64_t>& mine = sendsDiffer ? e.sends : e.recvs;
        const std::vector<uint64_t>& theirs = sendsDiffer ? back->recvs : back->sends;
        char b[512];
        snprintf(
            b, sizeof b,
            "rank %d's device point-to-point batch has %s %s rank %d, whose batch has %s %s rank %d: between ranks "
            "of one process on one GPU, device sends and receives must pair up call for call (the same "
            "messages, of the same sizes, in one group on both sides); nothing was launched",
            y, messages(mine, sendsDiffer ? "send" : "receive").c_str(), sendsDiffer ? "to" : "from", e.peer,
            messages(theirs, sendsDiffer ? "receive" : "send").c_str(), sendsDiffer ? "from" : "to", y);
        *mismatch = b;
      }
      if (visited.insert(e.peer).second) {
        seen.push_back(e.peer);
        todo.push_back(e.peer);
      }
    }
  }
  for (int r : visited) absent.erase(r);
  missing->assign(absent.begin(), absent.end());
  return seen;
}

void PeerMeet::settle(int start) {
  std::vector<int> missing;
  std::string mismatch;
  const std::vector<int> ranks = reach(start, &missing, &mismatch);
  if (!mismatch.empty()) {
    for (int r : ranks) {
      Member& m = members_[r];
      if (m.state != Member::kArrived) continue;  // a refusing rank keeps its refusal
      m.state = Member::kFailed;
      m.failure = mismatch;
      for (int q : ranks)
        if (members_[q].state == Member::kRefused) members_[q].untold.erase(r);
    }
    version_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
    return;
  }
  if (!missing.empty()) return;  // the last of them to arrive completes the component
  auto comp = std::make_shared<Component>();
  comp->ranks = ranks;
  for (int r : ranks) {
    Member& m = members_[r];
    m.state = Member::kGo;
    m.component = comp;
  }
  version_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
}

void PeerMeet::pause(std::unique_lock<std::mutex>& lk) {
  // As waitUntil (bootstrap/comm_context.h): spin ~20 us, yield until ~300 us, then sleep (a wake-up
  // costs tens of microseconds, which an eager call of a few microseconds must not pay).
  const uint64_t seen = version_.load(std::memory_order_acquire);
  lk.unlock();
  const int64_t t0 = nowNs();
  bool moved = false;
  while (!moved && nowNs() - t0 < 20000)
    for (int i = 0; i < 32 && !moved; i++) {
      cpuRelax();
      moved = version_.load(std::memory_order_acquire) != seen;
    }
  while (!moved && nowNs() - t0 < 300000) {
    sched_yield();
    moved = version_.load(std::memory_order_acquire) != seen;
  }
  lk.lock();
  if (!moved && version_.load(std::memory_order_acquire) == seen) cv_.wait_for(lk, std::chrono::milliseconds(2));
}

clbResult_t PeerMeet::arrive(CommContext* comm, const std::vector<Edge>& edges, int64_t warnMs) {
  const int me = comm->rank;
  std::unique_lock<std::mutex> lk(mu_);
  Member& m = members_[me];
  if (m.state == Member::kRefused) m.state = Member::kOut;  // its previous call's refusal is done with
  if (m.state != Member::kOut)
    return setError(clbInternalError, "rank %d arrived at its point-to-point meeting while still in it", me);
  m.edges = edges;
  m.state = Member::kArrived;
  settle(me);
  const int64_t start = nowMs();
  bool warned = warnMs <= 0;
  while (m.state == Member::kArrived) {
    pause(lk);
    if (m.state != Member::kArrived) break;
    lk.unlock();
    clbResult_t rc =
        comm->checkWait(start, "its peers to make the matching point-to-point calls", CommContext::kClosesAreFine);
    lk.lock();
    if (m.state != Member::kArrived) break;  // decided meanwhile: go on like the others
    std::vector<int> missing;
    std::string mismatch;
    if (!warned && nowMs() - start >= warnMs) {
      warned = true;
      reach(me, &missing, &mismatch);
      CLB_WARN(
          "rank %d has waited %lld ms (of its %lld ms timeout) for rank(s) %s, which share its GPU and process, "
          "to make the device point-to-point calls that pair with its own: is one of those threads blocked, or "
          "making other calls first?",
          me, (long long)(nowMs() - start), (long long)comm->cfg.timeoutMs, joined(missing).c_str());
    }
    if (rc == clbSuccess) continue;
    reach(me, &missing, &mismatch);
    m.state = Member::kOut;
    m.edges.clear();
    if (rc == clbTimeout)
      return setError(clbTimeout,
                      "rank %d waited %lld ms for rank(s) %s, which share its GPU and process, to make the device "
                      "point-to-point calls that pair with its own (nothing was launched): is one of those threads "
                      "stuck, or making other calls first? Raise the timeout with COLIBRI_TIMEOUT_MS if it is just "
                      "slow",
                      me, (long long)comm->cfg.timeoutMs, joined(missing).c_str());
    return rc;
  }
  if (m.state == Member::kFailed) {
    const std::string why = m.failure;
    m.state = Member::kOut;
    m.edges.clear();
    m.failure.clear();
    return setError(clbInvalidUsage, "%s", why.c_str());
  }
  return clbSuccess;  // kGo
}

clbResult_t PeerMeet::launched(CommContext* comm) {
  const int me = comm->rank;
  std::unique_lock<std::mutex> lk(mu_);
  Member& m = members_[me];
  std::shared_ptr<Component> comp = m.component;
  m.state = Member::kOut;  // a later batch naming this rank waits for its next arrival
  m.edges.clear();
  m.component.reset();
  if (!comp) return setError(clbInternalError, "rank %d left a point-to-point meeting it had not gone from", me);
  comp->launched++;
  version_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
  const int64_t start = nowMs();
  while (comp->launched < comp->ranks.size()) {
    pause(lk);
    if (comp->launched >= comp->ranks.size()) break;
    lk.unlock();
    clbResult_t rc =
        comm->checkWait(start, "its peers to launch their point-to-point kernels", CommContext::kClosesAreFine);
    lk.lock();
    if (comp->launched >= comp->ranks.size()) break;
    if (rc == clbTimeout)
      return setError(clbTimeout,
                      "rank %d launched its point-to-point kernel but the rank(s) it waits for, %s, which "
                      "share its GPU and process, did not within %lld ms (every one had entered its call)",
                      me, joined(comp->ranks).c_str(), (long long)comm->cfg.timeoutMs);
    if (rc != clbSuccess) return rc;
  }
  return clbSuccess;
}

void PeerMeet::refuse(CommContext* comm, const std::vector<Edge>& edges, const std::string& why) {
  const int me = comm->rank;
  std::lock_guard<std::mutex> g(mu_);
  Member& m = members_[me];
  if (m.state != Member::kOut && m.state != Member::kRefused) return;  // (not reached: refusals come before arriving)
  m.edges = edges;
  m.state = Member::kRefused;
  m.untold.clear();
  for (const Edge& e : edges) m.untold.insert(e.peer);
  m.failure = "rank " + std::to_string(me) + " refused its device point-to-point call that pairs with this one (" +
              why + "), so nothing was launched";
  settle(me);  // the peers already waiting fail now
}

}  // namespace clb
