// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// colibri_boot_netsim: the bootstrap's real code (Bootstrap::init, then the init's all-gathers)
// for n ranks, run as n threads over the network and clock of src/tools/netsim.h: what init
// takes on a fleet, predicted from the code itself rather than from a model of its schedule
// (colibri_boot_sim). TLS is off. Every rank checks every block of every all-gather.
//
//   colibri_boot_netsim [--ranks 2,8,64] [--latency-us 10] [--local-latency-us 2] [--gbps 100]
//                       [--syscall-us 1] [--wake-us 2] [--poll-fd-ns 50] [--cpu-scale 1] [--cores 0]
//                       [--ranks-per-node 1] [--somaxconn 4096] [--spread-us 0]
//                       [--exchanges fleet] [--timeout-ms 120000]
//                       [--max-init-ms X] [--min-syn-dropped N] [--max-syn-dropped N]
//
// Each size runs in a child process of its own (a fresh network, root and clock). One CSV line
// per size, in ms from when the root listens (the ranks start then, or spread after): when the
// root's thread ended (its replies sent and its connections to the ranks closed), when the slowest
// rank's Bootstrap::init returned (the table gathered and checked), the slowest rank's init (its
// own start to the end of its last all-gather) and the median rank's, the messages and bytes the network carried,
// connection attempts (refused: nobody listened yet; SYNs dropped at a full accept queue), the thread handoffs, and
// this machine's real time and peak memory for the run. --spread-us: rank r starts at r/n of it (the launcher's
// stagger); --cpu-scale: the code's CPU time here times this; --exchanges as colibri_boot_sim's ("fleet": 8,184,4 bytes
// per rank; "socket": none; "shm": 8,1; or a list). The --max/--min options make a size fail (exit status 1) past them:
// the tests' checks. Memory: every rank holds the table, n × sizeof(RankInfo) bytes, so n ranks take about n² × 304
// bytes (5 GB at 4 096).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "colibri/colibri.h"
#include "tools/netsim.h"

namespace {

struct Options {
  netsim::Params p;
  std::vector<long> ranks{2, 8, 64};
  std::vector<size_t> exchanges{8, 184, 4};
  int ranksPerNode = 1;
  double spreadUs = 0;
  int64_t timeoutMs = 120000;
  // Checks (tests): a size fails when its slowest rank's init took longer, or when fewer or more
  // SYNs than these were dropped.
  double maxInitMs = -1;
  long minSynDropped = -1, maxSynDropped = -1;
};

struct RankOut {
  clbResult_t rc = clbInternalError;
  std::string error;
  int64_t startNs = 0, bootstrapNs = 0, endNs = 0;  // bootstrapNs: Bootstrap::init returned
};

bool parseList(const char* s, std::vector<long>* out) {
  out->clear();
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const long v = strtol(p, &end, 10);
    if (end == p || v < 0) return false;
    out->push_back(v);
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return false;
  }
  return !out->empty();
}

void rankBody(const Options& o, const clb::IdData& id, int r, int n, RankOut* out) {
  out->startNs = netsim::now();
  clb::Bootstrap b;
  clbResult_t rc = b.init(id, r, n, o.timeoutMs, nullptr);
  out->bootstrapNs = netsim::now();
  if (rc != clbSuccess) out->error = std::string("init: ") + clbGetLastError();
  for (size_t k = 0; rc == clbSuccess && k < o.exchanges.size(); k++) {
    const size_t bytes = o.exchanges[k];
    auto value = [&](int p, size_t i) { return (char)(p * 131 + i * 7 + k); };
    std::vector<char> buf((size_t)n * bytes);
    for (size_t i = 0; i < bytes; i++) buf[(size_t)r * bytes + i] = value(r, i);
    rc = b.allGather(buf.data(), bytes);
    if (rc != clbSuccess) {
      out->error = std::string("allGather: ") + clbGetLastError();
      break;
    }
    for (int p = 0; p < n && rc == clbSuccess; p++)
      for (size_t i = 0; i < bytes; i++)
        if (buf[(size_t)p * bytes + i] != value(p, i)) {
          rc = clbInternalError;
          out->error = "all-gather " + std::to_string(k) + ": block " + std::to_string(p) + " is wrong";
          break;
        }
  }
  out->endNs = netsim::now();
  out->rc = rc;
  netsim::meet(n);  // nobody closes its connections before every rank is done
}

