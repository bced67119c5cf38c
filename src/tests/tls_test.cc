// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// COLIBRI_TLS: communicators over TLS (bootstrap, all), the errors of a wrong setup (missing
// library, missing or mismatched files, a peer of another CA, a rank whose mode differs from its
// id's, plain and TLS clients at the wrong listener), and a TLS root that idle and junk
// connections cannot stall. Certificates are made at run time with the openssl command; where it
// or libssl.so.3 is missing the tests skip, unless COLIBRI_REQUIRE_TLS_TESTS=1 (CI) makes that a
// failure.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/net.h"
#include "bootstrap/tls.h"
#include "tests/test_bootstrap.h"
#include "tests/test_ranks.h"
#include "tests/test_tls.h"

namespace {

using clbtest::pki;
using clbtest::ScopedEnv;
using clbtest::tlsEnv;

// n ranks as threads over the socket transport: an all-reduce of 300 000 floats and an
// all-gather, checked element by element; returns each rank's errors ("" when all went well) and
// rank 0's clbCommInfo.
std::vector<std::string> sumOverSockets(int n, std::string* info) {
  return clbtest::runThreadRanks(
      n,
      [](int, clbConfig_t* c) {
        c->transport = clbTransportSocket;
        c->timeoutMs = 20000;
      },
      [&](int rank, clbComm_t comm) {
        const size_t count = 300000;
        std::vector<float> v(count);
        for (size_t i = 0; i < count; i++) v[i] = (float)((i * 7 + rank * 13) % 1000);
        ASSERT_EQ(clbAllReduce(v.data(), v.data(), count, clbFloat32, clbSum, comm, nullptr), clbSuccess)
            << clbGetLastError();
        for (size_t i = 0; i < count; i++) {
          float want = 0;
          for (int r = 0; r < n; r++) want += (float)((i * 7 + r * 13) % 1000);
          ASSERT_EQ(v[i], want) << "element " << i;
        }
        std::vector<int32_t> mine(1000, rank * 1000 + 1), all(1000 * n);
        for (int i = 0; i < 1000; i++) mine[i] = rank * 1000 + i;
        ASSERT_EQ(clbAllGather(mine.data(), all.data(), 1000, clbInt32, comm, nullptr), clbSuccess)
            << clbGetLastError();
        for (int r = 0; r < n; r++)
          for (int i = 0; i < 1000; i++) ASSERT_EQ(all[r * 1000 + i], r * 1000 + i);
        if (rank == 0 && info) {
          char b[4096];
          ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess);
          *info = b;
        }
      });
}

void expectAllOk(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Tls, AllRunsEveryConnectionOverTls13) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  std::string info;
  expectAllOk(sumOverSockets(3, &info));
  EXPECT_NE(info.find("tls: all (every connection, TLSv1.3 TLS_"), std::string::npos) << info;
}

// A split of a communicator under COLIBRI_TLS=all runs its own ring over TLS too (the child has
// no root; its ring connections are TLS like the parent's), and its collectives are right.
TEST(Tls, SplitOfACommunicatorUnderAllIsTlsToo) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  const int n = 4;
  auto errors = clbtest::runThreadRanks(
      n,
      [](int, clbConfig_t* c) {
        c->transport = clbTransportSocket;
        c->timeoutMs = 20000;
      },
      [&](int rank, clbComm_t comm) {
        clbComm_t half = nullptr;
        ASSERT_EQ(clbCommSplit(comm, rank % 2, rank, nullptr, &half), clbSuccess) << clbGetLastError();
        char b[4096];
        ASSERT_EQ(clbCommInfo(half, b, sizeof b), clbSuccess);
        EXPECT_NE(std::string(b).find("tls: all (every connection, TLSv1.3 TLS_"), std::string::npos) << b;
        std::vector<int32_t> v(5000);
        for (int i = 0; i < 5000; i++) v[i] = rank * 100000 + i;
        ASSERT_EQ(clbAllReduce(v.data(), v.data(), v.size(), clbInt32, clbSum, half, nullptr), clbSuccess)
            << clbGetLastError();
        for (int i = 0; i < 5000; i++) {
          int32_t want = 0;
          for (int r = rank % 2; r < n; r += 2) want += r * 100000 + i;
          ASSERT_EQ(v[i], want) << "element " << i;
        }
        clbCommDestroy(half);
      });
  expectAllOk(errors);
}

