// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Shared memory between ranks on one host (processes or threads). Each rank owns:
//  * a control block (4 KiB, created at init): counters, its state, the layout of its data segment;
//  * a data segment (created on first need, grown on demand, given back by trim) holding its
//    outgoing ring FIFO and its "direct" scratch area.
// Data a rank sends lives in memory the sender owns, so a rank can trim or grow its segment
// without losing anything a peer has not read yet (it first waits until peers have consumed it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/comm_context.h"
#include "transport/channel.h"
#include "transport/transport.h"

namespace clb {

struct alignas(64) SegDesc {
  std::atomic<uint64_t> gen;  // 0: no segment
  uint64_t bytes, fifoOffset, slotBytes, slots, scratchOffset, scratchBytes;
};

struct alignas(64) Counter {
  std::atomic<uint64_t> v;
};

enum RankState : uint32_t { kRunning = 0, kFailed = 1, kAborted = 2, kClosed = 3 };

struct CtlBlock {
  uint32_t magic;
  int32_t rank;
  int32_t pid;  // as its own PID namespace counts it: for messages only
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> waiters;  // threads sleeping on a counter of this block
  char reason[236];
  SegDesc seg;
  Counter fifoHead;      // messages this rank posted into its FIFO (consumed by next)
  Counter fifoTail;      // messages this rank consumed from prev's FIFO
  Counter directPosted;  // seq of the collective whose input is in this rank's scratch
  OpDesc directDesc;
  Counter directDone;  // seq of the last direct collective this rank finished reading
  Counter opSeq;       // seq of the collective this rank is in (diagnostics)
  OpDesc opDesc;
  Counter peerBell;  // bumped by a peer that posted to, or consumed from, this rank's point-to-point FIFOs
  // Transport::announceDeviceEnd: the first device call this failed rank will never make (0: none
  // said; kDeviceEndEvery: every call ends; kDeviceEndToldInBoxes: its point-to-point end told).
  std::atomic<uint64_t> deviceEnd;
};
static_assert(sizeof(CtlBlock) <= 4096, "control block must fit a page");

struct SlotHeader {
  MsgTag tag;
  char pad[64 - sizeof(MsgTag) % 64];
};

// Segments and who owns them. Every name is "/clb-j<session>-r<rank>-<what>": the communicator's
// random session (16 hex digits, so unique per job) and the rank that made it. Its maker holds an
// exclusive flock on it from before anyone could judge the name until it removed the name, and
// only the holder of that lock removes a name. The kernel drops the lock when the last descriptor
// of it closes, at the latest when the process ends however it ends, so a name nobody holds is
// left by a process that is gone: removeUnheldSegments removes those. No pid is involved, so this
// holds across PID namespaces (containers sharing /dev/shm). Names of the older form
// "/clb-<pid>-..." (their makers held no lock) are never removed here.
constexpr const char* kSegmentPrefix = "clb-j";
std::string sessionSegmentPrefix(uint64_t session);  // "clb-j<session>-", without the "/"
std::string segmentName(uint64_t session, int rank, const std::string& what);

// Creates (O_EXCL, the pages reserved, unlinked again on failure) or opens a POSIX shared memory
// segment of `bytes` and maps it. Creating, *fd receives the descriptor that holds the lock:
// keep it open while the name exists and remove the name with unlinkSegment. Opening, the
// descriptor is kept in *fd when fd is not null (ownerHoldsLock), else closed.
clbResult_t mapSegment(const std::string& name, size_t bytes, bool create, char** out, int* fd);
// Removes the name, then closes *fd (its lock) and sets it to -1.
void unlinkSegment(const std::string& name, int* fd);
// Removes every segment in /dev/shm whose name starts with `prefix` and whose lock nobody holds.
void removeUnheldSegments(const std::string& prefix);
// Whether the maker of the segment open as `fd` still holds its lock (a non-blocking try).
bool ownerHoldsLock(int fd);

class ShmWorld {
 public:
  explicit ShmWorld(CommContext* comm) : comm_(comm) {}
  ~ShmWorld();
  clbResult_t init();
  CtlBlock* ctl(int r) { return ctls_[r]; }
  const CtlBlock* ctl(int r) const { return ctls_[r]; }
  CtlBlock* self() { return ctls_[comm_->rank]; }

