// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <poll.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/hash.h"

namespace clb {
namespace {

constexpr char kRootReply[] = "colibri/9/root-reply";
constexpr char kRootNote[] = "colibri/6/root-note";
constexpr char kRingAccept[] = "colibri/3/ring-accept";
constexpr char kTreeUp[] = "colibri/8/tree-up";
constexpr char kTreeDown[] = "colibri/8/tree-down";

// The body of a ring connection's handshake: who connects to whom, for which channel.
struct RingBody {
  int32_t fromRank;
  int32_t toRank;
  int32_t channel;  // kRingChannelBootstrap (to the tree parent), kRingChannelNotices or kRingChannelTransport
  int32_t pad;
};

// 0.0.0.0 or ::, which names every interface of this host, none that another host can reach.
bool isWildcard(const SockAddr& a) {
  if (a.ss.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  return a.ss.ss_family == AF_INET6 &&
         IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
}

// The root's answer to an authenticated hello: header, message, on success the table's digest and
// the rank's rows (replyRows), then a tag over the header, the message, the digest (zeros on a
// refusal) and the rows.
clbResult_t sendReply(Link& link, const uint8_t* secret, const Transcript& t, clbResult_t status,
                      const std::string& msg, uint32_t nranks, const uint8_t* session, const RankInfo* rows,
                      int64_t deadline, uint32_t flags = 0, const std::array<uint8_t, kSha256Bytes>* digest = nullptr) {
  ReplyHeader r{(uint32_t)status, (uint32_t)msg.size(), nranks, flags, {}};
  if (session) memcpy(r.session, session, kSessionBytes);
  const std::array<uint8_t, kSha256Bytes> d = digest ? *digest : tableDigest(nullptr, 0);  // zeros: no table
  const size_t rowBytes = rows ? kReplyRows * sizeof(RankInfo) : 0;
  uint8_t mac[kTagBytes];
  tag(secret, kRootReply, t, {{&r, sizeof r}, {msg.data(), msg.size()}, {d.data(), d.size()}, {rows, rowBytes}}, mac);
  return sendAllParts(
      link,
      {{&r, sizeof r}, {msg.data(), msg.size()}, {d.data(), rows ? d.size() : 0}, {rows, rowBytes}, {mac, sizeof mac}},
      deadline, nullptr, "a rank");
}

// The root's note to a joined rank that ranks are still missing (kReplyNote): header and message,
// tagged apart from the reply (kRootNote), so that no note can pass for the reply or the other way.
clbResult_t sendNote(Link& link, const uint8_t* secret, const Transcript& t, const std::string& msg, int64_t deadline) {
  ReplyHeader r{(uint32_t)clbSuccess, (uint32_t)msg.size(), 0, kReplyNote, {}};
  uint8_t mac[kTagBytes];
  tag(secret, kRootNote, t, {{&r, sizeof r}, {msg.data(), msg.size()}}, mac);
  return sendAllParts(link, {{&r, sizeof r}, {msg.data(), msg.size()}, {mac, sizeof mac}}, deadline, nullptr, "a rank");
}

struct Root;
// The roots running in this process, for releaseRoot. Never destroyed: a root thread may still
// end while the process exits and its statics go.
std::mutex& gRootsMutex = *new std::mutex;
std::vector<Root*>& gRoots = *new std::vector<Root*>;

struct Root {
  static constexpr int64_t kMaxRootWaitMs = 86400000;
  static constexpr int64_t kRootSendMs = 30000;
  // A joined rank's wait ends before the root gives up on it: its own timeout then says what the
  // root refused meanwhile, rather than that the root closed its connection.
  static constexpr int64_t kRootGraceMs = 1000;

  int listenFd;
  int wakeFd;  // an eventfd: releaseRoot wakes the poll at once
  IdData id;
  std::string where;
  int64_t deadline;
  TlsContextRef tls;  // COLIBRI_TLS=bootstrap or all
  std::atomic<bool> released{false};
  // What a rank of this process that waits in vain is told: connections that did not prove the
  // secret (written by the root's thread, read by the ranks' under the lock).
  std::mutex refusedMutex{};
  std::string refused{};
  std::string missing{};  // "rank(s) 1, 3 of 4": the ranks that never joined (under refusedMutex)

  struct Joined {
    Link link;
    Transcript t{};
    uint64_t noted = ~0ull;  // the `changes` of the last note of missing ranks it was sent
  };

  // One authenticated hello: checked, then kept (its connection waits for the table) or refused.
  // A refused rank holds the secret, so it is one of this communicator's, misconfigured: false,
  // with what to tell every other rank (*failure), since no communicator can form any more.
  bool join(Authenticated& a, std::vector<Joined>* joined, std::vector<RankInfo>* table, int* nranks, int* count,
            std::string* failure, clbResult_t* failCode) {
    HelloBody b;
    memcpy(&b, a.body.data(), sizeof b);
    b.info.hostname[sizeof b.info.hostname - 1] = 0;
    char m[kMaxReplyMessageBytes];
    clbResult_t status = clbSuccess;
    if (b.nranks < 1 || b.nranks > CLB_MAX_RANKS) {  // before anything is sized by it
      snprintf(m, sizeof m, "rank %d says nranks=%d: a communicator has 1 to %d ranks", b.rank, b.nranks,
               CLB_MAX_RANKS);
      status = clbInvalidArgument;
    } else if (*nranks >= 0 && b.nranks != *nranks) {
      snprintf(m, sizeof m,
               "rank %d says nranks=%d but an earlier rank said nranks=%d: every rank must pass the same nranks",
               b.rank, b.nranks, *nranks);
      status = clbInvalidArgument;
    } else if (b.rank < 0 || b.rank >= b.nranks) {
      snprintf(m, sizeof m, "rank %d is out of range for nranks=%d", b.rank, b.nranks);
      status = clbInvalidArgument;
    } else if (b.info.rank != b.rank) {  // its row goes to its peers as rank b.rank's (protocol 9)
      snprintf(m, sizeof m, "rank %d's hello carries the row of rank %d: a rank's row describes itself", b.rank,
               b.info.rank);
      status = clbInvalidArgument;
    } else if (*nranks >= 0 && (*joined)[b.rank].link.open() && !leftSince(*joined, b.rank, *count)) {
      snprintf(m, sizeof m, "rank %d joined twice (from %s pid %d and pid %d): give every process a distinct rank",
               b.rank, b.info.hostname, (*table)[b.rank].pid, b.info.pid);
      status = clbInvalidArgument;
    } else if (!b.info.agreed.settingsValid) {
      // A rank whose configuration was refused joins only to say so (core/comm.cc, newComm):
      // every rank learns it now, not at its timeout.
      snprintf(m, sizeof m, "rank %d holds a setting that is not valid (its own error says which): fix it there",
               b.rank);
      status = clbInvalidUsage;
    }
    if (status != clbSuccess) {
      (void)sendReply(a.link, id.secret, a.transcript, status, m, 0, nullptr, nullptr, nowMs() + handshakeTimeoutMs());
      char who[160];
      snprintf(who, sizeof who, "rank %d (%s, pid %d) was refused, so this communicator cannot form: ", b.rank,
               b.info.hostname, b.info.pid);
      *failure = who + std::string(m);
      *failCode = status;
      return false;
    }
    if (*nranks < 0) {
      *nranks = b.nranks;
      joined->clear();
      joined->resize(*nranks);
      table->assign(*nranks, RankInfo{});
    }
    (*joined)[b.rank] = Joined{std::move(a.link), a.transcript};
    (*table)[b.rank] = b.info;
    (*count)++;
    changes++;
    ever.resize(*nranks);
    ever[b.rank] = 1;
    if (!warnAt) warnAt = nowMs() + (b.timeoutMs >= 4 && b.timeoutMs <= kMaxRootWaitMs ? b.timeoutMs / 4 : 15000);
    const int64_t wait =
        (b.timeoutMs >= 1 && b.timeoutMs <= kMaxRootWaitMs ? b.timeoutMs : kMaxRootWaitMs) + kRootGraceMs;
    if (nowMs() + wait > deadline) deadline = nowMs() + wait;
    return true;
  }

  // Joined rank r's connection closed (it gave up, or misbehaves: a joined rank sends nothing
  // more): its place frees, so that it can join again.
  void leave(std::vector<Joined>& joined, size_t r, int& count) {
    CLB_INFO("bootstrap root at %s: rank %zu closed its connection before the communicator formed", where.c_str(), r);
    joined[r].link.close();
    count--;
    changes++;
  }

  // Whether joined rank r's connection has closed (leave), looked at by itself.
  bool leftSince(std::vector<Joined>& joined, size_t r, int& count) {
    pollfd p{joined[r].link.fd(), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !p.revents) return false;
    leave(joined, r, count);
    return true;
  }

  // The joined ranks' connections, looked at every kJoinedCheckMs rather than in every turn of
  // the loop: a turn then costs the same at 8 ranks and at 8 192 (the listener, the pending
  // handshakes), not a poll of every rank that joined. A rank that joins again sooner is looked at
  // by itself (join, leftSince); atOnce: whatever the period (before the replies go out).
  static constexpr int64_t kJoinedCheckMs = 50;
  int64_t joinedCheckAt = 0;
  std::vector<pollfd> joinedFds{};
  void checkJoined(std::vector<Joined>& joined, int& count, int64_t now, bool atOnce = false) {
    if (now < joinedCheckAt && !atOnce) return;
    joinedCheckAt = now + kJoinedCheckMs;
    joinedFds.clear();
    for (const Joined& j : joined) joinedFds.push_back({j.link.fd(), j.link.open() ? (short)POLLIN : (short)0, 0});
    if (joinedFds.empty() || poll(joinedFds.data(), joinedFds.size(), 0) <= 0) return;
    for (size_t r = 0; r < joined.size(); r++)
      if (joined[r].link.open() && joinedFds[r].revents) leave(joined, r, count);
  }

  // When to say which ranks are missing (a quarter of the first rank's timeout after it joined;
  // 0: none joined yet), and whether it was said.
  int64_t warnAt = 0;
  bool warned = false;
  uint64_t changes = 0, noted = ~0ull;  // joins and leaves so far; how many the lists below reflect
  std::string gone{};                   // the ranks that never joined, as of `noted`

  // Which ranks ever joined (a rank that gave up at its own timeout came all the same).
  std::vector<char> ever{};

  // The ranks of `nranks` that never joined, as "1, 3, 5-9" (at most a few dozen named).
  std::string missingRanks(int nranks) const {
    return rankList(nranks, [&](int r) { return r < (int)ever.size() && ever[r]; });
  }
  // The ranks that joined and then closed their connection (they gave up at their own timeout).
  std::string leftRanks(const std::vector<Joined>& joined, int nranks) const {
    return rankList(nranks, [&](int r) {
      return !(r < (int)ever.size() && ever[r]) || (r < (int)joined.size() && joined[r].link.open());
    });
  }
  // The ranks of `nranks` for which skip(r) is false, as "1, 3, 5-9" (at most 32 ranges, then how
  // many more ranks).
  template <class Skip>
  static std::string rankList(int nranks, Skip skip) {
    std::string out;
    int named = 0;
    for (int r = 0; r < nranks; r++) {
      if (skip(r)) continue;
      int last = r;
      while (last + 1 < nranks && !skip(last + 1)) last++;
      if (++named > 32) {
        int more = 0;
        for (int q = r; q < nranks; q++) more += skip(q) ? 0 : 1;
        return out + " and " + std::to_string(more) + " more";
      }
      out += (out.empty() ? "" : ", ") + std::to_string(r) + (last > r ? "-" + std::to_string(last) : "");
      r = last;
    }
    return out;
  }

  // How the missing ranks are started, worded for the way this id was made.
  std::string startAdvice(int nranks) const {
    char b[320];
    if (id.flags & kIdRootAtRank0)
      snprintf(b, sizeof b,
               "start each with MASTER_ADDR=%s MASTER_PORT=%u WORLD_SIZE=%d and its own RANK (and the same "
               "COLIBRI_BOOTSTRAP_SECRET as the others, if they have one)",
               id.host, (unsigned)id.port, nranks);
    else if (id.flags & kIdGrow)
      snprintf(b, sizeof b,
               "start each new rank with the id that clbCommGetUniqueId made (the same bytes), calling "
               "clbCommGrow(NULL, %d, id, its rank, ...) / Communicator.join; the ranks 0..%u of the communicator "
               "being grown each call clbCommGrow on it",
               nranks, id.growFrom - 1);
    else
      snprintf(b, sizeof b,
               "start each with this communicator's UniqueId (the same bytes every rank passes to "
               "clbCommInitRank / Communicator.init), nranks=%d and its own rank",
               nranks);
    return b;
  }

  // Once ranks joined and others are still missing at warnAt: a WARN naming them, what a rank of
  // this process that waits in vain will be told, and a note to every joined rank (kReplyNote), so
  // that ranks in other processes and on other hosts learn it too (again after each join or leave).
  // The lists are made again only when a rank joined or left since (`changes`), and at most every
  // kJoinedCheckMs: not at every join, which made the root's work grow as n².
  int64_t listsAt = 0;
  void noteMissing(std::vector<Joined>& joined, const std::vector<RankInfo>& table, int nranks, int count) {
    if (changes != noted && nowMs() >= listsAt) {
      listsAt = nowMs() + kJoinedCheckMs;
      noted = changes;
      gone = nranks > 0 && count < nranks ? missingRanks(nranks) : std::string();
      const std::string left = nranks > 0 && count < nranks ? leftRanks(joined, nranks) : std::string();
      std::lock_guard<std::mutex> g(refusedMutex);
      missing = gone.empty() ? "" : "rank(s) " + gone + " of " + std::to_string(nranks);
      if (!left.empty())
        missing +=
            (missing.empty() ? "" : "; ") + std::string("rank(s) ") + left + " joined and gave up (their timeout)";
    }
    if (gone.empty() || !warnAt || nowMs() < warnAt || count >= nranks) return;  // all here: the replies say it
    const std::string note = "rank(s) " + gone + " of " + std::to_string(nranks) + "\n" + startAdvice(nranks);
    for (Joined& j : joined)
      if (j.link.open() && j.noted != noted) {
        j.noted = noted;
        (void)sendNote(j.link, id.secret, j.t, note, nowMs() + handshakeTimeoutMs());
      }
    if (warned) return;
    warned = true;
    std::string here;
    for (int r = 0, shown = 0; r < nranks && r < (int)joined.size() && shown < 4; r++)
      if (joined[r].link.open()) {
        here += std::string(shown++ ? ", " : "") + "rank " + std::to_string(r) + " on " + table[r].hostname + ", pid " +
                std::to_string(table[r].pid);
      }
    CLB_WARN(
        "bootstrap root at %s: %d of %d rank(s) joined (%s%s); still missing rank(s) %s, which the joined ranks wait "
        "for until their timeout: %s",
        where.c_str(), count, nranks, here.c_str(), count > 4 ? ", ..." : "", gone.c_str(),
        startAdvice(nranks).c_str());
  }

  void run() {
    HandshakeServer hs(listenFd, id.secret, 1u << kPurposeRoot, nullptr, sizeof(HelloBody), "root at " + where,
                       handshakeTimeoutMs(), kMaxPendingHandshakes, tls);
    std::vector<Joined> joined;
    std::vector<RankInfo> table;
    int nranks = -1, count = 0;
    std::vector<pollfd> fds;
    std::vector<Authenticated> done;
    const char* why = nullptr;
    std::string failure;
    clbResult_t failCode = clbSuccess;
    // Until the communicator forms, or, once a rank was refused, until the timeout or the release
    // (answering every later rank with that failure).
    while (!failure.empty() || nranks < 0 || count < nranks) {
      if (released.load()) {
        why = "its unique id was released";
        break;
      }
      const int64_t now = nowMs();
      if (now >= deadline) {
        why = "no communicator formed within its timeout";
        break;
      }
      fds.clear();
      fds.push_back({wakeFd, POLLIN, 0});
      const size_t n = hs.addPollFds(&fds);
      const int64_t left = std::min(deadline - now, std::max<int64_t>(joinedCheckAt - now, 1));
      if (poll(fds.data(), fds.size(), hs.pollTimeoutMs((int)(left < 100 ? left : 100))) < 0 && errno != EINTR) {
        why = "poll() failed";
        break;
      }
      done.clear();
      const uint64_t refusedBefore = hs.refused();
      hs.advance(fds, 1, n, &done);
      if (hs.refused() != refusedBefore) {
        std::lock_guard<std::mutex> g(refusedMutex);
        refused = std::to_string(hs.refused()) +
                  " connection(s) that hold another secret than the communicator's "
                  "(the last from " +
                  hs.lastRefused() + ")";
      }
      checkJoined(joined, count, nowMs());
      for (Authenticated& a : done) {
        if (!failure.empty()) {  // failed already: every later rank is told at once too
          (void)sendReply(a.link, id.secret, a.transcript, failCode, failure, 0, nullptr, nullptr,
                          nowMs() + handshakeTimeoutMs(), kReplyAboutAnother);
          continue;
        }
        if (join(a, &joined, &table, &nranks, &count, &failure, &failCode)) continue;
        // Every rank that joined learns it now, rather than at its timeout; no communicator forms.
        CLB_WARN("bootstrap root at %s: %s", where.c_str(), failure.c_str());
        const int64_t sendBy = nowMs() + handshakeTimeoutMs();
        for (Joined& j : joined)
          if (j.link.open())
            (void)sendReply(j.link, id.secret, j.t, failCode, failure, 0, nullptr, nullptr, sendBy, kReplyAboutAnother);
        joined.clear();
        count = 0;
        changes++;
      }
      // All here: is every joined rank still there?
      if (failure.empty() && nranks >= 0 && count >= nranks) checkJoined(joined, count, nowMs(), true);
      noteMissing(joined, table, nranks, count);
    }
    if (why) {
      // Joined ranks that gave up at their own timeout closed their connections: say who never came.
      const std::string never = nranks > 0 ? missingRanks(nranks) : std::string();
      CLB_INFO("bootstrap root at %s stops: %s (%d of %d rank(s) still joined%s%s)", where.c_str(), why, count, nranks,
               never.empty() ? "" : "; not joined: rank(s) ", never.c_str());
    } else {
      uint8_t session[kSessionBytes];
      if (!randomBytes(session, sizeof session)) {
        const int64_t x[2] = {nowMs(), (int64_t)getpid()};
        uint8_t d[kSha256Bytes];
        sha256(x, sizeof x, d);  // never reached on Linux >= 3.17; still distinct per root
        memcpy(session, d, sizeof session);
      }
      const int64_t sendBy = nowMs() + kRootSendMs;
      const std::array<uint8_t, kSha256Bytes> digest = tableDigest(table.data(), table.size());
      for (int r = 0; r < nranks; r++) {
        RankInfo rows[kReplyRows];
        const std::array<int, kReplyRows> at = replyRows(r, nranks);
        for (int k = 0; k < kReplyRows; k++) rows[k] = table[at[k]];
        (void)sendReply(joined[r].link, id.secret, joined[r].t, clbSuccess, "", (uint32_t)nranks, session, rows, sendBy,
                        0, &digest);
      }
      CLB_DEBUG("bootstrap root at %s done: %d ranks", where.c_str(), nranks);
    }
    joined.clear();
  }
};

}  // namespace

uint64_t localHostHash() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  std::string key = name;
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (fgets(boot, sizeof boot, f)) key += boot;
    fclose(f);
  }
  if (const char* h = getenv("COLIBRI_HOSTID")) key = h;  // lets tests pretend to be many hosts
  return Fnv1a().bytes(key.data(), key.size()).value();
}