// Point-to-point connections (dialed at a pair's first message, answered by the acceptor thread)
// run over TLS as well under all: an exchange in both directions and an all-to-all arrive whole.
TEST(Tls, PointToPointUnderAllRunsOverTls) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  const int n = 3;
  auto errors = clbtest::runThreadRanks(
      n,
      [](int, clbConfig_t* c) {
        c->transport = clbTransportSocket;
        c->timeoutMs = 20000;
      },
      [&](int rank, clbComm_t comm) {
        const size_t count = 100003;
        std::vector<int32_t> out(count * n), in(count * n, -1);
        for (size_t i = 0; i < out.size(); i++) out[i] = rank * 1000000 + (int32_t)i;
        ASSERT_EQ(clbAllToAll(out.data(), in.data(), count, clbInt32, comm, nullptr), clbSuccess) << clbGetLastError();
        for (int p = 0; p < n; p++)
          for (size_t i = 0; i < count; i++)
            ASSERT_EQ(in[p * count + i], p * 1000000 + (int32_t)(rank * count + i)) << "from " << p << " element " << i;
      });
  expectAllOk(errors);
}

TEST(Tls, BootstrapCoversTheRootConnections) {
  REQUIRE_PKI();
  auto env = tlsEnv("bootstrap");
  std::string info;
  expectAllOk(sumOverSockets(2, &info));
  EXPECT_NE(info.find("tls: bootstrap"), std::string::npos) << info;
}

TEST(Tls, OffIsTheDefault) {
  ScopedEnv env{{"COLIBRI_TLS", nullptr}};
  std::string info;
  expectAllOk(sumOverSockets(2, &info));
  EXPECT_NE(info.find("tls: off"), std::string::npos) << info;
}

TEST(Tls, TheIdCarriesTheMode) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  char d[256];
  ASSERT_EQ(clbUniqueIdDescribe(&id, d, sizeof d), clbSuccess);
  EXPECT_NE(std::string(d).find("tls=all"), std::string::npos) << d;
  clbUniqueIdRelease(&id);
  clbUniqueId addr;
  ASSERT_EQ(clbUniqueIdFromAddress("127.0.0.1", 29555, "pass", &addr), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbUniqueIdDescribe(&addr, d, sizeof d), clbSuccess);
  EXPECT_NE(std::string(d).find("tls=all"), std::string::npos) << d;
}

TEST(Tls, RankThatRunsAnotherModeThanItsIdIsRefused) {
  REQUIRE_PKI();
  clbUniqueId id;
  {
    ScopedEnv off{{"COLIBRI_TLS", "off"}};
    ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  }
  auto env = tlsEnv("all");
  clbComm_t c = nullptr;
  EXPECT_EQ(clbCommInitRank(&c, &id, 0, 1, nullptr), clbInvalidUsage);
  EXPECT_NE(std::string(clbGetLastError())
                .find("runs with COLIBRI_TLS=all, but its unique id was made with "
                      "COLIBRI_TLS=off"),
            std::string::npos)
      << clbGetLastError();
  clbUniqueIdRelease(&id);
}

