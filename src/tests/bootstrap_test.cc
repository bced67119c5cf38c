// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Bootstrap messages: ids round-trip, wrong secrets and versions are refused with a message that
// names both sides, ranks that disagree on nranks are refused, and nobody hangs.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstring>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/crypto.h"
#include "bootstrap/net.h"
#include "tests/test_bootstrap.h"

namespace {

// A port free now on `host`: bound, then released (for the torchrun-style tests' MASTER_PORT).
int freePort(const char* host) {
  clb::SockAddr any, bound;
  if (clb::resolveHost(host, 0, &any) != clbSuccess) return -1;
  int fd = -1;
  if (clb::listenTcp(any, &fd, &bound) != clbSuccess) return -1;
  clb::closeFd(&fd);
  return bound.port();
}

clbConfig_t quickConfig(int64_t timeoutMs) {
  clbConfig_t c;
  clbConfigInit(&c);
  c.timeoutMs = timeoutMs;
  return c;
}

TEST(UniqueId, CarriesMagicVersionAddressAndFreshSecret) {
  clbUniqueId a, b;
  ASSERT_EQ(clbGetUniqueId(&a), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbGetUniqueId(&b), clbSuccess) << clbGetLastError();
  clb::IdData da, db;
  ASSERT_EQ(clb::decodeId(&a, &da), clbSuccess);
  ASSERT_EQ(clb::decodeId(&b, &db), clbSuccess);
  EXPECT_EQ(da.protocol, (uint32_t)CLB_PROTOCOL_VERSION);
  EXPECT_NE(da.port, 0);
  EXPECT_NE(memcmp(da.secret, db.secret, sizeof da.secret), 0) << "every id has its own secret";
  char desc[256];
  ASSERT_EQ(clbUniqueIdDescribe(&a, desc, sizeof desc), clbSuccess);
  EXPECT_NE(std::string(desc).find("secret-fingerprint"), std::string::npos);
}

TEST(UniqueId, GarbageIsRejectedWithAHint) {
  clbUniqueId junk;
  memset(&junk, 0x5a, sizeof junk);
  clbComm_t comm;
  clbConfig_t cfg = quickConfig(1000);
  EXPECT_EQ(clbCommInitRank(&comm, &junk, 0, 1, &cfg), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("not a Colibri unique id"), std::string::npos) << clbGetLastError();
}

TEST(Bootstrap, WrongSecretIsRefusedNamingBothFingerprints) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbUniqueId wrong = id;
  reinterpret_cast<clb::IdData*>(&wrong)->secret[3] ^= 0x40;
  clbComm_t comm = nullptr;
  clbConfig_t cfg = quickConfig(5000);
  EXPECT_EQ(clbCommInitRank(&comm, &wrong, 0, 1, &cfg), clbAuthError);
  std::string msg = clbGetLastError();
  char fp[16];
  snprintf(fp, sizeof fp, "%08x", clb::secretFingerprint(reinterpret_cast<clb::IdData*>(&id)->secret));
  EXPECT_NE(msg.find("wrong secret"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fp), std::string::npos) << "names the root's fingerprint: " << msg;
  // The root keeps serving: the right id still works afterwards.
  ASSERT_EQ(clbCommInitRank(&comm, &id, 0, 1, &cfg), clbSuccess) << clbGetLastError();
  clbCommDestroy(comm);
}