uint32_t processNamespaceId() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) == 0 && (uint32_t)st.st_ino != 0) return (uint32_t)st.st_ino;
  static std::mutex m;
  static pid_t owner = 0;
  static uint32_t made = 0;
  std::lock_guard<std::mutex> lock(m);
  if (owner != getpid()) {  // first call, or a forked child: a value of its own
    owner = getpid();
    made = 0;
    while (made == 0)
      if (!randomBytes(&made, sizeof made)) made = (uint32_t)nowMs() ^ ((uint32_t)owner << 16);
  }
  return made;
}

SockAddr listenerOf(const RankInfo& pi, int p, char* name, size_t bytes) {
  IdData tmp{};
  tmp.family = pi.family;
  tmp.port = pi.port;
  memcpy(tmp.addr, pi.addr, 16);
  const SockAddr addr = idAddress(tmp);
  snprintf(name, bytes, "rank %d (%s, pid %d, %s)", p, pi.hostname, pi.pid, addr.str().c_str());
  return addr;
}

SockAddr idAddress(const IdData& id) {
  SockAddr a;
  if (id.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(id.port);
    memcpy(&s->sin6_addr, id.addr, 16);
    a.len = sizeof *s;
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(id.port);
    memcpy(&s->sin_addr, id.addr, 4);
    a.len = sizeof *s;
  }
  return a;
}

