// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The bootstrap under attack, over loopback: what a rank writes never holds its secret; forged,
// replayed and reflected handshakes are refused while the real ranks form their communicator;
// idle, junk and half-open connections at the root and at a ring listener do not delay init;
// random and mutated handshake messages crash, leak and hang nothing; a man in the middle that
// changes one byte of the root's reply, of a ring accept or of an all-gather block fails init at
// once, by the message's tag; roots of ids never used stop at their timeout or when released,
// leaving no thread or fd; listeners bind the advertised address, not every interface.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/net.h"
#include "tests/test_bootstrap.h"
#include "tests/test_ranks.h"
#include "tests/test_tls.h"

// ---- a tap on every byte this process sends on a socket ----
// The library is linked into this binary statically, so these definitions take the place of
// libc's for its calls: while the tap is on, what goes out is recorded, then sent as usual.
namespace {
std::atomic<bool> gTapOn{false};
std::mutex gTapMutex;
std::string gTapped;                              // everything, in order
std::vector<std::pair<int, std::string>> gSends;  // each send with its fd
void record(int fd, const void* p, ssize_t n) {
  if (n <= 0 || !gTapOn.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> g(gTapMutex);
  gTapped.append(static_cast<const char*>(p), (size_t)n);
  gSends.emplace_back(fd, std::string(static_cast<const char*>(p), (size_t)n));
}
void tapStart() {
  std::lock_guard<std::mutex> g(gTapMutex);
  gTapped.clear();
  gSends.clear();
  gTapOn = true;
}

// A man in the middle on the same tap: while armed, every send() of the process, and every part
// of a sendmsg() (the bootstrap sends a message of several parts, such as the root's reply header,
// table and tag, as one sendmsg), goes past `picks` (fd, bytes) first, and the first send or part
// it picks goes out as a copy whose byte at `offset` is xor `mask`; the caller's buffer stays as it
// was (the sender MACed and keeps the true bytes). One pick per arming; `mask` 0 sends an unchanged
// copy (the control). In the selectors below, a "send" is either. With `cut`, the send it picks
// does not go out at all: its connection is shut down instead, as a listener that closes it does.
struct Tamper {
  std::function<bool(int fd, const char* bytes, size_t n)> picks;
  size_t offset = 0;
  uint8_t mask = 1;
  bool cut = false;
};
std::atomic<bool> gTamperArmed{false};
std::mutex gTamperMutex;
Tamper gTamper;
std::atomic<int> gTamperPicked{0};   // sends picked since arming: 0 or 1
std::atomic<int> gTamperFlipped{0};  // bytes that went out changed
std::atomic<int> gTamperCut{0};      // connections shut down instead of a send

// Whether this send is the one to change; if so, `changed` holds what goes out instead, changed at `at`.
// With a cut, the connection is shut down and true returned with `changed` empty.
bool tamperPicks(int fd, const void* buf, size_t n, std::string* changed, size_t* at) {
  if (!gTamperArmed.load()) return false;
  std::lock_guard<std::mutex> g(gTamperMutex);
  if (!gTamperArmed.load() || gTamperPicked.load() || !gTamper.picks(fd, static_cast<const char*>(buf), n))
    return false;
  gTamperPicked++;
  if (gTamper.cut) {
    shutdown(fd, SHUT_RDWR);
    gTamperCut++;
    changed->clear();
    return true;
  }
  if (gTamper.offset >= n) return false;  // a selector that points past its message changes nothing
  changed->assign(static_cast<const char*>(buf), n);
  (*changed)[gTamper.offset] ^= (char)gTamper.mask;
  *at = gTamper.offset;
  return true;
}

void tamperArm(Tamper t) {
  std::lock_guard<std::mutex> g(gTamperMutex);
  gTamper = std::move(t);
  gTamperPicked = 0;
  gTamperFlipped = 0;
  gTamperCut = 0;
  gTamperArmed = true;
}

void tamperDisarm() {
  std::lock_guard<std::mutex> g(gTamperMutex);
  gTamperArmed = false;
  gTamper = Tamper{};
}
}  // namespace

extern "C" ssize_t send(int fd, const void* buf, size_t n, int flags) {
  std::string changed;
  size_t at = 0;
  const bool picked = tamperPicks(fd, buf, n, &changed, &at);
  if (picked && changed.empty()) {  // cut: nothing goes out
    errno = EPIPE;
    return -1;
  }
  const void* out = picked ? changed.data() : buf;
  ssize_t r = syscall(SYS_sendto, fd, out, n, flags, nullptr, 0);
  // Counted once the changed byte is on the wire (a short send that stops before it changes nothing).
  if (picked && r > (ssize_t)at && changed[at] != static_cast<const char*>(buf)[at]) gTamperFlipped++;
  record(fd, out, r);
  return r;
}
extern "C" ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  // The parts go past the man in the middle one by one, as sends of their own would.
  std::vector<iovec> iov(m->msg_iov, m->msg_iov + m->msg_iovlen);
  std::string changed;
  size_t at = 0, partAt = 0, picked = iov.size();
  for (size_t i = 0, off = 0; i < iov.size(); off += iov[i].iov_len, i++)
    if (tamperPicks(fd, iov[i].iov_base, iov[i].iov_len, &changed, &at)) {
      if (changed.empty()) {  // cut: nothing goes out
        errno = EPIPE;
        return -1;
      }
      iov[i].iov_base = changed.data();
      picked = i;
      partAt = off;
      break;
    }
  msghdr out = *m;
  out.msg_iov = iov.data();
  ssize_t r = syscall(SYS_sendmsg, fd, &out, flags);
  // Counted once the changed byte is on the wire, as for send().
  if (picked < iov.size() && r > (ssize_t)(partAt + at) &&
      changed[at] != static_cast<const char*>(m->msg_iov[picked].iov_base)[at])
    gTamperFlipped++;
  for (size_t i = 0, left = r > 0 ? (size_t)r : 0; i < iov.size() && left; i++) {
    size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
    record(fd, iov[i].iov_base, (ssize_t)k);
    left -= k;
  }
  return r;
}

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `ms` for `done`.
bool within(int ms, const std::function<bool()>& done) {
  const int64_t by = clb::nowMs() + ms;
  while (!done() && clb::nowMs() < by) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

clbConfig_t config(int64_t timeoutMs, int transport = clbTransportAuto) {
  clbConfig_t c;
  clbConfigInit(&c);
  c.timeoutMs = timeoutMs;
  c.transport = transport;
  return c;
}

// n rank threads init with `uid`, all-reduce once (checked) and destroy; the slowest init's time,
// and each rank's init result and how long its init took to return (success or not).
struct Formed {
  std::vector<std::string> errors;
  double slowestInitMs = 0;
  std::vector<clbResult_t> codes;
  std::vector<double> returnedMs;
};
Formed formCommunicator(const clbUniqueId& uid, int n, int64_t timeoutMs, int transport = clbTransportAuto,
                        const std::function<void()>& whileRank0Waits = nullptr) {
  Formed f;
  f.errors.assign(n, "");
  f.codes.assign(n, clbInternalError);
  f.returnedMs.assign(n, 0);
  std::vector<double> ms(n, 0);
  std::atomic<bool> rank0In{false};
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++) {
    ts.emplace_back([&, r] {
      if (r > 0 && whileRank0Waits) {
        while (!rank0In.load()) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (r == 1) whileRank0Waits();
      }
      clbConfig_t cfg = config(timeoutMs, transport);
      clbComm_t c = nullptr;
      const auto t0 = Clock::now();
      if (r == 0) rank0In = true;
      f.codes[r] = clbCommInitRank(&c, &uid, r, n, &cfg);
      f.returnedMs[r] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (f.codes[r] != clbSuccess) {
        f.errors[r] = clbGetLastError();
        return;
      }
      ms[r] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      int v = r + 1, out = 0;
      if (clbAllReduce(&v, &out, 1, clbInt32, clbSum, c, nullptr) != clbSuccess)
        f.errors[r] = clbGetLastError();
      else if (out != n * (n + 1) / 2)
        f.errors[r] = "allReduce gave " + std::to_string(out);
      clbCommDestroy(c);
    });
    if (r == 0 && whileRank0Waits) {
      while (!rank0In.load()) std::this_thread::yield();
    }
  }
  for (auto& t : ts) t.join();
  for (double m : ms) f.slowestInitMs = m > f.slowestInitMs ? m : f.slowestInitMs;
  return f;
}

