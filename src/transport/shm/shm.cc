// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "transport/shm/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <map>
#include <mutex>

#include "base/error.h"

namespace clb {
namespace {

constexpr uint32_t kCtlMagic = 0x4c54434c;  // "LCTL"
constexpr size_t kCtlBytes = 4096;
constexpr size_t kAlign = 4096;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Opens an existing segment to look at it. O_NONBLOCK: a FIFO someone put in /dev/shm under a
// Colibri name would otherwise block the open.
int openToLook(const char* name) { return shm_open(name, O_RDONLY | O_NONBLOCK, 0); }

// Whether the segment `name` is the file open as fd (the name was not removed, or made again).
bool namesFile(const char* name, int fd) {
  int g = openToLook(name);
  if (g < 0) return false;
  struct stat a {
  }, b{};
  bool same = fstat(fd, &a) == 0 && fstat(g, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  close(g);
  return same;
}

// Creates `name` (O_EXCL) and takes its maker's lock, never waiting for it. A cleaner may judge
// the name between the two (nobody holds it yet): it then holds the file's lock and removes the
// name. The maker never removes a name it does not hold (a cleaner that checked the name before
// such a removal would remove the maker's next file under it): it waits until the cleaner removed
// it and makes it again. Once the lock is held and the name leads to this file, only this process
// removes it.
int createLocked(const char* name, int* out) {
  bool cleaned = false;  // a cleaner took a file of ours: the name goes away soon
  const int64_t until = nowMs() + 2000;
  for (;;) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST && cleaned && nowMs() < until) {
      sched_yield();
      continue;
    }
    if (fd < 0) return errno;
    int rc;
    while ((rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    const int e = errno;
    if (rc == 0 && namesFile(name, fd)) {
      *out = fd;
      return 0;
    }
    close(fd);  // the cleaner holds it, or removed its name already: it is gone or going
    if (rc != 0 && e != EWOULDBLOCK) return e;
    if (nowMs() >= until) return EAGAIN;
    cleaned = true;
    sched_yield();
  }
}

}  // namespace

std::string sessionSegmentPrefix(uint64_t session) {
  char b[40];
  snprintf(b, sizeof b, "%s%016" PRIx64 "-", kSegmentPrefix, session);
  return b;
}

std::string segmentName(uint64_t session, int rank, const std::string& what) {
  return "/" + sessionSegmentPrefix(session) + "r" + std::to_string(rank) + "-" + what;
}

void removeUnheldSegments(const std::string& prefix) {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (struct dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    const std::string name = std::string("/") + e->d_name;
    int fd = openToLook(name.c_str());
    if (fd < 0) continue;  // removed meanwhile, or another user's
    // Nobody holds it: its maker exited (the kernel let go of the lock) or was killed. (It is the
    // file the name leads to: a name made again meanwhile leads to another.)
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 && namesFile(name.c_str(), fd))
      shm_unlink(name.c_str());
    close(fd);
  }
  closedir(d);
}

bool ownerHoldsLock(int fd) {
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) return true;  // EWOULDBLOCK: held (anything else: say held)
  flock(fd, LOCK_UN);
  return false;
}