// The rank that waits in vain for a rank whose id has another secret (a connection the root
// cannot trust, so it does not fail the others for it) is told at its timeout what the root
// refused meanwhile, with the address and fingerprint of the last such connection.
TEST(Bootstrap, RankThatWaitsInVainIsToldOfAWrongSecretTheRootRefused) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbUniqueId wrong = id;
  reinterpret_cast<clb::IdData*>(&wrong)->secret[0] ^= 0x01;
  char fp[16];
  snprintf(fp, sizeof fp, "%08x", clb::secretFingerprint(reinterpret_cast<clb::IdData*>(&wrong)->secret));
  clbResult_t rc0 = clbSuccess, rc1 = clbSuccess;
  std::string m0;
  std::thread t0([&] {
    clbComm_t c = nullptr;
    clbConfig_t cfg = quickConfig(1500);
    rc0 = clbCommInitRank(&c, &id, 0, 2, &cfg);
    m0 = clbGetLastError();
    if (c) clbCommDestroy(c);
  });
  std::thread t1([&] {
    clbComm_t c = nullptr;
    clbConfig_t cfg = quickConfig(1500);
    rc1 = clbCommInitRank(&c, &wrong, 1, 2, &cfg);
    if (c) clbCommDestroy(c);
  });
  t0.join();
  t1.join();
  EXPECT_EQ(rc1, clbAuthError);
  EXPECT_EQ(rc0, clbTimeout) << m0;
  EXPECT_NE(m0.find("Meanwhile the root refused 1 connection(s) that hold another secret than the communicator's"),
            std::string::npos)
      << m0;
  EXPECT_NE(m0.find(std::string("secret fingerprint ") + fp), std::string::npos) << m0;
  clbUniqueIdRelease(&id);
}

// MASTER_ADDR=0.0.0.0 (every interface): the rank with another secret fails at once and names the
// root by the address it reached, not by the wildcard, which no one can dial from elsewhere; rank 0
// is told at its (short) timeout what the root refused, from where.
TEST(Bootstrap, WrongSecretAtAWildcardRootNamesTheAddressReached) {
  const int port = freePort("0.0.0.0");
  ASSERT_GT(port, 0);
  clbResult_t rc[2] = {clbSuccess, clbSuccess};
  std::string m[2];
  double took[2] = {0, 0};
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] {
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0's root listens
      clbUniqueId id;
      ASSERT_EQ(clbUniqueIdFromAddress("0.0.0.0", port, r == 0 ? "right" : "wrong", &id), clbSuccess);
      clbConfig_t cfg = quickConfig(r == 0 ? 1500 : 20000);
      clbComm_t c = nullptr;
      const auto start = std::chrono::steady_clock::now();
      rc[r] = clbCommInitRank(&c, &id, r, 2, &cfg);
      took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      m[r] = clbGetLastError();
      if (c) clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  const std::string at = "the bootstrap root at 127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(rc[1], clbAuthError) << m[1];
  EXPECT_NE(m[1].find("wrong secret"), std::string::npos) << m[1];
  EXPECT_NE(m[1].find(at), std::string::npos) << m[1];
  EXPECT_EQ(m[1].find("0.0.0.0"), std::string::npos) << m[1];
  EXPECT_LT(took[1], 2.0) << "the rank with another secret fails at once";
  EXPECT_EQ(rc[0], clbTimeout) << m[0];
  EXPECT_NE(m[0].find("at 127.0.0.1:" + std::to_string(port) +
                      " for all 2 ranks to join (missing: rank(s) 1 of 2). Meanwhile the root refused 1 "
                      "connection(s) that hold another secret"),
            std::string::npos)
      << m[0];
  EXPECT_EQ(m[0].find("0.0.0.0"), std::string::npos) << m[0];
}

TEST(Bootstrap, OtherProtocolVersionIsRefusedNamingBoth) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  reinterpret_cast<clb::IdData*>(&id)->protocol = CLB_PROTOCOL_VERSION + 1;
  clbComm_t comm = nullptr;
  clbConfig_t cfg = quickConfig(2000);
  EXPECT_EQ(clbCommInitRank(&comm, &id, 0, 1, &cfg), clbAuthError);
  std::string msg = clbGetLastError();
  EXPECT_NE(msg.find("protocol " + std::to_string(CLB_PROTOCOL_VERSION + 1)), std::string::npos) << msg;
  EXPECT_NE(msg.find("protocol " + std::to_string(CLB_PROTOCOL_VERSION)), std::string::npos) << msg;
}