clbResult_t decodeId(const clbUniqueId* id, IdData* out) {
  if (!id) return setError(clbInvalidArgument, "unique id is NULL");
  memcpy(out, id, sizeof *out);
  if (out->magic != kIdMagic)
    return setError(clbInvalidArgument,
                    "this is not a Colibri unique id (bad magic %08x): create it with clbGetUniqueId / "
                    "UniqueId.create() and pass its bytes unchanged to every rank",
                    out->magic);
  if (out->protocol != CLB_PROTOCOL_VERSION)
    return setError(clbAuthError,
                    "the unique id was made for bootstrap protocol %u, this library (Colibri %s) speaks "
                    "protocol %u: run the same Colibri version on every rank",
                    out->protocol, versionString(CLB_VERSION_CODE).c_str(), CLB_PROTOCOL_VERSION);
  if (((out->flags & kIdTlsMask) >> kIdTlsShift) > (uint32_t)TlsMode::kAll)
    return setError(clbInvalidArgument,
                    "the unique id names TLS mode %u, which does not exist: pass every rank the id's "
                    "bytes unchanged",
                    (out->flags & kIdTlsMask) >> kIdTlsShift);
  return clbSuccess;
}

clbResult_t startRoot(const SockAddr& listenAddr, const IdData& id, int64_t waitMs, SockAddr* bound) {
  TlsContextRef tls;
  if (idTlsMode(id) != TlsMode::kOff) CLB_CHECK(tlsContextFor(idTlsMode(id), &tls));
  int fd = -1;
  CLB_CHECK(listenTcp(listenAddr, &fd, bound));
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int e = errno;
    close(fd);
    return setSysError(e, "eventfd() for the bootstrap root failed");
  }
  Root* root = new Root{fd, wake, id, "", nowMs() + waitMs, tls};
  if (!root->id.port) root->id.port = (uint16_t)bound->port();  // the id's port, for releaseRoot
  root->where = idAddress(root->id).str();
  {
    std::lock_guard<std::mutex> g(gRootsMutex);
    gRoots.push_back(root);
  }
  try {
    std::thread([root] {
      root->run();
      {
        std::lock_guard<std::mutex> g(gRootsMutex);
        gRoots.erase(std::find(gRoots.begin(), gRoots.end(), root));
      }
      close(root->listenFd);
      close(root->wakeFd);
      wipe(root->id.secret, sizeof root->id.secret);
      delete root;
    }).detach();
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> g(gRootsMutex);
      gRoots.erase(std::find(gRoots.begin(), gRoots.end(), root));
    }
    close(fd);
    close(wake);
    delete root;
    return setError(clbSystemError, "cannot start the bootstrap root thread: %s", e.what());
  }
  return clbSuccess;
}