void unlinkSegment(const std::string& name, int* fd) {
  shm_unlink(name.c_str());  // before the lock goes: nobody else may remove a name while it is held
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

clbResult_t mapSegment(const std::string& name, size_t bytes, bool create, char** out, int* fd) {
  int f = -1;
  if (create) {
    if (int e = createLocked(name.c_str(), &f))
      return setSysError(e, "shm_open(%s) failed (is /dev/shm mounted and large enough?)", name.c_str());
  } else {
    f = shm_open(name.c_str(), O_RDWR, 0600);
    if (f < 0 && errno == ENOENT)  // a peer's segment: it made it, then removed it
      return setError(clbRemoteError,
                      "the shared memory %s of a peer rank is gone: that rank failed or exited during init (its "
                      "error says why)",
                      name.c_str());
    if (f < 0) return setSysError(errno, "shm_open(%s) failed (is /dev/shm mounted and large enough?)", name.c_str());
  }
  // posix_fallocate reserves the pages now: on a full /dev/shm the error comes here, not as a
  // SIGBUS at first touch.
  int fe = 0;
  if (create && (ftruncate(f, (off_t)bytes) != 0 || (fe = posix_fallocate(f, 0, (off_t)bytes)) != 0)) {
    int e = fe ? fe : errno;
    unlinkSegment(name, &f);
    return setSysError(e, "cannot size shared memory %s to %zu bytes (is /dev/shm full? docker: --shm-size)",
                       name.c_str(), bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  int e = errno;
  if (p == MAP_FAILED) {
    if (create)
      unlinkSegment(name, &f);
    else
      close(f);
    return setSysError(e, "mmap of shared memory %s (%zu bytes) failed", name.c_str(), bytes);
  }
  if (fd)
    *fd = f;
  else
    close(f);
  *out = static_cast<char*>(p);
  return clbSuccess;
}

namespace {
// The control blocks mapped in this process, by segment name, each mapped once however many of
// this process's ranks use it: rank threads of one process would otherwise map every rank's block
// once per rank (n x n mappings, and as many unmaps at destroy, each a TLB flush of every core
// that runs one of them). The last rank of the process to let go of a block unmaps it, so a block
// stays readable to its peers here after its owner destroyed its communicator, as a mapping of
// their own would.
struct SharedCtl {
  char* base;
  int refs;
};
std::mutex& gCtlMutex = *new std::mutex;  // never destroyed: ranks may end while statics go
std::map<std::string, SharedCtl>& gCtls = *new std::map<std::string, SharedCtl>;

// mapSegment for a control block. The creator maps it (it is new) and enters it in gCtls; a peer
// in this process (fd NULL) takes that mapping. A peer in another process (fd not NULL: its lock
// is tried through a descriptor of this rank's own) gets a mapping and a descriptor of its own.
// The mapping itself is made outside the lock (creating may wait for a sweep of another process).
clbResult_t mapControl(const std::string& name, bool create, char** out, int* fd) {
  if (!create && fd) return mapSegment(name, kCtlBytes, false, out, fd);
  if (!create) {
    std::lock_guard<std::mutex> g(gCtlMutex);
    auto it = gCtls.find(name);
    if (it != gCtls.end()) {
      it->second.refs++;
      *out = it->second.base;
      return clbSuccess;
    }
  }
  char* p = nullptr;
  CLB_CHECK(mapSegment(name, kCtlBytes, create, &p, fd));
  std::lock_guard<std::mutex> g(gCtlMutex);
  auto [it, made] = gCtls.try_emplace(name, SharedCtl{p, 1});
  if (!made) {  // another rank of this process mapped the same block meanwhile: one mapping
    munmap(p, kCtlBytes);
    it->second.refs++;
  }
  *out = it->second.base;
  return clbSuccess;
}

// Lets go of the control block `name` mapped at `base` (mapControl's).
void unmapControl(const std::string& name, char* base) {
  {
    std::lock_guard<std::mutex> g(gCtlMutex);
    auto it = gCtls.find(name);
    if (it != gCtls.end() && it->second.base == base) {
      if (--it->second.refs > 0) return;
      gCtls.erase(it);
    }
  }
  munmap(base, kCtlBytes);  // the last user of a shared mapping, or a mapping of its own
}
}  // namespace

std::string ShmWorld::segName(int rank, uint64_t gen, bool control) const {
  return segmentName(comm_->boot.sessionNonce(), rank, control ? std::string("ctl") : "g" + std::to_string(gen));
}

ShmWorld::~ShmWorld() {
  unmapOwn();
  for (auto& m : peers_)
    if (m.base) munmap(m.base, m.bytes);
  for (int r = 0; r < (int)ctls_.size(); r++)
    if (ctls_[r]) {
      if (r == comm_->rank) comm_->mem.addHost(-(int64_t)kCtlBytes);
      unmapControl(ctlNames_[r], reinterpret_cast<char*>(ctls_[r]));
    }
  // This rank's lock goes with them: peers see it gone from here on (its state says why).
  for (int fd : ctlFds_)
    if (fd >= 0) close(fd);
}

clbResult_t ShmWorld::init() {
  const int n = comm_->nranks, me = comm_->rank;
  // Segments left by processes that died (kill -9 leaves the names). One sweep at a time in this
  // process: ranks that init while another rank of it sweeps leave it to that one (each sweep
  // opens every segment of /dev/shm, so rank threads each sweeping made init n x n).
  {
    static std::mutex& sweeping = *new std::mutex;
    std::unique_lock<std::mutex> g(sweeping, std::try_to_lock);
    if (g.owns_lock()) removeUnheldSegments(kSegmentPrefix);
  }
  ctls_.assign(n, nullptr);
  ctlNames_.assign(n, std::string());
  for (int r = 0; r < n; r++) ctlNames_[r] = segName(r, 0, true);
  ctlFds_.assign(n, -1);
  peers_.assign(n, Mapping{});
  char* p = nullptr;
  const std::string& myName = ctlNames_[me];
  // Its lock is held until the communicator is destroyed: the peers' sign that this rank lives.
  CLB_CHECK(mapControl(myName, true, &p, &ctlFds_[me]));
  comm_->mem.addHost(kCtlBytes);
  ctls_[me] = new (p) CtlBlock();
  CtlBlock* c = ctls_[me];
  c->magic = kCtlMagic;
  c->rank = me;
  c->pid = getpid();
  // Every control block exists, and each rank says on which file system (its device number, the
  // same for all that share that /dev/shm, whatever their namespaces): ranks with the same host
  // name and boot id but /dev/shm of their own (containers with IPC namespaces of their own)
  // cannot meet there, and all fail at once, saying so.
  std::vector<uint64_t> shmDev(n, 0);
  struct stat st {};
  if (fstat(ctlFds_[me], &st) == 0) shmDev[me] = (uint64_t)st.st_dev;
  clbResult_t rc = comm_->boot.allGather(shmDev.data(), sizeof(uint64_t));
  for (int r = 0; rc == clbSuccess && r < n; r++)
    if (shmDev[r] != shmDev[me])
      rc = setError(clbInvalidUsage,
                    "rank %d and rank %d have the same host name and boot id but not the same /dev/shm (containers "
                    "with IPC namespaces of their own?), so the shm transport cannot connect them: give them one "
                    "/dev/shm (docker run --ipc=host, or one shared-memory volume mounted at /dev/shm in each), or "
                    "use transport socket (COLIBRI_TRANSPORT=socket)",
                    me, r);
  for (int r = 0; rc == clbSuccess && r < n; r++) {
    if (r == me) continue;
    // Kept open for ownerGone, but not for ranks of this process (they cannot die alone).
    rc = mapControl(ctlNames_[r], false, &p, comm_->boot.inThisProcess(r) ? nullptr : &ctlFds_[r]);
    if (rc == clbSuccess) ctls_[r] = reinterpret_cast<CtlBlock*>(p);
  }
  if (rc == clbSuccess) rc = comm_->boot.barrier();  // every control block is mapped by everyone
  shm_unlink(myName.c_str());                        // the name only: the lock stays
  CLB_CHECK(rc);
  for (int r = 0; r < n; r++)
    if (ctls_[r]->magic != kCtlMagic || ctls_[r]->rank != r)
      return setError(clbInternalError, "control block of rank %d is corrupt", r);
  return clbSuccess;
}

bool ShmWorld::ownerGone(int r) const {
  return r < (int)ctlFds_.size() && r != comm_->rank && ctlFds_[r] >= 0 && !ownerHoldsLock(ctlFds_[r]);
}

void ShmWorld::removeAbandoned() const { removeUnheldSegments(sessionSegmentPrefix(comm_->boot.sessionNonce())); }

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
  unlinkSegment(segName(comm_->rank, own_.gen, false), &own_.fd);
  comm_->mem.addHost(-(int64_t)own_.bytes);
  own_ = Mapping{};
}

clbResult_t ShmWorld::waitDrained() {
  CtlBlock* me = self();
  const int n = comm_->nranks;
  const uint64_t head = me->fifoHead.v.load();
  if (n > 1) {
    CtlBlock* nx = ctl((comm_->rank + 1) % n);
    CLB_CHECK(waitUntil(
        comm_, [&] { return nx->fifoTail.v.load(std::memory_order_acquire) >= head; }, &nx->fifoTail.v, &nx->waiters,
        "the next rank to consume this rank's ring messages", (comm_->rank + 1) % n));
  }
  for (int r = 0; r < n; r++) {
    if (r == comm_->rank || lastDirectSeq == 0) continue;
    CtlBlock* pr = ctl(r);
    CLB_CHECK(waitUntil(
        comm_, [&] { return pr->directDone.v.load(std::memory_order_acquire) >= lastDirectSeq; }, &pr->directDone.v,
        &pr->waiters, "a peer to finish reading this rank's scratch", r));
  }
  return clbSuccess;
}

clbResult_t ShmWorld::ensure(size_t slotBytes, size_t slots, size_t scratchBytes) {
  SegDesc& d = self()->seg;
  if (slotBytes == 0 && scratchBytes == 0) return clbSuccess;  // nothing to hold
  if (own_.base && d.slotBytes >= slotBytes && d.slots >= slots && d.scratchBytes >= scratchBytes) return clbSuccess;
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
  int fd = -1;
  CLB_CHECK(mapSegment(segName(comm_->rank, gen, false), total, true, &base, &fd));
  own_ = Mapping{gen, base, total, fd};
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
    CLB_CHECK(mapSegment(segName(r, gen, false), d.bytes, false, &p, nullptr));
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

ShmRingChannel::ShmRingChannel(CommContext* comm, ShmWorld* world)
    : comm_(comm),
      world_(world),
      next_((comm->rank + 1) % comm->nranks),
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
  if (bytes > d.slotBytes)
    return setError(clbInternalError, "message of %zu bytes > slot %llu", bytes, (unsigned long long)d.slotBytes);
  const uint64_t slots = d.slots;
  CLB_CHECK(waitUntil(
      comm_, [&] { return head_ - nx->fifoTail.v.load(std::memory_order_acquire) < slots; }, &nx->fifoTail.v,
      &nx->waiters, "the next rank to take a ring message", next_));
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
  CLB_CHECK(waitUntil(
      comm_, [&] { return pv->fifoHead.v.load(std::memory_order_acquire) > tail_; }, &pv->fifoHead.v, &pv->waiters,
      "a ring message from the previous rank", prev_));
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

ShmTransport::ShmTransport(CommContext* comm)
    : comm_(comm), world_(comm), ring_(comm, &world_), direct_(comm, &world_) {}

ShmTransport::~ShmTransport() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

clbResult_t ShmTransport::init() {
  CLB_CHECK(world_.init());
  // Where a peer process is in this PID namespace, a pidfd too: it also sees the death of a
  // process whose forked child still holds the lock. (Elsewhere its pid means another process.)
  pidfds_.assign(comm_->nranks, -1);
  for (int p = 0; p < comm_->nranks; p++) {
#ifdef SYS_pidfd_open
    if (!comm_->boot.inThisProcess(p) && comm_->boot.inThisPidNamespace(p))
      pidfds_[p] = (int)syscall(SYS_pidfd_open, comm_->boot.peers()[p].pid, 0);
#endif
  }
  return clbSuccess;
}

bool ShmTransport::peerGone(int p) const {
  bool gone = world_.ownerGone(p);
  if (!gone && p < (int)pidfds_.size() && pidfds_[p] >= 0) {
    struct pollfd f {
      pidfds_[p], POLLIN, 0
    };
    gone = poll(&f, 1, 0) == 1;
  }
  // A rank lets go of its lock when it destroys its communicator, after it said why (closed,
  // failed, aborted): then that is the news, not its death.
  return gone && world_.ctl(p)->state.load(std::memory_order_acquire) == kRunning;
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
    if (p == me || comm_->boot.inThisProcess(p)) continue;
    if (world_.ctl(p)->state.load(std::memory_order_acquire) == kClosed) continue;
    if (peerGone(p)) return *n = PeerNotice{PeerNotice::kGone, p, world_.ctl(p)->pid}, true;
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

bool ShmTransport::abandonedNotice(PeerNotice* n) {
  for (int p = 0; p < comm_->nranks; p++) {
    if (p == comm_->rank) continue;
    CtlBlock* c = world_.ctl(p);
    const uint32_t st = c->state.load(std::memory_order_acquire);
    if (st == kAborted) return *n = PeerNotice{PeerNotice::kAborted, p}, true;
    if (st == kClosed) continue;  // completed every call
    // (Not one that failed first and then went: its destroy lets go of its lock as a death does,
    // so peerGone cannot tell them apart; what it said of its device calls tells its peers.)
    if (peerGone(p)) return *n = PeerNotice{PeerNotice::kGone, p, (int)c->pid}, true;
  }
  return false;
}

void ShmTransport::announceDeviceEnd(uint64_t next) {
  std::atomic<uint64_t>& end = world_.self()->deviceEnd;
  uint64_t was = end.load(std::memory_order_relaxed);
  while (was != kDeviceEndEvery && !(next == kDeviceEndToldInBoxes && was != 0) &&
         !end.compare_exchange_weak(was, next, std::memory_order_release)) {
  }
}

uint64_t ShmTransport::deviceEnd(int p) const { return world_.ctl(p)->deviceEnd.load(std::memory_order_acquire); }

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
  // A peer process that died left its segments' names behind: the survivors remove them (only
  // names nobody holds the lock of: a live peer's stay).
  world_.removeAbandoned();
}

}  // namespace clb