void expectFormed(const Formed& f) {
  for (size_t r = 0; r < f.errors.size(); r++) EXPECT_EQ(f.errors[r], "") << "rank " << r;
}

// Whether any `window`-byte run of `secret` occurs in `bytes`.
bool holdsPartOf(const std::string& bytes, const uint8_t* secret, size_t secretBytes, size_t window) {
  for (size_t i = 0; i + window <= secretBytes; i++)
    if (bytes.find(std::string(reinterpret_cast<const char*>(secret) + i, window)) != std::string::npos) return true;
  return false;
}

class SecretOnTheWire : public ::testing::TestWithParam<int> {};

// Everything three ranks send while they init, all-reduce and destroy (root hellos, ring
// handshakes, the bootstrap's exchanges, the data path) holds no 4-byte run of the secret.
TEST_P(SecretOnTheWire, NoByteRunOfTheSecretIsEverSent) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  const clb::IdData id = clbtest::idData(uid);
  tapStart();
  Formed f = formCommunicator(uid, 3, 10000, GetParam());
  gTapOn = false;
  expectFormed(f);
  std::lock_guard<std::mutex> g(gTapMutex);
  EXPECT_GT(gTapped.size(), 3 * sizeof(clb::ClientHello)) << "the tap saw the bootstrap's traffic";
  EXPECT_FALSE(holdsPartOf(gTapped, id.secret, clb::kSecretBytes, 4)) << gTapped.size() << " bytes sent";
}
INSTANTIATE_TEST_SUITE_P(Transports, SecretOnTheWire, ::testing::Values(clbTransportShm, clbTransportSocket),
                         [](const auto& i) { return std::string(i.param == clbTransportShm ? "Shm" : "Socket"); });

// A TCP port on 127.0.0.1 that was free a moment ago (bound, then released), or -1.
int freeLoopbackPort() {
  clb::SockAddr any, bound;
  int lfd = -1;
  if (clb::resolveHost("127.0.0.1", 0, &any) != clbSuccess || clb::listenTcp(any, &lfd, &bound) != clbSuccess)
    return -1;
  clb::closeFd(&lfd);
  return bound.port();
}

// The torchrun form: neither the passphrase nor the secret made of it goes out.
TEST(SecretOnTheWireFromAddress, PassphraseNeverSent) {
  const int port = freeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string pass = "correct horse battery staple";
  clbUniqueId uid;
  ASSERT_EQ(clbUniqueIdFromAddress("127.0.0.1", port, pass.c_str(), &uid), clbSuccess);
  tapStart();
  Formed f = formCommunicator(uid, 2, 10000);
  gTapOn = false;
  expectFormed(f);
  std::lock_guard<std::mutex> g(gTapMutex);
  EXPECT_EQ(gTapped.find("horse"), std::string::npos);
  EXPECT_FALSE(holdsPartOf(gTapped, clbtest::idData(uid).secret, clb::kSecretBytes, 4));
}

// A rank whose passphrase differs is refused with "wrong secret"; one that takes the same
// passphrase from COLIBRI_BOOTSTRAP_SECRET joins.
TEST(Passphrase, DifferentPassphraseIsRefusedTheSameOneJoins) {
  const int port = freeLoopbackPort();
  ASSERT_GT(port, 0);
  clbUniqueId a, b, c;
  ASSERT_EQ(clbUniqueIdFromAddress("127.0.0.1", port, "alpha", &a), clbSuccess);
  ASSERT_EQ(clbUniqueIdFromAddress("127.0.0.1", port, "beta", &b), clbSuccess);
  setenv("COLIBRI_BOOTSTRAP_SECRET", "alpha", 1);
  ASSERT_EQ(clbUniqueIdFromAddress("127.0.0.1", port, nullptr, &c), clbSuccess);
  unsetenv("COLIBRI_BOOTSTRAP_SECRET");
  std::string e0, e1, e2;
  std::thread r0([&] {
    clbConfig_t cfg = config(5000);
    clbComm_t comm = nullptr;
    if (clbCommInitRank(&comm, &a, 0, 2, &cfg) != clbSuccess)
      e0 = clbGetLastError();
    else
      clbCommDestroy(comm);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 opens the root
  clbConfig_t cfg = config(2000);
  clbComm_t comm = nullptr;
  EXPECT_EQ(clbCommInitRank(&comm, &b, 1, 2, &cfg), clbAuthError);
  e1 = clbGetLastError();
  if (clbCommInitRank(&comm, &c, 1, 2, &cfg) != clbSuccess)
    e2 = clbGetLastError();
  else
    clbCommDestroy(comm);
  r0.join();
  EXPECT_NE(e1.find("wrong secret"), std::string::npos) << e1;
  EXPECT_EQ(e2, "");
  EXPECT_EQ(e0, "");
}

// A client that does not hold the secret: it cannot pass for the root's peer (the root's proof
// fails at the client), and a proof it makes up is refused; the real ranks then form.
TEST(Handshake, ForgedHelloWithoutTheSecretIsRefused) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  const clb::IdData id = clbtest::idData(uid);
  uint8_t guess[clb::kSecretBytes];
  memcpy(guess, id.secret, sizeof guess);
  guess[0] ^= 1;
  clbtest::RootAnswer a = clbtest::helloToRoot(id, guess, 0, 2);
  EXPECT_EQ(a.rc, clbAuthError);
  EXPECT_NE(a.error.find("wrong secret"), std::string::npos) << a.error;
  // By hand: a hello, then 32 made-up bytes as the proof with a hello body.
  int fd = clbtest::rawConnect(clb::idAddress(id));
  ASSERT_GE(fd, 0);
  clb::ClientHello h{clb::kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, clb::kPurposeRoot, 0, 0, {}};
  ASSERT_EQ(send(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
  clb::ServerChallenge ch{};
  ASSERT_EQ(clb::recvAll(fd, &ch, sizeof ch, clb::nowMs() + 2000, nullptr, "root"), clbSuccess);
  std::vector<uint8_t> forged(clb::kTagBytes + sizeof(clb::HelloBody), 0x42);
  ASSERT_EQ(send(fd, forged.data(), forged.size(), 0), (ssize_t)forged.size());
  EXPECT_TRUE(clbtest::closedSilently(fd, 2000)) << "the root drops a connection whose proof is wrong";
  close(fd);
  expectFormed(formCommunicator(uid, 2, 5000));
}

// What a real rank sent on one connection, replayed on another, is refused (the root's nonce
// differs); so is the root's own proof sent back as the client's (reflection). The real rank whose
// bytes were replayed held a place and left: its place frees and the real ranks form.
TEST(Handshake, ReplayedAndReflectedAnswersAreRefused) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  const clb::IdData id = clbtest::idData(uid);
  tapStart();
  int held = -1;
  clbtest::RootAnswer a = clbtest::helloToRoot(id, id.secret, 0, 2, &held);
  gTapOn = false;
  ASSERT_EQ(a.rc, clbSuccess) << a.error;
  std::string recorded;  // what the client sent (the root's challenge went out on another fd)
  {
    // The client's connection is the one whose first send is its hello: the root's thread may
    // have sent its challenge before the tap saw the hello, so the first send is not enough.
    std::lock_guard<std::mutex> g(gTapMutex);
    int client = -1;
    for (const auto& s : gSends)
      if (client < 0 && s.second.size() == sizeof(clb::ClientHello)) {
        clb::ClientHello h;
        memcpy(&h, s.second.data(), sizeof h);
        if (h.magic == clb::kWireMagic) client = s.first;
      }
    for (const auto& s : gSends)
      if (s.first == client) recorded += s.second;
  }
  ASSERT_EQ(recorded.size(), sizeof(clb::ClientHello) + clb::kTagBytes + sizeof(clb::HelloBody));
  // Replay, on a new connection, of the hello and of the proof with its body.
  int fd = clbtest::rawConnect(clb::idAddress(id));
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, recorded.data(), sizeof(clb::ClientHello), 0), (ssize_t)sizeof(clb::ClientHello));
  clb::ServerChallenge ch{};
  ASSERT_EQ(clb::recvAll(fd, &ch, sizeof ch, clb::nowMs() + 2000, nullptr, "root"), clbSuccess);
  const size_t rest = recorded.size() - sizeof(clb::ClientHello);
  ASSERT_EQ(send(fd, recorded.data() + sizeof(clb::ClientHello), rest, 0), (ssize_t)rest);
  EXPECT_TRUE(clbtest::closedSilently(fd, 2000)) << "a replayed proof is refused";
  close(fd);
  // Reflection: the root's proof as the client's.
  fd = clbtest::rawConnect(clb::idAddress(id));
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, recorded.data(), sizeof(clb::ClientHello), 0), (ssize_t)sizeof(clb::ClientHello));
  ASSERT_EQ(clb::recvAll(fd, &ch, sizeof ch, clb::nowMs() + 2000, nullptr, "root"), clbSuccess);
  std::string reflected(reinterpret_cast<const char*>(ch.proof), clb::kTagBytes);
  reflected += recorded.substr(sizeof(clb::ClientHello) + clb::kTagBytes);
  ASSERT_EQ(send(fd, reflected.data(), reflected.size(), 0), (ssize_t)reflected.size());
  EXPECT_TRUE(clbtest::closedSilently(fd, 2000)) << "a reflected proof is refused";
  close(fd);
  close(held);  // the recorded rank 0 leaves: its place frees
  // Once the root has seen it leave: its end of the connection may read the close a moment later
  // (the kernel can defer loopback's delivery), and until then the place is not free.
  EXPECT_TRUE(within(3000, [&] { return clb::rootMissing(id).find("gave up") != std::string::npos; }))
      << clb::rootMissing(id);
  expectFormed(formCommunicator(uid, 2, 5000));
}

