// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "transport/socket/socket.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "bootstrap/tls.h"

namespace clb {

// How long in all a failed communicator's destroy waits for its last point-to-point messages to be
// taken (close): writes already posted land in milliseconds; a peer that is alive but no longer
// receives would otherwise hold the destroy for the whole timeout.
constexpr int64_t kFailedDrainMs = 1000;

ssize_t readNow(Link& link, void* buf, size_t bytes, int* closedErrno) {
  const ssize_t n = link.tryRecv(buf, bytes);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  *closedErrno = n == 0 ? -1 : errno;
  return -1;
}

SocketRingChannel::SocketRingChannel(CommContext* comm, Link& send, Link& recv)
    : comm_(comm),
      sendLink_(send),
      recvLink_(recv),
      next_((comm->rank + 1) % comm->nranks),
      prev_((comm->rank + comm->nranks - 1) % comm->nranks) {}

SocketRingChannel::~SocketRingChannel() { comm_->mem.addHost(-accounted_); }

void SocketRingChannel::resize(std::vector<Slot>& slots, size_t capacity) {
  slots.resize(slots_);
  for (auto& s : slots) s.data.resize(sizeof(MsgTag) + capacity);  // keeps buffered contents
}

clbResult_t SocketRingChannel::prepare(size_t maxBytes) {
  size_t depth = comm_->cfg.pipelineDepth < 2 ? 2 : comm_->cfg.pipelineDepth;
  size_t cap = (maxBytes + 4095) / 4096 * 4096;
  if (cap <= capacity_ && depth <= slots_ && !send_.empty()) return clbSuccess;
  // Ring order means buffered messages sit at sequence-ordered slots: grow the count only when empty.
  if (depth > slots_ && sendPosted_ == sendWritten_ && recvRead_ == recvConsumed_ && pendingHeaderDone_ == 0) {
    std::vector<Slot> s2, r2;
    send_.swap(s2);
    recv_.swap(r2);
    slots_ = depth;
    sendPosted_ = sendWritten_ = recvRead_ = recvConsumed_ = 0;
  }
  capacity_ = std::max(capacity_, cap);
  int64_t total = (int64_t)(2 * slots_ * (sizeof(MsgTag) + capacity_));
  if (total > comm_->cfg.stagingCapBytes)
    return setError(clbOutOfMemory,
                    "socket staging of %lld bytes needed, above the cap of %lld bytes: raise "
                    "stagingCapBytes (COLIBRI_STAGING_CAP_BYTES) or lower chunkBytes / pipelineDepth",
                    (long long)total, (long long)comm_->cfg.stagingCapBytes);
  resize(send_, capacity_);
  resize(recv_, capacity_);
  comm_->mem.addHost(total - accounted_);
  accounted_ = total;
  return clbSuccess;
}

clbResult_t SocketRingChannel::progress(bool wait, int64_t startMs, const char* what) {
  if (wait && !recvLink_.buffered()) {
    struct pollfd p[2] = {{sendLink_.fd(), sendPosted_ > sendWritten_ ? sendLink_.wantEvents(POLLOUT) : (short)0, 0},
                          {recvLink_.fd(), recvLink_.wantEvents(POLLIN), 0}};
    int rc = poll(p, 2, 20);
    if (rc < 0 && errno != EINTR) return setSysError(errno, "poll() on ring sockets failed");
  }
  if (wait) CLB_CHECK(comm_->checkWait(startMs, what, -1));
  // Write what is queued, in order.
  while (sendWritten_ < sendPosted_) {
    Slot& s = send_[sendWritten_ % slots_];
    const MsgTag* tag = reinterpret_cast<const MsgTag*>(s.data.data());
    size_t total = sizeof(MsgTag) + tag->bytes;
    ssize_t n = sendLink_.trySend(s.data.data() + s.done, total - s.done);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      if (errno == EPIPE || errno == ECONNRESET)  // the peer is gone: its fault, not this host's
        return setError(clbRemoteError,
                        "rank %d closed the connection while rank %d was sending to it "
                        "(did it exit or fail?): %s",
                        next_, comm_->rank, strerror(errno));
      if (errno == EPROTO)
        return setError(clbAuthError, "the TLS connection to rank %d failed: %s", next_,
                        sendLink_.tls() ? sendLink_.tls()->failure().c_str() : "?");
      return setSysError(errno, "sending to rank %d failed (did it exit?)", next_);
    }
    s.done += n;
    if (s.done < total) break;
    s.done = 0;
    sendWritten_++;
  }
  // Read eagerly while a slot is free.
  while (recvClosedErrno_ == 0 && recvRead_ - recvConsumed_ < slots_) {
    if (pendingHeaderDone_ < sizeof(MsgTag)) {
      // A close or error is one only if this rank still needs data (waitRecv says so then).
      const ssize_t n = readNow(recvLink_, reinterpret_cast<char*>(&pendingHeader_) + pendingHeaderDone_,
                                sizeof(MsgTag) - pendingHeaderDone_, &recvClosedErrno_);
      if (n <= 0) break;
      pendingHeaderDone_ += n;
      if (pendingHeaderDone_ < sizeof(MsgTag)) break;
    }
    // A message of a later collective waits in the kernel (its header here) until that
    // collective starts: staging then never holds data across calls, and trim can free it.
    if (pendingHeader_.op.seq > comm_->seq) break;
    if (pendingHeader_.bytes > capacity_) break;  // staging not grown yet: waitRecv checks the tag
    Slot& s = recv_[recvRead_ % slots_];
    if (s.done == 0) {
      memcpy(s.data.data(), &pendingHeader_, sizeof(MsgTag));
      s.done = sizeof(MsgTag);
    }
    size_t total = sizeof(MsgTag) + pendingHeader_.bytes;
    if (s.done < total) {
      const ssize_t n = readNow(recvLink_, s.data.data() + s.done, total - s.done, &recvClosedErrno_);
      if (n <= 0) break;
      s.done += n;
      if (s.done < total) break;
    }
    s.done = 0;
    pendingHeaderDone_ = 0;
    recvRead_++;
  }
  return clbSuccess;
}