namespace {
bool sameId(const IdData& a, const IdData& b) {
  return a.port == b.port && equalConstantTime(a.secret, b.secret, kSecretBytes);
}
}  // namespace

bool rootRuns(const IdData& id) {
  std::lock_guard<std::mutex> g(gRootsMutex);
  for (Root* r : gRoots)
    if (sameId(r->id, id)) return true;
  return false;
}

// `field` of the root of `id` in this process, read under its lock; "" when none runs here.
std::string rootText(const IdData& id, std::string Root::*field) {
  std::lock_guard<std::mutex> g(gRootsMutex);
  for (Root* r : gRoots)
    if (sameId(r->id, id)) {
      std::lock_guard<std::mutex> g2(r->refusedMutex);
      return r->*field;
    }
  return "";
}

std::string rootRefusals(const IdData& id) { return rootText(id, &Root::refused); }
std::string rootMissing(const IdData& id) { return rootText(id, &Root::missing); }

void releaseRoot(const IdData& id) {
  std::lock_guard<std::mutex> g(gRootsMutex);
  for (Root* r : gRoots)
    if (sameId(r->id, id)) {
      r->released.store(true);
      const uint64_t one = 1;
      (void)!write(r->wakeFd, &one, sizeof one);
    }
}

int runningRoots() {
  std::lock_guard<std::mutex> g(gRootsMutex);
  return (int)gRoots.size();
}

SockAddr listenAddressFor(const SockAddr& advertised, const char* hostAsGiven) {
  SockAddr a = advertised;
  bool any = false;
  if (const char* b = getenv("COLIBRI_BOOTSTRAP_BIND"); b && !strcmp(b, "any")) any = true;
  if (!any && hostAsGiven) {
    bool loopback = false;
    if (a.ss.ss_family == AF_INET)
      loopback = (ntohl(reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr) >> 24) == 127;
    else
      loopback = IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
    uint8_t literal[16];
    const bool isLiteral =
        inet_pton(AF_INET, hostAsGiven, literal) == 1 || inet_pton(AF_INET6, hostAsGiven, literal) == 1;
    bool loopbackName = false;
    for (const char* n : {"localhost", "localhost.localdomain", "localhost6", "localhost6.localdomain6",
                          "ip6-localhost", "ip6-loopback"})
      loopbackName = loopbackName || strcasecmp(hostAsGiven, n) == 0;
    // A host name that resolves to loopback here (Debian's 127.0.1.1): other hosts reach it at
    // another address, so listen on every interface.
    if (loopback && !isLiteral && !loopbackName) any = true;
  }
  if (any) {
    if (a.ss.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&a.ss)->sin_addr.s_addr = htonl(INADDR_ANY);
    else
      reinterpret_cast<sockaddr_in6*>(&a.ss)->sin6_addr = in6addr_any;
  }
  return a;
}

Bootstrap::~Bootstrap() { close(); }

bool Bootstrap::inThisPidNamespace(int p) const {
  const RankInfo &o = peers_[p], &me = peers_[rank_];
  return o.hostHash == me.hostHash && o.pidNamespace == me.pidNamespace && me.pidNamespace != 0;
}

bool Bootstrap::inThisProcess(int p) const {
  return p == rank_ || (inThisPidNamespace(p) && peers_[p].pid == peers_[rank_].pid);
}

void Bootstrap::close() {
  stopAcceptor();  // first: its thread reads the secret and the listener
  wipe(id_.secret, kSecretBytes);
  wipe(session_, kSessionBytes);
  closeFd(&listenFd_);
  up_.close();
  for (Link& l : children_) l.close();
  nextCtl_.close();
  prevCtl_.close();
  dataNext_.close();
  dataPrev_.close();
}

clbResult_t tlsModeForNewId(TlsMode* out) {
  bool set = false;
  CLB_CHECK(tlsModeFromEnv(out, &set));
  TlsContextRef ctx;
  return tlsContextFor(*out, &ctx);
}

clbResult_t Bootstrap::init(const IdData& id, int rank, int nranks, int64_t timeoutMs, const std::atomic<bool>* abort,
                            const VersionInfo* versions, const AgreedSettings* agreed, const TableCheck& checkTable) {
  id_ = id;
  rank_ = rank;
  nranks_ = nranks;
  timeoutMs_ = timeoutMs;
  abort_ = abort;
  const int64_t deadline = nowMs() + timeoutMs;
  SockAddr root = idAddress(id);
  CLB_CHECK(setUpTls(id, rank));
  if ((id.flags & kIdRootAtRank0) && rank == 0) {
    SockAddr bound;
    CLB_CHECK(startRoot(listenAddressFor(root, id.host), id, timeoutMs, &bound));
    clbResult_t rc = joinRoot(root, deadline, versions, agreed, checkTable);
    if (rc != clbSuccess) releaseRoot(id_);  // frees MASTER_PORT for a retry in this process
    return rc;
  }
  return joinRoot(root, deadline, versions, agreed, checkTable);
}

clbResult_t Bootstrap::setUpTls(const IdData& id, int rank) {
  // TLS as the id says; a rank told otherwise by its own COLIBRI_TLS does not silently follow.
  TlsMode envMode = TlsMode::kOff;
  bool envSet = false;
  CLB_CHECK(tlsModeFromEnv(&envMode, &envSet));
  const TlsMode mode = idTlsMode(id);
  if (envSet && envMode != mode)
    return setError(clbInvalidUsage,
                    "rank %d runs with COLIBRI_TLS=%s, but its unique id was made with COLIBRI_TLS=%s: make the id "
                    "where COLIBRI_TLS is the same as on every rank (or unset it on the ranks: they follow the id)",
                    rank, tlsModeName(envMode), tlsModeName(mode));
  TlsContextRef ctx;
  if (clbResult_t rc = tlsContextFor(mode, &ctx); rc != clbSuccess) {
    if (envSet) return rc;
    const std::string why = lastError();
    return setError(rc, "rank %d's unique id was made with COLIBRI_TLS=%s, so this rank runs TLS too: %s", rank,
                    tlsModeName(mode), why.c_str());
  }
  rootTls_ = mode != TlsMode::kOff ? ctx : nullptr;
  ringTls_ = mode == TlsMode::kAll ? ctx : nullptr;
  return clbSuccess;
}

clbResult_t Bootstrap::openListener(int rank, RankInfo* info) {
  // On the address other hosts can reach (advertised in the table).
  SockAddr local;
  CLB_CHECK(localAddress(&local));
  SockAddr bound;
  closeFd(&listenFd_);
  CLB_CHECK(listenTcp(listenAddressFor(local), &listenFd_, &bound));
  memset(info, 0, sizeof *info);
  info->rank = rank;
  info->pid = getpid();
  info->hostHash = localHostHash();
  info->pidNamespace = processNamespaceId();
  info->family = local.ss.ss_family;
  info->port = (uint16_t)bound.port();
  if (local.ss.ss_family == AF_INET)
    memcpy(info->addr, &reinterpret_cast<sockaddr_in*>(&local.ss)->sin_addr, 4);
  else
    memcpy(info->addr, &reinterpret_cast<sockaddr_in6*>(&local.ss)->sin6_addr, 16);
  gethostname(info->hostname, sizeof info->hostname - 1);
  return clbSuccess;
}

clbResult_t Bootstrap::prepareTable(const IdData& id, int rank, RankInfo* info) {
  CLB_CHECK(setUpTls(id, rank));
  return openListener(rank, info);
}