// A server that does not hold the secret learns nothing it could use: the rank refuses it (its
// proof is wrong) before sending a proof of its own, and says "wrong secret" with both prints.
TEST(Handshake, RankRefusesARootThatCannotProveTheSecret) {
  clb::SockAddr lo, bound;
  ASSERT_EQ(clb::resolveHost("127.0.0.1", 0, &lo), clbSuccess);
  int lfd = -1;
  ASSERT_EQ(clb::listenTcp(lo, &lfd, &bound), clbSuccess);
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  ASSERT_EQ(clbUniqueIdRelease(&uid), clbSuccess);
  clb::IdData id = clbtest::idData(uid);
  id.port = (uint16_t)bound.port();
  memcpy(id.addr, &reinterpret_cast<sockaddr_in*>(&bound.ss)->sin_addr, 4);
  memcpy(&uid, &id, sizeof id);
  size_t got = 0;
  std::thread fake([&] {
    int fd = -1;
    if (clb::acceptTcp(lfd, clb::nowMs() + 3000, nullptr, &fd) != clbSuccess) return;
    clb::ClientHello h{};
    if (clb::recvAll(fd, &h, sizeof h, clb::nowMs() + 2000, nullptr, "rank") != clbSuccess) return;
    got = sizeof h;
    clb::ServerChallenge ch{clb::kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, clbSuccess, 0, 0x1234, {}, {}};
    memset(ch.proof, 0x77, sizeof ch.proof);
    (void)!send(fd, &ch, sizeof ch, 0);
    char b[256];
    for (;;) {
      ssize_t n = recv(fd, b, sizeof b, 0);
      if (n <= 0) break;
      got += n;
    }
    close(fd);
  });
  clbConfig_t cfg = config(3000);
  clbComm_t c = nullptr;
  EXPECT_EQ(clbCommInitRank(&c, &uid, 0, 2, &cfg), clbAuthError);
  const std::string msg = clbGetLastError();
  fake.join();
  clb::closeFd(&lfd);
  EXPECT_NE(msg.find("wrong secret"), std::string::npos) << msg;
  EXPECT_NE(msg.find("00001234"), std::string::npos) << msg;
  EXPECT_EQ(got, sizeof(clb::ClientHello)) << "the rank sent nothing after its hello";
}

// ---- a man in the middle that changes one byte ----

int localPort(int fd) {
  clb::SockAddr a;
  a.len = sizeof a.ss;
  return getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) == 0 ? a.port() : -1;
}

// Whether one of this process's sockets listens on `port`.
bool listensHere(int port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return false;
  bool found = false;
  while (struct dirent* e = readdir(d)) {
    const int fd = atoi(e->d_name);
    int on = 0;
    socklen_t len = sizeof on;
    if (fd > 2 && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on && localPort(fd) == port)
      found = true;
  }
  closedir(d);
  return found;
}

int peerPort(int fd) {
  clb::SockAddr a;
  a.len = sizeof a.ss;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) == 0 ? a.port() : -1;
}

// Each rank's ring listener port, learnt from the hellos (proof, then HelloBody) the ranks of this
// process send the root: they all go out before the root answers, so before any ring connection.
struct RingPorts {
  std::vector<int> port;
  explicit RingPorts(int n) : port(n, -1) {}
  void learn(const char* p, size_t n) {
    if (n != clb::kTagBytes + sizeof(clb::HelloBody)) return;
    clb::HelloBody b;
    memcpy(&b, p + clb::kTagBytes, sizeof b);
    if (b.rank >= 0 && b.rank < (int)port.size() && b.info.pid == getpid()) port[b.rank] = b.info.port;
  }
};

// One message to change: how many ranks init over which transport, the rank that receives the
// changed message, the selector with the byte it changes, and what that rank's error says.
struct TamperCase {
  const char* name;
  int nranks;
  int transport;
  int victim;
  Tamper tamper;
  const char* says;
};