TEST(Tls, BadModeAndMissingFilesNameTheVariable) {
  REQUIRE_PKI();
  clbUniqueId id;
  {
    ScopedEnv e{{"COLIBRI_TLS", "yes"}};
    EXPECT_EQ(clbGetUniqueId(&id), clbInvalidArgument);
    EXPECT_NE(std::string(clbGetLastError()).find("COLIBRI_TLS='yes' is not one of off, bootstrap, all"),
              std::string::npos)
        << clbGetLastError();
  }
  {
    auto env = tlsEnv("all");
    ScopedEnv e{{"COLIBRI_TLS_KEY", nullptr}};
    EXPECT_EQ(clbGetUniqueId(&id), clbInvalidArgument);
    EXPECT_NE(std::string(clbGetLastError()).find("COLIBRI_TLS=all needs COLIBRI_TLS_KEY"), std::string::npos)
        << clbGetLastError();
  }
  {
    auto env = tlsEnv("bootstrap");
    ScopedEnv e{{"COLIBRI_TLS_CA", "/nonexistent/ca.pem"}};
    EXPECT_EQ(clbGetUniqueId(&id), clbSystemError);
    EXPECT_NE(std::string(clbGetLastError()).find("COLIBRI_TLS_CA=/nonexistent/ca.pem cannot be read"),
              std::string::npos)
        << clbGetLastError();
  }
  {
    auto env = tlsEnv("all");
    ScopedEnv e{{"COLIBRI_TLS_KEY", pki().otherKey.c_str()}};
    EXPECT_EQ(clbGetUniqueId(&id), clbInvalidArgument);
    EXPECT_NE(std::string(clbGetLastError()).find("COLIBRI_TLS_KEY is not the key of COLIBRI_TLS_CERT"),
              std::string::npos)
        << clbGetLastError();
  }
  {
    auto env = tlsEnv("all");
    ScopedEnv e{{"COLIBRI_TLS_CERT", pki().key.c_str()}};  // a key where the certificate goes
    EXPECT_EQ(clbGetUniqueId(&id), clbInvalidArgument);
    EXPECT_NE(std::string(clbGetLastError()).find("COLIBRI_TLS_CERT is not a PEM certificate"), std::string::npos)
        << clbGetLastError();
  }
}

TEST(Tls, MissingLibraryIsUnsupportedWithWhatToDo) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  ScopedEnv e{{"COLIBRI_TLS_LIBRARY", "/nonexistent/libssl.so.3"}};
  clbUniqueId id;
  EXPECT_EQ(clbGetUniqueId(&id), clbUnsupported);
  const std::string m = clbGetLastError();
  EXPECT_NE(m.find("COLIBRI_TLS needs OpenSSL 3 (/nonexistent/libssl.so.3)"), std::string::npos) << m;
  EXPECT_NE(m.find("apt-get install libssl3"), std::string::npos) << m;
  EXPECT_NE(m.find("COLIBRI_TLS=off"), std::string::npos) << m;
}

// A plain client at a TLS root, and a TLS client at a plain one: each is told why, and the real
// ranks are not held up.
TEST(Tls, PlainClientAtATlsRootIsToldWhy) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  const clb::IdData d = clbtest::idData(id);
  auto a = clbtest::helloToRoot(d, d.secret, 0, 2);
  EXPECT_EQ(a.rc, clbAuthError);
  EXPECT_NE(a.error.find("this listener takes TLS connections only"), std::string::npos) << a.error;
  clbUniqueIdRelease(&id);
}

TEST(Tls, TlsClientAtAPlainRootIsToldWhy) {
  REQUIRE_PKI();
  clbUniqueId id;
  {
    ScopedEnv off{{"COLIBRI_TLS", "off"}};
    ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  }
  auto env = tlsEnv("all");
  clb::TlsContextRef ctx;
  ASSERT_EQ(clb::tlsContextFor(clb::TlsMode::kAll, &ctx), clbSuccess) << clbGetLastError();
  const clb::IdData d = clbtest::idData(id);
  int fd = clbtest::rawConnect(clb::idAddress(d));
  ASSERT_GE(fd, 0);
  clb::Link link(fd);
  clb::Transcript t{};
  bool retry = false;
  clb::HelloBody b{};
  EXPECT_EQ(clb::clientHandshake(link, ctx, d.secret, clb::kPurposeRoot, nullptr, &b, sizeof b, clb::nowMs() + 3000,
                                 nullptr, "the root", &t, &retry),
            clbAuthError);
  EXPECT_FALSE(retry);
  EXPECT_NE(std::string(clbGetLastError()).find("does not speak TLS"), std::string::npos) << clbGetLastError();
  clbUniqueIdRelease(&id);
}

