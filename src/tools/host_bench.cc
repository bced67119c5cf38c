// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Host-memory all-reduce (or a send/recv ring exchange, or an all-to-all) over one transport, ranks
// as threads of this process: the init time of
// the slowest rank (median and min of `inits` inits), the time of the slowest rank's clbCommSplit
// of the same ranks into one communicator (median and min of `inits` splits: what a split costs
// next to a fresh init of as many ranks), that of the slowest survivor's clbCommShrink without the
// last rank (median and min of `inits`), then for each size from min to max bytes
// (x4) the time per call (median of 5 runs of `iters` calls, slowest rank) and its bus bandwidth as
// nccl-tests counts it: all-reduce 2 (n - 1) / n * bytes / time; sendrecv (bytes to the next rank
// and from the previous one, in a group) bytes / time; alltoall (bytes = one rank's whole buffer,
// bytes / n to each rank) (n - 1) / n * bytes / time; alltoallv (uneven, as MoE dispatch: rank r
// sends w(r, p) / 3 of bytes / n to rank p, w = 1 + (r + p) mod 3) the bytes rank 0 sends to the
// others / time. CSV on stdout. The environment chooses the rest (COLIBRI_TLS ...). verbs needs
// a libibverbs.so.1: on a machine without RDMA, the stand-in over emulated NICs
// (LD_LIBRARY_PATH=build/native/verbs-emu, built with the tests).
//   colibri_host_bench [ranks=2] [transport=socket|shm|verbs] [min=4096] [max=67108864] [iters=20] [inits=50]
//                      [coll=allreduce|sendrecv|alltoall|alltoallv|broadcast|scatter|gather]
// broadcast, scatter and gather have root 0 (scatter / gather: bytes is the root's whole buffer);
// their busbw is bytes / time for broadcast, (n - 1) / n * bytes / time for the other two.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"

namespace {

using Clock = std::chrono::steady_clock;

// alltoallv: the elements rank r sends to rank p out of `count` (1/3 to 3/3 of count / n).
size_t unevenCount(size_t count, int n, int r, int p) { return count / n * (1 + (r + p) % 3) / 3; }

double since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

bool check(clbResult_t rc, const char* what) {
  if (rc == clbSuccess) return true;
  fprintf(stderr, "%s: %s\n", what, clbGetLastError());
  exit(1);
}

// Runs fn(rank) on n threads at once; the slowest one's time, µs.
template <class Fn>
double slowestUs(int n, Fn fn) {
  std::vector<double> us(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      auto t0 = Clock::now();
      fn(r);
      us[r] = since(t0);
    });
  for (auto& t : ts) t.join();
  return *std::max_element(us.begin(), us.end());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  const char* transportName = argc > 2 && (!strcmp(argv[2], "shm") || !strcmp(argv[2], "verbs")) ? argv[2] : "socket";
  const int transport = !strcmp(transportName, "shm")     ? clbTransportShm
                        : !strcmp(transportName, "verbs") ? clbTransportVerbs
                                                          : clbTransportSocket;
  const size_t minBytes = argc > 3 ? strtoull(argv[3], nullptr, 10) : 4096;
  const size_t maxBytes = argc > 4 ? strtoull(argv[4], nullptr, 10) : (64u << 20);
  const int iters = argc > 5 ? atoi(argv[5]) : 20;
  const int inits = argc > 6 ? atoi(argv[6]) : 50;
  const std::string coll = argc > 7 ? argv[7] : "allreduce";
  if (coll != "allreduce" && coll != "sendrecv" && coll != "alltoall" && coll != "alltoallv" && coll != "broadcast" &&
      coll != "scatter" && coll != "gather") {
    fprintf(stderr, "coll %s: use allreduce, sendrecv, alltoall, alltoallv, broadcast, scatter or gather\n",
            coll.c_str());
    return 2;
  }
  const char* tls = getenv("COLIBRI_TLS");
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = transport;

  // Init of the slowest rank.
  std::vector<double> initUs;
  for (int i = 0; i < inits; i++) {
    clbUniqueId id;
    check(clbGetUniqueId(&id), "clbGetUniqueId");
    std::vector<clbComm_t> made(n);
    initUs.push_back(
        slowestUs(n, [&](int r) { check(clbCommInitRank(&made[r], &id, r, n, &cfg), "clbCommInitRank"); }));
    for (clbComm_t c : made) clbCommDestroy(c);
  }
  printf("# ranks %d, transport %s, COLIBRI_TLS=%s: init median %.0f us, min %.0f us (%d inits)\n", n, transportName,
         tls ? tls : "(unset)", median(initUs), *std::min_element(initUs.begin(), initUs.end()), inits);