// The header of the root's reply to rank `victim`: the root answers the ranks in rank order, so
// it is the victim-th 32-byte send shaped like a success header for n ranks (status 0, no message,
// nranks n, pad 0; a 32-byte tag is random and has none of that shape). The first byte of the
// session changes. A rank takes the session as it comes; it keys the ring's handshakes and names
// the shm segments, so without the tag the rank would go on in another session and fail only at the
// ring, blaming a neighbour that "did not prove the secret".
TamperCase rootReplyHeader(int n, int victim) {
  Tamper t;
  t.picks = [n, victim, seen = 0](int, const char* p, size_t bytes) mutable {
    if (bytes != sizeof(clb::ReplyHeader)) return false;
    clb::ReplyHeader h;
    memcpy(&h, p, sizeof h);
    if (h.status != clbSuccess || h.msgBytes != 0 || h.nranks != (uint32_t)n || h.flags != 0) return false;
    return seen++ == victim;
  };
  t.offset = offsetof(clb::ReplyHeader, session);
  return {"the root's reply header",
          n,
          clbTransportShm,
          victim,
          t,
          "failed its authentication tag: something on the network between this rank and the root changed it"};
}

// The rows in the root's reply to rank `victim` (clb::replyRows: its own, next's, its tree
// parent's, prev's): the victim-th send of that many RankInfo entries of this process, in that
// order. The first byte of the hostname in next's row changes: a hostname only names its rank in
// messages, so without the tag nothing would ever notice.
TamperCase rootReplyTable(int n, int victim) {
  Tamper t;
  t.picks = [n, victim, seen = 0](int, const char* p, size_t bytes) mutable {
    if (bytes != clb::kReplyRows * sizeof(clb::RankInfo)) return false;  // only the victim's rows match below
    const std::array<int, clb::kReplyRows> want = clb::replyRows(victim, n);
    for (int k = 0; k < clb::kReplyRows; k++) {
      clb::RankInfo e;
      memcpy(&e, p + k * sizeof e, sizeof e);
      if (e.rank != want[k] || e.pid != getpid()) return false;
    }
    return seen++ == 0;
  };
  t.offset = sizeof(clb::RankInfo) + offsetof(clb::RankInfo, hostname);
  return {"the root's reply rows",
          n,
          clbTransportShm,
          victim,
          t,
          "failed its authentication tag: something on the network between this rank and the root changed it"};
}

// The ring's accept that rank `server`'s listener sends its previous rank, which checks it: the
// first 4-byte send of status 0 on a connection whose local port is that listener's (the data
// channel's accept: prev connects it first). The status's low byte changes. An accept holds
// nothing but its status, so no change of it would pass unseen; without the tag this one would
// read as a refusal ("refused this rank's ring connection"), blaming the neighbour.
TamperCase ringAccept(int n, int server) {
  Tamper t;
  t.picks = [server, ports = RingPorts(n)](int fd, const char* p, size_t bytes) mutable {
    ports.learn(p, bytes);
    uint32_t status = 1;
    if (bytes == sizeof status) memcpy(&status, p, sizeof status);
    return bytes == sizeof status && status == clbSuccess && ports.port[server] > 0 &&
           localPort(fd) == ports.port[server];
  };
  t.offset = 0;
  return {"a ring accept", n, clbTransportShm, (server + n - 1) % n, t, "'s answer failed its authentication tag"};
}

// The first 8-byte all-gather block that rank `victim` (the root of the bootstrap tree, rank 0, or
// another rank with children) receives. Init's second bootstrap all-gather (the first, exchange 0,
// gathers the table's rows) is the shm transport's (every control block exists, and on which
// /dev/shm): a block of 8 bytes per rank, which a child sends up
// on its connection to the victim's ring listener (its peer port; the notice channel to that
// listener carries nothing during init). Its first byte changes: without the tag the victim would
// read it as a rank on another /dev/shm, not as a change on the way.
TamperCase allGatherBlock(int n, int victim) {
  Tamper t;
  t.picks = [victim, ports = RingPorts(n)](int fd, const char* p, size_t bytes) mutable {
    ports.learn(p, bytes);
    return bytes == sizeof(uint64_t) && ports.port[victim] > 0 && peerPort(fd) == ports.port[victim];
  };
  t.offset = 0;
  return {"an all-gather block",
          n,
          clbTransportShm,
          victim,
          t,
          ", exchange 1, up the tree): something on the network changed it"};
}

// A row of the table on its way up the tree (exchange 0, protocol 9): the first 304-byte block
// that rank `victim` receives from a child, on the child's connection to the victim's ring
// listener. The first byte of its hostname changes: the tree's tag catches it before the table's
// hash is even compared.
TamperCase allGatherRow(int n, int victim) {
  Tamper t;
  t.picks = [victim, ports = RingPorts(n)](int fd, const char* p, size_t bytes) mutable {
    ports.learn(p, bytes);
    return bytes == sizeof(clb::RankInfo) && ports.port[victim] > 0 && peerPort(fd) == ports.port[victim];
  };
  t.offset = offsetof(clb::RankInfo, hostname);
  return {"a row of the table on its way up the tree",
          n,
          clbTransportShm,
          victim,
          t,
          ", exchange 0, up the tree): something on the network changed it"};
}

// The shm transport's exchange (allGatherBlock's) on its way down: what rank 0, the tree's root,
// sends its child rank 2 (n = 3), the blocks of ranks 0 and 1 in one 16-byte part, on the
// connection that rank 2 dialed to rank 0's listener (its local port there). Without the tag rank 2 would take rank 0
// or 1 for a rank on another /dev/shm.
TamperCase allGatherDown() {
  Tamper t;
  t.picks = [ports = RingPorts(3)](int fd, const char* p, size_t bytes) mutable {
    ports.learn(p, bytes);
    return bytes == 2 * sizeof(uint64_t) && ports.port[0] > 0 && localPort(fd) == ports.port[0];
  };
  t.offset = 0;
  return {"an all-gather block on its way down",
          3,
          clbTransportShm,
          2,
          t,
          "failed its authentication tag (the blocks of ranks outside 2 to 2, exchange 1, down the tree)"};
}

constexpr int64_t kTamperTimeoutMs = 2000;

// Inits the case's ranks with its selector armed (changing by `mask`), then disarms.
Formed initTampered(const TamperCase& c, uint8_t mask) {
  clbUniqueId uid;
  EXPECT_EQ(clbGetUniqueId(&uid), clbSuccess);
  Tamper t = c.tamper;
  t.mask = mask;
  tamperArm(std::move(t));
  Formed f = formCommunicator(uid, c.nranks, kTamperTimeoutMs, c.transport);
  tamperDisarm();
  return f;
}

// The changed message is caught by its tag: the receiving rank's init fails with clbAuthError and
// says so, long before the timeout; every other rank's init returns an error too (at its timeout
// at the latest: a rank that fails does not tell the others).
void expectCaught(const TamperCase& c) {
  Formed f = initTampered(c, 1);
  ASSERT_EQ(gTamperPicked.load(), 1) << "the selector found " << c.name;
  ASSERT_EQ(gTamperFlipped.load(), 1) << "one byte of " << c.name << " went out changed";
  const int v = c.victim;
  EXPECT_EQ(f.codes[v], clbAuthError) << "rank " << v << ": " << f.errors[v];
  EXPECT_NE(f.errors[v].find(c.says), std::string::npos) << "rank " << v << ": " << f.errors[v];
  EXPECT_LT(f.returnedMs[v], kTamperTimeoutMs / 3) << "rank " << v << " catches it at once, not at its timeout";
  for (int r = 0; r < c.nranks; r++) {
    printf("%s changed, rank %d returned %s after %.0f ms: %s\n", c.name, r, clbGetErrorString(f.codes[r]),
           f.returnedMs[r], f.errors[r].substr(0, f.errors[r].find('\n')).c_str());
    if (r == v) continue;
    EXPECT_NE(f.codes[r], clbSuccess) << "rank " << r << " forms no communicator without rank " << v;
    EXPECT_LT(f.returnedMs[r], kTamperTimeoutMs + 2000) << "rank " << r << " returns: " << f.errors[r];
    // A peer that failed is named as such, not mistaken for a host problem (its segment is gone).
    EXPECT_EQ(f.errors[r].find("is /dev/shm mounted"), std::string::npos) << "rank " << r << ": " << f.errors[r];
  }
}