  // Makes this rank's data segment hold a FIFO of `slots` x `slotBytes` and `scratchBytes` of
  // scratch (at least; it only grows). Waits until peers are done with the current segment first.
  clbResult_t ensure(size_t slotBytes, size_t slots, size_t scratchBytes);
  char* ownBase() { return own_.base; }
  // The current data segment of peer r (mapped on first use, remapped when the peer regrew it).
  clbResult_t peerBase(int r, char** base);
  // Waits until the next rank consumed every FIFO message and peers finished with the scratch.
  clbResult_t waitDrained();
  clbResult_t trim();
  void setState(RankState s, const char* reason);
  // Whether rank r (of another process) let go of its control block's lock: its process ended
  // (or it destroyed its communicator). Never for this rank, nor ranks of this process.
  bool ownerGone(int r) const;
  // Removes the names of this communicator's segments whose makers are gone (they cannot remove
  // them themselves; the mappings stay valid until they are unmapped). A live rank's stay.
  void removeAbandoned() const;
  uint64_t lastDirectSeq = 0;           // seq of this rank's last direct collective that used its scratch
  std::vector<const void*> srcScratch;  // the direct path's per-call input table, kept allocated

 private:
  struct Mapping {
    uint64_t gen = 0;
    char* base = nullptr;
    size_t bytes = 0;
    int fd = -1;  // this rank's own segment: its lock
  };
  std::string segName(int rank, uint64_t gen, bool control) const;
  void unmapOwn();
  CommContext* comm_;
  std::vector<CtlBlock*> ctls_;
  std::vector<std::string> ctlNames_;  // [r]: the name rank r's control block was mapped by
  // [me]: the lock on this rank's control block, held for the communicator's life; [r]: rank
  // r's control block open, to try its lock (-1: r is in this process).
  std::vector<int> ctlFds_;
  // setState's: its callers are any threads of this rank (a failed call, clbCommAbort from another
  // thread), and its failure reason is written once (peers read it once they see kFailed).
  std::mutex stateMutex_;
  bool reasonWritten_ = false;
  Mapping own_;
  uint64_t lastGen_ = 0;
  std::vector<Mapping> peers_;
};

class ShmRingChannel : public RingChannel {
 public:
  ShmRingChannel(CommContext* comm, ShmWorld* world);
  const char* name() const override { return "shm"; }
  clbResult_t prepare(size_t maxBytes) override;
  clbResult_t acquireSend(size_t bytes, void** buf) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t waitRecv(const MsgTag& expect, const void** buf) override;
  clbResult_t releaseRecv() override;
  clbResult_t finish() override { return clbSuccess; }
  clbResult_t trim() override { return world_->trim(); }

 private:
  char* slot(char* base, const SegDesc& d, uint64_t index) const;
  CommContext* comm_;
  ShmWorld* world_;
  int next_, prev_;
  uint64_t head_ = 0, tail_ = 0;
  char* sendSlot_ = nullptr;
};

// The direct algorithm (transport/shm/direct.cc): every rank posts its data in its shared-memory
// scratch and reads the others' in place (it works on the control blocks and scratch).
class ShmDirect : public DirectAlgorithm {
 public:
  ShmDirect(CommContext* comm, ShmWorld* world) : comm_(comm), world_(world) {}
  size_t scratchBytes(const CollArgs& a) const override;
  clbResult_t run(const CollArgs& a) override;

 private:
  CommContext* comm_;
  ShmWorld* world_;
};

// The point-to-point FIFO from one rank to another: a segment of its own that the sender makes at
// its first message to that peer (sized for that message, at most chunkBytes a slot), grows by
// making the next generation once the receiver consumed everything, and gives back at trim. Its
// name says sender, receiver and generation, so the receiver finds it without being told.
struct alignas(64) PeerFifo {
  std::atomic<uint32_t> magic;  // set last by the sender, once the header is written
  uint32_t pad;
  uint64_t bytes, slotBytes, slots;
  Counter head;                // messages the sender posted
  Counter tail;                // messages the receiver consumed
  std::atomic<uint64_t> next;  // once drained: the generation that replaces this one (0: none yet)
};

class ShmTransport;

// Both directions between this rank and peer `peer` (transport/shm/peer.cc).
class ShmPeerChannel : public PeerChannel {
 public:
  ShmPeerChannel(CommContext* comm, ShmWorld* world, ShmTransport* owner, int peer)
      : comm_(comm), world_(world), owner_(owner), peer_(peer) {}
  ~ShmPeerChannel() override;
  size_t maxMessageBytes() const override;
  clbResult_t trySend(size_t bytes, void** buf, size_t* room) override;
  clbResult_t postSend(const MsgTag& tag) override;
  clbResult_t tryRecv(const MsgTag** tag, const void** buf) override;
  clbResult_t releaseRecv() override;
  // Gives back the outgoing FIFO and the incoming mapping where nothing is left in them.
  void trim();
  // Waits until the peer consumed everything sent to it (destroy of a healthy rank).
  clbResult_t waitDrained();

