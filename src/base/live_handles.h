// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The handles alive in this process (the C ABI's communicators, the drop-in's): a handle not
// among them is refused by every call (a second destroy, a call after it) instead of being read.
// Every call looks its handle up, so the lookup is read-mostly: each thread remembers the handles
// it found alive (8, by address) together with the registry's generation, which every removal
// advances; a lookup whose handle is remembered under the present generation takes no lock and
// writes nothing shared. Otherwise it asks the set under a shared lock. (A shared lock alone
// costs a write to the lock's cache line per call, which two threads on two cores calling at
// once make 50 to 280 ns: docs/performance.md.) A removal happens under the exclusive lock before
// the handle is freed, so a handle remembered as alive was alive when the generation was read.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <shared_mutex>
#include <unordered_set>

namespace clb {

template <class T>
class LiveHandles {
 public:
  void add(const T* p) {
    std::unique_lock<std::shared_mutex> g(mu_);
    set_.insert(p);
  }
  // Takes p out; whether it was in.
  bool remove(const T* p) {
    std::unique_lock<std::shared_mutex> g(mu_);
    return removeLocked(p);
  }
  bool contains(const T* p) {
    if (!p) return false;
    Seen& s = seen();
    const uint64_t gen = gen_.load(std::memory_order_acquire);  // before the set is asked
    const size_t i = std::hash<const T*>()(p) / alignof(T) % kSeen;
    if (s.gen == gen && s.handles[i] == p) return true;
    bool in;
    {
      std::shared_lock<std::shared_mutex> g(mu_);
      in = set_.count(p) != 0;
    }
    if (s.gen != gen) s = Seen{gen, {}};
    if (in) s.handles[i] = p;
    return in;
  }
  // For a caller that checks and removes under one exclusive lock with a step between.
  std::shared_mutex& mutex() { return mu_; }
  bool containsLocked(const T* p) const { return set_.count(p) != 0; }
  bool removeLocked(const T* p) {
    const bool was = set_.erase(p) == 1;
    gen_.fetch_add(1, std::memory_order_release);
    return was;
  }

 private:
  static constexpr size_t kSeen = 8;
  struct Seen {
    uint64_t gen = ~0ull;
    const T* handles[kSeen] = {};
  };
  static Seen& seen() {
    static thread_local Seen s;
    return s;
  }
  std::shared_mutex mu_;
  std::unordered_set<const T*> set_;
  alignas(64) std::atomic<uint64_t> gen_{0};  // read by every call: apart from the lock's line
};

}  // namespace clb