TEST(Tamper, RootReplyHeaderByteFailsItsTag) { expectCaught(rootReplyHeader(2, 1)); }

TEST(Tamper, RootReplyTableByteFailsItsTag) { expectCaught(rootReplyTable(3, 1)); }

TEST(Tamper, RingAcceptByteFailsItsTag) { expectCaught(ringAccept(3, 2)); }

TEST(Tamper, AllGatherBlockByteFailsItsTag) { expectCaught(allGatherBlock(3, 0)); }

TEST(Tamper, AllGatherBlockOnItsWayDownFailsItsTag) { expectCaught(allGatherDown()); }

TEST(Tamper, TableRowOnItsWayUpFailsItsTag) { expectCaught(allGatherRow(3, 0)); }

// The control: the same selectors with mask 0 pick their message and send it as an unchanged
// copy, and every rank inits and all-reduces, so what fails above is the changed byte alone.
TEST(Tamper, UnchangedCopiesLetInitSucceed) {
  for (const TamperCase& c : {rootReplyHeader(2, 1), rootReplyTable(3, 1), ringAccept(3, 2), allGatherBlock(3, 0),
                              allGatherDown(), allGatherRow(3, 0)}) {
    Formed f = initTampered(c, 0);
    EXPECT_EQ(gTamperPicked.load(), 1) << "the selector found " << c.name;
    EXPECT_EQ(gTamperFlipped.load(), 0) << c.name;
    expectFormed(f);
  }
}

// ---- what the root and a shrink's lowest survivor send: a constant size per rank ----

// Bytes sent, while armed, on connections whose local port is `port` (a listener's accepted
// connections): a counter on the man in the middle that picks nothing.
struct PortBytes {
  std::atomic<size_t> bytes{0};
  std::atomic<int> port{-1};
  RingPorts ports;
  explicit PortBytes(int n) : ports(n) {}
  void arm() {
    Tamper t;
    t.picks = [this](int fd, const char* p, size_t n) {
      ports.learn(p, n);
      if (port.load() > 0 && localPort(fd) == port.load()) bytes += n;
      return false;
    };
    tamperArm(std::move(t));
  }
};

// n rank threads over sockets: init (the root's bytes counted), then every rank but the last
// shrinks the communicator without it (the bytes rank 0's listener sends counted: rank 0 is the
// lowest survivor, which answers the others). Returns {root bytes per rank, lowest survivor's bytes
// per other survivor}; both checked communicators all-reduce correctly.
std::pair<double, double> rootAndLeadBytes(int n) {
  clbUniqueId uid;
  EXPECT_EQ(clbGetUniqueId(&uid), clbSuccess);
  PortBytes counter(n);
  counter.port = clbtest::idData(uid).port;
  counter.arm();
  std::vector<clbComm_t> comms(n, nullptr);
  std::vector<std::string> errors(n);
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < n; r++)
      ts.emplace_back([&, r] {
        clbConfig_t cfg = config(10000, clbTransportSocket);
        if (clbCommInitRank(&comms[r], &uid, r, n, &cfg) != clbSuccess) errors[r] = clbGetLastError();
      });
    for (auto& t : ts) t.join();
  }
  const double rootPerRank = (double)counter.bytes.load() / n;
  const int leadPort = counter.ports.port[0];
  counter.bytes = 0;
  counter.port = leadPort;
  {
    std::vector<std::thread> ts;
    for (int r = 0; r + 1 < n; r++)
      ts.emplace_back([&, r] {
        if (!comms[r]) return;
        const int excluded = n - 1;
        clbComm_t child = nullptr;
        if (clbCommShrink(comms[r], &excluded, 1, nullptr, &child, CLB_SHRINK_DEFAULT) != clbSuccess) {
          errors[r] = std::string("shrink: ") + clbGetLastError();
          return;
        }
        int v = r + 1, out = 0;
        if (clbAllReduce(&v, &out, 1, clbInt32, clbSum, child, nullptr) != clbSuccess || out != (n - 1) * n / 2)
          errors[r] = "the shrunk communicator's all-reduce: " + std::to_string(out);
        clbCommDestroy(child);
      });
    for (auto& t : ts) t.join();
  }
  const double leadPerSurvivor = (double)counter.bytes.load() / (n - 2);
  tamperDisarm();
  for (clbComm_t c : comms)
    if (c) clbCommDestroy(c);
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << n << " ranks, rank " << r;
  EXPECT_GT(leadPort, 0) << "rank 0's listener port was learnt from its hello";
  return {rootPerRank, leadPerSurvivor};
}

// Protocol 9: the root answers each rank with the table's hash and four rows, and a shrink's
// lowest survivor each survivor with its verdict, the hash and four parts, whatever the number of
// ranks. Before, both sent every rank's row to every rank (n x n bytes in all): at 16 ranks four
// times what they sent each rank at 4.
TEST(RootWork, TheRootAndAShrinksLowestSurvivorSendAConstantSizePerRank) {
  const auto small = rootAndLeadBytes(4), large = rootAndLeadBytes(16);
  printf("bytes per rank: root %.0f at 4 ranks, %.0f at 16; a shrink's lowest survivor %.0f at 4, %.0f at 16\n",
         small.first, large.first, small.second, large.second);
  EXPECT_GT(small.first, 0.0);
  EXPECT_GT(small.second, 0.0);
  EXPECT_LT(large.first, small.first * 1.25) << "the root's reply grows with the ranks";
  EXPECT_LT(large.second, small.second * 1.25) << "the lowest survivor's answer grows with the survivors";
}

// A ring listener that closes a connection during its handshake (it was full, or restarting) is
// connected to again, without TLS and with it: the first thing any ring listener of this process
// sends on a connection (a challenge; under TLS its server hello) does not go out, its connection
// is shut down instead, and every rank still inits. Without the retry the rank whose connection was
// cut fails ("closed the connection", or "it closed the connection during the TLS handshake").
void expectRingCutRetried() {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess) << clbGetLastError();
  const int rootPort = clbtest::idData(uid).port;
  Tamper t;
  t.cut = true;
  // An accepted connection has its listener's port: one of this process's listening sockets has
  // it (looked up once per port: every send of every thread waits for the selector).
  t.picks = [rootPort, listener = std::map<int, bool>()](int fd, const char*, size_t) mutable {
    const int lp = localPort(fd);
    if (lp <= 0 || lp == rootPort) return false;
    auto it = listener.find(lp);
    if (it == listener.end()) it = listener.emplace(lp, listensHere(lp)).first;
    return it->second;
  };
  tamperArm(std::move(t));
  Formed f = formCommunicator(uid, 2, 6000);
  tamperDisarm();
  EXPECT_EQ(gTamperPicked.load(), 1) << "a ring listener sent on a connection";
  EXPECT_EQ(gTamperCut.load(), 1) << "and that connection was cut";
  expectFormed(f);
}

TEST(RingRetry, ListenerThatClosesBeforeItsChallengeIsConnectedAgain) {
  clbtest::ScopedEnv env{{"COLIBRI_TLS", "off"}};
  expectRingCutRetried();
}

