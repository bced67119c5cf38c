// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point over shared memory: one FIFO per direction and pair, in a segment the sender
// owns (shm.h, PeerFifo). Nothing is made for a peer before the first message to it, and a slot is
// only as large as the messages need: a pipeline stage that sends 8 KiB to its neighbour holds
// pipelineDepth x 8 KiB for it, and nothing for the other ranks.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "transport/shm/shm.h"

namespace clb {
namespace {

constexpr uint32_t kPeerMagic = 0x50324650;  // "PF2P"
constexpr size_t kMinSlot = 4096;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Maps the peer's FIFO `name` if it is there and complete; *base null when not yet.
clbResult_t openIfThere(const std::string& name, char** base, size_t* bytes) {
  *base = nullptr;
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    if (errno == ENOENT) return clbSuccess;  // not made yet
    return setSysError(errno, "shm_open(%s) of a peer's point-to-point FIFO failed", name.c_str());
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(PeerFifo)) {  // still being sized
    close(fd);
    return clbSuccess;
  }
  void* p = mmap(nullptr, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return setSysError(e, "mmap of a peer's point-to-point FIFO %s failed", name.c_str());
  PeerFifo* h = static_cast<PeerFifo*>(p);
  if (h->magic.load(std::memory_order_acquire) != kPeerMagic) {  // header not written yet
    munmap(p, (size_t)st.st_size);
    return clbSuccess;
  }
  *base = static_cast<char*>(p);
  *bytes = (size_t)st.st_size;
  return clbSuccess;
}

}  // namespace

ShmPeerChannel::~ShmPeerChannel() {
  dropOut();
  if (in_.base) munmap(in_.base, in_.bytes);
}

std::string ShmPeerChannel::name(int from, int to, uint64_t gen) const {
  return segmentName(comm_->boot.sessionNonce(), from, "p" + std::to_string(to) + "-g" + std::to_string(gen));
}

size_t ShmPeerChannel::maxMessageBytes() const { return (size_t)comm_->cfg.chunkBytes; }

char* ShmPeerChannel::slot(const Fifo& f, uint64_t index) const {
  const PeerFifo* h = f.hdr();
  return f.base + roundUp(sizeof(PeerFifo), 64) + (index % h->slots) * (sizeof(SlotHeader) + h->slotBytes);
}

void ShmPeerChannel::dropOut() {
  if (!out_.base) return;
  munmap(out_.base, out_.bytes);
  unlinkSegment(name(comm_->rank, peer_, out_.gen), &out_.fd);
  comm_->mem.addHost(-accounted_);
  accounted_ = 0;
  out_ = Fifo{};
}

clbResult_t ShmPeerChannel::remake(size_t bytes) {
  // Slots for this message, rounded to a power of two (so that growing messages remake it a few
  // times only), at most chunkBytes; pipelineDepth of them.
  size_t slotBytes = kMinSlot;
  while (slotBytes < bytes) slotBytes *= 2;
  slotBytes = std::min(slotBytes, std::max(kMinSlot, roundUp(maxMessageBytes(), 64)));
  const size_t slots = comm_->cfg.pipelineDepth < 2 ? 2 : (size_t)comm_->cfg.pipelineDepth;
  auto totalFor = [&](size_t slot) {
    return roundUp(roundUp(sizeof(PeerFifo), 64) + slots * (sizeof(SlotHeader) + slot), 4096);
  };
  // The cap covers all of this rank's staging (its ring segment and every FIFO it sends through).
  // No FIFO takes more than its share of it (cap / (nranks - 1)), so that an all-to-all finds
  // room for every peer; near the cap, smaller slots (more messages, the same data), down to 4 KiB.
  const int64_t share = comm_->cfg.stagingCapBytes / std::max(1, comm_->nranks - 1);
  while (slotBytes > kMinSlot && (int64_t)totalFor(slotBytes) > share) slotBytes /= 2;
  auto staging = [&] { return comm_->mem.host.load() - comm_->transientHost.load() - accounted_; };
  int64_t others = staging();
  if (others + (int64_t)totalFor(slotBytes) > comm_->cfg.stagingCapBytes) {
    owner_->trimPeers();  // first, what other peers' FIFOs hold and no longer need
    others = staging();
  }
  while (slotBytes > kMinSlot && others + (int64_t)totalFor(slotBytes) > comm_->cfg.stagingCapBytes) slotBytes /= 2;
  const size_t total = totalFor(slotBytes);
  capped_ = slotBytes < bytes;
  if (others + (int64_t)total > comm_->cfg.stagingCapBytes)
    return setError(clbOutOfMemory,
                    "rank %d: a point-to-point FIFO to rank %d of %zu bytes (%zu slots of %zu bytes) would take this "
                    "rank's staging to %lld bytes, above the cap of %lld bytes: raise stagingCapBytes "
                    "(COLIBRI_STAGING_CAP_BYTES), lower chunkBytes / pipelineDepth, or call clbCommTrim after calls "
                    "to peers no longer used",
                    comm_->rank, peer_, total, slots, slotBytes, (long long)(others + (int64_t)total),
                    (long long)comm_->cfg.stagingCapBytes);
  PeerFifo* old = out_.base ? out_.hdr() : nullptr;
  const uint64_t gen = outGens_ + 1;
  char* base = nullptr;
  int fd = -1;
  CLB_CHECK(mapSegment(name(comm_->rank, peer_, gen), total, true, &base, &fd));
  outGens_ = gen;
  PeerFifo* h = new (base) PeerFifo();
  h->bytes = total;
  h->slotBytes = slotBytes;
  h->slots = slots;
  h->head.v.store(head_, std::memory_order_relaxed);  // message numbers go on across generations
  h->tail.v.store(head_, std::memory_order_relaxed);
  h->magic.store(kPeerMagic, std::memory_order_release);
  if (old) {
    old->next.store(gen, std::memory_order_release);  // the receiver moves over once it read all
    munmap(out_.base, out_.bytes);
    unlinkSegment(name(comm_->rank, peer_, out_.gen), &out_.fd);
  }
  comm_->mem.addHost((int64_t)total - accounted_);
  accounted_ = (int64_t)total;
  out_ = Fifo{gen, base, total, fd};
  CLB_DEBUG("rank %d: point-to-point FIFO to rank %d, generation %llu: %zu x %zu bytes", comm_->rank, peer_,
            (unsigned long long)gen, slots, slotBytes);
  return clbSuccess;
}

clbResult_t ShmPeerChannel::trySend(size_t bytes, void** buf, size_t* room) {
  *buf = nullptr;
  // A FIFO that the cap made smaller takes shorter messages instead of growing.
  if (!out_.base || (bytes > out_.hdr()->slotBytes && !capped_)) {
    // A larger slot: only once the receiver consumed everything (it reads the old one first).
    if (out_.base && out_.hdr()->tail.v.load(std::memory_order_acquire) < head_) return clbSuccess;
    CLB_CHECK(remake(bytes));
  }
  PeerFifo* h = out_.hdr();
  if (head_ - h->tail.v.load(std::memory_order_acquire) >= h->slots) return clbSuccess;  // full
  sendSlot_ = slot(out_, head_);
  *buf = sendSlot_ + sizeof(SlotHeader);
  *room = std::min<size_t>(bytes, h->slotBytes);
  return clbSuccess;
}

void ShmPeerChannel::ringBell() {
  CtlBlock* p = world_->ctl(peer_);
  p->peerBell.v.fetch_add(1, std::memory_order_seq_cst);
  if (p->waiters.load(std::memory_order_seq_cst)) futexWakeAll(&p->peerBell.v);
}

clbResult_t ShmPeerChannel::postSend(const MsgTag& tag) {
  reinterpret_cast<SlotHeader*>(sendSlot_)->tag = tag;
  head_++;
  out_.hdr()->head.v.store(head_, std::memory_order_release);
  ringBell();
  return clbSuccess;
}

clbResult_t ShmPeerChannel::tryRecv(const MsgTag** tag, const void** buf) {
  *buf = nullptr;
  for (;;) {
    if (!in_.base) {
      size_t bytes = 0;
      CLB_CHECK(openIfThere(name(peer_, comm_->rank, inGen_), &in_.base, &bytes));
      // Gone after this rank let go of it drained (trim): the sender moved on to the next one
      // (which it makes with a message in it, so never more than one ahead).
      if (!in_.base && inGen_ == inMapped_) {
        CLB_CHECK(openIfThere(name(peer_, comm_->rank, inGen_ + 1), &in_.base, &bytes));
        if (in_.base) inGen_++;
      }
      if (!in_.base) return clbSuccess;
      inMapped_ = inGen_;
      in_.gen = inGen_;
      in_.bytes = bytes;
    }
    PeerFifo* h = in_.hdr();
    if (h->head.v.load(std::memory_order_acquire) > tail_) break;
    // Everything here is read: the sender may have moved to a new generation (or given it back).
    const uint64_t next = h->next.load(std::memory_order_acquire);
    if (next == 0 || h->head.v.load(std::memory_order_acquire) > tail_) return clbSuccess;
    munmap(in_.base, in_.bytes);
    in_ = Fifo{};
    inGen_ = next;
  }
  char* s = slot(in_, tail_);
  *tag = &reinterpret_cast<SlotHeader*>(s)->tag;
  *buf = s + sizeof(SlotHeader);
  return clbSuccess;
}

clbResult_t ShmPeerChannel::releaseRecv() {
  tail_++;
  in_.hdr()->tail.v.store(tail_, std::memory_order_release);
  ringBell();
  return clbSuccess;
}

void ShmPeerChannel::trim() {
  if (out_.base && out_.hdr()->tail.v.load(std::memory_order_acquire) >= head_) {
    PeerFifo* h = out_.hdr();
    // The receiver moves on to the next generation, which is made at the next send.
    h->next.store(outGens_ + 1, std::memory_order_release);
    dropOut();
  }
  if (in_.base && in_.hdr()->head.v.load(std::memory_order_acquire) <= tail_) {
    munmap(in_.base, in_.bytes);  // mapped again (the same generation) at the next receive
    in_ = Fifo{};
  }
}

clbResult_t ShmPeerChannel::waitDrained() {
  if (!out_.base) return clbSuccess;
  PeerFifo* h = out_.hdr();
  CtlBlock* me = world_->self();
  char what[96];
  snprintf(what, sizeof what, "rank %d to read the point-to-point messages this rank sent it", peer_);
  return waitUntil(
      comm_, [&] { return h->tail.v.load(std::memory_order_acquire) >= head_; }, &me->peerBell.v, &me->waiters, what,
      peer_);
}

// ---- the transport's part ----

clbResult_t ShmTransport::peer(int p, PeerChannel** out) {
  if (peers_.empty()) peers_.resize(comm_->nranks);
  if (!peers_[p]) peers_[p] = std::make_unique<ShmPeerChannel>(comm_, &world_, this, p);
  *out = peers_[p].get();
  return clbSuccess;
}

clbResult_t ShmTransport::waitPeers(uint64_t seen, int64_t startMs, const char* what, int peer,
                                    const std::vector<int>&) {
  CtlBlock* me = world_.self();
  // The timeout counts from the batch's last progress, not from this wait: bells that bring no
  // progress (a peer consuming older messages) would otherwise start it again and again.
  if (nowMs() - startMs >= 1) CLB_CHECK(comm_->checkWait(startMs, what, peer));
  return waitUntil(
      comm_, [&] { return me->peerBell.v.load(std::memory_order_acquire) != seen; }, &me->peerBell.v, &me->waiters,
      what, peer);
}

void ShmTransport::trimPeers() {
  for (auto& ch : peers_)
    if (ch) ch->trim();
}

clbResult_t ShmTransport::trim() {
  trimPeers();
  return ring_.trim();
}

}  // namespace clb