// A rank with another nranks is refused, and the rank that joined before it learns why at once
// (not at its timeout): no communicator can form.
TEST(Bootstrap, DisagreeingNranksIsRefusedAndEveryRankIsToldAtOnce) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbResult_t rc0 = clbSuccess, rc1 = clbSuccess;
  std::string m0, m1;
  double s0 = 0;
  std::thread t0([&] {
    clbComm_t c = nullptr;
    clbConfig_t cfg = quickConfig(20000);
    const auto start = std::chrono::steady_clock::now();
    rc0 = clbCommInitRank(&c, &id, 0, 2, &cfg);
    m0 = clbGetLastError();
    s0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (c) clbCommDestroy(c);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread t1([&] {
    clbComm_t c = nullptr;
    clbConfig_t cfg = quickConfig(20000);
    rc1 = clbCommInitRank(&c, &id, 1, 3, &cfg);
    m1 = clbGetLastError();
    if (c) clbCommDestroy(c);
  });
  t0.join();
  t1.join();
  EXPECT_EQ(rc1, clbInvalidArgument);
  EXPECT_NE(m1.find("nranks=3"), std::string::npos) << m1;
  EXPECT_EQ(rc0, clbInvalidArgument) << m0;
  EXPECT_NE(m0.find("rank 1 ("), std::string::npos) << m0;
  EXPECT_NE(m0.find("was refused, so this communicator cannot form: rank 1 says nranks=3 but an earlier rank said "
                    "nranks=2"),
            std::string::npos)
      << m0;
  EXPECT_LT(s0, 2.0) << "rank 0 is told at once, not at its 20 s timeout";
  // A rank that comes after the refusal is told too, at once.
  clbComm_t c = nullptr;
  clbConfig_t cfg = quickConfig(20000);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(clbCommInitRank(&c, &id, 0, 2, &cfg), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("rank 1 says nranks=3"), std::string::npos) << clbGetLastError();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  clbUniqueIdRelease(&id);
}

// Two processes' threads claim the same rank: both the duplicate and the ranks already in learn it.
TEST(Bootstrap, DuplicateRankIsRefusedAndEveryRankIsToldAtOnce) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<clbResult_t> rc(3, clbSuccess);
  std::vector<std::string> m(3);
  std::vector<std::thread> ts;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < 3; t++) {
    ts.emplace_back([&, t] {
      if (t == 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the duplicate comes last
      clbComm_t c = nullptr;
      clbConfig_t cfg = quickConfig(20000);
      rc[t] = clbCommInitRank(&c, &id, t == 2 ? 1 : t, 3, &cfg);
      m[t] = clbGetLastError();
      if (c) clbCommDestroy(c);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  for (int t = 0; t < 3; t++) {
    EXPECT_EQ(rc[t], clbInvalidArgument) << t << ": " << m[t];
    EXPECT_NE(m[t].find("rank 1 joined twice"), std::string::npos) << t << ": " << m[t];
  }
  clbUniqueIdRelease(&id);
}

TEST(Bootstrap, NranksBeyondTheMaximumIsRefusedAtInit) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbComm_t c = nullptr;
  clbConfig_t cfg = quickConfig(1000);
  EXPECT_EQ(clbCommInitRank(&c, &id, 0, INT_MAX, &cfg), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("at most 65536 ranks"), std::string::npos) << clbGetLastError();
  EXPECT_EQ(c, nullptr);
}

// A hello whose row describes another rank than the one it joins as (from a rank that holds the
// secret) is refused with the reason: its row would reach its peers as another rank's.
TEST(Bootstrap, RootRefusesAHelloWhoseRowNamesAnotherRank) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  clb::IdData id;
  ASSERT_EQ(clb::decodeId(&uid, &id), clbSuccess);
  clbtest::RootAnswer a = clbtest::helloToRoot(id, id.secret, 0, 2, nullptr, 1);
  ASSERT_EQ(a.rc, clbSuccess) << a.error;
  EXPECT_EQ(a.status, (uint32_t)clbInvalidArgument);
  EXPECT_NE(a.msg.find("rank 0's hello carries the row of rank 1"), std::string::npos) << a.msg;
  clbUniqueIdRelease(&uid);
}

// A hello that carries the right secret but nranks = INT_MAX (or a negative one) is refused by the
// root with the reason before anything is sized by it: the process hosting the root survives, and
// the real ranks then form their communicator.
// A hello with nranks out of range (from a rank that holds the secret) is refused before anything
// is sized by it, and the root survives it; the ranks that come after are told why at once.
TEST(Bootstrap, RootRefusesAHelloWithNranksOutOfRangeAndTellsTheRealRanks) {
  clbUniqueId uid;
  ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
  clb::IdData id;
  ASSERT_EQ(clb::decodeId(&uid, &id), clbSuccess);
  for (int32_t bad : {INT_MAX, -7}) {
    clbtest::RootAnswer a = clbtest::helloToRoot(id, id.secret, 0, bad);
    ASSERT_EQ(a.rc, clbSuccess) << a.error;
    EXPECT_EQ(a.status, (uint32_t)clbInvalidArgument) << bad;
    // The first is refused for what it says; the second is told of the first (no communicator can form).
    EXPECT_NE(a.msg.find("says nranks=2147483647"), std::string::npos) << bad << ": " << a.msg;
  }
  std::vector<clbResult_t> rc(2, clbInternalError);
  std::vector<std::string> msg(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] {
      clbComm_t c = nullptr;
      clbConfig_t cfg = quickConfig(5000);
      rc[r] = clbCommInitRank(&c, &uid, r, 2, &cfg);
      msg[r] = clbGetLastError();
      if (c) clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(rc[r], clbInvalidArgument) << msg[r];
    EXPECT_NE(msg[r].find("says nranks=2147483647: a communicator has 1 to"), std::string::npos) << msg[r];
  }
  EXPECT_TRUE(clb::rootRuns(id)) << "the root survived the hostile hellos";
  clbUniqueIdRelease(&uid);
}

TEST(Bootstrap, TorchrunStyleRootAtRankZero) {
  const int port = freePort("127.0.0.1");
  ASSERT_GT(port, 0);
  std::vector<std::thread> ts;
  std::vector<clbResult_t> rc(3, clbInternalError);
  for (int r = 0; r < 3; r++)
    ts.emplace_back([&, r] {
      clbUniqueId id;
      clbUniqueIdFromAddress("127.0.0.1", port, "s3cret", &id);
      clbConfig_t cfg = quickConfig(10000);
      clbComm_t c = nullptr;
      rc[r] = clbCommInitRank(&c, &id, r, 3, &cfg);
      if (rc[r] == clbSuccess) {
        int v = r + 1, out = 0;
        rc[r] = clbAllReduce(&v, &out, 1, clbInt32, clbSum, c, nullptr);
        if (rc[r] == clbSuccess && out != 6) rc[r] = clbInternalError;
        clbCommDestroy(c);
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 3; r++) EXPECT_EQ(rc[r], clbSuccess) << "rank " << r;
}

// A rank that never comes (1 of 3, torchrun style, the root at rank 0): at a quarter of the
// timeout the root's process logs a WARN naming the ranks that joined, the one missing and the
// variables to start it with; rank 0's timeout names it too (its process runs the root) and
// advises the variables, not a UniqueId. Rank 2 waits longer: rank 0 stops the root as it gives up,
// which ends rank 2's wait too.
TEST(Bootstrap, ARankThatNeverComesIsNamedWithTheVariablesToStartIt) {
  const int port = freePort("127.0.0.1");
  ASSERT_GT(port, 0);
  clbtest::LogLines log(clbLogWarn);
  std::vector<std::thread> ts;
  std::vector<clbResult_t> rc(3, clbSuccess);
  std::vector<std::string> msg(3);
  for (int r : {0, 2})
    ts.emplace_back([&, r] {
      clbUniqueId id;
      clbUniqueIdFromAddress("127.0.0.1", port, "s3cret", &id);
      clbConfig_t cfg = quickConfig(r == 0 ? 2000 : 6000);
      clbComm_t c = nullptr;
      rc[r] = clbCommInitRank(&c, &id, r, 3, &cfg);
      msg[r] = clbGetLastError();
      if (c) clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  const std::string warn = log.find({"still missing rank(s) 1,", "2 of 3 rank(s) joined"});
  EXPECT_FALSE(warn.empty()) << "no WARN naming the missing rank";
  const std::string vars =
      "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=3 and its own RANK";
  EXPECT_NE(warn.find(vars), std::string::npos) << warn;
  EXPECT_EQ(rc[0], clbTimeout) << msg[0];
  EXPECT_NE(msg[0].find("(missing: rank(s) 1 of 3)"), std::string::npos) << msg[0];
  EXPECT_NE(msg[0].find("with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE and its own RANK"), std::string::npos)
      << msg[0];
  EXPECT_EQ(msg[0].find("UniqueId"), std::string::npos) << msg[0];
  EXPECT_NE(rc[2], clbSuccess) << "rank 2 cannot form a communicator either";
}

// A rank whose configuration is refused, while another rank never comes: the refused rank keeps
// its valid settings, joins only to say so, and the root refuses it at its hello, so it and the
// rank that joined fail at once (not at the timeout, the refused rank's 60 s default included),
// each saying what concerns it.
TEST(Bootstrap, ARefusedRankFailsEveryJoinedRankAtOnceEvenWhileAnotherIsMissing) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<clbResult_t> rc(2, clbSuccess);
  std::vector<std::string> msg(2);
  std::vector<double> took(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg = quickConfig(20000);
      if (r == 1) cfg.chunkBytes = 100;  // out of range
      clbComm_t c = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      rc[r] = clbCommInitRank(&c, &id, r, 3, &cfg);
      took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      msg[r] = clbGetLastError();
      if (c) clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(rc[1], clbInvalidArgument) << msg[1];
  EXPECT_NE(msg[1].find("chunkBytes=100 is out of range"), std::string::npos) << msg[1];
  EXPECT_NE(msg[1].find("every rank of the communicator refuses it"), std::string::npos) << msg[1];
  EXPECT_LT(msg[1].find("every rank of the communicator refuses it"), msg[1].find('\n'))
      << "one sentence, the refusal's location not in the middle: " << msg[1];
  EXPECT_EQ(rc[0], clbInvalidUsage) << msg[0];
  EXPECT_NE(msg[0].find("rank 1 holds a setting that is not valid"), std::string::npos) << msg[0];
  for (int r = 0; r < 2; r++) EXPECT_LT(took[r], 5.0 * clbtest::slowdown()) << "rank " << r << ": " << msg[r];
  clbUniqueIdRelease(&id);
}

// A rank that joined and gave up at its own (shorter) timeout is named as such, beside the one
// that never came.
TEST(Bootstrap, ARankThatJoinedAndGaveUpIsNamedBesideTheOneThatNeverCame) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::string m0;
  std::thread t2([&] {
    clbConfig_t cfg = quickConfig(300);
    clbComm_t c = nullptr;
    clbCommInitRank(&c, &id, 2, 3, &cfg);
    if (c) clbCommDestroy(c);
  });
  clbConfig_t cfg = quickConfig(2000);
  clbComm_t c = nullptr;
  EXPECT_EQ(clbCommInitRank(&c, &id, 0, 3, &cfg), clbTimeout);
  m0 = clbGetLastError();
  t2.join();
  EXPECT_NE(m0.find("(missing: rank(s) 1 of 3; rank(s) 2 joined and gave up (their timeout))"), std::string::npos)
      << m0;
  clbUniqueIdRelease(&id);
}

// The same with a UniqueId (clbGetUniqueId): the advice is the id, and a range of missing ranks
// is written as one.
TEST(Bootstrap, RanksThatNeverComeAreNamedWithTheUniqueIdToStartThem) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbtest::LogLines log(clbLogWarn);
  clbComm_t c = nullptr;
  clbConfig_t cfg = quickConfig(1200);
  EXPECT_EQ(clbCommInitRank(&c, &id, 1, 5, &cfg), clbTimeout);
  const std::string m = clbGetLastError();
  EXPECT_NE(m.find("(missing: rank(s) 0, 2-4 of 5)"), std::string::npos) << m;
  EXPECT_NE(m.find("start every rank with the same UniqueId"), std::string::npos) << m;
  const std::string warn = log.find({"still missing rank(s) 0, 2-4", "1 of 5 rank(s) joined (rank 1 on "});
  EXPECT_NE(warn.find("this communicator's UniqueId"), std::string::npos) << "WARN: " << warn;
  clbUniqueIdRelease(&id);
}

// The body of a process of ARankInAnotherProcessLearnsWhoIsMissing: rank 1 of the id in
// CLB_NOTE_ID (hex) with a 4 s timeout; its error and its WARN lines go to CLB_NOTE_OUT.
TEST(NoteChild, JoinsAndWaits) {
  const char* out = getenv("CLB_NOTE_OUT");
  if (!out) GTEST_SKIP() << "runs only as the process of ARankInAnotherProcessLearnsWhoIsMissing";
  clbtest::LogLines log(clbLogWarn);
  const clbUniqueId id = clbtest::unhex(getenv("CLB_NOTE_ID"));
  clbConfig_t cfg = quickConfig(4000);
  clbComm_t c = nullptr;
  const clbResult_t rc = clbCommInitRank(&c, &id, 1, 3, &cfg);
  const std::string e = clbGetLastError();
  if (c) clbCommDestroy(c);
  FILE* f = fopen(out, "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "rc %d\n%s\n", (int)rc, e.c_str());
  for (const std::string& l : log.lines()) fprintf(f, "WARN %s\n", l.c_str());
  fclose(f);
}

// A rank in another process than the root's (on another host, as most are) learns which ranks the
// root still waits for: the root's note at a quarter of the timeout, which it logs and its timeout
// names, as a rank in the root's process does.
TEST(Bootstrap, ARankInAnotherProcessLearnsWhoIsMissing) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);  // the root: this process
  char path[] = "/tmp/clb-note-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  // Rank 0 here (its timeout, whichever joins first, sets the note at 500 ms); rank 2 never comes.
  std::thread t0([&] {
    clbConfig_t cfg = quickConfig(2000);
    clbComm_t c = nullptr;
    clbCommInitRank(&c, &id, 0, 3, &cfg);
    if (c) clbCommDestroy(c);
  });
  const pid_t pid = clbtest::spawnSelf("NoteChild.JoinsAndWaits",
                                       {std::string("CLB_NOTE_OUT=") + path, "CLB_NOTE_ID=" + clbtest::hex(id)});
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  t0.join();
  clbUniqueIdRelease(&id);
  std::string all;
  if (FILE* f = fopen(path, "r")) {
    char b[2048];
    while (fgets(b, sizeof b, f)) all += b;
    fclose(f);
  }
  unlink(path);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed: " << all;
  EXPECT_NE(all.find("rc 6\n"), std::string::npos) << "a timeout (clbTimeout) in the child: " << all;
  EXPECT_NE(all.find("(missing: rank(s) 2 of 3)"), std::string::npos) << all;
  EXPECT_NE(all.find("WARN rank 1: the bootstrap root at"), std::string::npos) << all;
  EXPECT_NE(all.find("still waits for rank(s) 2 of 3"), std::string::npos) << all;
  EXPECT_NE(all.find("this communicator's UniqueId"), std::string::npos) << "the advice: " << all;
}

// The body of a process of NoSecretIsWarnedOncePerProcessAndBriefly: three ids from an address
// without a secret, the warnings they log written to CLB_SECRET_OUT, one per line.
TEST(NoSecretChild, MakesThreeIds) {
  const char* out = getenv("CLB_SECRET_OUT");
  if (!out) GTEST_SKIP() << "runs only as the process of NoSecretIsWarnedOncePerProcessAndBriefly";
  clbtest::LogLines log(clbLogWarn);
  for (int i = 0; i < 3; i++) {
    clbUniqueId id;
    ASSERT_EQ(clbUniqueIdFromAddress("127.0.0.1", 29500 + i, nullptr, &id), clbSuccess) << clbGetLastError();
  }
  FILE* f = fopen(out, "w");
  ASSERT_NE(f, nullptr);
  for (const std::string& l : log.lines())
    if (l.find("SECRET") != std::string::npos) fprintf(f, "%s\n", l.c_str());
  fclose(f);
}

// Every rank of a torchrun-style launch without COLIBRI_BOOTSTRAP_SECRET is told once, in one
// short line (not one long paragraph per id).
TEST(Bootstrap, NoSecretIsWarnedOncePerProcessAndBriefly) {
  char path[] = "/tmp/clb-secret-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  const pid_t pid = clbtest::spawnSelf("NoSecretChild.MakesThreeIds",
                                       {std::string("CLB_SECRET_OUT=") + path, "COLIBRI_BOOTSTRAP_SECRET="});
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed";
  std::vector<std::string> lines;
  if (FILE* f = fopen(path, "r")) {
    char b[1024];
    while (fgets(b, sizeof b, f)) lines.push_back(b);
    fclose(f);
  }
  unlink(path);
  ASSERT_EQ(lines.size(), 1u) << "one warning for three ids";
  EXPECT_LT(lines[0].size(), 120u) << lines[0];
  EXPECT_NE(lines[0].find("no COLIBRI_BOOTSTRAP_SECRET: anyone who can reach 127.0.0.1:29500 can join"),
            std::string::npos)
      << lines[0];
}

TEST(Bootstrap, DirectAlgorithmOverSocketIsRefusedAtInit) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<std::thread> ts;
  std::vector<std::string> msg(2);
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] {
      clbConfig_t cfg = quickConfig(5000);
      cfg.transport = clbTransportSocket;
      cfg.algorithm = clbAlgoDirect;
      clbComm_t c = nullptr;
      if (clbCommInitRank(&c, &id, r, 2, &cfg) != clbSuccess) msg[r] = clbGetLastError();
      if (c) clbCommDestroy(c);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; r++) EXPECT_NE(msg[r].find("direct needs the shm transport"), std::string::npos) << msg[r];
}