clbResult_t SocketRingChannel::acquireSend(size_t bytes, void** buf) {
  if (bytes > capacity_) return setError(clbInternalError, "message of %zu bytes > socket slot %zu", bytes, capacity_);
  int64_t start = nowMs();
  CLB_CHECK(progress(false, start, "sending to the next rank"));
  while (sendPosted_ - sendWritten_ >= slots_) CLB_CHECK(progress(true, start, "the next rank to take a ring message"));
  *buf = send_[sendPosted_ % slots_].data.data() + sizeof(MsgTag);
  return clbSuccess;
}

clbResult_t SocketRingChannel::postSend(const MsgTag& tag) {
  Slot& s = send_[sendPosted_ % slots_];
  memcpy(s.data.data(), &tag, sizeof tag);
  s.done = 0;
  sendPosted_++;
  return progress(false, nowMs(), "sending to the next rank");
}

clbResult_t SocketRingChannel::waitRecv(const MsgTag& expect, const void** buf) {
  int64_t start = nowMs();
  CLB_CHECK(progress(false, start, "a ring message from the previous rank"));
  while (recvRead_ == recvConsumed_) {
    if (pendingHeaderDone_ == sizeof(MsgTag) && pendingHeader_.bytes > capacity_)
      return checkTag(pendingHeader_, expect, prev_, comm_->rank);  // fails: sizes differ
    if (recvClosedErrno_ == -1 || recvClosedErrno_ == ECONNRESET) {
      // The connection's end says little; the notices say why (a failure, an abort, a close, a
      // process that is gone) and come within moments of it on the control connections.
      for (const int64_t until = nowMs() + 100; nowMs() < until; poll(nullptr, 0, 1))
        CLB_CHECK(comm_->checkWait(start, "a ring message from the previous rank", prev_));
    }
    if (recvClosedErrno_ == -1)
      return setError(clbRemoteError,
                      "rank %d closed the connection while rank %d waited for its data (did it exit or fail?)", prev_,
                      comm_->rank);
    if (recvClosedErrno_ == ECONNRESET)
      return setError(clbRemoteError,
                      "rank %d reset the connection while rank %d waited for its data "
                      "(did it exit or fail?)",
                      prev_, comm_->rank);
    if (recvClosedErrno_ == EPROTO)
      return setError(clbAuthError, "the TLS connection from rank %d failed: %s", prev_,
                      recvLink_.tls() ? recvLink_.tls()->failure().c_str() : "?");
    if (recvClosedErrno_ > 0)
      return setSysError(recvClosedErrno_, "receiving from rank %d failed (did it exit?)", prev_);
    CLB_CHECK(progress(true, start, "a ring message from the previous rank"));
  }
  const char* d = recv_[recvConsumed_ % slots_].data.data();
  CLB_CHECK(checkTag(*reinterpret_cast<const MsgTag*>(d), expect, prev_, comm_->rank));
  *buf = d + sizeof(MsgTag);
  return clbSuccess;
}