clbResult_t Bootstrap::initWithTable(const IdData& id, int rank, int nranks, int64_t timeoutMs,
                                     const std::atomic<bool>* abort, const uint8_t session[kSessionBytes],
                                     std::vector<RankInfo> table, const TableCheck& checkTable,
                                     const std::array<uint8_t, kSha256Bytes>* digest) {
  id_ = id;
  rank_ = rank;
  nranks_ = nranks;
  timeoutMs_ = timeoutMs;
  abort_ = abort;
  if (listenFd_ < 0 || (int)table.size() != nranks)
    return setError(clbInternalError,
                    "bootstrap from a table: no listener (prepareTable), or a table of %zu ranks "
                    "for %d",
                    table.size(), nranks);
  if (digest)  // the rows this rank connects with must be there; the others are gathered
    for (int k : replyRows(rank, nranks))
      if (table[k].rank != k)
        return setError(clbRemoteError, "rank %d: the lowest survivor's answer holds no row of rank %d", rank, k);
  for (int p = 0; p < nranks; p++) {              // as the root does with the rows it receives
    if (digest && table[p].rank == -1) continue;  // to be gathered
    table[p].hostname[sizeof table[p].hostname - 1] = '\0';
    if (table[p].rank != p)
      return setError(clbRemoteError, "rank %d: row %d of the table says rank %d", rank, p, table[p].rank);
  }
  memcpy(session_, session, kSessionBytes);
  memcpy(&nonce_, session_, sizeof nonce_);
  peers_ = std::move(table);
  if (digest)
    return connectAndGather(*digest, "the lowest survivor", checkTable);  // replyRows only, as after a root's reply
  if (checkTable) CLB_CHECK(checkTable(peers_));  // every member has this table: all fail, or none does
  CLB_CHECK(connectRing());                       // the listener stays: see closeListener / startPeerAcceptor
  return clbSuccess;
}

clbResult_t Bootstrap::readNote(Link& link, const ReplyHeader& rep, const Transcript& t, int64_t deadline,
                                const std::string& rootName, std::string* note) {
  if (rep.msgBytes > kMaxReplyMessageBytes)
    return setError(clbAuthError, "%s sent a note of %u bytes (at most %u)", rootName.c_str(), rep.msgBytes,
                    kMaxReplyMessageBytes);
  std::string msg(rep.msgBytes, '\0');
  uint8_t mac[kTagBytes];
  if (!msg.empty()) CLB_CHECK(recvAll(link, msg.data(), msg.size(), deadline, abort_, rootName.c_str()));
  CLB_CHECK(recvAll(link, mac, sizeof mac, deadline, abort_, rootName.c_str()));
  if (!tagMatches(id_.secret, kRootNote, t, {{&rep, sizeof rep}, {msg.data(), msg.size()}}, mac))
    return setError(clbAuthError,
                    "a note of %s failed its authentication tag: something on the network between this rank and "
                    "the root changed it",
                    rootName.c_str());
  for (char& ch : msg)
    if ((unsigned char)ch < 0x20 && ch != '\n') ch = '?';
  // A root in this process says it itself (Root::noteMissing): one line, not one per rank thread.
  if (msg != *note && !rootRuns(id_)) {
    const size_t nl = msg.find('\n');
    CLB_WARN("rank %d: %s still waits for %s (this rank waits for them until its timeout, %lld ms): %s", rank_,
             rootName.c_str(), msg.substr(0, nl).c_str(), (long long)timeoutMs_,
             nl == std::string::npos ? "start them" : msg.substr(nl + 1).c_str());
    *note = msg;
  }
  return clbSuccess;
}

clbResult_t Bootstrap::joinRoot(const SockAddr& root, int64_t deadline, const VersionInfo* versions,
                                const AgreedSettings* agreed, const TableCheck& checkTable) {
  const IdData& id = id_;
  const int rank = rank_, nranks = nranks_;
  const int64_t timeoutMs = timeoutMs_;
  const std::atomic<bool>* abort = abort_;

  HelloBody body{};
  body.rank = rank;
  body.nranks = nranks;
  body.timeoutMs = timeoutMs;
  CLB_CHECK(openListener(rank, &body.info));  // our ring listener
  if (versions) body.info.versions = *versions;
  if (agreed)
    body.info.agreed = *agreed;
  else
    body.info.agreed.settingsValid = 1;  // nothing to agree on: not a refused configuration

  // An id may name every interface (MASTER_ADDR=0.0.0.0), which no one can reach from elsewhere:
  // a dial there reaches this host, and the messages name the root by the address it reached.
  std::string rootAt = root.str();
  std::string rootName = "the bootstrap root at " + rootAt;
  // Connect and prove the secret; again if the root closed before its challenge (it was full of
  // pending connections, or rank 0 is still starting it), or before its reply while it still
  // accepts connections (it dropped this one as late or as the oldest pending).
  Link link;
  Transcript t{};
  ReplyHeader rep{};
  std::string note;  // the root's last note of the ranks still missing (kReplyNote)
  clbResult_t rc = clbSuccess;
  bool again = false;  // after an EOF before the reply: only a root that still listens is retried
  for (int delayMs = 1;; delayMs = delayMs < 64 ? delayMs * 2 : 100) {
    int fd = -1;
    rc = connectTcp(root, again ? std::min(deadline, nowMs() + 200) : deadline, abort, &fd);
    if (rc == clbTimeout && again) rc = clbRemoteError;
    if (rc == clbRemoteError) {
      return setError(clbRemoteError,
                      "%s closed the connection before all %d ranks joined: it stops when no communicator forms "
                      "within its timeout, when its id is released, or when its process exits",
                      rootName.c_str(), nranks);
    }
    if (rc == clbTimeout)
      return setError(clbTimeout,
                      "rank %d could not reach %s within %lld ms: start it (clbGetUniqueId's process must still "
                      "run, and its root gives up when no communicator forms within its timeout) or raise the "
                      "timeout (COLIBRI_TIMEOUT_MS)",
                      rank, rootName.c_str(), (long long)timeoutMs);
    CLB_CHECK(rc);
    link = Link(fd);
    if (isWildcard(root)) {
      SockAddr peer;
      peer.len = sizeof peer.ss;
      if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer.ss), &peer.len) == 0 && !isWildcard(peer)) {
        rootAt = peer.str();
        rootName = "the bootstrap root at " + rootAt;
      }
    }
    bool retry = false;
    rc = clientHandshake(link, rootTls_, id.secret, kPurposeRoot, nullptr, &body, sizeof body, deadline, abort,
                         rootName.c_str(), &t, &retry);
    // The reply; before it, any notes of ranks the root still waits for.
    while (rc == clbSuccess) {
      rc = recvAll(link, &rep, sizeof rep, deadline, abort, rootName.c_str());
      if (rc == clbRemoteError) retry = again = true;
      if (rc != clbSuccess || !(rep.flags & kReplyNote)) break;
      rc = readNote(link, rep, t, deadline, rootName, &note);
    }
    if (rc == clbSuccess) break;
    // A root in this process says what it refused meanwhile (often the rank that never came) and
    // who is missing: asked before this rank's connection closes, which would count it as gone.
    const std::string refused = rc == clbTimeout ? rootRefusals(id_) : std::string();
    std::string missing = rc == clbTimeout ? rootMissing(id_) : std::string();
    if (missing.empty()) missing = note.substr(0, note.find('\n'));  // the root's last note, if any
    link.close();
    if (rc == clbTimeout) {
      const bool byAddress = id_.flags & kIdRootAtRank0;
      return setError(clbTimeout,
                      "rank %d waited %lld ms at %s for all %d ranks to join%s%s%s%s%s; start every rank %s, or raise "
                      "the timeout (COLIBRI_TIMEOUT_MS)",
                      rank, (long long)timeoutMs, rootAt.c_str(), nranks,
                      missing.empty() ? "" : " (missing: ", missing.c_str(), missing.empty() ? "" : ")",
                      refused.empty() ? "" : ". Meanwhile the root refused ",
                      (refused + (refused.empty() ? ""
                                  : byAddress     ? ": is a rank running with another secret or address?"
                                                  : ": is a rank running with another UniqueId?"))
                          .c_str(),
                      byAddress ? "with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE and its own RANK"
                                : "with the same UniqueId");
    }
    if (!retry || nowMs() + delayMs >= deadline) return rc;
    usleep(delayMs * 1000);
  }
  std::string msg;
  const bool ok = rc == clbSuccess && rep.status == clbSuccess;
  if (rc == clbSuccess && (rep.msgBytes > kMaxReplyMessageBytes || (ok && rep.nranks != (uint32_t)nranks)))
    rc = setError(clbAuthError, "%s sent a reply that does not fit this rank's hello (message of %u bytes, %u ranks)",
                  rootName.c_str(), rep.msgBytes, rep.nranks);
  if (rc == clbSuccess) {
    msg.assign(rep.msgBytes, '\0');
    if (!msg.empty()) rc = recvAll(link, msg.data(), msg.size(), deadline, abort, rootName.c_str());
  }
  // On success the whole table's digest and this rank's rows (replyRows); the rest of the table
  // comes over the tree once it is connected (gatherTable).
  std::array<uint8_t, kSha256Bytes> digest{};
  RankInfo rows[kReplyRows];
  memset(rows, 0, sizeof rows);
  if (rc == clbSuccess && ok) rc = recvAll(link, digest.data(), digest.size(), deadline, abort, rootName.c_str());
  if (rc == clbSuccess && ok) rc = recvAll(link, rows, sizeof rows, deadline, abort, rootName.c_str());
  uint8_t mac[kTagBytes];
  if (rc == clbSuccess) rc = recvAll(link, mac, sizeof mac, deadline, abort, rootName.c_str());
  link.close();
  CLB_CHECK(rc);
  if (!tagMatches(
          id.secret, kRootReply, t,
          {{&rep, sizeof rep}, {msg.data(), msg.size()}, {digest.data(), digest.size()}, {rows, ok ? sizeof rows : 0}},
          mac)) {
    return setError(clbAuthError,
                    "the reply of %s failed its authentication tag: something on the network between "
                    "this rank and the root changed it",
                    rootName.c_str());
  }
  if (!ok && (rep.flags & kReplyAboutAnother))
    return setError((clbResult_t)rep.status, "%s stopped before the communicator formed: %s", rootName.c_str(),
                    msg.c_str());
  if (!ok) return setError((clbResult_t)rep.status, "%s refused rank %d: %s", rootName.c_str(), rank, msg.c_str());
  memcpy(session_, rep.session, kSessionBytes);
  memcpy(&nonce_, session_, sizeof nonce_);
  // The rows this rank connects with; the others say "not here yet" (rank -1) until gatherTable.
  RankInfo unknown{};
  unknown.rank = -1;
  peers_.assign(nranks, unknown);
  const std::array<int, kReplyRows> at = replyRows(rank, nranks);
  for (int k = 0; k < kReplyRows; k++) {
    rows[k].hostname[sizeof rows[k].hostname - 1] = '\0';
    if (rows[k].rank != at[k])
      return setError(clbRemoteError, "rank %d: %s sent the row of rank %d in the place of rank %d's", rank,
                      rootName.c_str(), rows[k].rank, at[k]);
    peers_[at[k]] = rows[k];
  }
  return connectAndGather(digest, "the root", checkTable);
}