  clbUniqueId id;
  check(clbGetUniqueId(&id), "clbGetUniqueId");
  std::vector<clbComm_t> comms(n);
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < n; r++) ts.emplace_back([&, r] { check(clbCommInitRank(&comms[r], &id, r, n, &cfg), "init"); });
    for (auto& t : ts) t.join();
  }

  // clbCommSplit of the same ranks (one color), the slowest rank's time.
  std::vector<double> splitUs;
  for (int i = 0; i < inits; i++) {
    std::vector<clbComm_t> made(n);
    splitUs.push_back(
        slowestUs(n, [&](int r) { check(clbCommSplit(comms[r], 0, r, nullptr, &made[r]), "clbCommSplit"); }));
    for (clbComm_t c : made) clbCommDestroy(c);
  }
  printf("# ranks %d: clbCommSplit into one communicator median %.0f us, min %.0f us (%d splits)\n", n, median(splitUs),
         *std::min_element(splitUs.begin(), splitUs.end()), inits);
  // clbCommShrink of the same ranks without the last one (alive: an exclusion by choice), the
  // slowest survivor's time. The survivors meet at the lowest one, each over a connection of its own.
  if (n > 1) {
    std::vector<double> shrinkUs;
    const int excluded = n - 1;
    for (int i = 0; i < inits; i++) {
      std::vector<clbComm_t> made(n - 1);
      shrinkUs.push_back(slowestUs(n - 1, [&](int r) {
        check(clbCommShrink(comms[r], &excluded, 1, nullptr, &made[r], CLB_SHRINK_DEFAULT), "clbCommShrink");
      }));
      for (clbComm_t c : made) clbCommDestroy(c);
    }
    printf("# ranks %d: clbCommShrink to %d ranks median %.0f us, min %.0f us (%d shrinks)\n", n, n - 1,
           median(shrinkUs), *std::min_element(shrinkUs.begin(), shrinkUs.end()), inits);
  }
  printf("tls,coll,ranks,bytes,us_per_call,busbw_GBps\n");
  // One call of `coll` on rank r: count floats (alltoall: count / n to each rank).
  auto call = [&](int r, float* in, float* out, size_t count) {
    if (coll == "allreduce") {
      check(clbAllReduce(in, in, count, clbFloat32, clbSum, comms[r], nullptr), "allReduce");
    } else if (coll == "sendrecv") {
      check(clbGroupStart(), "clbGroupStart");
      check(clbSend(in, count, clbFloat32, (r + 1) % n, comms[r], nullptr), "clbSend");
      check(clbRecv(out, count, clbFloat32, (r + n - 1) % n, comms[r], nullptr), "clbRecv");
      check(clbGroupEnd(), "clbGroupEnd");
    } else if (coll == "alltoall") {
      check(clbAllToAll(in, out, count / n, clbFloat32, comms[r], nullptr), "clbAllToAll");
    } else if (coll == "broadcast") {
      check(clbBroadcast(in, out, count, clbFloat32, 0, comms[r], nullptr), "clbBroadcast");
    } else if (coll == "scatter") {
      check(clbScatter(in, out, count / n, clbFloat32, 0, comms[r], nullptr), "clbScatter");
    } else if (coll == "gather") {
      check(clbGather(in, out, count / n, clbFloat32, 0, comms[r], nullptr), "clbGather");
    } else {
      std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
      size_t so = 0, ro = 0;
      for (int p = 0; p < n; p++) {
        sc[p] = unevenCount(count, n, r, p), sd[p] = so, so += sc[p];
        rc[p] = unevenCount(count, n, p, r), rd[p] = ro, ro += rc[p];
      }
      check(clbAllToAllv(in, sc.data(), sd.data(), out, rc.data(), rd.data(), clbFloat32, comms[r], nullptr),
            "clbAllToAllv");
    }
  };
  const double factor = coll == "allreduce"                         ? 2.0 * (n - 1) / n
                        : coll == "sendrecv" || coll == "broadcast" ? 1.0
                                                                    : (n - 1.0) / n;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    if (coll != "allreduce" && coll != "sendrecv" && coll != "broadcast" && count < (size_t)(3 * n))
      continue;                     // under one element per rank
    double moved = factor * bytes;  // the bytes busbw counts
    if (coll == "alltoallv") {
      moved = 0;
      for (int p = 1; p < n; p++) moved += (double)unevenCount(count, n, 0, p) * sizeof(float);
    }
    std::vector<double> runs;
    for (int run = 0; run < 6; run++) {  // the first is a warm-up
      std::vector<double> us(n);
      std::vector<std::thread> ts;
      for (int r = 0; r < n; r++)
        ts.emplace_back([&, r] {
          std::vector<float> buf(count, 1.0f), out(count);
          call(r, buf.data(), out.data(), count);
          auto t0 = Clock::now();
          for (int i = 0; i < iters; i++) call(r, buf.data(), out.data(), count);
          us[r] = since(t0) / iters;
        });
      for (auto& t : ts) t.join();
      if (run > 0) runs.push_back(*std::max_element(us.begin(), us.end()));
    }
    const double t = median(runs);
    printf("%s,%s,%d,%zu,%.1f,%.3f\n", tls ? tls : "off", coll.c_str(), n, bytes, t, moved / t / 1e3);
    fflush(stdout);
  }
  for (clbComm_t c : comms) clbCommDestroy(c);
}
