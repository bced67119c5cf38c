// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The registrations of user buffers that a verbs channel in device mode sends from without a
// copy (VerbsChannel::sendFrom): one per allocation (its registrable range and CUDA's buffer ID,
// through the core's clbNetDeviceMemory_v1_t lookup and exportRange), least recently used dropped
// beyond maxRegs entries or capBytes bytes, an entry dropped when its allocation was freed
// (another ID at the same base). An allocation that cannot be registered is remembered for a while
// so that the driver is asked about it once per kUserRetryCalls collectives, not per message.
//
// The cache owns its memory regions; the channel that holds it gives the protection domain and a
// `quiesce` that waits until no send is in flight (a message may still be read from an entry about
// to be dropped). Not thread-safe: the channel's thread drives it.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "colibri/colibri.h"
#include "colibri/net_plugin.h"
#include "transport/verbs/verbs_api.h"

namespace clb {
namespace verbs {

class UserRegs {
 public:
  struct Stats {
    size_t cached = 0;  // registrations held now (failed ones not counted)
    int64_t cachedBytes = 0;
    uint64_t registered = 0;  // registrations made
    uint64_t hits = 0;        // sends that found theirs cached
    uint64_t stale = 0;       // entries dropped because the allocation behind them changed
    uint64_t evicted = 0;     // entries dropped for room
  };

  // `device`: the core's device memory services (lookup and exportRange serve this cache);
  // `rank` for messages. Registrations are made in `pd` (set before the first find).
  UserRegs(const VerbsApi* api, const clbNetDeviceMemory_v1_t* device, size_t maxRegs, int64_t capBytes, int rank,
           std::function<clbResult_t()> quiesce)
      : api_(api), device_(device), maxRegs_(maxRegs), capBytes_(capBytes), rank_(rank), quiesce_(std::move(quiesce)) {}
  UserRegs(const UserRegs&) = delete;
  UserRegs& operator=(const UserRegs&) = delete;
  ~UserRegs() { deregisterAll(); }

  void setPd(ibv_pd* pd) { pd_ = pd; }
  // Whether sends may look here at all: device mode with the core's lookup and export.
  bool usable() const { return device_ && device_->lookup && device_->exportRange; }

  // A new collective (the channel's prepare): one cached entry is checked against its
  // allocation, so that one the caller freed is dropped within maxRegs collectives instead of
  // holding its memory (a dma-buf registration keeps a freed allocation alive).
  clbResult_t beginCall();
  // The registration of the user allocation holding [p, p + len): cached, else made and cached;
  // *mr NULL when it cannot be had (the message is copied).
  clbResult_t find(const void* p, size_t len, ibv_mr** mr);
  // New bounds, applied at once (least recently used dropped).
  clbResult_t setLimits(size_t maxRegs, int64_t capBytes);
  // Every entry dropped (the channel's trim), waiting for sends in flight first.
  clbResult_t clear();
  // Every registration released without waiting: for the channel's destructor, once its queue
  // pairs are gone and nothing reads them.
  void deregisterAll();

  Stats stats() const { return stats_; }

 private:
  struct Entry {
    clbNetUserRange_v1_t range;
    ibv_mr* mr;          // nullptr: the range could not be registered (remembered for a while)
    uint64_t lastUse;    // collective (calls_) of the last use, or of the failure
    uint64_t lastTouch;  // for least-recently-used order
  };
  clbResult_t drop(size_t i);  // waits until no send is in flight (one may read it)
  clbResult_t evict();         // until the bounds hold
  void hit(Entry& e, ibv_mr** mr);

  const VerbsApi* api_;
  const clbNetDeviceMemory_v1_t* device_;
  size_t maxRegs_;
  int64_t capBytes_;
  int rank_;
  std::function<clbResult_t()> quiesce_;
  ibv_pd* pd_ = nullptr;
  std::vector<Entry> entries_;
  uint64_t calls_ = 0;  // collectives (beginCall)
  uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace verbs
}  // namespace clb