clbResult_t Bootstrap::connectAndGather(const std::array<uint8_t, kSha256Bytes>& digest, const char* source,
                                        const TableCheck& checkTable) {
  CLB_CHECK(connectRing());  // the listener stays: see closeListener / startPeerAcceptor
  CLB_CHECK(gatherTable(digest, source));
  if (checkTable) CLB_CHECK(checkTable(peers_));  // every rank has this table: all fail, or none does
  return clbSuccess;
}

std::array<uint8_t, kSha256Bytes> tableDigest(const RankInfo* rows, size_t count) {
  std::array<uint8_t, kSha256Bytes> d{};
  if (count) sha256(rows, count * sizeof(RankInfo), d.data());
  return d;
}

clbResult_t Bootstrap::gatherTable(const std::array<uint8_t, kSha256Bytes>& rootDigest, const char* source) {
  CLB_CHECK(allGather(peers_.data(), sizeof(RankInfo)));  // this rank's row: as `source` sent it
  return checkGatheredTable(&peers_, rootDigest, rank_, source);
}

clbResult_t checkGatheredTable(std::vector<RankInfo>* table, const std::array<uint8_t, kSha256Bytes>& rootDigest,
                               int rank, const char* source) {
  // Each hop of the tree is tagged, so a change on the network fails a tag first: a mismatch here
  // is a rank holding the secret that changed a row it forwarded, or a source that hashed another
  // table than the rows it sent.
  if (tableDigest(table->data(), table->size()) != rootDigest)
    return setError(clbAuthError,
                    "rank %d: the table of the %zu ranks gathered over the bootstrap tree differs from the one %s "
                    "hashed (SHA-256): a rank on the tree changed a row it forwarded, or %s hashed another table",
                    rank, table->size(), source, source);
  for (size_t p = 0; p < table->size(); p++) {  // as initWithTable checks the table it is given
    RankInfo& row = (*table)[p];
    row.hostname[sizeof row.hostname - 1] = '\0';
    if (row.rank != (int)p)
      return setError(clbRemoteError, "rank %d: row %zu of the table says rank %d", rank, p, row.rank);
  }
  return clbSuccess;
}

std::string Bootstrap::rowName(int p) const {
  if (p < 0 || p >= (int)peers_.size() || peers_[p].rank != p) return "rank " + std::to_string(p);
  return "rank " + std::to_string(p) + " (" + peers_[p].hostname + " pid " + std::to_string(peers_[p].pid) + ")";
}

// One of this rank's three dials (two to next, one to its tree parent), moved on by connectRing's
// poll loop: connect (again after a refusal, or after a close during TLS or before the peer's
// challenge or answer), TLS (COLIBRI_TLS=all), hello, proof + body, then the peer's tagged answer.
struct RingDial {
  enum Stage { kWaiting, kConnecting, kTls, kChallenge, kAnswer, kDone };
  int channel = 0;
  int toRank = 0;
  SockAddr to;
  char name[160] = {};   // the peer, for messages
  Link* link = nullptr;  // the connection, from its socket on (up_, nextCtl_ or dataNext_)
  Stage stage = kWaiting;
  int64_t at = 0;                   // kWaiting: when to connect
  int64_t connectBy = 0;            // the attempts of one connect end then (0: not started)
  int delayMs = 1;                  // the wait before the next attempt
  bool again = false;               // next closed before its answer: it is connected again only while it still listens
  std::unique_ptr<TlsSession> tls;  // kTls: the client handshake under way (on the link once done)
  ClientHello hello{};
  Transcript t{};
  bool polled() const { return stage != kWaiting && stage != kDone; }
  short events() const {
    if (stage == kConnecting) return POLLOUT;
    if (stage == kTls) return tls->wantEvents(POLLIN);
    return link->wantEvents(POLLIN);
  }
  // A whole TLS record read already: the next step has it although the socket is not readable.
  bool buffered() const { return (stage == kChallenge || stage == kAnswer) && link->buffered(); }
};

std::vector<int> treeChildren(int r, int n) {
  std::vector<int> c;
  const int end = treeEnd(r, n);
  for (int64_t step = 1; r + step < end; step *= 2) c.push_back((int)(r + step));
  return c;
}

