// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The network and clock of netsim.h. The system calls below are defined in the program itself:
// the library's objects, linked statically, call these; libstdc++ finds pthread_create and
// pthread_join here too (the program exports them). A call from a thread that is not scheduled,
// or on a descriptor this file did not make, goes to the C library's own (dlsym RTLD_NEXT).
#include "tools/netsim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <vector>

namespace netsim {
namespace {

constexpr int kFdBase = 1 << 20;  // virtual descriptors: far above the real ones
constexpr int64_t kNever = INT64_MAX / 4;
constexpr int64_t kClockBaseNs = 1000000000LL;  // CLOCK_MONOTONIC of a scheduled thread: this + its time

template <typename F>
F realFn(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    fprintf(stderr, "netsim: the C library has no %s\n", name);
    abort();
  }
  return reinterpret_cast<F>(p);
}
#define REAL(name) static const auto real_##name = netsim::realFn<decltype(&::name)>(#name)

int64_t cpuNs() {
  REAL(clock_gettime);
  timespec ts;
  real_clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct Thread;

struct Chunk {
  int64_t at;
  std::string data;
  size_t off = 0;
};

struct Sock {
  enum Kind { kStream, kListen, kEvent, kDgram } kind = kStream;
  int node = 0, owner = -1;  // owner: the thread whose connect made it (both ends), for NETSIM_TRACE
  int flags = 0;             // O_NONBLOCK
  sockaddr_storage local{}, remote{};
  socklen_t localLen = 0, remoteLen = 0;
  // stream
  bool connecting = false, connected = false, wrShut = false, closed = false;
  int64_t closedAt = kNever;
  int64_t connectAt = kNever;  // a connect completes (or fails) then
  int connectErr = 0;
  int64_t synRetryAt = kNever;  // a dropped SYN goes out again then
  int synTries = 0;
  int targetPort = 0;
  std::weak_ptr<Sock> peer;
  std::deque<Chunk> in;
  int64_t lastAt = 0;        // arrival of the last chunk
  int64_t eofAt = kNever;    // the peer's end of stream arrives then
  int64_t resetAt = kNever;  // a reset arrives then (the peer closed with data unread, or was sent to after closing)
  // listener
  int backlog = 0, port = 0;
  std::deque<std::pair<int64_t, std::shared_ptr<Sock>>> queue;  // by the time each can be accepted
  // eventfd
  uint64_t counter = 0;
  int64_t setAt = 0;
  std::vector<Thread*> waiters;
};

struct Thread {
  int id = 0, node = 0;
  int64_t vt = 0, cpuMark = 0, wakeAt = 0;
  int peeks = 0;  // clock reads since cpuMark (each read's own CPU is not the code's)
  enum St { kReady, kRun, kBlocked, kJoin, kDone } st = kReady;
  uint64_t epoch = 0;
  bool go = false;
  std::condition_variable cv;
  void* (*fn)(void*) = nullptr;
  void* arg = nullptr;
  std::vector<Thread*> joiners;
  bool placed = false;  // by scheduleNextThread (else the code started it)
};

struct Cand {
  int64_t t;
  uint64_t seq;
  Thread* th;
  uint64_t epoch;
  bool operator>(const Cand& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct World {
  std::mutex m;
  std::condition_variable doneCv;
  Params p;
  Stats stats;
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  uint64_t seq = 0;
  int alive = 0, threads = 0, meetCount = 0;
  bool scheduleNext = false, started = false, deadlock = false;
  int64_t nextStart = 0;
  int nextNode = 0;
  std::string why;
  std::unordered_map<int, std::shared_ptr<Sock>> fds;
  std::unordered_map<int, std::weak_ptr<Sock>> ports;
  std::unordered_map<pthread_t, Thread*> byHandle;
  std::vector<Thread*> meeting;
  std::vector<int64_t> egress, ingress, cores;
  int64_t readNs = 0;  // the CPU one CLOCK_THREAD_CPUTIME_ID read costs here (measured in configure)
  int nextFd = kFdBase, nextPort = 20000;
};
World& w = *new World;  // never destroyed: parked threads may outlive main
thread_local Thread* tSelf = nullptr;

int64_t us(double v) { return (int64_t)(v * 1000); }

// NETSIM_TRACE=<thread id>: what happens to the connections that thread dials.
int traced() {
  static const int id = getenv("NETSIM_TRACE") ? atoi(getenv("NETSIM_TRACE")) : -1;
  return id;
}
void trace(const char* what, const Sock& s, int64_t t, int by) {
  if (s.owner >= 0 && s.owner == traced())
    fprintf(stderr, "netsim: %.6f s thread %d: %s (socket of node %d, %zu chunks in)\n", t / 1e9, by, what, s.node,
            s.in.size());
}

void push(Thread* t, int64_t at) { w.heap.push({std::max(at, t->vt), w.seq++, t, t->epoch}); }

void notify(Sock& s, int64_t at) {
  for (Thread* t : s.waiters)
    if (t->st == Thread::kBlocked) push(t, at);
}

// CPU work of `t`: on its own core, or on the first of the shared cores to free.
void spend(Thread* t, int64_t ns) {
  if (ns <= 0) return;
  if (w.p.cores <= 0) {
    t->vt += ns;
    return;
  }
  auto core = std::min_element(w.cores.begin(), w.cores.end());
  t->vt = std::max(t->vt, *core) + ns;
  *core = t->vt;
}

// Gives the processor to the thread with the earliest candidate (which may be `self`); returns
// when `self` runs again. `self` may be null (a thread that ended).
void switchAway(std::unique_lock<std::mutex>& lk, Thread* self) {
  for (;;) {
    if (w.heap.empty()) {
      if (w.alive > 0 && !w.deadlock) {
        w.deadlock = true;
        w.why = std::to_string(w.alive) + " thread(s) blocked with nothing to wake them";
      }
      w.doneCv.notify_all();
      if (!self) return;
      for (;;) self->cv.wait(lk);  // parked for good: the run reports the deadlock
    }
    Cand c = w.heap.top();
    w.heap.pop();
    if (c.epoch != c.th->epoch || (c.th->st != Thread::kReady && c.th->st != Thread::kBlocked)) continue;
    c.th->wakeAt = c.t;
    c.th->st = Thread::kRun;
    if (c.th == self) return;
    w.stats.handoffs++;
    c.th->go = true;
    c.th->cv.notify_one();
    break;
  }
  if (!self) return;
  while (!self->go) self->cv.wait(lk);
  self->go = false;
}

// Blocks `self` until a candidate (pushed here or by an event) picks it; its clock then moves to
// the wake time, plus the wake-up.
void block(std::unique_lock<std::mutex>& lk, Thread* self, int64_t until) {
  self->epoch++;
  self->st = Thread::kBlocked;
  if (until < kNever) push(self, until);
  switchAway(lk, self);
  self->epoch++;
  if (self->wakeAt > self->vt) self->vt = self->wakeAt + us(w.p.wakeUs);
}

enum CallKind {
  kSyscall = 1,     // costs syscallUs
  kInOrder = 2 | 1  // and lets every thread that is behind in time go first
};

// The code's CPU since t's last call, at this machine's `now`: less the reads of the CPU clock
// themselves (the half of the read that ended the last interval and the half that ends this one
// make one; each clock peek in between one more), times cpuScale.
int64_t codeCpu(Thread* t, int64_t now) {
  return (int64_t)(std::max<int64_t>(0, now - t->cpuMark - w.readNs * (1 + t->peeks)) * w.p.cpuScale);
}

// t's time now, without ending its stretch of CPU: a clock read of the code's.
int64_t peekNow(Thread* t) {
  std::lock_guard<std::mutex> g(w.m);
  const int64_t cpu = codeCpu(t, cpuNs());
  t->peeks++;
  return t->vt + cpu;
}

// A system call of a scheduled thread: its CPU since the last one, and the call's own cost. A call
// that acts on the network (kInOrder) first lets the threads whose clocks are behind this one's
// run, so that what it sees and does happens in time order across threads. (Calls made under a
// lock of the code's own must not be kInOrder: the thread let go first could wait for that lock
// with the processor. In the bootstrap, the one such call is the eventfd write of releaseRoot.)
struct Call {
  Thread* t;
  std::unique_lock<std::mutex> lk;
  explicit Call(Thread* th, CallKind kind = kInOrder) : t(th), lk(w.m) {
    spend(t, codeCpu(t, cpuNs()) + ((kind & kSyscall) ? us(w.p.syscallUs) : 0));
    if ((kind & 2) && !w.heap.empty() && w.heap.top().t < t->vt) {
      t->epoch++;
      t->st = Thread::kReady;
      push(t, t->vt);
      switchAway(lk, t);
      t->epoch++;
    }
  }
  ~Call() {
    lk.unlock();
    t->cpuMark = cpuNs();
    t->peeks = 0;
  }
};

std::shared_ptr<Sock> sockOf(int fd) {
  auto it = w.fds.find(fd);
  return it == w.fds.end() ? nullptr : it->second;
}

// A descriptor of this file's, used by a scheduled thread (any other thread gets the C library's
// answer: EBADF).
bool virtualFd(int fd) {
  if (fd < kFdBase || !tSelf) return false;
  std::lock_guard<std::mutex> g(w.m);
  return w.fds.count(fd) != 0;
}

int addFd(std::shared_ptr<Sock> s) {
  const int fd = w.nextFd++;
  w.fds[fd] = std::move(s);
  return fd;
}

int fail(int e) {
  errno = e;
  return -1;
}

int64_t latencyNs(int a, int b) { return us(a == b ? w.p.localLatencyUs : w.p.latencyUs); }

void setPort(sockaddr_storage* ss, socklen_t* len, int port) {
  auto* a = reinterpret_cast<sockaddr_in*>(ss);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a->sin_port = htons((uint16_t)port);
  *len = sizeof *a;
}

int portOf(const sockaddr* a) {
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  return -1;
}

// A SYN from `s` leaves at t0.
void sendSyn(const std::shared_ptr<Sock>& s, int64_t t0) {
  w.stats.connects++;
  auto it = w.ports.find(s->targetPort);
  std::shared_ptr<Sock> l = it == w.ports.end() ? nullptr : it->second.lock();
  if (!l || l->kind != Sock::kListen || l->closed) {
    w.stats.refused++;
    s->connectAt = t0 + 2 * us(w.p.latencyUs);
    s->connectErr = ECONNREFUSED;
    return;
  }
  const int64_t lat = latencyNs(s->node, l->node);
  const int64_t acceptable = t0 + 3 * lat;
  size_t queued = 0;
  for (auto& q : l->queue)
    if (q.first <= acceptable) queued++;
  if ((int)queued > l->backlog) {  // Linux drops the SYN; the client sends it again after 1 s, 2 s, ...
    w.stats.synDropped++;
    s->synRetryAt = t0 + (1000000000LL << std::min(s->synTries++, 5));
    s->connectAt = kNever;
    return;
  }
  auto ss = std::make_shared<Sock>();
  ss->kind = Sock::kStream;
  ss->node = l->node;
  ss->flags = 0;
  ss->connected = true;
  ss->connectAt = 0;
  ss->local = l->local;
  ss->localLen = l->localLen;
  ss->remote = s->local;
  ss->remoteLen = s->localLen;
  ss->peer = s;
  s->peer = ss;
  ss->owner = s->owner;
  s->connectAt = t0 + 2 * lat;
  s->connectErr = 0;
  auto pos =
      std::upper_bound(l->queue.begin(), l->queue.end(), acceptable,
                       [](int64_t a, const std::pair<int64_t, std::shared_ptr<Sock>>& q) { return a < q.first; });
  l->queue.insert(pos, {acceptable, ss});
  notify(*l, acceptable);
}

void advanceConnect(const std::shared_ptr<Sock>& s, int64_t t) {
  while (s->synRetryAt <= t) {
    const int64_t at = s->synRetryAt;
    s->synRetryAt = kNever;
    sendSyn(s, at);
  }
  if (s->connecting && s->connectAt <= t) {
    s->connecting = false;
    s->connected = s->connectErr == 0;
  }
}

// The poll events of `s` at time t; *next: the earliest later time they may change.
short readiness(const std::shared_ptr<Sock>& s, short events, int64_t t, int64_t* next) {
  short rev = 0;
  switch (s->kind) {
    case Sock::kStream:
    case Sock::kDgram:
      advanceConnect(s, t);
      if (s->connecting) {
        *next = std::min({*next, s->connectAt, s->synRetryAt});
        return 0;
      }
      if (!s->connected) {
        if (s->connectErr) return (short)(POLLERR | (events & POLLOUT));
        return 0;
      }
      if (s->resetAt <= t) return (short)((events & (POLLIN | POLLOUT)) | POLLERR | POLLHUP);
      *next = std::min(*next, s->resetAt);
      if ((events & POLLIN) && ((!s->in.empty() && s->in.front().at <= t) || s->eofAt <= t)) rev |= POLLIN;
      if ((events & POLLIN) && !(rev & POLLIN)) *next = std::min(*next, s->in.empty() ? s->eofAt : s->in.front().at);
      if (events & POLLOUT) rev |= POLLOUT;
      return rev;
    case Sock::kListen:
      if (!s->queue.empty()) {
        if (s->queue.front().first <= t) return (short)(events & POLLIN);
        *next = std::min(*next, s->queue.front().first);
      }
      return 0;
    case Sock::kEvent:
      if (s->counter > 0) {
        if (s->setAt <= t) return (short)(events & POLLIN);
        *next = std::min(*next, s->setAt);
      }
      return (short)(events & POLLOUT);
  }
  return 0;
}

// The stream's bytes to its peer, leaving at t: through the sender's link, the latency, the
// receiver's link, after what either carries already.
ssize_t streamSend(Call& c, const std::shared_ptr<Sock>& s, const void* const* bufs, const size_t* lens, int parts) {
  const int64_t t = c.t->vt;
  advanceConnect(s, t);
  if (s->kind != Sock::kStream) return fail(EOPNOTSUPP);
  if (s->connecting) return fail(EAGAIN);
  if (!s->connected || s->wrShut || s->resetAt <= t) return fail(EPIPE);
  std::shared_ptr<Sock> p = s->peer.lock();
  size_t total = 0;
  for (int i = 0; i < parts; i++) total += lens[i];
  if (!p || p->closedAt <= t) {  // as Linux: this send succeeds, the peer answers with a reset
    if (p) s->resetAt = std::min(s->resetAt, t + 2 * latencyNs(s->node, p->node));
    return (ssize_t)total;
  }
  std::string data;
  for (int i = 0; i < parts; i++) data.append(static_cast<const char*>(bufs[i]), lens[i]);
  if (data.empty()) return 0;
  const size_t bytes = data.size();
  int64_t at;
  if (s->node == p->node) {
    at = t + latencyNs(s->node, p->node);
  } else {
    const int64_t ser = (int64_t)(bytes / w.p.bytesPerUs * 1000);
    const int64_t depart = std::max(w.egress[s->node], t) + ser;
    w.egress[s->node] = depart;
    at = std::max(depart + latencyNs(s->node, p->node), w.ingress[p->node] + ser);
    w.ingress[p->node] = at;
  }
  at = std::max(at, p->lastAt);
  p->lastAt = at;
  trace(("sent " + std::to_string(bytes) + " B").c_str(), *s, t, c.t->id);
  p->in.push_back({at, std::move(data)});
  w.stats.messages++;
  w.stats.bytes += bytes;
  notify(*p, at);
  return (ssize_t)bytes;
}

ssize_t streamRecv(Call& c, const std::shared_ptr<Sock>& s, void* buf, size_t len, bool peek) {
  const int64_t t = c.t->vt;
  advanceConnect(s, t);
  if (s->kind != Sock::kStream) return fail(EOPNOTSUPP);
  if (s->connecting) return fail(EAGAIN);
  if (!s->connected) return fail(ENOTCONN);
  size_t got = 0;
  for (auto it = s->in.begin(); it != s->in.end() && it->at <= t && got < len; ++it) {
    const size_t take = std::min(len - got, it->data.size() - it->off);
    memcpy(static_cast<char*>(buf) + got, it->data.data() + it->off, take);
    got += take;
    if (!peek) it->off += take;
  }
  if (!peek)
    while (!s->in.empty() && s->in.front().off == s->in.front().data.size()) s->in.pop_front();
  if (got > 0 || len == 0) return (ssize_t)got;
  if (s->resetAt <= t) return fail(ECONNRESET);
  if (s->eofAt <= t) return 0;
  return fail(EAGAIN);
}

// s closes over data it did not read: as Linux, the peer gets a reset instead of an end.
void resetStream(Sock& s, int64_t t) {
  std::shared_ptr<Sock> p = s.peer.lock();
  if (!p) return;
  const int64_t at = t + latencyNs(s.node, p->node);
  if (at < p->resetAt) {
    p->resetAt = at;
    notify(*p, at);
  }
}

void endStream(Sock& s, int64_t t) {
  std::shared_ptr<Sock> p = s.peer.lock();
  if (!p) return;
  const int64_t at = std::max(t + latencyNs(s.node, p->node), p->lastAt);
  if (at < p->eofAt) {
    p->eofAt = at;
    notify(*p, at);
  }
}

void threadEnds(Thread* t) {
  std::unique_lock<std::mutex> lk(w.m);
  t->st = Thread::kDone;
  t->epoch++;
  w.alive--;
  if (!t->placed) w.stats.codeThreadsEndNs = std::max(w.stats.codeThreadsEndNs, t->vt);
  for (Thread* j : t->joiners) {
    j->st = Thread::kReady;
    j->epoch++;
    push(j, t->vt);
  }
  t->joiners.clear();
  if (w.alive == 0) {
    w.doneCv.notify_all();
    return;
  }
  switchAway(lk, nullptr);
}

void* trampoline(void* arg) {
  Thread* t = static_cast<Thread*>(arg);
  tSelf = t;
  {
    std::unique_lock<std::mutex> lk(w.m);
    while (!t->go) t->cv.wait(lk);
    t->go = false;
    if (t->wakeAt > t->vt) t->vt = t->wakeAt;
  }
  t->cpuMark = cpuNs();
  void* r = t->fn(t->arg);
  threadEnds(t);
  tSelf = nullptr;  // what runs after (thread-local destructors) is not scheduled
  return r;
}

}  // namespace

void configure(const Params& p) {
  constexpr int kReads = 20000;
  const int64_t t0 = cpuNs();
  for (int i = 0; i < kReads - 1; i++) (void)cpuNs();
  const int64_t readNs = (cpuNs() - t0) / kReads;
  std::lock_guard<std::mutex> g(w.m);
  w.readNs = readNs;
  w.p = p;
  if (p.cores > 0) w.cores.assign(p.cores, 0);
}

void scheduleNextThread(int64_t startNs, int node) {
  std::lock_guard<std::mutex> g(w.m);
  w.scheduleNext = true;
  w.nextStart = startNs;
  w.nextNode = node;
}

bool run(std::string* why) {
  std::unique_lock<std::mutex> lk(w.m);
  w.scheduleNext = false;
  w.started = true;
  switchAway(lk, nullptr);
  w.doneCv.wait(lk, [] { return w.alive == 0 || w.deadlock; });
  if (w.deadlock && why) *why = w.why;
  return !w.deadlock;
}

int64_t now() { return tSelf ? peekNow(tSelf) : 0; }

void meet(int count) {
  Thread* t = tSelf;
  if (!t) return;
  Call c(t, kSyscall);
  w.meeting.push_back(t);
  if ((int)w.meeting.size() >= count) {
    int64_t last = 0;
    for (Thread* m : w.meeting) last = std::max(last, m->vt);
    for (Thread* m : w.meeting)
      if (m != t) {
        m->st = Thread::kReady;
        m->epoch++;
        push(m, last);
      }
    w.meeting.clear();
    t->vt = last;
    return;
  }
  t->epoch++;
  t->st = Thread::kBlocked;
  switchAway(c.lk, t);
  t->epoch++;
  t->vt = std::max(t->vt, t->wakeAt);
}

Stats stats() {
  std::lock_guard<std::mutex> g(w.m);
  return w.stats;
}

const Params& params() { return w.p; }

}  // namespace netsim

using netsim::Call;
using netsim::fail;
using netsim::Sock;
using netsim::sockOf;
using netsim::tSelf;
using netsim::virtualFd;
using netsim::w;

// The calls, as the C library declares them (its exception specifications included), visible to
// the shared libraries of the program (it builds with hidden visibility).
#pragma GCC visibility push(default)
extern "C" {

int pthread_create(pthread_t* th, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) noexcept {
  REAL(pthread_create);
  netsim::Thread* parent = tSelf;
  netsim::Thread* t = nullptr;
  {
    std::unique_lock<std::mutex> lk(w.m);
    if (parent || w.scheduleNext) {
      t = new netsim::Thread;
      t->id = w.threads++;
      t->fn = fn;
      t->arg = arg;
      if (w.scheduleNext) {  // placed by scheduleNextThread
        t->node = w.nextNode;
        t->vt = w.nextStart;
        t->placed = true;
        w.scheduleNext = false;
      } else {
        lk.unlock();
        {
          Call c(parent);
          t->node = parent->node;
          t->vt = parent->vt + netsim::us(w.p.threadStartUs);
        }
        lk.lock();
      }
      while ((int)w.egress.size() <= t->node) w.egress.push_back(0), w.ingress.push_back(0);
      w.alive++;
      w.stats.peakThreads = std::max<uint64_t>(w.stats.peakThreads, (uint64_t)w.alive);
      push(t, t->vt);
    }
  }
  if (!t) return real_pthread_create(th, attr, fn, arg);
  pthread_attr_t small;
  if (!attr) {  // thousands of threads: 1 MiB stacks, not the default 8
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 1 << 20);
  }
  const int rc = real_pthread_create(th, attr ? attr : &small, netsim::trampoline, t);
  if (!attr) pthread_attr_destroy(&small);
  std::lock_guard<std::mutex> g(w.m);
  if (rc != 0) {
    t->st = netsim::Thread::kDone;
    t->epoch++;
    w.alive--;
    return rc;
  }
  w.byHandle[*th] = t;
  return 0;
}

int pthread_join(pthread_t th, void** ret) {
  REAL(pthread_join);
  netsim::Thread* self = tSelf;
  netsim::Thread* target = nullptr;
  {
    std::lock_guard<std::mutex> g(w.m);
    auto it = w.byHandle.find(th);
    if (it != w.byHandle.end()) target = it->second;
  }
  if (self && target) {
    Call c(self);
    if (target->st != netsim::Thread::kDone) {
      self->epoch++;
      self->st = netsim::Thread::kJoin;
      target->joiners.push_back(self);
      netsim::switchAway(c.lk, self);
      self->epoch++;
      self->vt = std::max(self->vt, self->wakeAt);
    }
  }
  return real_pthread_join(th, ret);
}

int clock_gettime(clockid_t clk, struct timespec* ts) noexcept {
  REAL(clock_gettime);
  if (!tSelf ||
      (clk != CLOCK_MONOTONIC && clk != CLOCK_MONOTONIC_RAW && clk != CLOCK_MONOTONIC_COARSE && clk != CLOCK_BOOTTIME))
    return real_clock_gettime(clk, ts);
  const int64_t t = netsim::peekNow(tSelf) + netsim::kClockBaseNs;
  ts->tv_sec = t / 1000000000LL;
  ts->tv_nsec = t % 1000000000LL;
  return 0;
}

int usleep(useconds_t usec) {
  REAL(usleep);
  if (!tSelf) return real_usleep(usec);
  Call c(tSelf);
  netsim::block(c.lk, c.t, c.t->vt + (int64_t)usec * 1000);
  return 0;
}

int sched_yield() noexcept {
  REAL(sched_yield);
  if (!tSelf) return real_sched_yield();
  Call c(tSelf);
  netsim::block(c.lk, c.t, c.t->vt + 1000);
  return 0;
}

int getrlimit(__rlimit_resource_t what, struct rlimit* r) noexcept {
  REAL(getrlimit);
  if (!tSelf || what != RLIMIT_NOFILE) return real_getrlimit(what, r);
  r->rlim_cur = r->rlim_max = 1 << 20;  // a process of its own per rank, as in a fleet
  return 0;
}

int socket(int domain, int type, int protocol) noexcept {
  REAL(socket);
  if (!tSelf) return real_socket(domain, type, protocol);
  Call c(tSelf);
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
  auto s = std::make_shared<Sock>();
  s->kind = (type & 0xf) == SOCK_DGRAM ? Sock::kDgram : Sock::kStream;
  s->node = c.t->node;
  s->flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
  return netsim::addFd(s);
}

int eventfd(unsigned int initval, int flags) noexcept {
  REAL(eventfd);
  if (!tSelf) return real_eventfd(initval, flags);
  Call c(tSelf);
  auto s = std::make_shared<Sock>();
  s->kind = Sock::kEvent;
  s->node = c.t->node;
  s->counter = initval;
  return netsim::addFd(s);
}

int bind(int fd, const struct sockaddr* addr, socklen_t len) noexcept {
  REAL(bind);
  if (!virtualFd(fd)) return real_bind(fd, addr, len);
  Call c(tSelf);
  auto s = sockOf(fd);
  int port = netsim::portOf(addr);
  if (port < 0) return fail(EAFNOSUPPORT);
  if (port == 0) {
    if (w.nextPort > 65535) return fail(EADDRINUSE);
    port = w.nextPort++;
  } else if (auto it = w.ports.find(port); it != w.ports.end() && !it->second.expired()) {
    return fail(EADDRINUSE);
  }
  s->port = port;
  netsim::setPort(&s->local, &s->localLen, port);
  return 0;
}

int listen(int fd, int backlog) noexcept {
  REAL(listen);
  if (!virtualFd(fd)) return real_listen(fd, backlog);
  Call c(tSelf);
  auto s = sockOf(fd);
  if (!s->port) return fail(EINVAL);
  s->kind = Sock::kListen;
  s->backlog = std::min(backlog, w.p.somaxconn);
  w.ports[s->port] = s;
  return 0;
}

int getsockname(int fd, struct sockaddr* addr, socklen_t* len) noexcept {
  REAL(getsockname);
  if (!virtualFd(fd)) return real_getsockname(fd, addr, len);
  Call c(tSelf, netsim::kSyscall);
  auto s = sockOf(fd);
  memcpy(addr, &s->local, std::min<socklen_t>(*len, s->localLen));
  *len = s->localLen;
  return 0;
}

int getpeername(int fd, struct sockaddr* addr, socklen_t* len) noexcept {
  REAL(getpeername);
  if (!virtualFd(fd)) return real_getpeername(fd, addr, len);
  Call c(tSelf, netsim::kSyscall);
  auto s = sockOf(fd);
  if (!s->connected) return fail(ENOTCONN);
  memcpy(addr, &s->remote, std::min<socklen_t>(*len, s->remoteLen));
  *len = s->remoteLen;
  return 0;
}

int setsockopt(int fd, int level, int name, const void* val, socklen_t len) noexcept {
  REAL(setsockopt);
  if (!virtualFd(fd)) return real_setsockopt(fd, level, name, val, len);
  Call c(tSelf, netsim::kSyscall);
  return 0;
}

int getsockopt(int fd, int level, int name, void* val, socklen_t* len) noexcept {
  REAL(getsockopt);
  if (!virtualFd(fd)) return real_getsockopt(fd, level, name, val, len);
  Call c(tSelf);
  auto s = sockOf(fd);
  if (level != SOL_SOCKET || name != SO_ERROR || *len < (socklen_t)sizeof(int)) return fail(ENOPROTOOPT);
  netsim::advanceConnect(s, c.t->vt);
  int err = 0;
  if (!s->connecting && !s->connected) {
    err = s->connectErr;
    s->connectErr = 0;
  }
  memcpy(val, &err, sizeof err);
  *len = sizeof err;
  return 0;
}

int fcntl(int fd, int cmd, ...) {
  REAL(fcntl);
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  if (!virtualFd(fd)) return real_fcntl(fd, cmd, arg);
  Call c(tSelf, netsim::kSyscall);
  auto s = sockOf(fd);
  if (cmd == F_GETFL) return O_RDWR | s->flags;
  if (cmd == F_SETFL) s->flags = (int)arg & O_NONBLOCK;
  return 0;
}

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  REAL(connect);
  if (!virtualFd(fd)) return real_connect(fd, addr, len);
  Call c(tSelf);
  auto s = sockOf(fd);
  if (s->kind == Sock::kDgram) return 0;
  if (s->connecting || s->connected) return fail(EISCONN);
  s->targetPort = netsim::portOf(addr);
  memcpy(&s->remote, addr, len);
  s->remoteLen = len;
  netsim::setPort(&s->local, &s->localLen, 40000 + (fd - netsim::kFdBase) % 20000);
  s->connecting = true;
  s->owner = c.t->id;
  netsim::sendSyn(s, c.t->vt);
  return fail(EINPROGRESS);
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  REAL(accept4);
  if (!virtualFd(fd)) return real_accept4(fd, addr, len, flags);
  Call c(tSelf);
  auto l = sockOf(fd);
  if (l->kind != Sock::kListen) return fail(EINVAL);
  if (l->queue.empty() || l->queue.front().first > c.t->vt) return fail(EAGAIN);
  auto ss = l->queue.front().second;
  l->queue.pop_front();
  netsim::trace("accepted", *ss, c.t->vt, c.t->id);
  ss->flags = (flags & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
  if (addr && len) {
    memcpy(addr, &ss->remote, std::min<socklen_t>(*len, ss->remoteLen));
    *len = ss->remoteLen;
  }
  return netsim::addFd(ss);
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  REAL(send);
  if (!virtualFd(fd)) return real_send(fd, buf, len, flags);
  Call c(tSelf);
  const void* bufs[1] = {buf};
  return netsim::streamSend(c, sockOf(fd), bufs, &len, 1);
}

ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  REAL(sendmsg);
  if (!virtualFd(fd)) return real_sendmsg(fd, m, flags);
  Call c(tSelf);
  std::vector<const void*> bufs(m->msg_iovlen);
  std::vector<size_t> lens(m->msg_iovlen);
  for (size_t i = 0; i < m->msg_iovlen; i++) bufs[i] = m->msg_iov[i].iov_base, lens[i] = m->msg_iov[i].iov_len;
  return netsim::streamSend(c, sockOf(fd), bufs.data(), lens.data(), (int)m->msg_iovlen);
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  REAL(recv);
  if (!virtualFd(fd)) return real_recv(fd, buf, len, flags);
  Call c(tSelf);
  return netsim::streamRecv(c, sockOf(fd), buf, len, (flags & MSG_PEEK) != 0);
}

ssize_t read(int fd, void* buf, size_t len) {
  REAL(read);
  if (!virtualFd(fd)) return real_read(fd, buf, len);
  Call c(tSelf);
  auto s = sockOf(fd);
  if (s->kind != Sock::kEvent) return netsim::streamRecv(c, s, buf, len, false);
  if (len < 8) return fail(EINVAL);
  if (s->counter == 0 || s->setAt > c.t->vt) return fail(EAGAIN);
  memcpy(buf, &s->counter, 8);
  s->counter = 0;
  return 8;
}

ssize_t write(int fd, const void* buf, size_t len) {
  REAL(write);
  if (!virtualFd(fd)) return real_write(fd, buf, len);
  Call c(tSelf, netsim::kSyscall);  // not in order: releaseRoot writes its eventfd under a lock
  auto s = sockOf(fd);
  if (s->kind != Sock::kEvent) {
    const void* bufs[1] = {buf};
    return netsim::streamSend(c, s, bufs, &len, 1);
  }
  if (len < 8) return fail(EINVAL);
  uint64_t v;
  memcpy(&v, buf, 8);
  s->counter += v;
  s->setAt = c.t->vt;
  netsim::notify(*s, s->setAt);
  return 8;
}

int shutdown(int fd, int how) noexcept {
  REAL(shutdown);
  if (!virtualFd(fd)) return real_shutdown(fd, how);
  Call c(tSelf);
  auto s = sockOf(fd);
  netsim::trace("shutdown", *s, c.t->vt, c.t->id);
  if ((how == SHUT_WR || how == SHUT_RDWR) && !s->wrShut && s->connected) {
    s->wrShut = true;
    netsim::endStream(*s, c.t->vt);
  }
  return 0;
}

int close(int fd) {
  REAL(close);
  bool mine = false;
  if (fd >= netsim::kFdBase) {
    std::lock_guard<std::mutex> g(w.m);
    mine = w.fds.count(fd) != 0;
  }
  if (!mine) return real_close(fd);
  std::shared_ptr<Sock> s;
  int64_t t = 0;
  auto drop = [&] {
    auto it = w.fds.find(fd);
    if (it == w.fds.end()) return false;
    s = it->second;
    w.fds.erase(it);
    netsim::trace("closed", *s, t, tSelf ? tSelf->id : -1);
    s->closed = true;
    s->closedAt = t;
    bool unread = false;
    for (const auto& ch : s->in) unread = unread || ch.at <= t;
    if (s->kind == Sock::kStream && unread)
      netsim::resetStream(*s, t);
    else if (s->kind == Sock::kStream && !s->wrShut)
      netsim::endStream(*s, t);
    if (s->kind == Sock::kListen) {
      w.ports.erase(s->port);
      for (auto& q : s->queue) netsim::resetStream(*q.second, t);  // never accepted: the client is reset
      s->queue.clear();
    }
    return true;
  };
  if (tSelf) {
    Call c(tSelf);
    t = c.t->vt;
    return drop() ? 0 : fail(EBADF);
  }
  std::lock_guard<std::mutex> g(w.m);  // after the run (a thread that is not scheduled)
  t = netsim::kNever / 2;
  return drop() ? 0 : fail(EBADF);
}

int poll(struct pollfd* fds, nfds_t n, int timeout) {
  REAL(poll);
  bool any = n == 0;  // no descriptor: a sleep
  for (nfds_t i = 0; i < n && !any; i++) any = fds[i].fd >= netsim::kFdBase;
  if (!tSelf || !any) return real_poll(fds, n, timeout);
  Call c(tSelf);
  const int64_t deadline = timeout < 0 ? netsim::kNever : c.t->vt + (int64_t)timeout * 1000000;
  std::vector<std::shared_ptr<Sock>> socks(n);
  for (nfds_t i = 0; i < n; i++) socks[i] = fds[i].fd >= 0 ? sockOf(fds[i].fd) : nullptr;
  for (;;) {
    int ready = 0;
    int64_t next = netsim::kNever;
    netsim::spend(c.t, (int64_t)(w.p.pollFdNs * n));  // the kernel looks at every descriptor
    for (nfds_t i = 0; i < n; i++) {
      fds[i].revents = 0;
      if (fds[i].fd < 0) continue;
      if (!socks[i]) {
        fds[i].revents = POLLNVAL;
      } else {
        fds[i].revents = netsim::readiness(socks[i], fds[i].events, c.t->vt, &next);
      }
      if (fds[i].revents) ready++;
    }
    if (ready || c.t->vt >= deadline) return ready;
    static const int traced = getenv("NETSIM_TRACE") ? atoi(getenv("NETSIM_TRACE")) : -1;
    if (c.t->id == traced) {
      fprintf(stderr, "netsim: thread %d at %.6f s polls", c.t->id, c.t->vt / 1e9);
      for (nfds_t i = 0; i < n; i++)
        if (socks[i])
          fprintf(stderr, " [fd %d kind %d ev %d conn %d/%d at %.6f err %d in %zu eof %.6f retry %.6f]", fds[i].fd,
                  (int)socks[i]->kind, fds[i].events, socks[i]->connecting, socks[i]->connected,
                  socks[i]->connectAt / 1e9, socks[i]->connectErr, socks[i]->in.size(), socks[i]->eofAt / 1e9,
                  socks[i]->synRetryAt / 1e9);
      fprintf(stderr, " until %.6f\n", std::min(next, deadline) / 1e9);
    }
    for (auto& s : socks)
      if (s) s->waiters.push_back(c.t);
    netsim::block(c.lk, c.t, std::min(next, deadline));
    for (auto& s : socks)
      if (s) {
        auto& v = s->waiters;
        auto it = std::find(v.begin(), v.end(), c.t);
        if (it != v.end()) v.erase(it);
      }
  }
}

}  // extern "C"
#pragma GCC visibility pop