// One size, in this (child) process: prints its CSV line, returns the exit status.
int runSize(const Options& o, int n) {
  netsim::configure(o.p);
  std::vector<RankOut> outs(n);
  clbUniqueId uid{};
  std::string launchError;
  int64_t t0 = 0;  // the root listens: the ranks start from here
  const auto real0 = std::chrono::steady_clock::now();
  netsim::scheduleNextThread(0, 0);
  std::thread launcher([&] {  // scheduled: the root starts in the simulation, on node 0
    if (clbGetUniqueId(&uid) != clbSuccess) {
      launchError = clbGetLastError();
      return;
    }
    clb::IdData id;
    memcpy(&id, &uid, sizeof id);
    t0 = netsim::now();
    for (int r = 0; r < n; r++) {
      netsim::scheduleNextThread(t0 + (int64_t)(o.spreadUs * 1000 * r / n), r / o.ranksPerNode);
      std::thread([&o, id, r, n, &outs] { rankBody(o, id, r, n, &outs[r]); }).detach();
    }
  });
  std::string why;
  const bool finished = netsim::run(&why);
  if (!finished) {
    fprintf(stderr, "%d ranks: the simulation stopped: %s\n", n, why.c_str());
    fflush(stderr);
    _exit(3);  // parked threads stay: leave without joining them
  }
  launcher.join();
  const double realS = std::chrono::duration<double>(std::chrono::steady_clock::now() - real0).count();
  if (!launchError.empty()) {
    fprintf(stderr, "clbGetUniqueId: %s\n", launchError.c_str());
    return 2;
  }
  std::vector<int64_t> took;
  int64_t bootstrapped = 0;
  int failed = 0;
  std::vector<std::string> said;  // each kind of failure once (its first 60 characters), with its first rank
  for (int r = 0; r < n; r++) {
    took.push_back(outs[r].endNs - outs[r].startNs);
    bootstrapped = std::max(bootstrapped, outs[r].bootstrapNs - outs[r].startNs);
    if (outs[r].rc == clbSuccess) continue;
    failed++;
    const std::string kind = outs[r].error.substr(outs[r].error.find(' ', 12), 40);
    if (std::find(said.begin(), said.end(), kind) != said.end() || said.size() >= 5) continue;
    said.push_back(kind);
    fprintf(stderr, "rank %d of %d: %s\n", r, n, outs[r].error.c_str());
  }
  std::sort(took.begin(), took.end());
  const netsim::Stats s = netsim::stats();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  printf("%d,%.3f,%.3f,%.3f,%.3f,%llu,%.1f,%llu,%llu,%llu,%llu,%.1f,%.0f,%s\n", n, (s.codeThreadsEndNs - t0) / 1e6,
         bootstrapped / 1e6, took.back() / 1e6, took[n / 2] / 1e6, (unsigned long long)s.messages, s.bytes / 1e6,
         (unsigned long long)s.connects, (unsigned long long)s.refused, (unsigned long long)s.synDropped,
         (unsigned long long)s.handoffs, realS, ru.ru_maxrss / 1024.0, failed ? "FAILED" : "ok");
  fflush(stdout);
  if (failed) return 1;
  if (o.maxInitMs >= 0 && took.back() / 1e6 > o.maxInitMs) {
    fprintf(stderr, "%d ranks: the slowest init took %.3f ms, more than --max-init-ms %.3f\n", n, took.back() / 1e6,
            o.maxInitMs);
    return 4;
  }
  if ((o.minSynDropped >= 0 && (long)s.synDropped < o.minSynDropped) ||
      (o.maxSynDropped >= 0 && (long)s.synDropped > o.maxSynDropped)) {
    fprintf(stderr, "%d ranks: %llu SYN(s) dropped, outside --min/max-syn-dropped %ld..%ld\n", n,
            (unsigned long long)s.synDropped, o.minSynDropped, o.maxSynDropped);
    return 4;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    std::vector<long> list;
    if (a == "--ranks" && parseList(v, &list))
      o.ranks = list;
    else if (a == "--latency-us")
      o.p.latencyUs = atof(v);
    else if (a == "--local-latency-us")
      o.p.localLatencyUs = atof(v);
    else if (a == "--gbps")
      o.p.bytesPerUs = atof(v) * 1000 / 8;
    else if (a == "--syscall-us")
      o.p.syscallUs = atof(v);
    else if (a == "--wake-us")
      o.p.wakeUs = atof(v);
    else if (a == "--poll-fd-ns")
      o.p.pollFdNs = atof(v);
    else if (a == "--cpu-scale")
      o.p.cpuScale = atof(v);
    else if (a == "--cores")
      o.p.cores = atoi(v);
    else if (a == "--ranks-per-node")
      o.ranksPerNode = atoi(v);
    else if (a == "--somaxconn")
      o.p.somaxconn = atoi(v);
    else if (a == "--spread-us")
      o.spreadUs = atof(v);
    else if (a == "--timeout-ms")
      o.timeoutMs = atoll(v);
    else if (a == "--max-init-ms")
      o.maxInitMs = atof(v);
    else if (a == "--min-syn-dropped")
      o.minSynDropped = atol(v);
    else if (a == "--max-syn-dropped")
      o.maxSynDropped = atol(v);
    else if (a == "--exchanges") {
      if (!strcmp(v, "fleet"))
        o.exchanges = {8, 184, 4};
      else if (!strcmp(v, "socket"))
        o.exchanges = {};
      else if (!strcmp(v, "shm"))
        o.exchanges = {8, 1};
      else if (parseList(v, &list))
        o.exchanges.assign(list.begin(), list.end());
      else {
        fprintf(stderr, "--exchanges: fleet, socket, shm or a list of block sizes\n");
        return 2;
      }
    } else {
      fprintf(stderr, "unknown option or bad value: %s %s (see src/tools/boot_netsim.cc)\n", a.c_str(), v);
      return 2;
    }
  }
  if (o.p.latencyUs < 0 || o.p.localLatencyUs < 0 || o.p.bytesPerUs <= 0 || o.p.syscallUs < 0 || o.p.wakeUs < 0 ||
      o.p.pollFdNs < 0 || o.p.cpuScale < 0 || o.p.cores < 0 || o.p.somaxconn < 0 || o.ranksPerNode < 1 ||
      o.spreadUs < 0 || o.timeoutMs <= 0) {
    fprintf(stderr, "latencies, costs, cores and spread must be >= 0; bandwidth, ranks per node and timeout > 0\n");
    return 2;
  }
  for (long n : o.ranks)
    if (n < 1 || n > 16384) {
      fprintf(stderr, "ranks must be 1 .. 16384 (each rank is a thread holding the whole table)\n");
      return 2;
    }
  setenv("COLIBRI_BOOTSTRAP_HOST", "127.0.0.1", 1);  // the simulated network has one address
  unsetenv("COLIBRI_TLS");
  printf(
      "# the bootstrap's code over a simulated network: latency %.1f us (%.1f inside a node), %.1f Gb/s a node, "
      "%.1f us a system call, %.1f us a wake-up, %.0f ns a polled descriptor, CPU x%.2f, %s, %d rank(s) a node, start "
      "spread %.0f us, "
      "all-gathers of",
      o.p.latencyUs, o.p.localLatencyUs, o.p.bytesPerUs * 8 / 1000, o.p.syscallUs, o.p.wakeUs, o.p.pollFdNs,
      o.p.cpuScale, o.p.cores ? (std::to_string(o.p.cores) + " shared core(s)").c_str() : "a core per thread",
      o.ranksPerNode, o.spreadUs);
  for (size_t b : o.exchanges) printf(" %zu", b);
  printf("%s bytes per rank\n", o.exchanges.empty() ? " no" : "");
  printf(
      "ranks,root_end_ms,bootstrap_ms,init_ms,median_ms,messages,MB,connects,refused,syn_dropped,handoffs,real_s,"
      "peak_MB,result\n");
  fflush(stdout);
  int status = 0;
  for (long n : o.ranks) {
    const pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 2;
    }
    if (pid == 0) _exit(runSize(o, (int)n));
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "%ld ranks: the run failed (%s %d)\n", n, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      status = 1;
    }
  }
  return status;
}