// clbCommInitRankAbortable: a flag set by another thread while the init waits for a rank that
// never comes ends it within about 100 ms (not at its timeout) with clbAborted, *comm NULL; a flag
// set before the call stops it before it connects; an init whose flag stays 0 completes, and the
// abort of the ranks that finished (all-to-all alike) works on the communicator as usual.
TEST(Bootstrap, AnAbortableInitEndsOnceItsFlagIsSet) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  clbConfig_t cfg = quickConfig(20000);
  int flag = 0;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
  });
  clbComm_t c = reinterpret_cast<clbComm_t>(&c);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(clbCommInitRankAbortable(&c, &id, 0, 2, &cfg, &flag), clbAborted);
  const std::string e = clbGetLastError();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "the init waited for its timeout";
  setter.join();
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(e.find("rank 0 of 2: the init was aborted (its abort flag was set) and freed what it made"),
            std::string::npos)
      << e;
  EXPECT_EQ(clbCommInitRankAbortable(&c, &id, 1, 2, &cfg, &flag), clbAborted);  // set already
  EXPECT_NE(std::string(clbGetLastError()).find("before it began"), std::string::npos) << clbGetLastError();
  // Not set: the init completes.
  clbUniqueId fresh;
  ASSERT_EQ(clbGetUniqueId(&fresh), clbSuccess);
  int never = 0;
  ASSERT_EQ(clbCommInitRankAbortable(&c, &fresh, 0, 1, &cfg, &never), clbSuccess) << clbGetLastError();
  int32_t x = 3, y = 0;
  EXPECT_EQ(clbAllReduce(&x, &y, 1, clbInt32, clbSum, c, nullptr), clbSuccess);
  EXPECT_EQ(y, 3);
  EXPECT_EQ(clbCommDestroy(c), clbSuccess);
}

}  // namespace