// A rank whose certificate another CA signed is refused by its neighbours, which say so; no
// rank hangs. It runs in a child process of its own (the environment is per process).
TEST(TlsChild, RankWithARogueCertificate) {
  const char* hexId = getenv("CLB_TLS_CHILD_ID");
  if (!hexId) GTEST_SKIP() << "runs as a child of Tls.PeerSignedByAnotherCaIsRefused";
  clbUniqueId id = clbtest::unhex(hexId);
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.timeoutMs = 4000;
  cfg.transport = clbTransportSocket;
  clbComm_t c = nullptr;
  EXPECT_NE(clbCommInitRank(&c, &id, 1, 2, &cfg), clbSuccess);
  const std::string m = clbGetLastError();
  printf("child error: %s\n", m.c_str());
  const char* expect = getenv("CLB_TLS_CHILD_EXPECT");
  ASSERT_NE(expect, nullptr);
  EXPECT_NE(m.find(expect), std::string::npos) << m;
}

// The child presents a certificate of another CA (the root refuses it, and the child is told to
// sign its certificate with the CA the peer trusts), or trusts another CA (it refuses the root's).
class TlsRogue : public ::testing::TestWithParam<bool> {};

TEST_P(TlsRogue, PeerOfAnotherCaIsRefusedOnEitherSide) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  const bool rogueCert = GetParam();
  std::vector<std::string> childEnv{"CLB_TLS_CHILD_ID=" + clbtest::hex(id), "COLIBRI_TLS=all"};
  if (rogueCert) {
    childEnv.insert(childEnv.end(),
                    {"COLIBRI_TLS_CERT=" + pki().rogueCert, "COLIBRI_TLS_KEY=" + pki().rogueKey,
                     "COLIBRI_TLS_CA=" + pki().ca, "CLB_TLS_CHILD_EXPECT=the peer refused this rank's certificate"});
  } else {
    childEnv.insert(childEnv.end(),
                    {"COLIBRI_TLS_CERT=" + pki().rogueCert, "COLIBRI_TLS_KEY=" + pki().rogueKey,
                     "COLIBRI_TLS_CA=" + pki().rogueCa, "CLB_TLS_CHILD_EXPECT=its certificate was refused: "});
  }
  pid_t pid = clbtest::spawnSelf("TlsChild.RankWithARogueCertificate", childEnv);
  ASSERT_GT(pid, 0);
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.timeoutMs = 4000;
  cfg.transport = clbTransportSocket;
  clbComm_t c = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(clbCommInitRank(&c, &id, 0, 2, &cfg), clbSuccess);
  const std::string m = clbGetLastError();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's checks failed";
  // The child cannot even join the root (its certificate is refused there), so rank 0 waits for
  // it until the timeout: rank 0's error says who never came.
  EXPECT_LT(s, 8.0);
  EXPECT_NE(m.find("rank 0 waited"), std::string::npos) << m;
  clbUniqueIdRelease(&id);
}
INSTANTIATE_TEST_SUITE_P(Sides, TlsRogue, ::testing::Values(true, false),
                         [](const auto& i) { return std::string(i.param ? "RogueCertificate" : "RogueTrust"); });

// A rank's hello to the root at `at` over TLS (the connection closes after it); its result.
clbResult_t tlsHelloTo(const clb::SockAddr& at, const clb::TlsContextRef& ctx, const uint8_t* secret, bool* retry) {
  int fd = -1;
  clbResult_t rc = clb::connectTcp(at, clb::nowMs() + 3000, nullptr, &fd);
  if (rc != clbSuccess) return rc;
  clb::Link link(fd);
  clb::Transcript t{};
  clb::HelloBody b{};
  b.nranks = 2;
  return clb::clientHandshake(link, ctx, secret, clb::kPurposeRoot, nullptr, &b, sizeof b, clb::nowMs() + 3000, nullptr,
                              "the root", &t, retry);
}