TEST(RingRetry, ListenerThatClosesDuringTlsIsConnectedAgain) {
  REQUIRE_PKI();
  auto env = clbtest::tlsEnv("all");
  expectRingCutRetried();
}

// ---- connections that stall ----

enum class Stall { kIdle, kJunk, kHalfOpen };
const char* stallName(Stall s) { return s == Stall::kIdle ? "idle" : s == Stall::kJunk ? "junk" : "half-open"; }

// `n` connections to `addr` that send nothing, 8 junk bytes, or a valid hello and then nothing.
std::vector<int> stallingConnections(const clb::SockAddr& addr, int n, Stall kind,
                                     uint32_t purpose = clb::kPurposeRoot) {
  std::vector<int> fds;
  for (int i = 0; i < n; i++) {
    int fd = clbtest::rawConnect(addr);
    if (fd < 0) break;
    if (kind == Stall::kJunk) (void)!send(fd, "\x13\x37junk!!", 8, 0);
    if (kind == Stall::kHalfOpen) {
      clb::ClientHello h{clb::kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, purpose, 0, 0, {}};
      (void)!send(fd, &h, sizeof h, 0);
    }
    fds.push_back(fd);
  }
  return fds;
}

struct StallCase {
  int n;
  Stall kind;
};
class StalledRoot : public ::testing::TestWithParam<StallCase> {};

// With 1, 3, 200 or 300 stalling connections held at the root, two ranks with a 6 s timeout init in
// under 2 s (each connection has a deadline of its own, and they are served side by side; past 256
// pending, the oldest goes once it has had a tenth of its deadline).
TEST_P(StalledRoot, RealRanksInitWithinTwoSeconds) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  std::vector<int> held = stallingConnections(clb::idAddress(clbtest::idData(uid)), GetParam().n, GetParam().kind);
  ASSERT_EQ((int)held.size(), GetParam().n);
  Formed f = formCommunicator(uid, 2, 6000);
  expectFormed(f);
  EXPECT_LT(f.slowestInitMs, 2000) << GetParam().n << " " << stallName(GetParam().kind) << " connection(s)";
  for (int fd : held) close(fd);
}
INSTANTIATE_TEST_SUITE_P(Connections, StalledRoot,
                         ::testing::Values(StallCase{1, Stall::kIdle}, StallCase{3, Stall::kIdle},
                                           StallCase{200, Stall::kIdle}, StallCase{200, Stall::kJunk},
                                           StallCase{3, Stall::kHalfOpen}, StallCase{200, Stall::kHalfOpen},
                                           StallCase{300, Stall::kIdle}, StallCase{300, Stall::kHalfOpen}),
                         [](const auto& i) {
                           return std::to_string(i.param.n) + (i.param.kind == Stall::kIdle   ? "Idle"
                                                               : i.param.kind == Stall::kJunk ? "Junk"
                                                                                              : "HalfOpen");
                         });

// The ports that listen now and did not before.
std::vector<clbtest::Listening> newListeners(const std::vector<clbtest::Listening>& before) {
  std::vector<clbtest::Listening> out;
  for (const auto& l : clbtest::listeningPorts()) {
    bool old = false;
    for (const auto& b : before) old = old || (b.port == l.port && b.addr == l.addr);
    if (!old) out.push_back(l);
  }
  return out;
}

class StalledRingListener : public ::testing::TestWithParam<StallCase> {};

// The same at rank 0's ring listener, found as the port that starts listening while rank 0 waits
// at the root: the stalling connections are made before rank 1 starts.
TEST_P(StalledRingListener, RealRanksInitWithinTwoSeconds) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  const int rootPort = clbtest::idData(uid).port;
  const auto before = clbtest::listeningPorts();
  std::vector<int> held;
  int found = 0;
  Formed f = formCommunicator(uid, 2, 6000, clbTransportAuto, [&] {
    std::vector<clbtest::Listening> fresh;
    within(2000, [&] {  // rank 0's listener, once it is up
      fresh.clear();
      for (const auto& l : newListeners(before))
        if (l.port != rootPort) fresh.push_back(l);
      return !fresh.empty();
    });
    for (const auto& l : fresh) {
      clb::SockAddr a = clb::idAddress(clbtest::idData(uid));  // the same host address
      reinterpret_cast<sockaddr_in*>(&a.ss)->sin_port = htons((uint16_t)l.port);
      for (int fd : stallingConnections(a, GetParam().n, GetParam().kind, clb::kPurposeRingData)) held.push_back(fd);
      found++;
    }
  });
  EXPECT_EQ(found, 1) << "exactly one new listener of this process: rank 0's ring listener";
  expectFormed(f);
  EXPECT_EQ((int)held.size(), GetParam().n) << "rank 0's ring listener was found and stalled";
  EXPECT_LT(f.slowestInitMs, 2000) << GetParam().n << " " << stallName(GetParam().kind) << " connection(s)";
  for (int fd : held) close(fd);
}
INSTANTIATE_TEST_SUITE_P(Connections, StalledRingListener,
                         ::testing::Values(StallCase{1, Stall::kIdle}, StallCase{3, Stall::kIdle},
                                           StallCase{200, Stall::kIdle}, StallCase{200, Stall::kJunk},
                                           StallCase{200, Stall::kHalfOpen}),
                         [](const auto& i) {
                           return std::to_string(i.param.n) + (i.param.kind == Stall::kIdle   ? "Idle"
                                                               : i.param.kind == Stall::kJunk ? "Junk"
                                                                                              : "HalfOpen");
                         });

// ---- fuzz ----

// One hostile message: random bytes of random length, or a valid hello (or hello + proof + body)
// with a few bytes changed or cut short.
std::string hostileMessage(std::mt19937_64& rng, uint32_t purpose) {
  std::string m;
  const int kind = (int)(rng() % 4);
  if (kind == 0) {
    m.resize(rng() % 400);
    for (char& c : m) c = (char)rng();
    return m;
  }
  clb::ClientHello h{clb::kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, purpose, 0, 0, {}};
  m.assign(reinterpret_cast<const char*>(&h), sizeof h);
  if (kind >= 2) m.append(clb::kTagBytes + sizeof(clb::HelloBody), '\0');
  if (kind == 3) {  // a valid hello, then a proof and body of random bytes
    for (size_t i = sizeof h; i < m.size(); i++) m[i] = (char)rng();
    return m;
  }
  const int flips = 1 + (int)(rng() % 4);
  for (int i = 0; i < flips; i++) m[rng() % m.size()] ^= (char)(1 + rng() % 255);
  if (rng() % 3 == 0) m.resize(rng() % m.size());
  return m;
}

// Sends `count` hostile messages to `addr`, each on its own connection, closed after it.
void fuzz(const clb::SockAddr& addr, int count, uint32_t purpose, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; i++) {
    int fd = clbtest::rawConnect(addr);
    if (fd < 0) continue;
    std::string m = hostileMessage(rng, purpose);
    if (!m.empty()) (void)!send(fd, m.data(), m.size(), MSG_NOSIGNAL);
    if (rng() % 8 == 0) (void)clbtest::closedSilently(fd, 2);  // sometimes read what comes back
    close(fd);
  }
}