clbResult_t SocketRingChannel::releaseRecv() {
  recvConsumed_++;
  return clbSuccess;
}

clbResult_t SocketRingChannel::finish() {
  int64_t start = nowMs();
  CLB_CHECK(progress(false, start, "sending to the next rank"));
  while (sendWritten_ < sendPosted_) CLB_CHECK(progress(true, start, "the next rank to take ring messages"));
  return clbSuccess;
}

clbResult_t SocketRingChannel::trim() {
  CLB_CHECK(finish());
  if (recvRead_ != recvConsumed_) return clbSuccess;  // messages of this rank's next call buffered
  if (pendingHeaderDone_ > 0 && pendingHeader_.op.seq <= comm_->seq) return clbSuccess;  // mid-message
  send_.clear();
  send_.shrink_to_fit();
  recv_.clear();
  recv_.shrink_to_fit();
  capacity_ = 0;
  sendPosted_ = sendWritten_ = recvRead_ = recvConsumed_ = 0;
  comm_->mem.addHost(-accounted_);
  accounted_ = 0;
  return clbSuccess;
}

// ---- failure notices over the bootstrap's control connections ----
//
// Each control connection carries at most a few notices, then the end of the connection. A rank
// that fails or aborts sends 'F' or 'A'; a rank that destroys its communicator after its calls
// sends 'C' before closing; a rank that learns that a neighbour's process ended without any of
// these (the connection ends with nothing on it: killed, or exited without destroying) forwards
// 'G' with that neighbour as origin, so that the news goes round the ring to ranks that share no
// connection with it. Notices are read without being taken (a peek of the first one), by the
// collective's thread and by clbCommGetAsyncError's callers alike, under one mutex.

namespace {
struct Notice {
  char kind;  // 'A' aborted, 'F' failed, 'C' closed, 'G' a rank's process is gone
  char pad[3];
  int32_t origin;
  uint64_t seq;  // the collective the sender was in: it completed every earlier one
  // 'F': the origin's own message (its first error: a refused call's reason, say), cut to fit and
  // ended by a NUL; empty where it had none. Forwarded with the notice (protocol 6).
  char reason[kNoticeReasonBytes];
};
static_assert(sizeof(Notice) == 256, "one notice is 256 bytes on the wire");
}  // namespace

// The relay: a thread of the process, while any LinkTransport lives, that every 20 ms reads the
// notices of every transport whose control connections have something (one poll() over them all,
// then statusNotice where one is readable), so that a rank that makes no call still forwards what a
// neighbour said round the ring. Without it, news reaches a rank only through neighbours that are
// in a call or asked for their status: a point-to-point peer that is no ring neighbour of a rank
// that failed would wait for it until the timeout while the ranks between them sit idle. One poll
// rather than a read per connection: with hundreds of rank threads in a process (tests,
// benchmarks), reads of idle connections every 20 ms took a fifth of the CPU while others started.
namespace {
struct Relay {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<LinkTransport*> live;
  bool running = false;
};
Relay& relay() {
  static Relay& r = *new Relay;  // never destroyed: the thread may outlive the statics at exit
  return r;
}
void relayLoop() {
  Relay& r = relay();
  std::unique_lock<std::mutex> g(r.mu);
  std::vector<pollfd> fds;
  std::vector<LinkTransport*> owners;
  while (!r.live.empty()) {
    PeerNotice n;
    fds.clear();
    owners.clear();
    for (LinkTransport* t : r.live)
      if (!t->watchNotices(&fds, &owners)) (void)t->statusNotice(&n);
    if (!fds.empty() && poll(fds.data(), fds.size(), 0) > 0) {
      LinkTransport* last = nullptr;  // a transport's two entries are side by side: asked once
      for (size_t i = 0; i < fds.size(); i++)
        if (fds[i].revents && owners[i] != last) (void)(last = owners[i])->statusNotice(&n);
    }
    r.cv.wait_for(g, std::chrono::milliseconds(20));
  }
  r.running = false;
}
}  // namespace