// A server that closes the connection during the TLS handshake (full, or restarting) is one to
// connect to again, as without TLS: the client says so instead of failing.
TEST(Tls, ServerThatClosesDuringTheTlsHandshakeIsToBeRetried) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clb::TlsContextRef ctx;
  ASSERT_EQ(clb::tlsContextFor(clb::TlsMode::kAll, &ctx), clbSuccess) << clbGetLastError();
  clb::SockAddr any, bound;
  int lfd = -1;
  ASSERT_EQ(clb::resolveHost("127.0.0.1", 0, &any), clbSuccess);
  ASSERT_EQ(clb::listenTcp(any, &lfd, &bound), clbSuccess);
  std::thread server([&] {
    int fd = -1;
    if (clb::acceptTcp(lfd, clb::nowMs() + 3000, nullptr, &fd) != clbSuccess) return;
    char b[64];
    (void)!clb::recvAll(fd, b, 16, clb::nowMs() + 3000, nullptr, "client");  // part of its TLS hello
    close(fd);
  });
  bool retry = false;
  EXPECT_EQ(tlsHelloTo(bound, ctx, reinterpret_cast<const uint8_t*>(pki().dir.data()) /* any 16 bytes */, &retry),
            clbRemoteError)
      << clbGetLastError();
  EXPECT_TRUE(retry);
  server.join();
  close(lfd);
}

// Someone in the middle with a certificate of the cluster's CA ends TLS on both sides and relays
// the handshake unchanged: the proofs MAC each TLS session's exporter value, so the rank refuses
// the relayed server proof (and nothing of the rank's reaches the root).
TEST(Tls, RelayBetweenTwoTlsSessionsIsRefused) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clb::TlsContextRef ctx;
  ASSERT_EQ(clb::tlsContextFor(clb::TlsMode::kAll, &ctx), clbSuccess) << clbGetLastError();
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  const clb::IdData d = clbtest::idData(id);
  clb::SockAddr any, bound;
  int lfd = -1;
  ASSERT_EQ(clb::resolveHost("127.0.0.1", 0, &any), clbSuccess);
  ASSERT_EQ(clb::listenTcp(any, &lfd, &bound), clbSuccess);
  std::atomic<bool> stop{false}, relayed{false};
  std::thread relay([&] {
    int cfd = -1, sfd = -1;
    if (clb::acceptTcp(lfd, clb::nowMs() + 3000, nullptr, &cfd) != clbSuccess) return;
    clb::Link client(cfd);
    std::unique_ptr<clb::TlsSession> cs;
    if (clb::TlsSession::create(ctx, cfd, true, &cs) != clbSuccess) return;
    std::string why;
    for (int r = 0, tries = 0; (r = cs->handshakeStep(&why)) != 1 && tries < 300; tries++) {
      if (r < 0) return;
      pollfd p{cfd, cs->wantEvents(POLLIN), 0};
      poll(&p, 1, 10);
    }
    client.setTls(std::move(cs));
    if (clb::connectTcp(clb::idAddress(d), clb::nowMs() + 3000, nullptr, &sfd) != clbSuccess) return;
    clb::Link root(sfd);
    std::unique_ptr<clb::TlsSession> ss;
    if (clb::TlsSession::create(ctx, sfd, false, &ss) != clbSuccess ||
        ss->connect(clb::nowMs() + 3000, nullptr, "root") != clbSuccess)
      return;
    root.setTls(std::move(ss));
    relayed = true;
    char buf[4096];
    const int64_t until = clb::nowMs() + 3000;
    while (!stop && clb::nowMs() < until) {
      bool moved = false;
      for (auto [from, to] : {std::pair<clb::Link*, clb::Link*>{&client, &root}, {&root, &client}}) {
        ssize_t n = from->tryRecv(buf, sizeof buf);
        if (n == 0) return;
        if (n > 0) {
          moved = true;
          if (clb::sendAll(*to, buf, (size_t)n, clb::nowMs() + 1000, nullptr, "relay") != clbSuccess) return;
        }
      }
      if (!moved) {
        pollfd p[2] = {{cfd, POLLIN, 0}, {sfd, POLLIN, 0}};
        poll(p, 2, 10);
      }
    }
  });
  bool retry = false;
  EXPECT_EQ(tlsHelloTo(bound, ctx, d.secret, &retry), clbAuthError);
  EXPECT_NE(std::string(clbGetLastError())
                .find("did not prove this communicator's secret although it names the same "
                      "fingerprint"),
            std::string::npos)
      << clbGetLastError();
  EXPECT_TRUE(relayed.load()) << "the relay had TLS with both sides";
  stop = true;
  relay.join();
  close(lfd);
  clbUniqueIdRelease(&id);
}

