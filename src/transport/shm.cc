// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "core/error.h"

namespace clb {
namespace {

constexpr uint32_t kCtlMagic = 0x4c54434c;  // "LCTL"
constexpr size_t kCtlBytes = 4096;
constexpr size_t kAlign = 4096;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Unlinks every Colibri name in /dev/shm for which gone(name, creator's pid) says so.
template <class Gone>
void unlinkNames(Gone gone) {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (struct dirent* e = readdir(d)) {
    int pid = 0;
    if (sscanf(e->d_name, "clb-%d-", &pid) != 1 || pid <= 0 || !gone(e->d_name, pid)) continue;
    shm_unlink((std::string("/") + e->d_name).c_str());
  }
  closedir(d);
}

// Removes segments left behind by processes that died (kill -9 leaves /dev/shm names behind).
void sweepStale() {
  unlinkNames([](const char*, int pid) { return kill(pid, 0) != 0 && errno == ESRCH; });
}

}  // namespace

clbResult_t mapSegment(const std::string& name, size_t bytes, bool create, char** out) {
  int fd = shm_open(name.c_str(), create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR, 0600);
  if (fd < 0 && !create && errno == ENOENT)  // a peer's segment: it made it, then removed it
    return setError(clbRemoteError,
                    "the shared memory %s of a peer rank is gone: that rank failed or exited during init (its "
                    "error says why)", name.c_str());
  if (fd < 0)
    return setSysError(errno, "shm_open(%s) failed (is /dev/shm mounted and large enough?)", name.c_str());
  // posix_fallocate reserves the pages now: on a full /dev/shm the error comes here, not as a
  // SIGBUS at first touch.
  int fe = 0;
  if (create && (ftruncate(fd, (off_t)bytes) != 0 || (fe = posix_fallocate(fd, 0, (off_t)bytes)) != 0)) {
    int e = fe ? fe : errno;
    close(fd);
    shm_unlink(name.c_str());
    return setSysError(e, "cannot size shared memory %s to %zu bytes (is /dev/shm full? docker: --shm-size)",
                       name.c_str(), bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    return setSysError(e, "mmap of shared memory %s (%zu bytes) failed", name.c_str(), bytes);
  }
  *out = static_cast<char*>(p);
  return clbSuccess;
}


std::string ShmWorld::segName(int rank, uint64_t gen, bool control) const {
  char b[96];
  // The creator's pid leads the name so that a later init can remove it if that process died.
  int pid = comm_->boot.peers()[rank].pid;
  if (control)
    snprintf(b, sizeof b, "/clb-%d-%016" PRIx64 "-r%d-ctl", pid, comm_->boot.sessionNonce(), rank);
  else
    snprintf(b, sizeof b, "/clb-%d-%016" PRIx64 "-r%d-g%" PRIu64, pid, comm_->boot.sessionNonce(), rank, gen);
  return b;
}

ShmWorld::~ShmWorld() {
  unmapOwn();
  for (auto& m : peers_)
    if (m.base) munmap(m.base, m.bytes);
  for (int r = 0; r < (int)ctls_.size(); r++)
    if (ctls_[r]) {
      if (r == comm_->rank) comm_->mem.addHost(-(int64_t)kCtlBytes);
      munmap(ctls_[r], kCtlBytes);
    }
}

clbResult_t ShmWorld::init() {
  const int n = comm_->nranks, me = comm_->rank;
  sweepStale();
  ctls_.assign(n, nullptr);
  peers_.assign(n, Mapping{});
  char* p = nullptr;
  std::string myName = segName(me, 0, true);
  CLB_CHECK(mapSegment(myName, kCtlBytes, true, &p));
  comm_->mem.addHost(kCtlBytes);
  ctls_[me] = new (p) CtlBlock();
  CtlBlock* c = ctls_[me];
  c->magic = kCtlMagic;
  c->rank = me;
  c->pid = getpid();
  clbResult_t rc = comm_->boot.barrier();  // every control block exists
  for (int r = 0; rc == clbSuccess && r < n; r++) {
    if (r == me) continue;
    rc = mapSegment(segName(r, 0, true), kCtlBytes, false, &p);
    if (rc == clbSuccess) ctls_[r] = reinterpret_cast<CtlBlock*>(p);
  }
  if (rc == clbSuccess) rc = comm_->boot.barrier();  // every control block is mapped by everyone
  shm_unlink(myName.c_str());
  CLB_CHECK(rc);
  for (int r = 0; r < n; r++)
    if (ctls_[r]->magic != kCtlMagic || ctls_[r]->rank != r)
      return setError(clbInternalError, "control block of rank %d is corrupt", r);
  return clbSuccess;
}

void ShmWorld::removeSegmentsOf(int pid) const {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "clb-%d-%016" PRIx64 "-", pid, comm_->boot.sessionNonce());
  unlinkNames([&](const char* name, int) { return !strncmp(name, prefix, strlen(prefix)); });
}

// Any thread of this rank may announce, several at once (a call that failed while another thread
// aborts). Peers, in other threads or processes, copy the reason once they see kFailed, without a
// lock: so it is written once, by the first failure that gives one (the cause; later ones are its
// echoes), before the state that publishes it, and never rewritten under a reader. The state
// itself is the last one announced, as before.
void ShmWorld::setState(RankState s, const char* reason) {
  if (ctls_.empty() || !self()) return;
  CtlBlock* c = self();
  std::lock_guard<std::mutex> g(stateMutex_);
  if (reason && s == kFailed && !reasonWritten_) {
    strncpy(c->reason, reason, sizeof c->reason - 1);
    c->reason[sizeof c->reason - 1] = 0;
    reasonWritten_ = true;
  }
  c->state.store(s, std::memory_order_seq_cst);
}

void ShmWorld::unmapOwn() {
  if (!own_.base) return;
  munmap(own_.base, own_.bytes);
  shm_unlink(segName(comm_->rank, own_.gen, false).c_str());
  comm_->mem.addHost(-(int64_t)own_.bytes);
  own_ = Mapping{};
}

clbResult_t ShmWorld::waitDrained() {
  CtlBlock* me = self();
  const int n = comm_->nranks;
  const uint64_t head = me->fifoHead.v.load();
  if (n > 1) {
    CtlBlock* nx = ctl((comm_->rank + 1) % n);
    CLB_CHECK(waitUntil(comm_, [&] { return nx->fifoTail.v.load(std::memory_order_acquire) >= head; },
                        &nx->fifoTail.v, &nx->waiters, "the next rank to consume this rank's ring messages",
                        (comm_->rank + 1) % n));
  }
  for (int r = 0; r < n; r++) {
    if (r == comm_->rank || lastDirectSeq == 0) continue;
    CtlBlock* pr = ctl(r);
    CLB_CHECK(waitUntil(comm_, [&] { return pr->directDone.v.load(std::memory_order_acquire) >= lastDirectSeq; },
                        &pr->directDone.v, &pr->waiters, "a peer to finish reading this rank's scratch", r));
  }
  return clbSuccess;
}

clbResult_t ShmWorld::ensure(size_t slotBytes, size_t slots, size_t scratchBytes) {
  SegDesc& d = self()->seg;
  if (slotBytes == 0 && scratchBytes == 0) return clbSuccess;  // nothing to hold
  if (own_.base && d.slotBytes >= slotBytes && d.slots >= slots && d.scratchBytes >= scratchBytes)
    return clbSuccess;
  size_t newSlot = own_.base ? std::max<size_t>(d.slotBytes, slotBytes) : slotBytes;
  size_t newSlots = own_.base ? std::max<size_t>(d.slots, slots) : slots;
  size_t newScratch = own_.base ? std::max<size_t>(d.scratchBytes, scratchBytes) : scratchBytes;
  if (newSlot) newSlot = roundUp(newSlot, 64);
  size_t fifoBytes = newSlot ? newSlots * (sizeof(SlotHeader) + newSlot) : 0;
  size_t total = roundUp(fifoBytes, kAlign) + roundUp(newScratch, kAlign);
  if ((int64_t)total > comm_->cfg.stagingCapBytes)
    return setError(clbOutOfMemory,
                    "staging of %zu bytes needed, above the cap of %lld bytes: raise stagingCapBytes "
                    "(COLIBRI_STAGING_CAP_BYTES) or lower chunkBytes / pipelineDepth / directMaxBytes",
                    total, (long long)comm_->cfg.stagingCapBytes);
  CLB_CHECK(waitDrained());
  uint64_t gen = ++lastGen_;  // never reused: peers cache mappings by generation
  unmapOwn();
  char* base = nullptr;
  CLB_CHECK(mapSegment(segName(comm_->rank, gen, false), total, true, &base));
  own_ = Mapping{gen, base, total};
  comm_->mem.addHost((int64_t)total);
  d.bytes = total;
  d.fifoOffset = 0;
  d.slotBytes = newSlot;
  d.slots = newSlot ? newSlots : 0;
  d.scratchOffset = roundUp(fifoBytes, kAlign);
  d.scratchBytes = newScratch;
  d.gen.store(gen, std::memory_order_release);
  CLB_DEBUG("rank %d: shm segment gen %llu: %zu bytes (fifo %zu x %zu, scratch %zu)", comm_->rank,
            (unsigned long long)gen, total, (size_t)d.slots, newSlot, newScratch);
  return clbSuccess;
}

clbResult_t ShmWorld::peerBase(int r, char** base) {
  const SegDesc& d = ctl(r)->seg;
  uint64_t gen = d.gen.load(std::memory_order_acquire);
  Mapping& m = peers_[r];
  if (m.gen != gen) {
    if (m.base) munmap(m.base, m.bytes);
    m = Mapping{};
    if (gen == 0) return setError(clbInternalError, "rank %d has no data segment", r);
    char* p = nullptr;
    CLB_CHECK(mapSegment(segName(r, gen, false), d.bytes, false, &p));
    m = Mapping{gen, p, (size_t)d.bytes};
  }
  *base = m.base;
  return clbSuccess;
}

clbResult_t ShmWorld::trim() {
  if (own_.base) {
    CLB_CHECK(waitDrained());
    unmapOwn();
    self()->seg.gen.store(0, std::memory_order_release);
  }
  for (auto& m : peers_) {
    if (m.base) munmap(m.base, m.bytes);
    m = Mapping{};
  }
  return clbSuccess;
}

// ---- ring channel over shared memory ----

ShmRingChannel::ShmRingChannel(clbComm* comm, ShmWorld* world)
    : comm_(comm), world_(world), next_((comm->rank + 1) % comm->nranks),
      prev_((comm->rank + comm->nranks - 1) % comm->nranks) {}

char* ShmRingChannel::slot(char* base, const SegDesc& d, uint64_t index) const {
  return base + d.fifoOffset + (index % d.slots) * (sizeof(SlotHeader) + d.slotBytes);
}

clbResult_t ShmRingChannel::prepare(size_t maxBytes) {
  int depth = comm_->cfg.pipelineDepth < 2 ? 2 : comm_->cfg.pipelineDepth;
  return world_->ensure(maxBytes, (size_t)depth, 0);
}

clbResult_t ShmRingChannel::acquireSend(size_t bytes, void** buf) {
  CtlBlock* nx = world_->ctl(next_);
  const SegDesc& d = world_->self()->seg;
  if (bytes > d.slotBytes) return setError(clbInternalError, "message of %zu bytes > slot %llu", bytes, (unsigned long long)d.slotBytes);
  const uint64_t slots = d.slots;
  CLB_CHECK(waitUntil(comm_, [&] { return head_ - nx->fifoTail.v.load(std::memory_order_acquire) < slots; },
                      &nx->fifoTail.v, &nx->waiters, "the next rank to take a ring message", next_));
  sendSlot_ = slot(world_->ownBase(), d, head_);
  *buf = sendSlot_ + sizeof(SlotHeader);
  return clbSuccess;
}

clbResult_t ShmRingChannel::postSend(const MsgTag& tag) {
  reinterpret_cast<SlotHeader*>(sendSlot_)->tag = tag;
  head_++;
  CtlBlock* me = world_->self();
  storeAndWake(&me->fifoHead.v, head_, &me->waiters);
  return clbSuccess;
}

clbResult_t ShmRingChannel::waitRecv(const MsgTag& expect, const void** buf) {
  CtlBlock* pv = world_->ctl(prev_);
  CLB_CHECK(waitUntil(comm_, [&] { return pv->fifoHead.v.load(std::memory_order_acquire) > tail_; },
                      &pv->fifoHead.v, &pv->waiters, "a ring message from the previous rank", prev_));
  char* base = nullptr;
  CLB_CHECK(world_->peerBase(prev_, &base));
  char* s = slot(base, pv->seg, tail_);
  const MsgTag& got = reinterpret_cast<SlotHeader*>(s)->tag;
  CLB_CHECK(checkTag(got, expect, prev_, comm_->rank));
  *buf = s + sizeof(SlotHeader);
  return clbSuccess;
}

clbResult_t ShmRingChannel::releaseRecv() {
  tail_++;
  CtlBlock* me = world_->self();
  storeAndWake(&me->fifoTail.v, tail_, &me->waiters);
  return clbSuccess;
}

// ---- the transport ----

ShmTransport::ShmTransport(clbComm* comm)
    : comm_(comm), world_(comm), ring_(comm, &world_), direct_(comm, &world_) {}

ShmTransport::~ShmTransport() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

clbResult_t ShmTransport::init() {
  CLB_CHECK(world_.init());
  // A pidfd per peer process: its death (a zombie's too) is one poll away.
  pidfds_.assign(comm_->nranks, -1);
  for (int p = 0; p < comm_->nranks; p++) {
    const int pid = comm_->boot.peers()[p].pid;
#ifdef SYS_pidfd_open
    if (p != comm_->rank && pid != getpid()) pidfds_[p] = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
  }
  return clbSuccess;
}

bool ShmTransport::peerGone(int p) const {
  if (p < (int)pidfds_.size() && pidfds_[p] >= 0) {
    struct pollfd f{pidfds_[p], POLLIN, 0};
    return poll(&f, 1, 0) == 1;
  }
  const int pid = comm_->boot.peers()[p].pid;  // no pidfd (an old kernel, or this process): ask kill
  return pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

bool ShmTransport::waitNotice(int peer, PeerNotice* n) {
  const int me = comm_->rank;
  const uint64_t seq = comm_->seq;
  for (int p = 0; p < comm_->nranks; p++) {
    if (p == me) continue;
    CtlBlock* c = world_.ctl(p);
    uint32_t st = c->state.load(std::memory_order_acquire);
    // A peer that failed or aborted in a later collective completed this one (its data is sent).
    if ((st == kFailed || st == kAborted) && c->opSeq.v.load(std::memory_order_acquire) > seq) continue;
    if (st == kFailed) return *n = PeerNotice{PeerNotice::kFailed, p, 0, c->reason}, true;
    if (st == kAborted) return *n = PeerNotice{PeerNotice::kAborted, p}, true;
    if (st == kClosed && (peer == p || peer == -1)) return *n = PeerNotice{PeerNotice::kClosed, p}, true;
  }
  // A peer process that died cannot say so: look for it (cheap, at most every ~2 ms here). One
  // that closed its communicator first is not dead to it: it finished what it shared with us.
  for (int p = 0; p < comm_->nranks; p++) {
    int pid = world_.ctl(p)->pid;
    if (p == me || pid == getpid()) continue;
    if (world_.ctl(p)->state.load(std::memory_order_acquire) == kClosed) continue;
    if (peerGone(p)) return *n = PeerNotice{PeerNotice::kGone, p, pid}, true;
  }
  return false;
}

bool ShmTransport::statusNotice(PeerNotice* n) {
  for (int p = 0; p < comm_->nranks; p++) {
    if (p == comm_->rank) continue;
    CtlBlock* c = world_.ctl(p);
    uint32_t st = c->state.load(std::memory_order_acquire);
    if (st == kFailed) return *n = PeerNotice{PeerNotice::kFailed, p, 0, c->reason}, true;
    if (st == kAborted) return *n = PeerNotice{PeerNotice::kAborted, p}, true;
    // A peer that closed (and maybe exited since) completed every call: nothing here waits on it.
    if (st == kClosed) continue;
    if (peerGone(p)) return *n = PeerNotice{PeerNotice::kGone, p, (int)c->pid}, true;
  }
  return false;
}

void ShmTransport::announce(PeerNotice::Kind kind, const char* reason) {
  world_.setState(kind == PeerNotice::kAborted ? kAborted : kFailed, reason);
}

void ShmTransport::beginCollective(const OpDesc& d) {
  CtlBlock* me = world_.self();
  me->opDesc = d;
  me->opSeq.v.store(d.seq, std::memory_order_release);
}

void ShmTransport::close(PeerNotice::Kind end) {
  // A healthy rank lets peers read what it sent last before its memory goes away.
  if (end == PeerNotice::kClosed && world_.waitDrained() != clbSuccess)
    CLB_WARN("rank %d: destroy did not wait for peers to drain: %s", comm_->rank, lastError().c_str());
  for (auto& ch : peers_)
    if (end == PeerNotice::kClosed && ch && ch->waitDrained() != clbSuccess)
      CLB_WARN("rank %d: destroy did not wait for a peer to read its point-to-point messages: %s", comm_->rank,
               lastError().c_str());
  world_.setState(end == PeerNotice::kAborted ? kAborted : end == PeerNotice::kFailed ? kFailed : kClosed, nullptr);
  // A peer process that died left its segments' names behind: the survivors remove them.
  for (int p = 0; p < comm_->nranks; p++)
    if (p != comm_->rank && peerGone(p)) world_.removeSegmentsOf(comm_->boot.peers()[p].pid);
}

}  // namespace clb