// 10 000 hostile messages at a root: it neither crashes nor leaks nor stops serving; the real
// ranks then form, and once they have, no fd is left over.
TEST(Fuzz, RootSurvivesTenThousandHostileMessages) {
  const int fds0 = clbtest::openFds();
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  const auto t0 = Clock::now();
  fuzz(clb::idAddress(clbtest::idData(uid)), 10000, clb::kPurposeRoot, 1);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  printf("10000 hostile connections in %.1f s\n", s);
  expectFormed(formCommunicator(uid, 2, 6000));
  const int64_t by = clb::nowMs() + 3000;
  while (clbtest::openFds() > fds0 && clb::nowMs() < by) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_LE(clbtest::openFds(), fds0) << "(roots of other tests may stop meanwhile: the count may only fall)";
}

// A HandshakeServer (the one every ring listener runs) on a loopback listener, driven on a thread
// of its own with the session a communicator would have.
struct ServerOnThread {
  clb::SockAddr bound;
  int lfd = -1;
  uint8_t secret[clb::kSecretBytes], session[clb::kSessionBytes];
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<clb::Authenticated> got;
  uint64_t dropped = 0;
  size_t pendingAtEnd = 1;
  std::thread thread;

  ServerOnThread() {
    clb::SockAddr lo;
    clb::resolveHost("127.0.0.1", 0, &lo);
    clb::listenTcp(lo, &lfd, &bound);
    clb::randomBytes(secret, sizeof secret);
    clb::randomBytes(session, sizeof session);
    thread = std::thread([this] {
      clb::HandshakeServer s(lfd, secret, 1u << clb::kPurposeRingData, session, 16, "test listener", 1000, 256);
      std::vector<pollfd> fds;
      std::vector<clb::Authenticated> done;
      while (!stop.load()) {
        fds.clear();
        size_t n = s.addPollFds(&fds);
        poll(fds.data(), fds.size(), 10);
        done.clear();
        s.advance(fds, 0, n, &done);
        std::lock_guard<std::mutex> g(mu);
        for (auto& a : done) got.push_back(std::move(a));
      }
      dropped = s.dropped();
      pendingAtEnd = s.pending();
    });
  }
  size_t authenticated() {
    std::lock_guard<std::mutex> g(mu);
    return got.size();
  }
  void finish() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  ~ServerOnThread() {
    finish();
    got.clear();
    clb::closeFd(&lfd);
  }
};

// After 10 000 hostile messages that server authenticates a real client, its body intact, and
// nothing pending is left.
TEST(Fuzz, RingServerSurvivesTenThousandHostileMessages) {
  const int fds0 = clbtest::openFds();
  {
    ServerOnThread server;
    fuzz(server.bound, 10000, clb::kPurposeRingData, 2);
    int fd = clbtest::rawConnect(server.bound);
    EXPECT_GE(fd, 0);
    const char body[16] = "the real client";
    clb::Transcript t{};
    bool retry = false;
    EXPECT_EQ(clbtest::clientHandshake(fd, server.secret, clb::kPurposeRingData, server.session, body, sizeof body,
                                       clb::nowMs() + 3000, nullptr, "listener", &t, &retry),
              clbSuccess)
        << clbGetLastError();
    within(3000, [&] { return server.authenticated() > 0; });
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // every hostile one past its deadline
    server.finish();
    ASSERT_EQ(server.got.size(), 1u) << "only the real client is authenticated";
    EXPECT_EQ(memcmp(server.got[0].body.data(), body, sizeof body), 0);
    EXPECT_EQ(memcmp(server.got[0].transcript.session, server.session, sizeof server.session), 0);
    EXPECT_GT(server.dropped, 5000u);
    EXPECT_EQ(server.pendingAtEnd, 0u);
    if (fd >= 0) close(fd);
  }
  EXPECT_LE(clbtest::openFds(), fds0);
}

// A client of another communicator (same secret, another session) is refused: the server's proof,
// made over its own session, does not verify, and the client says so; the server authenticates
// nobody. A purpose the listener does not serve is refused with the reason.
TEST(Handshake, OtherSessionAndOtherPurposeAreRefused) {
  ServerOnThread server;
  uint8_t other[clb::kSessionBytes];
  memcpy(other, server.session, sizeof other);
  other[5] ^= 1;
  const char body[16] = "another session";
  clb::Transcript t{};
  bool retry = false;
  int fd = clbtest::rawConnect(server.bound);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(clbtest::clientHandshake(fd, server.secret, clb::kPurposeRingData, other, body, sizeof body,
                                     clb::nowMs() + 3000, nullptr, "listener", &t, &retry),
            clbAuthError);
  EXPECT_NE(std::string(clbGetLastError()).find("did not prove this communicator's secret"), std::string::npos)
      << clbGetLastError();
  close(fd);
  fd = clbtest::rawConnect(server.bound);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(clbtest::clientHandshake(fd, server.secret, clb::kPurposeRoot, server.session, body, sizeof body,
                                     clb::nowMs() + 3000, nullptr, "listener", &t, &retry),
            clbInvalidUsage);
  EXPECT_NE(std::string(clbGetLastError()).find("does not serve connections of purpose 1"), std::string::npos)
      << clbGetLastError();
  close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server.authenticated(), 0u);
}

// ---- root lifecycle ----

// 50 ids never used: their roots stop at the timeout (COLIBRI_TIMEOUT_MS at creation), leaving no
// thread and no fd. (Roots of other tests in this process may stop meanwhile: counts may only fall.)
TEST(RootLifecycle, UnusedIdsLeaveNoThreadOrFdAfterTheirTimeout) {
  const int threads0 = clbtest::threads(), fds0 = clbtest::openFds();
  setenv("COLIBRI_TIMEOUT_MS", "300", 1);
  std::vector<clbUniqueId> ids(50);
  for (auto& id : ids) ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  unsetenv("COLIBRI_TIMEOUT_MS");
  auto running = [&] {
    int n = 0;
    for (auto& id : ids) n += clb::rootRuns(clbtest::idData(id));
    return n;
  };
  EXPECT_EQ(running(), 50);
  EXPECT_TRUE(within(3000, [&] { return running() == 0 && clbtest::threads() <= threads0; }))
      << running() << " roots, " << clbtest::threads() - threads0 << " threads more than before";
  EXPECT_LE(clbtest::openFds(), fds0);
  // A rank that comes after its root stopped is told so.
  clbConfig_t cfg = config(300);
  clbComm_t c = nullptr;
  EXPECT_EQ(clbCommInitRank(&c, &ids[0], 0, 2, &cfg), clbTimeout);
  EXPECT_NE(std::string(clbGetLastError()).find("its root gives up"), std::string::npos) << clbGetLastError();
}

// Released ids stop their roots at once; a rank waiting at a released root is told why.
TEST(RootLifecycle, ReleasedIdsStopTheirRootsAtOnce) {
  const int threads0 = clbtest::threads(), fds0 = clbtest::openFds();
  std::vector<clbUniqueId> ids(50);
  for (auto& id : ids) ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  auto running = [&] {
    int n = 0;
    for (auto& id : ids) n += clb::rootRuns(clbtest::idData(id));
    return n;
  };
  EXPECT_EQ(running(), 50);
  const auto t0 = Clock::now();
  for (auto& id : ids) EXPECT_EQ(clbUniqueIdRelease(&id), clbSuccess);
  EXPECT_TRUE(within(2000, [&] { return running() == 0 && clbtest::threads() <= threads0; }));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_LE(clbtest::openFds(), fds0);
  EXPECT_EQ(clbUniqueIdRelease(&ids[0]), clbSuccess) << "releasing again is no error";
  // Rank 0 of 2 waits at a root that is released under it.
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 0 has joined by then
    clbUniqueIdRelease(&uid);
  });
  clbConfig_t cfg = config(5000);
  clbComm_t c = nullptr;
  EXPECT_EQ(clbCommInitRank(&c, &uid, 0, 2, &cfg), clbRemoteError);
  EXPECT_NE(std::string(clbGetLastError()).find("closed the connection before all 2 ranks joined"), std::string::npos)
      << clbGetLastError();
  releaser.join();
}

