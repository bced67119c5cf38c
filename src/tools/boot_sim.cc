// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// colibri_boot_sim: what init would take for a fleet of n ranks, past what one machine can run.
// It replays the bootstrap's message schedule, step by step and rank by rank, over a model of the
// network and of each rank's CPU:
//
//   1. join: every rank connects to the root (TCP, then the challenge-response: 2 round trips),
//      sends its proof and hello; the root's one thread takes the hellos one after another;
//   2. reply: once all have come, the root hashes the table once and answers every rank in rank
//      order through its one network link, each reply the table's hash and the rows the rank
//      connects with (protocol 9; with --table root, protocol 8's whole table, which each rank
//      hashes);
//   3. connect: each rank dials its ring neighbour (two connections) and its tree parent, and
//      answers its previous rank and its children; a connection is made once both ends are
//      connecting (3 round trips: TCP, hello and challenge, proof and answer);
//   4. the init's bootstrap all-gathers on the tree (Bootstrap::allGather): up, the smaller
//      subtrees first, then down, the larger first, each message tagged and checked; the first
//      gathers the table's rows, which each rank then hashes and compares with the root's hash.
//
// The schedule is the code's: the tree is bootstrap.h's treeParent / treeChildren / treeEnd, the
// tree messages' sizes its treeSpan (as Bootstrap::sendTree uses it), the others the wire
// structs' (bootstrap.h, handshake.h), and the hash and HMAC costs are measured on this machine
// with the library's own SHA-256 at start. What is modelled and not run: the
// network (a one-way latency between any two ranks and one link's bandwidth per rank, full duplex,
// no congestion inside the fabric), and a fixed CPU cost per message (system call, wake-up).
// With --cores C all ranks share C cores (one host, as the measured runs on the build machine);
// the prediction is then the longer of the schedule's critical path and all its CPU work spread
// over C cores.
//
//   colibri_boot_sim [--latency-us 10] [--gbps 100] [--msg-us 2] [--cores 0] [--exchanges fleet]
//                    [--table tree|root] [--ranks 2,8,...]
// --exchanges: the init's all-gathers, block bytes per rank: "fleet" (the verbs transport's:
// 8, 184, 4), "socket" (none), "shm" (8, 1), or a list such as 8,1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/crypto.h"
#include "bootstrap/handshake.h"