LinkTransport::LinkTransport(CommContext* comm, int kind, std::unique_ptr<RingChannel> ring, std::string describe,
                             const clbNetPlugin_v1_t* plugin)
    : comm_(comm), kind_(kind), ring_(std::move(ring)), describe_(std::move(describe)), plugin_(plugin) {
  Relay& r = relay();
  std::lock_guard<std::mutex> g(r.mu);
  r.live.push_back(this);
  if (!r.running) {
    r.running = true;
    std::thread(relayLoop).detach();
  }
}

LinkTransport::~LinkTransport() {
  Relay& r = relay();
  std::lock_guard<std::mutex> g(r.mu);  // the relay is not in this one's notices once it is held
  r.live.erase(std::remove(r.live.begin(), r.live.end(), this), r.live.end());
  r.cv.notify_all();
}

const clbNetPlugin_v1_t* LinkTransport::netPlugin() const {
  const auto* net = dynamic_cast<const NetRingChannel*>(ring_.get());
  return net ? net->plugin() : nullptr;
}

void LinkTransport::sendNotice(char kind, int origin, uint64_t seq, const char* reason, Link* only) {
  Notice n{kind, {0, 0, 0}, origin, seq, {}};
  if (kind == 'F' && reason) snprintf(n.reason, sizeof n.reason, "%s", reason);
  for (Link* l : {&comm_->boot.nextCtl(), &comm_->boot.prevCtl()})
    if (l->open() && (!only || l == only)) (void)!l->trySend(&n, sizeof n);
}

void LinkTransport::announce(PeerNotice::Kind kind, const char* reason) {
  std::lock_guard<std::mutex> lock(noticeMutex_);
  char k = kind == PeerNotice::kAborted ? 'A' : 'F';
  if (noticeKind_ == 'A') k = 'A';
  // A failure this rank learnt of first goes on as that rank's, with its words.
  if (noticeKind_)
    sendNotice(k, noticeOrigin_.load(), comm_->seq, noticeReason_);
  else
    sendNotice(k, comm_->rank, comm_->seq, reason);
}

void LinkTransport::readNotices() {
  if (noticeKind_) return;  // the first news is kept (and was forwarded where it needs to be)
  const int prev = (comm_->rank + comm_->nranks - 1) % comm_->nranks, next = (comm_->rank + 1) % comm_->nranks;
  Link* links[2] = {&comm_->boot.prevCtl(), &comm_->boot.nextCtl()};
  for (int i = 0; i < 2 && !noticeKind_; i++) {
    Link* l = links[i];
    if (!l->open() || closedBy_[i]) continue;
    Notice n{};
    const ssize_t got = l->tryRecv(&n, sizeof n, true);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (got > 0 && got < (ssize_t)sizeof n) continue;  // the rest is on its way
    if (got == (ssize_t)sizeof n && n.kind == 'C') {   // that neighbour ended its part normally
      closedBy_[i] = true;
      closedSeq_[i] = n.seq;
      continue;
    }
    if (got == (ssize_t)sizeof n) {
      noticeOrigin_ = n.origin;
      noticeSeq_ = n.seq;
      n.reason[sizeof n.reason - 1] = 0;  // whatever the peer sent, a string
      memcpy(noticeReason_, n.reason, sizeof noticeReason_);
      noticeKind_ = n.kind;  // last: a reader that sees the kind sees the rest
    } else {                 // the connection ended (or broke) with no notice on it: the neighbour's process is gone
      noticeOrigin_ = i == 0 ? prev : next;
      noticeSeq_ = 0;
      noticeKind_ = 'G';
    }
    // Whoever shares no connection with the origin hears of it through the other neighbour.
    if (comm_->nranks > 2)
      sendNotice(noticeKind_ == 'A'   ? 'A'
                 : noticeKind_ == 'G' ? 'G'
                                      : 'F',
                 noticeOrigin_, noticeSeq_, noticeReason_, links[1 - i]);
  }
}

