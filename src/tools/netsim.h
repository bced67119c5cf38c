// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// A network and a clock in one process, for running the bootstrap's real code at a fleet's size
// (src/tools/boot_netsim.cc). Linking netsim.cc into a program replaces, for the threads it
// schedules, the system calls the bootstrap makes: sockets (socket, bind, listen, accept4,
// connect, send, sendmsg, recv, read, write, close, shutdown, poll, the socket options and
// names), eventfd, usleep, clock_gettime(CLOCK_MONOTONIC), getrlimit, and thread creation and
// joining. Threads other than the scheduled ones get the real calls.
//
// Time is virtual. The scheduled threads run one at a time; each has its own clock, advanced by
// the CPU time it really uses between two calls (CLOCK_THREAD_CPUTIME_ID, times cpuScale, less
// the cost of reading that clock, measured at start: about 1.3 us on the build VM) and by a fixed
// cost per system call. A thread that blocks (poll without a ready descriptor, usleep)
// waits for the earliest event that ends its wait: data, a connection, an end of stream, an
// eventfd write, its timeout. Before a call that acts on the network, every thread whose clock is
// behind the caller's runs first, so what a thread observes at time t is what the others did
// before t (a conservative discrete-event simulation, accurate to the CPU work between two such
// calls). NETSIM_TRACE=<thread id> prints what happens to the connections that thread dials.
//
// The network: every thread belongs to a node (a host with one network link); a message leaves
// its node's link after the ones before it (bandwidth), travels `latency`, and enters the
// receiving node's link after the ones before it. Between threads of one node it takes
// `localLatency` and no link. TCP as Linux does it, reduced to what the bootstrap relies on: a
// connect completes one round trip after it is sent, the server accepts it after one and a half;
// a listener whose accept queue is full (the listen backlog, at most somaxconn) drops the SYN,
// which the client sends again after 1 s, 2 s, 4 s ...; no listener at the address: refused after
// a round trip; a stream's bytes arrive in order, its end after them; a close over unread data
// resets the peer instead (its data is read first, then ECONNRESET), and so does a send after the
// peer's close (that send succeeds, the next one fails once the reset is back); send buffers are
// unbounded (sends never block). With `cores` > 0 all threads share that many cores (one host, as the measured runs on
// one machine): each stretch of CPU work takes the core that frees first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace netsim {

struct Params {
  double latencyUs = 10;      // one way between nodes
  double localLatencyUs = 2;  // one way inside a node
  double bytesPerUs = 12500;  // each node's link, each way (100 Gb/s)
  double syscallUs = 1;       // CPU of each network system call
  double wakeUs = 2;          // from an event to the blocked thread running again
  double pollFdNs = 50;       // poll()'s kernel work per descriptor, each time it looks (this machine: 45-67)
  double threadStartUs = 20;  // a new thread's first instruction after its creation
  double cpuScale = 1;        // this machine's CPU time of the real code, times this
  int cores = 0;              // 0: a core per thread; else every thread shares this many
  int somaxconn = 4096;       // the kernel's cap on a listen backlog (net.core.somaxconn)
};

struct Stats {
  uint64_t messages = 0;         // sends that moved bytes
  uint64_t bytes = 0;            // bytes sent
  uint64_t connects = 0;         // connection attempts
  uint64_t refused = 0;          // attempts to an address with no listener
  uint64_t synDropped = 0;       // SYNs dropped at a full accept queue (retried after 1 s, 2 s ...)
  uint64_t handoffs = 0;         // times a thread gave the processor to another
  uint64_t peakThreads = 0;      // threads alive at once
  int64_t codeThreadsEndNs = 0;  // the last end of a thread the code started itself (the root's)
};

// Before any scheduled thread exists.
void configure(const Params& p);
// Threads this thread creates from now on are scheduled (this thread itself is not). Their clock
// starts at `startNs` (virtual), on node `node`.
void scheduleNextThread(int64_t startNs, int node);
// Starts the schedule and returns when every scheduled thread has ended. False when the
// simulation deadlocked (threads blocked with nothing that can wake them): `why` says which.
bool run(std::string* why);
// The calling scheduled thread's virtual time, ns (0 at the start of the run).
int64_t now();
// Blocks the calling scheduled thread until `count` threads in all have called it; then all go
// on at the time of the last one. Costs nothing in virtual time.
void meet(int count);
Stats stats();
const Params& params();

}  // namespace netsim