namespace {

struct Model {
  double latencyUs = 10;      // one way, any two ranks (the root included)
  double bytesPerUs = 12500;  // one rank's link, each way (100 Gb/s)
  double msgUs = 2;           // CPU per message sent or received
  double hashBytesPerUs = 0;  // SHA-256, measured
  double hmacUs = 0;          // one HMAC-SHA256 of a short message, measured
  int cores = 0;              // 0: a core per rank; else every rank shares this many
  std::vector<size_t> exchanges{8, 184, 4};
  // "tree" (protocol 9, as built): the root sends each rank only the rows it connects with
  // (clb::replyRows) and the table's hash, and the ranks all-gather their rows on the tree first.
  // "root", for comparison: the root sends every rank the whole table (protocol 8).
  bool tableOnTree = true;
};

// The library's SHA-256 and HMAC, timed here.
void measureHashing(Model* m) {
  using Clock = std::chrono::steady_clock;
  std::vector<uint8_t> big(4 << 20, 0x5a);
  uint8_t out[clb::kSha256Bytes];
  auto t0 = Clock::now();
  for (int i = 0; i < 4; i++) clb::sha256(big.data(), big.size(), out);
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  m->hashBytesPerUs = 4.0 * big.size() / us;
  const uint8_t key[16] = {1};
  t0 = Clock::now();
  constexpr int kHmacs = 20000;
  for (int i = 0; i < kHmacs; i++) clb::hmacSha256(key, sizeof key, big.data() + i % 64, 96, out);
  m->hmacUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kHmacs;
}

struct Result {
  double joinedUs = 0;     // the root has every hello
  double repliedUs = 0;    // the last rank has checked its table
  double connectedUs = 0;  // the last rank has its ring and tree
  double initUs = 0;       // the last rank is through the init's all-gathers
  double rootBytes = 0;    // bytes the root sends
  double cpuUs = 0;        // CPU work of all ranks and the root together
  bool cpuBound = false;   // with --cores: the CPU work over the cores is longer than the schedule
};

Result simulate(const Model& m, int n) {
  Result res;
  const double L = m.latencyUs;
  auto wire = [&](double bytes) { return bytes / m.bytesPerUs; };
  auto hash = [&](double bytes) { return bytes / m.hashBytesPerUs; };
  double cpu = 0;  // all CPU work, for --cores
  // 1. join. Each rank: TCP connect (1 round trip), hello and challenge (1), then its proof and
  // hello body one way. The root: per hello, its challenge (an HMAC), the proof's check (one),
  // and a message in, a message out and the body in.
  const double helloBytes = sizeof(clb::ClientHello) + clb::kTagBytes + sizeof(clb::HelloBody);
  const double rankJoinCpu = 3 * m.msgUs + 2 * m.hmacUs;
  const double rootHelloCpu = 3 * m.msgUs + 2 * m.hmacUs;
  double rootIn = 0, root = 0;
  for (int r = 0; r < n; r++) {
    const double arrives = 4 * L + rankJoinCpu + L;
    rootIn = std::max(rootIn, arrives) + wire(helloBytes);  // the root's link, one hello after another
    root = std::max(root, rootIn) + rootHelloCpu;
  }
  cpu += n * (rankJoinCpu + rootHelloCpu);
  res.joinedUs = root;
  // 2. reply: the table hashed once, then per rank a header, the table and a tag, in rank order.
  const double tableBytes = (double)n * sizeof(clb::RankInfo);
  const double replyBytes = sizeof(clb::ReplyHeader) + clb::kTagBytes +
                            (m.tableOnTree ? clb::kReplyRows * sizeof(clb::RankInfo) + clb::kSha256Bytes : tableBytes);
  const double checkedBytes = m.tableOnTree ? 0 : tableBytes;  // hashed by each rank on receipt
  root += hash(tableBytes);
  cpu += hash(tableBytes);
  std::vector<double> ready(n);
  for (int r = 0; r < n; r++) {
    root += m.msgUs + m.hmacUs + wire(replyBytes);
    // The rank: the reply in, the table's hash and the tag checked.
    ready[r] = root + L + m.msgUs + hash(checkedBytes) + m.hmacUs;
  }
  cpu += n * (2 * m.msgUs + 2 * m.hmacUs + hash(checkedBytes));
  res.rootBytes = n * replyBytes + n * (sizeof(clb::ServerChallenge));
  res.repliedUs = *std::max_element(ready.begin(), ready.end());
  // 3. connect: ring (two connections each way with the neighbours) and tree (one to the parent).
  // Each connection: made once both ends connect, then 3 round trips; each end's CPU: 3 messages
  // and 3 HMACs (challenge or proof, the check, the answer's tag).
  const double connCpu = 3 * m.msgUs + 3 * m.hmacUs;
  std::vector<double> connected(n, 0);
  std::vector<int> links(n, 0);
  auto connect = [&](int a, int b, int count) {
    const double done = std::max(ready[a], ready[b]) + 6 * L;
    connected[a] = std::max(connected[a], done);
    connected[b] = std::max(connected[b], done);
    links[a] += count;
    links[b] += count;
  };
  if (n > 1)
    for (int r = 0; r < n; r++) {
      connect(r, (r + 1) % n, 2);
      if (r > 0) connect(r, clb::treeParent(r), 1);
    }
  for (int r = 0; r < n; r++) {
    connected[r] = std::max(connected[r], ready[r]) + links[r] * connCpu;
    cpu += links[r] * connCpu;
  }
  res.connectedUs = *std::max_element(connected.begin(), connected.end());
  // 4. the all-gathers, each on the tree as Bootstrap::allGather runs it.
  std::vector<double> t = connected, upArrives(n), downArrives(n);
  std::vector<size_t> exchanges = m.exchanges;
  if (m.tableOnTree) exchanges.insert(exchanges.begin(), sizeof(clb::RankInfo));
  for (size_t e = 0; e < (n > 1 ? exchanges.size() : 0); e++) {
    const size_t bytes = exchanges[e];
    // The bytes of the message about c's subtree, as Bootstrap::sendTree sends it.
    auto span = [&](bool up, int c) { return (double)clb::treeSpan(up, c, clb::treeEnd(c, n), n, bytes).total(); };
    auto msgCpu = [&](double msgBytes) { return m.msgUs + m.hmacUs + hash(msgBytes); };
    for (int r = n - 1; r >= 0; r--) {  // children are above their parent: theirs come first
      for (int c : clb::treeChildren(r, n)) {
        t[r] = std::max(t[r], upArrives[c]) + msgCpu(span(true, c));
        cpu += msgCpu(span(true, c));
      }
      if (r > 0) {
        t[r] += msgCpu(span(true, r)) + wire(span(true, r) + clb::kTagBytes);
        cpu += msgCpu(span(true, r));
        upArrives[r] = t[r] + L;
      }
    }
    for (int r = 0; r < n; r++) {  // parents first
      if (r > 0) {
        t[r] = std::max(t[r], downArrives[r]) + msgCpu(span(false, r));
        cpu += msgCpu(span(false, r));
      }
      std::vector<int> kids = clb::treeChildren(r, n);
      for (size_t j = kids.size(); j-- > 0;) {
        const int c = kids[j];
        t[r] += msgCpu(span(false, c)) + wire(span(false, c) + clb::kTagBytes);
        cpu += msgCpu(span(false, c));
        downArrives[c] = t[r] + L;
      }
    }
    if (m.tableOnTree && e == 0)  // each rank checks the gathered table against the root's hash
      for (int r = 0; r < n; r++) {
        t[r] += hash(tableBytes);
        cpu += hash(tableBytes);
      }
  }
  res.initUs = *std::max_element(t.begin(), t.end());
  res.cpuUs = cpu;
  if (m.cores > 0 && cpu / m.cores > res.initUs) {
    res.initUs = cpu / m.cores;
    res.cpuBound = true;
  }
  return res;
}

std::vector<long> parseList(const char* s) {
  std::vector<long> v;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const long x = strtol(p, &end, 10);
    if (end == p) {
      fprintf(stderr, "not a list of numbers: %s\n", s);
      exit(2);
    }
    v.push_back(x);
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') {
      fprintf(stderr, "not a list of numbers: %s\n", s);
      exit(2);
    }
  }
  return v;
}