namespace {

// The exchange tree, for every size up to 300 ranks: each rank but 0 has one parent below it that
// lists it as a child, a rank's children's subtrees tile its own after itself, and no path to rank
// 0 is longer than ceil(log2 n) hops.
TEST(BootstrapTree, SubtreesTileAndDepthIsLogarithmic) {
  for (int n = 1; n <= 300; n++) {
    int log2n = 0;
    while ((1 << log2n) < n) log2n++;
    for (int r = 0; r < n; r++) {
      int next = r + 1;
      for (int c : clb::treeChildren(r, n)) {
        ASSERT_EQ(c, next) << "n " << n << " rank " << r;
        ASSERT_EQ(clb::treeParent(c), r) << "n " << n;
        next = clb::treeEnd(c, n);
      }
      ASSERT_EQ(next, clb::treeEnd(r, n)) << "n " << n << " rank " << r;
      int hops = 0;
      for (int p = r; p != 0; p = clb::treeParent(p)) {
        ASSERT_LT(clb::treeParent(p), p);
        hops++;
      }
      ASSERT_LE(hops, log2n) << "n " << n << " rank " << r;
    }
  }
}

// The bootstrap's own all-gather and barrier over the tree, for sizes with full, partial and
// one-rank subtrees: every block arrives where it belongs, byte for byte, and nothing past the
// buffer changes; three exchanges in a row (their tags numbered) and blocks of 1, 7 and 304 bytes.
TEST(BootstrapTree, AllGatherDeliversEveryBlockForManySizes) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33}) {
    clbUniqueId uid;
    ASSERT_EQ(clbGetUniqueId(&uid), clbSuccess);
    const clb::IdData id = clbtest::idData(uid);
    std::vector<std::string> errors(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; r++)
      ts.emplace_back([&, r] {
        clb::Bootstrap b;
        if (b.init(id, r, n, 10000, nullptr) != clbSuccess) {
          errors[r] = std::string("init: ") + clbGetLastError();
          return;
        }
        for (size_t bytes : {(size_t)1, (size_t)7, (size_t)304}) {
          auto value = [&](int p, size_t i) { return (unsigned char)(p * 131 + i * 7 + bytes); };
          std::vector<unsigned char> buf(n * bytes + 16, 0xEE);
          for (size_t i = 0; i < bytes; i++) buf[r * bytes + i] = value(r, i);
          if (b.allGather(buf.data(), bytes) != clbSuccess) {
            errors[r] = std::string("allGather: ") + clbGetLastError();
            return;
          }
          for (int p = 0; p < n; p++)
            for (size_t i = 0; i < bytes; i++)
              if (buf[p * bytes + i] != value(p, i)) {
                errors[r] = "block " + std::to_string(p) + " byte " + std::to_string(i) + " of " +
                            std::to_string(bytes) + " is " + std::to_string(buf[p * bytes + i]);
                return;
              }
          for (size_t i = n * bytes; i < buf.size(); i++)
            if (buf[i] != 0xEE) {
              errors[r] = "the all-gather wrote past its buffer";
              return;
            }
        }
        if (b.barrier() != clbSuccess) errors[r] = std::string("barrier: ") + clbGetLastError();
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << n << " ranks, rank " << r;
  }
}

// The check of the table gathered over the tree (protocol 9) against the root's hash: the table
// the root hashed passes; one byte changed in any row fails with clbAuthError saying so; a table
// whose hash matches but whose row names another rank fails too.
TEST(BootstrapTree, GatheredTableMustHashToTheRootsDigest) {
  std::vector<clb::RankInfo> table(5);
  for (int p = 0; p < 5; p++) {
    memset(&table[p], 0, sizeof table[p]);
    table[p].rank = p;
    table[p].pid = 1000 + p;
    snprintf(table[p].hostname, sizeof table[p].hostname, "host-%d", p);
  }
  std::array<uint8_t, clb::kSha256Bytes> digest{};
  clb::sha256(table.data(), table.size() * sizeof(clb::RankInfo), digest.data());
  std::vector<clb::RankInfo> same = table;
  EXPECT_EQ(clb::checkGatheredTable(&same, digest, 2), clbSuccess) << clbGetLastError();
  for (size_t at :
       {(size_t)0, sizeof(clb::RankInfo) * 3 + offsetof(clb::RankInfo, port), sizeof(clb::RankInfo) * 5 - 1}) {
    std::vector<clb::RankInfo> changed = table;
    reinterpret_cast<uint8_t*>(changed.data())[at] ^= 1;
    EXPECT_EQ(clb::checkGatheredTable(&changed, digest, 2), clbAuthError) << "byte " << at;
    EXPECT_NE(std::string(clbGetLastError()).find("differs from the one the root hashed"), std::string::npos)
        << clbGetLastError();
  }
  std::vector<clb::RankInfo> misnamed = table;
  misnamed[4].rank = 3;
  clb::sha256(misnamed.data(), misnamed.size() * sizeof(clb::RankInfo), digest.data());
  EXPECT_EQ(clb::checkGatheredTable(&misnamed, digest, 2), clbRemoteError);
  EXPECT_NE(std::string(clbGetLastError()).find("row 4 of the table says rank 3"), std::string::npos)
      << clbGetLastError();
}

}  // namespace
