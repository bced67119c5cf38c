// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "transport/verbs/user_regs.h"

#include <unistd.h>

#include <algorithm>

#include "base/error.h"

namespace clb {
namespace verbs {

// How many collectives an allocation that could not be registered is not asked about again.
constexpr uint64_t kUserRetryCalls = 64;

void UserRegs::hit(Entry& e, ibv_mr** mr) {
  e.lastUse = calls_;
  e.lastTouch = ++clock_;
  stats_.hits++;
  *mr = e.mr;
}

clbResult_t UserRegs::find(const void* p, size_t len, ibv_mr** mr) {
  *mr = nullptr;
  if (maxRegs_ == 0 || !usable()) return clbSuccess;  // the cache is off: every message copied
  // A buffer already looked up in this collective is the same allocation (the call is
  // synchronous: the caller cannot free it meanwhile): no driver query per chunk.
  const char* b = static_cast<const char*>(p);
  for (Entry& e : entries_) {
    const char* lo = static_cast<const char*>(e.range.base);
    if (e.mr && e.lastUse == calls_ && b >= lo && b + len <= lo + e.range.bytes) {
      hit(e, mr);
      return clbSuccess;
    }
  }
  clbNetUserRange_v1_t r{};
  int found = 0;
  CLB_CHECK(device_->lookup(device_->self, p, len, &r, &found));
  if (!found) return clbSuccess;
  for (size_t i = 0; i < entries_.size(); i++) {
    Entry& e = entries_[i];
    if (e.range.base != r.base) continue;
    if (e.range.id == r.id && e.range.bytes == r.bytes) {
      if (!e.mr && calls_ - e.lastUse < kUserRetryCalls) return clbSuccess;  // failed lately: copied
      if (e.mr) {
        hit(e, mr);
        return clbSuccess;
      }
    } else {
      stats_.stale += e.mr ? 1 : 0;  // freed, and something else allocated at the same address
    }
    CLB_CHECK(drop(i));
    break;
  }
  if ((int64_t)r.bytes > capBytes_) return clbSuccess;  // never cached: copied
  int fd = -1;
  ibv_mr* m = nullptr;
  if (device_->exportRange(device_->self, r.base, r.bytes, &fd) == clbSuccess) {
    m = fd >= 0 ? (api_->regDmabufMr
                       ? api_->regDmabufMr(pd_, 0, r.bytes, (uint64_t)(uintptr_t)r.base, fd, IBV_ACCESS_LOCAL_WRITE)
                       : nullptr)
                : api_->regMr(pd_, r.base, r.bytes, IBV_ACCESS_LOCAL_WRITE);
    if (fd >= 0) close(fd);
  }
  if (!m) {
    CLB_DEBUG("rank %d: verbs: a user buffer of %zu bytes at %p cannot be registered (%s); its messages are copied",
              rank_, r.bytes, r.base, lastError().c_str());
    clearError();
    entries_.push_back(Entry{r, nullptr, calls_, ++clock_});
    return clbSuccess;
  }
  // Room for it: least recently used entries go (only now that the new one exists, so a failed
  // registration never costs a good one).
  entries_.push_back(Entry{r, m, calls_, ++clock_});
  stats_.cachedBytes += (int64_t)r.bytes;
  stats_.registered++;
  CLB_CHECK(evict());
  stats_.cached = 0;
  for (const Entry& e : entries_) stats_.cached += e.mr ? 1 : 0;
  *mr = m;
  return clbSuccess;
}

clbResult_t UserRegs::drop(size_t i) {
  Entry& e = entries_[i];
  if (e.mr) {
    CLB_CHECK(quiesce_());  // a message in flight may be read from it
    api_->deregMr(e.mr);
    stats_.cachedBytes -= (int64_t)e.range.bytes;
    stats_.cached--;
  }
  entries_.erase(entries_.begin() + (long)i);
  return clbSuccess;
}

clbResult_t UserRegs::beginCall() {
  calls_++;
  if (entries_.empty() || !device_ || !device_->lookup) return clbSuccess;
  const size_t i = (size_t)(calls_ % entries_.size());
  Entry& e = entries_[i];
  clbNetUserRange_v1_t now{};
  int found = 0;
  CLB_CHECK(device_->lookup(device_->self, e.range.base, 1, &now, &found));
  if (found && now.base == e.range.base && now.id == e.range.id && now.bytes == e.range.bytes) return clbSuccess;
  stats_.stale += e.mr ? 1 : 0;
  return drop(i);
}

clbResult_t UserRegs::evict() {
  for (;;) {
    size_t held = 0;
    for (const Entry& e : entries_) held += e.mr ? 1 : 0;
    if (held <= maxRegs_ && stats_.cachedBytes <= capBytes_) break;
    size_t lru = entries_.size();
    for (size_t i = 0; i < entries_.size(); i++)
      if (entries_[i].mr && (lru == entries_.size() || entries_[i].lastTouch < entries_[lru].lastTouch)) lru = i;
    if (lru == entries_.size()) break;
    CLB_CHECK(drop(lru));
    stats_.evicted++;
  }
  // Remembered failures count against the entry limit too, oldest first.
  while (entries_.size() > 2 * std::max<size_t>(maxRegs_, 1)) {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); i++)
      if (!entries_[i].mr && (entries_[oldest].mr || entries_[i].lastTouch < entries_[oldest].lastTouch)) oldest = i;
    if (entries_[oldest].mr) break;
    CLB_CHECK(drop(oldest));
  }
  return clbSuccess;
}

clbResult_t UserRegs::setLimits(size_t maxRegs, int64_t capBytes) {
  maxRegs_ = maxRegs;
  capBytes_ = capBytes;
  return evict();
}

clbResult_t UserRegs::clear() {
  while (!entries_.empty()) CLB_CHECK(drop(entries_.size() - 1));
  return clbSuccess;
}

void UserRegs::deregisterAll() {
  for (Entry& e : entries_)
    if (e.mr) api_->deregMr(e.mr);
  entries_.clear();
  stats_.cached = 0;
  stats_.cachedBytes = 0;
}

}  // namespace verbs
}  // namespace clb