// Every pending handshake is counted back when its listener ends: a root that stops with idle
// connections pending leaves the process's bound as it was.
TEST(Tls, PendingHandshakesAreCountedBackWhenTheRootStops) {
  // Connections other tests left at listeners that still run are dropped within their 1 s deadline.
  for (int i = 0; i < 600 && clb::pendingHandshakesInProcess() != 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int before = clb::pendingHandshakesInProcess();
  ASSERT_EQ(before, 0) << "handshakes left pending by earlier tests";
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  const clb::IdData d = clbtest::idData(id);
  std::vector<int> held;
  for (int i = 0; i < 5; i++) held.push_back(clbtest::rawConnect(clb::idAddress(d)));
  for (int i = 0; i < 200 && clb::pendingHandshakesInProcess() < before + 5; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(clb::pendingHandshakesInProcess(), before + 5);
  clbUniqueIdRelease(&id);
  for (int i = 0; i < 200 && clb::rootRuns(d); i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(clb::rootRuns(d));
  EXPECT_EQ(clb::pendingHandshakesInProcess(), before);
  for (int fd : held) close(fd);
}

// A TLS root serves connections side by side as the plain one does: idle ones, junk, and TLS
// handshakes that stop half way do not hold up the real ranks.
TEST(Tls, IdleJunkAndStalledHandshakesDoNotStallInit) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  const clb::IdData d = clbtest::idData(id);
  const clb::SockAddr root = clb::idAddress(d);
  std::vector<int> held;
  for (int i = 0; i < 60; i++) {
    int fd = clbtest::rawConnect(root);
    ASSERT_GE(fd, 0);
    if (i % 3 == 1) (void)!write(fd, "\x16\x03\x01\x00\x05junk", 9);      // a TLS record header, then junk
    if (i % 3 == 2) (void)!write(fd, "\x16\x03\x01\x02\x00\x01\x00", 7);  // a client hello that stops
    held.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> errors(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg;
      clbConfigInit(&cfg);
      cfg.timeoutMs = 6000;
      clbComm_t c = nullptr;
      if (clbCommInitRank(&c, &id, r, 2, &cfg) != clbSuccess)
        errors[r] = clbGetLastError();
      else
        clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expectAllOk(errors);
  EXPECT_LT(s, 2.0);
  for (int fd : held) close(fd);
}

}  // namespace

namespace {
// The same files give the same context (built once: OpenSSL 3 takes milliseconds to build one);
// a file that changes gives a new one.
TEST(Tls, ContextIsBuiltOncePerFiles) {
  REQUIRE_PKI();
  auto env = tlsEnv("all");
  clb::TlsContextRef a, b, c;
  ASSERT_EQ(clb::tlsContextFor(clb::TlsMode::kAll, &a), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clb::tlsContextFor(clb::TlsMode::kBootstrap, &b), clbSuccess) << clbGetLastError();
  EXPECT_EQ(a.get(), b.get());
  const std::string copy = pki().dir + "/rank-copy.pem";
  ASSERT_EQ(system(("cp " + pki().cert + " " + copy).c_str()), 0);
  ScopedEnv e{{"COLIBRI_TLS_CERT", copy.c_str()}};
  ASSERT_EQ(clb::tlsContextFor(clb::TlsMode::kAll, &c), clbSuccess) << clbGetLastError();
  EXPECT_NE(a.get(), c.get());
}
}  // namespace