// A root that formed its communicator stops.
TEST(RootLifecycle, RootStopsOnceItsCommunicatorFormed) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  EXPECT_TRUE(clb::rootRuns(clbtest::idData(uid)));
  expectFormed(formCommunicator(uid, 2, 5000));
  EXPECT_TRUE(within(1000, [&] { return !clb::rootRuns(clbtest::idData(uid)); }));
}

// ---- where listeners bind ----

std::string hexAddress(const char* dotted) {
  in_addr a{};
  inet_pton(AF_INET, dotted, &a);
  char b[16];
  snprintf(b, sizeof b, "%08X", a.s_addr);  // /proc/net/tcp prints the address as a host-order word
  return b;
}

bool listensOn(int port, const std::string& addr) {
  for (const auto& l : clbtest::listeningPorts())
    if (l.port == port && l.addr == addr) return true;
  return false;
}

// The root listens on the address its id advertises, and on every interface only when told.
TEST(Listeners, RootBindsTheAdvertisedAddressUnlessToldAny) {
  setenv("COLIBRI_BOOTSTRAP_HOST", "127.0.0.1", 1);
  clbUniqueId a;
  ASSERT_EQ(clbGetUniqueId(&a), clbSuccess);
  setenv("COLIBRI_BOOTSTRAP_BIND", "any", 1);
  clbUniqueId b;
  ASSERT_EQ(clbGetUniqueId(&b), clbSuccess);
  unsetenv("COLIBRI_BOOTSTRAP_BIND");
  unsetenv("COLIBRI_BOOTSTRAP_HOST");
  EXPECT_TRUE(listensOn(clbtest::idData(a).port, hexAddress("127.0.0.1")));
  EXPECT_TRUE(listensOn(clbtest::idData(b).port, "00000000"));
  char desc[256];
  ASSERT_EQ(clbUniqueIdDescribe(&a, desc, sizeof desc), clbSuccess);
  EXPECT_NE(std::string(desc).find("127.0.0.1:"), std::string::npos) << desc;
  clbUniqueIdRelease(&a);
  clbUniqueIdRelease(&b);
}

// COLIBRI_SOCKET_IFNAME picks the interface (here the loopback one); a name that matches none is
// a clear error that lists the interfaces.
TEST(Listeners, SocketIfnameChoosesTheInterface) {
  setenv("COLIBRI_SOCKET_IFNAME", "lo", 1);
  clbUniqueId a;
  ASSERT_EQ(clbGetUniqueId(&a), clbSuccess);
  EXPECT_TRUE(listensOn(clbtest::idData(a).port, hexAddress("127.0.0.1")));
  clbUniqueIdRelease(&a);
  setenv("COLIBRI_SOCKET_IFNAME", "nosuchif9", 1);
  clbUniqueId b;
  EXPECT_EQ(clbGetUniqueId(&b), clbInvalidArgument);
  const std::string msg = clbGetLastError();
  unsetenv("COLIBRI_SOCKET_IFNAME");
  EXPECT_NE(msg.find("COLIBRI_SOCKET_IFNAME=nosuchif9 matches no interface"), std::string::npos) << msg;
  EXPECT_NE(msg.find(" lo"), std::string::npos) << "lists the interfaces: " << msg;
}

}  // namespace

// ---- what a wire tap sees under COLIBRI_TLS ----
namespace {

struct Seen {
  bool wireMagic = false, rootHello = false, table = false, payload = false;
  size_t bytes = 0;
};

// Two ranks over the socket transport, each all-reducing 64 Ki int32 of 0x11223344, with the
// tap on; what of the plaintext it saw: the bootstrap's wire magic ("CLBW", in every handshake),
// a hello to the root (the magic, protocol, version and the root's purpose: only on the root's
// connections), a rank's row of the table (its Colibri version, NUL padded, as the hellos and the
// rows carry it) and the data (a run of the ranks' values).
Seen tapTwoRanks() {
  const std::string version = clb::versionString(CLB_VERSION_CODE) + std::string(4, '\0');
  tapStart();
  auto errors = clbtest::runThreadRanks(
      2, [](int, clbConfig_t* c) { c->transport = clbTransportSocket; },
      [](int, clbComm_t comm) {
        std::vector<int32_t> v(1 << 16, 0x11223344);
        EXPECT_EQ(clbAllReduce(v.data(), v.data(), v.size(), clbInt32, clbSum, comm, nullptr), clbSuccess);
        EXPECT_EQ(v[12345], 2 * 0x11223344);
      });
  gTapOn = false;
  for (auto& e : errors) EXPECT_EQ(e, "");
  std::lock_guard<std::mutex> g(gTapMutex);
  Seen s;
  s.bytes = gTapped.size();
  uint32_t magic = clb::kWireMagic;
  s.wireMagic = gTapped.find(std::string(reinterpret_cast<const char*>(&magic), 4)) != std::string::npos;
  const uint32_t hello[4] = {clb::kWireMagic, CLB_PROTOCOL_VERSION, CLB_VERSION_CODE, clb::kPurposeRoot};
  s.rootHello = gTapped.find(std::string(reinterpret_cast<const char*>(hello), sizeof hello)) != std::string::npos;
  s.table = gTapped.find(version) != std::string::npos;
  const int32_t run[4] = {0x11223344, 0x11223344, 0x11223344, 0x11223344};
  s.payload = gTapped.find(std::string(reinterpret_cast<const char*>(run), sizeof run)) != std::string::npos;
  return s;
}

}  // namespace

// Without TLS the tap reads the handshakes, the table and the data (so the checks below can fail).
TEST(TlsOnTheWire, OffShowsEverything) {
  clbtest::ScopedEnv env{{"COLIBRI_TLS", "off"}};
  const Seen s = tapTwoRanks();
  EXPECT_TRUE(s.wireMagic);
  EXPECT_TRUE(s.rootHello);
  EXPECT_TRUE(s.table);
  EXPECT_TRUE(s.payload);
}

// bootstrap: the root's connections are encrypted (no hello to the root), the ranks' connections
// to each other are not: their handshakes, the table's rows gathered on the tree (protocol 9) and
// the data are readable.
TEST(TlsOnTheWire, BootstrapHidesTheRootsTrafficOnly) {
  REQUIRE_PKI();
  auto env = clbtest::tlsEnv("bootstrap");
  const Seen s = tapTwoRanks();
  EXPECT_FALSE(s.rootHello);
  EXPECT_TRUE(s.wireMagic);
  EXPECT_TRUE(s.table);
  EXPECT_TRUE(s.payload);
}

// all: nothing of the plaintext crosses the wire.
TEST(TlsOnTheWire, AllHidesEverything) {
  REQUIRE_PKI();
  auto env = clbtest::tlsEnv("all");
  const Seen s = tapTwoRanks();
  EXPECT_GT(s.bytes, (size_t)2 * (1 << 16) * 4 / 2) << "the tap saw the data's ciphertext";
  EXPECT_FALSE(s.wireMagic);
  EXPECT_FALSE(s.rootHello);
  EXPECT_FALSE(s.table);
  EXPECT_FALSE(s.payload);
}