 private:
  struct Fifo {
    uint64_t gen = 0;
    char* base = nullptr;
    size_t bytes = 0;
    int fd = -1;  // the outgoing FIFO: its lock
    PeerFifo* hdr() const { return reinterpret_cast<PeerFifo*>(base); }
  };
  std::string name(int from, int to, uint64_t gen) const;
  char* slot(const Fifo& f, uint64_t index) const;
  // Replaces the outgoing FIFO (drained) by one whose slots hold `bytes` (0: by none).
  clbResult_t remake(size_t bytes);
  void dropOut();
  void ringBell();  // the peer's bell: something moved between the two (it may wait for that)
  CommContext* comm_;
  ShmWorld* world_;
  ShmTransport* owner_;  // near the cap, it gives back the other peers' idle FIFOs first
  int peer_;
  Fifo out_, in_;
  uint64_t outGens_ = 0;          // generations made so far (the next is outGens_ + 1)
  uint64_t inGen_ = 1;            // the generation the receiver maps next
  uint64_t inMapped_ = 0;         // the last generation it mapped
  uint64_t head_ = 0, tail_ = 0;  // this rank's copies: posted to peer / consumed from peer
  char* sendSlot_ = nullptr;
  int64_t accounted_ = 0;
  bool capped_ = false;  // the outgoing FIFO's slots are smaller than its messages (stagingCapBytes)
};

// The shm transport: the control blocks and segments, the ring over them, the direct algorithm,
// and the peers' health from their control blocks (state, reason, collective) and processes.
class ShmTransport : public Transport {
 public:
  explicit ShmTransport(CommContext* comm);
  ~ShmTransport() override;
  // Every rank's control block mapped, and a pidfd per peer process in this PID namespace.
  clbResult_t init();
  int kind() const override { return clbTransportShm; }
  RingChannel& ring() override { return ring_; }
  bool sharesMemory() const override { return true; }
  DirectAlgorithm* direct() override { return &direct_; }
  // A peer process that exited or was killed while its rank was running, even one its parent has
  // not reaped yet: it let go of its control block's lock (ShmWorld::ownerGone), or, in this PID
  // namespace, its pidfd is readable. No pid is looked up: in another namespace it is another's.
  bool peerGone(int p) const override;
  bool waitNotice(int peer, PeerNotice* n) override;
  bool statusNotice(PeerNotice* n) override;
  bool abandonedNotice(PeerNotice* n) override;
  void announceDeviceEnd(uint64_t next) override;
  uint64_t deviceEnd(int p) const override;
  void announce(PeerNotice::Kind kind, const char* reason) override;
  void beginCollective(const OpDesc& d) override;
  clbResult_t peer(int p, PeerChannel** out) override;
  uint64_t peerActivity() override { return world_.self()->peerBell.v.load(std::memory_order_acquire); }
  clbResult_t waitPeers(uint64_t seen, int64_t startMs, const char* what, int peer,
                        const std::vector<int>& peers) override;
  clbResult_t trim() override;
  // Gives back every peer FIFO that nothing is left in (clbCommTrim, and staging near its cap).
  void trimPeers();
  void close(PeerNotice::Kind end) override;

 private:
  CommContext* comm_;
  ShmWorld world_;
  ShmRingChannel ring_;
  ShmDirect direct_;
  std::vector<std::unique_ptr<ShmPeerChannel>> peers_;  // point-to-point, per peer once used
  std::vector<int> pidfds_;  // a pidfd per peer process in this PID namespace (-1: none), readable once it exited
};

}  // namespace clb