std::string ms(double us) {
  char b[32];
  if (us < 1000)
    snprintf(b, sizeof b, "%.3f", us / 1000);
  else
    snprintf(b, sizeof b, "%.1f", us / 1000);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  Model m;
  std::vector<long> ranks{2, 8, 32, 128, 512, 1024, 8192, 65536};
  std::string exchanges = "fleet";
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    i++;
    if (a == "--latency-us")
      m.latencyUs = atof(v);
    else if (a == "--gbps")
      m.bytesPerUs = atof(v) * 1e9 / 8 / 1e6;
    else if (a == "--msg-us")
      m.msgUs = atof(v);
    else if (a == "--cores")
      m.cores = atoi(v);
    else if (a == "--exchanges")
      exchanges = v;
    else if (a == "--table" && (!strcmp(v, "root") || !strcmp(v, "tree")))
      m.tableOnTree = !strcmp(v, "tree");
    else if (a == "--ranks")
      ranks = parseList(v);
    else {
      fprintf(stderr, "unknown option %s (see the comment at the top of src/tools/boot_sim.cc)\n", a.c_str());
      return 2;
    }
  }
  if (exchanges == "fleet")
    m.exchanges = {8, 184, 4};
  else if (exchanges == "socket")
    m.exchanges.clear();
  else if (exchanges == "shm")
    m.exchanges = {8, 1};
  else {
    m.exchanges.clear();
    for (long b : parseList(exchanges.c_str())) m.exchanges.push_back((size_t)b);
  }
  for (long n : ranks)
    if (n < 1 || n > (1L << 22)) {
      fprintf(stderr, "ranks must be 1 .. %ld\n", 1L << 22);
      return 2;
    }
  if (m.latencyUs < 0 || m.bytesPerUs <= 0 || m.msgUs < 0 || m.cores < 0) {
    fprintf(stderr, "latency, message cost and cores must be >= 0, bandwidth > 0\n");
    return 2;
  }
  measureHashing(&m);
  printf(
      "# model: latency %.1f us one way, %.1f Gb/s per rank, %.2f us CPU per message, %s; measured here: "
      "SHA-256 %.0f MB/s, HMAC-SHA256 of 96 bytes %.2f us; all-gathers of",
      m.latencyUs, m.bytesPerUs * 8e6 / 1e9, m.msgUs,
      m.cores ? (std::to_string(m.cores) + " cores shared by all ranks").c_str() : "a core per rank", m.hashBytesPerUs,
      m.hmacUs);
  for (size_t b : m.exchanges) printf(" %zu", b);
  printf("%s bytes per rank; table %s\n", m.exchanges.empty() ? " no" : "",
         m.tableOnTree ? "gathered on the tree (protocol 9)" : "sent whole to every rank by the root (protocol 8)");
  printf("ranks,joined_ms,replied_ms,connected_ms,init_ms,root_sends_MB,cpu_bound\n");
  for (long n : ranks) {
    const Result r = simulate(m, (int)n);
    printf("%ld,%s,%s,%s,%s,%.1f,%s\n", n, ms(r.joinedUs).c_str(), ms(r.repliedUs).c_str(), ms(r.connectedUs).c_str(),
           ms(r.initUs).c_str(), r.rootBytes / 1e6, r.cpuBound ? "yes" : "no");
  }
  return 0;
}