// A connection that proved the secret and this communicator's session: kept when it comes from
// prev for a ring channel not yet in, or from a child of this rank for the tree, refused otherwise;
// the answer is tagged either way.
void Bootstrap::acceptRing(Authenticated* a) {
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  RingBody b;
  memcpy(&b, a->body.data(), sizeof b);
  const int channel = a->purpose == kPurposeRingNotices    ? kRingChannelNotices
                      : b.channel == kRingChannelTransport ? kRingChannelTransport
                                                           : kRingChannelBootstrap;
  Link* slot = nullptr;
  Transcript* t = nullptr;
  if (channel != kRingChannelBootstrap) {
    if (b.fromRank == prev) slot = ringLink(channel, false);
  } else {
    for (size_t j = 0; j < childRanks_.size(); j++)
      if (childRanks_[j] == b.fromRank) slot = &children_[j], t = &childT_[j];
  }
  const uint32_t status = slot && b.toRank == rank_ && b.channel == channel && !slot->open() ? (uint32_t)clbSuccess
                                                                                             : (uint32_t)clbAuthError;
  uint8_t mac[kTagBytes];
  tag(id_.secret, kRingAccept, a->transcript, {{&status, sizeof status}}, mac);
  const int64_t by = nowMs() + handshakeTimeoutMs();
  if (sendAllParts(a->link, {{&status, sizeof status}, {mac, sizeof mac}}, by, nullptr, a->from.c_str()) !=
          clbSuccess ||
      status != clbSuccess) {
    if (status != clbSuccess)
      CLB_WARN(
          "rank %d refused a ring connection from %s: it proved the secret but says it is rank %d to rank %d "
          "on channel %d (expected rank %d on the ring channels, a child of this rank on the tree's, once each)",
          rank_, a->from.c_str(), b.fromRank, b.toRank, b.channel, prev);
    a->link.close();
    return;
  }
  *slot = std::move(a->link);
  if (t) *t = a->transcript;
}

// Moves `d` on; `ready`: poll() saw its socket ready (or TLS holds data for it).
clbResult_t Bootstrap::stepDial(RingDial* d, bool ready, int64_t deadline) {
  const SockAddr& na = d->to;
  const char* nextName = d->name;
  const int64_t now = nowMs();
  bool retry = false;
  clbResult_t rc = clbSuccess;
  int err = 0;
  switch (d->stage) {
    case RingDial::kWaiting: {
      if (now < d->at) return clbSuccess;
      if (!d->connectBy) d->connectBy = d->again ? std::min(deadline, now + 200) : deadline;
      int fd = -1;
      bool noSocket = false;
      err = startConnect(na, &fd, &noSocket);
      if (noSocket) return setSysError(err, "socket() to connect to %s failed", na.str().c_str());
      if (fd >= 0) *d->link = Link(fd);
      if (err == EINPROGRESS) {
        d->stage = RingDial::kConnecting;
        return clbSuccess;
      }
      break;
    }
    case RingDial::kConnecting:
      if (!ready) return clbSuccess;
      err = finishConnect(d->link->fd());
      if (err != 0) d->link->close();
      break;
    case RingDial::kTls: {
      if (!ready) return clbSuccess;
      std::string why;
      const int r = d->tls->handshakeStep(&why);
      if (r == 0) return clbSuccess;  // again once its socket is ready for what TLS wants
      if (r == -2) {                  // closed during TLS: full, or restarting (connected again)
        rc = setError(clbRemoteError, "TLS with %s: %s", nextName, why.c_str());
        retry = true;
        break;
      }
      if (r < 0) {
        rc = setError(clbAuthError, "TLS with %s: %s", nextName, why.c_str());
        break;
      }
      CLB_DEBUG("TLS to %s: %s", nextName, d->tls->describe().c_str());
      d->link->setTls(std::move(d->tls));
      d->stage = RingDial::kChallenge;
      return clientHello(*d->link, id_.secret, ringPurpose(d->channel), deadline, abort_, nextName, &d->hello);
    }
    case RingDial::kChallenge: {
      if (!ready) return clbSuccess;
      const RingBody body{rank_, d->toRank, d->channel, 0};
      rc = clientProve(*d->link, id_.secret, d->hello, session_, &body, sizeof body, deadline, abort_, nextName, &d->t,
                       &retry);
      if (rc == clbSuccess) d->stage = RingDial::kAnswer;
      break;
    }
    case RingDial::kAnswer: {
      if (!ready) return clbSuccess;
      uint32_t status = 0;
      uint8_t mac[kTagBytes];
      rc = recvAll(*d->link, &status, sizeof status, deadline, abort_, nextName);
      if (rc == clbRemoteError) retry = d->again = true;
      if (rc == clbSuccess) rc = recvAll(*d->link, mac, sizeof mac, deadline, abort_, nextName);
      if (rc != clbSuccess) break;
      if (!tagMatches(id_.secret, kRingAccept, d->t, {{&status, sizeof status}}, mac))
        return setError(clbAuthError,
                        "%s's answer failed its authentication tag: something on the network between "
                        "the ranks changed it",
                        nextName);
      if (status != clbSuccess) return setError(clbAuthError, "%s refused this rank's ring connection", nextName);
      if (d->channel == kRingChannelBootstrap) upT_ = d->t;
      d->stage = RingDial::kDone;
      return clbSuccess;
    }
    case RingDial::kDone: return clbSuccess;
  }
  if (d->stage == RingDial::kTls || d->stage == RingDial::kChallenge || d->stage == RingDial::kAnswer) {
    if (rc == clbSuccess) return clbSuccess;
    // The handshake failed: over, unless next closed before answering (it was full or restarting).
    d->tls.reset();
    d->link->close();
    if (!retry || now + d->delayMs >= deadline) return rc;
  } else if (err == 0) {  // connected: TLS first where COLIBRI_TLS=all, else say hello
    d->connectBy = 0;
    if (ringTls_) {
      CLB_CHECK(TlsSession::create(ringTls_, d->link->fd(), false, &d->tls));
      d->stage = RingDial::kTls;
      return stepDial(d, true, deadline);  // its client hello goes out now
    }
    d->stage = RingDial::kChallenge;
    return clientHello(*d->link, id_.secret, ringPurpose(d->channel), deadline, abort_, nextName, &d->hello);
  } else {
    if (!connectRetryable(err)) return setSysError(err, "cannot connect to %s", nextName);
    if (now + d->delayMs >= d->connectBy) {
      if (d->again)
        return setError(clbRemoteError, "%s closed the ring connection before answering, and no longer listens",
                        nextName);
      return setError(clbTimeout,
                      "nobody accepted a connection at %s before the timeout (last error: %s); check that the peer "
                      "is running and the address is reachable",
                      nextName, strerror(err));
    }
  }
  d->stage = RingDial::kWaiting;  // again after a pause
  d->at = now + d->delayMs;
  d->delayMs = d->delayMs < 64 ? d->delayMs * 2 : 100;
  return clbSuccess;
}