bool LinkTransport::watchNotices(std::vector<pollfd>* fds, std::vector<LinkTransport*>* owners) {
  std::lock_guard<std::mutex> lock(noticeMutex_);
  if (noticeKind_) return true;  // the first news is kept: nothing more to read
  Link* links[2] = {&comm_->boot.prevCtl(), &comm_->boot.nextCtl()};
  for (int i = 0; i < 2; i++) {
    if (!links[i]->open() || closedBy_[i]) continue;
    if (links[i]->buffered()) return false;
    fds->push_back({links[i]->fd(), POLLIN, 0});
    owners->push_back(this);
  }
  return true;
}

bool LinkTransport::noticeOf(PeerNotice* out) const {
  const char kind = noticeKind_;
  if (kind != 'A' && kind != 'F' && kind != 'G') return false;
  out->kind = kind == 'A' ? PeerNotice::kAborted : kind == 'G' ? PeerNotice::kGone : PeerNotice::kFailed;
  out->origin = noticeOrigin_;
  out->reason = out->kind == PeerNotice::kFailed && noticeReason_[0] ? noticeReason_ : nullptr;
  if (out->kind == PeerNotice::kGone && out->origin >= 0 && out->origin < comm_->nranks)
    out->pid = comm_->boot.peers()[out->origin].pid;
  return true;
}

bool LinkTransport::waitNotice(int, PeerNotice* out) {
  std::lock_guard<std::mutex> lock(noticeMutex_);
  readNotices();
  // A neighbour that failed in a later collective finished this one: let this one complete. A
  // neighbour that closed after this collective did too; one that closed before it never joins.
  if (noticeKind_ && (noticeKind_ == 'G' || noticeSeq_ <= comm_->seq)) return noticeOf(out);
  for (int i = 0; i < 2; i++)
    if (closedBy_[i] && closedSeq_[i] < comm_->seq) {
      out->kind = PeerNotice::kClosed;
      out->origin = i == 0 ? (comm_->rank + comm_->nranks - 1) % comm_->nranks : (comm_->rank + 1) % comm_->nranks;
      return true;
    }
  return false;
}

bool LinkTransport::statusNotice(PeerNotice* out) {
  std::lock_guard<std::mutex> lock(noticeMutex_);
  readNotices();
  return noticeOf(out);
}

void LinkTransport::close(PeerNotice::Kind end) {
  if (end != PeerNotice::kClosed && end != PeerNotice::kFailed) return;  // aborted: nothing more goes out
  if (end == PeerNotice::kClosed) {
    ring_->finish();
    std::lock_guard<std::mutex> lock(noticeMutex_);
    sendNotice('C', comm_->rank, comm_->seq, nullptr);  // this rank's end is no failure (readNotices)
  }
  // What this rank sent last reaches its peers (over the plugin: its writes acknowledged), also
  // where it failed: a rank that refused a call still delivers the sends that returned before it
  // (their last writes may be in flight), and its peers' matching receives get their data. Over a
  // broken channel or to a peer that is gone this ends at once, with the channel's error; a failed
  // rank waits at most kFailedDrainMs in all for peers that are alive but no longer receive.
  const bool closed = end == PeerNotice::kClosed;
  if (!closed) comm_->giveUpAtMs = nowMs() + std::min<int64_t>(kFailedDrainMs, comm_->cfg.timeoutMs);
  for (auto& ch : netPeers_)
    if (ch && ch->finish() != clbSuccess && closed)
      CLB_WARN("rank %d: destroy did not see every point-to-point message acknowledged: %s", comm_->rank,
               lastError().c_str());
  for (auto& ch : peers_)
    if (ch && ch->connected() && ch->flush() != clbSuccess && closed)
      CLB_WARN("rank %d: destroy did not write every point-to-point message: %s", comm_->rank, lastError().c_str());
}

}  // namespace clb