clbResult_t Bootstrap::connectRing() {
  childRanks_ = treeChildren(rank_, nranks_);
  children_.clear();
  children_.resize(childRanks_.size());
  childT_.assign(childRanks_.size(), Transcript{});
  exchange_ = 0;
  if (nranks_ == 1) return clbSuccess;
  const int64_t deadline = nowMs() + timeoutMs_;
  const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  // prev and this rank's children connect to us while we connect to next and to our parent (every
  // rank is both, so one after the other would wait in a circle): one poll loop on this thread
  // serves our listener and moves our dials on, side by side. No thread to start, and no hop
  // between threads.
  char where[96];
  snprintf(where, sizeof where, "rank %d's ring listener", rank_);
  // A rank that finished init first may already dial this one for point-to-point, or for a shrink
  // of the communicator being made (same body size): kept for the acceptor, which answers it once
  // it runs (startPeerAcceptor).
  HandshakeServer server(
      listenFd_, id_.secret,
      (1u << kPurposeRingData) | (1u << kPurposeRingNotices) | (1u << kPurposePeerData) | (1u << kPurposeGather),
      session_, sizeof(RingBody), where, handshakeTimeoutMs(), kMaxPendingHandshakes, ringTls_);
  RingDial dials[kRingChannels];
  for (int ch = 0; ch < kRingChannels; ch++) {
    RingDial& d = dials[ch];
    d.channel = ch;
    d.toRank = ch == kRingChannelBootstrap ? treeParent(rank_) : next;
    d.link = ch == kRingChannelBootstrap ? &up_ : ringLink(ch, true);
    d.to = listenerOf(peers_[d.toRank], d.toRank, d.name, sizeof d.name);
    if (ch == kRingChannelBootstrap && rank_ == 0) d.stage = RingDial::kDone;  // the tree's root
  }
  std::vector<pollfd> fds;
  std::vector<Authenticated> done;
  for (;;) {
    for (RingDial& d : dials) CLB_CHECK(stepDial(&d, false, deadline));  // the attempts due
    bool connected = true;
    for (const RingDial& d : dials) connected = connected && d.stage == RingDial::kDone;
    int missing = -1;  // a rank whose connection to this one is still to come
    if (!prevCtl_.open() || !dataPrev_.open()) missing = prev;
    for (size_t j = 0; missing < 0 && j < children_.size(); j++)
      if (!children_[j].open()) missing = childRanks_[j];
    if (connected && missing < 0) return clbSuccess;
    if (abort_ && abort_->load())
      return setError(clbAborted,
                      "rank %d stopped connecting its ring (to rank %d, from rank %d) and tree (to rank %d, from %zu "
                      "children): aborted",
                      rank_, next, prev, treeParent(rank_), childRanks_.size());
    const int64_t now = nowMs();
    if (now >= deadline && !connected) {
      const RingDial* late = nullptr;  // the first dial not through
      for (const RingDial& d : dials)
        if (!late && d.stage != RingDial::kDone) late = &d;
      return setError(clbTimeout,
                      "rank %d waited %lld ms for %s to take its %s connection: is it stuck or unable to reach "
                      "this host? Raise the timeout with COLIBRI_TIMEOUT_MS if it is slow",
                      rank_, (long long)timeoutMs_, late->name,
                      late->channel == kRingChannelBootstrap ? "tree (bootstrap)" : "ring");
    }
    if (now >= deadline)
      return setError(clbTimeout,
                      "rank %d waited %lld ms for %s to connect its ring or tree connections: is it stuck or unable "
                      "to reach this host? Raise the timeout with COLIBRI_TIMEOUT_MS if it is slow",
                      rank_, (long long)timeoutMs_, rowName(missing).c_str());
    fds.clear();
    int64_t wait = std::min<int64_t>(20, deadline - now);  // the server's deadlines are checked this often
    for (const RingDial& d : dials) {
      fds.push_back({d.polled() ? d.link->fd() : -1, d.polled() ? d.events() : (short)0, 0});
      if (d.stage == RingDial::kWaiting) wait = std::min(wait, std::max<int64_t>(0, d.at - now));
      if (d.buffered()) wait = 0;
    }
    const size_t n = server.addPollFds(&fds);
    if (poll(fds.data(), fds.size(), server.pollTimeoutMs((int)wait)) < 0 && errno != EINTR)
      return setSysError(errno, "poll() on the ring connections");
    done.clear();
    server.advance(fds, kRingChannels, n, &done);
    for (Authenticated& a : done) {
      if (a.purpose == kPurposePeerData || a.purpose == kPurposeGather)
        earlyPeers_.push_back(std::move(a));
      else
        acceptRing(&a);
    }
    for (int ch = 0; ch < kRingChannels; ch++)
      if (fds[ch].fd >= 0 && (fds[ch].revents || dials[ch].buffered())) CLB_CHECK(stepDial(&dials[ch], true, deadline));
  }
}

// A tree message: its blocks (treeSpan), then a tag over the exchange's number, the direction, the
// range and the bytes, keyed by the connection's handshake.
clbResult_t Bootstrap::sendTree(Link& link, const Transcript& t, bool up, uint64_t ex, int from, int to, const char* b,
                                size_t bytes, int64_t deadline, const char* name) {
  const uint64_t head[4] = {ex, (uint64_t)from, (uint64_t)to, (uint64_t)bytes};
  const TreeSpan s = treeSpan(up, from, to, nranks_, bytes);
  const ConstBuf lo{b, s.loBytes}, hi{b + s.hiOffset, s.hiBytes};
  uint8_t mac[kTagBytes];
  tag(id_.secret, up ? kTreeUp : kTreeDown, t, {{head, sizeof head}, {lo.data, lo.bytes}, {hi.data, hi.bytes}}, mac);
  return sendAllParts(link, {lo, hi, {mac, sizeof mac}}, deadline, abort_, name);
}

clbResult_t Bootstrap::recvTree(Link& link, const Transcript& t, bool up, uint64_t ex, int from, int to, char* b,
                                size_t bytes, int64_t deadline, int peer, const char* name) {
  const uint64_t head[4] = {ex, (uint64_t)from, (uint64_t)to, (uint64_t)bytes};
  const TreeSpan s = treeSpan(up, from, to, nranks_, bytes);
  char *lo = b, *hi = b + s.hiOffset;
  const size_t loBytes = s.loBytes, hiBytes = s.hiBytes;
  uint8_t mac[kTagBytes];
  if (loBytes) CLB_CHECK(recvAll(link, lo, loBytes, deadline, abort_, name));
  if (hiBytes) CLB_CHECK(recvAll(link, hi, hiBytes, deadline, abort_, name));
  CLB_CHECK(recvAll(link, mac, sizeof mac, deadline, abort_, name));
  if (!tagMatches(id_.secret, up ? kTreeUp : kTreeDown, t, {{head, sizeof head}, {lo, loBytes}, {hi, hiBytes}}, mac))
    return setError(clbAuthError,
                    "rank %d: a bootstrap block from rank %d failed its authentication tag (the blocks of ranks %s%d "
                    "to %d, exchange %llu, %s the tree): something on the network changed it, or the ranks disagree "
                    "on the exchange",
                    rank_, peer, up ? "" : "outside ", from, to - 1, (unsigned long long)ex, up ? "up" : "down");
  return clbSuccess;
}

// Up the tree, each subtree's blocks gathered at its top (the smaller subtrees first: they are
// ready first); then down, each rank sending each child what lies outside the child's subtree (the
// larger subtrees first: they have further to go).
clbResult_t Bootstrap::allGather(void* buf, size_t bytes) {
  if (nranks_ == 1) return clbSuccess;
  char* b = static_cast<char*>(buf);
  const int64_t deadline = nowMs() + timeoutMs_;
  const uint64_t ex = exchange_++;
  const int parent = treeParent(rank_), end = treeEnd(rank_, nranks_);
  char name[96];
  for (size_t j = 0; j < childRanks_.size(); j++) {
    const int c = childRanks_[j];
    snprintf(name, sizeof name, "rank %d (this rank's child in the bootstrap tree)", c);
    CLB_CHECK(recvTree(children_[j], childT_[j], true, ex, c, treeEnd(c, nranks_), b, bytes, deadline, c, name));
  }
  if (rank_ > 0) {
    snprintf(name, sizeof name, "rank %d (this rank's parent in the bootstrap tree)", parent);
    CLB_CHECK(sendTree(up_, upT_, true, ex, rank_, end, b, bytes, deadline, name));
    CLB_CHECK(recvTree(up_, upT_, false, ex, rank_, end, b, bytes, deadline, parent, name));
  }
  for (size_t j = childRanks_.size(); j-- > 0;) {
    const int c = childRanks_[j];
    snprintf(name, sizeof name, "rank %d (this rank's child in the bootstrap tree)", c);
    CLB_CHECK(sendTree(children_[j], childT_[j], false, ex, c, treeEnd(c, nranks_), b, bytes, deadline, name));
  }
  return clbSuccess;
}

clbResult_t Bootstrap::barrier() {
  std::vector<char> v(nranks_);
  return allGather(v.data(), 1);
}

}  // namespace clb
