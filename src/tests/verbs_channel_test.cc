// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The verbs RingChannel over the verbs emulator: endpoints are emulated hosts (one device context
// each), connected by exchanging VerbsConnInfo, then driven the way the ring algorithm drives a
// channel. Contents are random and checked byte by byte, tags are checked, and the failures a
// real fabric produces (dead peer, lost packets, bad rkey) must surface as clear errors in time.
#include <gtest/gtest.h>

#include "tests/test_fd_io.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "transport/shm/shm.h"
#include "core/comm.h"  // a clbComm on the stack
#include "transport/net/net_plugin.h"
#include "transport/verbs/verbs_channel.h"
#include "tests/verbs_emu/emu_client.h"

extern char** environ;

namespace {

using clb::MsgTag;
using clb::verbs::VerbsChannel;
using clb::verbs::VerbsConnInfo;
using clb::verbs::VerbsOptions;
namespace emu = clbtest::emu;
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

const size_t kSizes[] = {0, 1, 4095, 65536, (1u << 20) + 3};

// `fastRetry`: give up on unacknowledged packets after ~40 ms (fault tests); otherwise the
// defaults (~67 ms x 7), which survive a loaded machine or a sanitizer build.
int gQps = 1;  // queue pairs per link in testOptions: VerbsChannelTest's parameter

VerbsOptions testOptions(int rank, int nranks, int slots = 4, int64_t timeoutMs = 3000, bool fastRetry = false) {
  VerbsOptions o;
  o.qpsPerConnection = gQps;
  o.rank = rank;
  o.nranks = nranks;
  o.slots = slots;
  o.timeoutMs = timeoutMs;
  if (fastRetry) {
    o.timeout = 8;  // ~1 ms, raised to the emulator's floor
    o.retryCnt = 3;
  }
  return o;
}

clb::OpDesc desc(uint64_t seq) {
  clb::OpDesc d{};
  d.seq = seq;
  d.coll = clb::kAllReduce;
  d.count = 12345;
  return d;
}

std::vector<char> content(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  std::mt19937 g(seed);
  for (auto& c : v) c = (char)g();
  return v;
}

long firstDiff(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

std::unique_ptr<VerbsChannel> make(const VerbsOptions& o) {
  std::unique_ptr<VerbsChannel> ch;
  clbResult_t rc = VerbsChannel::create(emu::api(), o, nullptr, &ch);
  EXPECT_EQ(rc, clbSuccess) << clb::lastError();
  return ch;
}

// Connects channels into a ring: ch[i] sends to ch[i+1].
void connectRing(std::vector<std::unique_ptr<VerbsChannel>>& ch) {
  int n = (int)ch.size();
  for (int i = 0; i < n; i++)
    ASSERT_EQ(ch[i]->connect(ch[(i + 1) % n]->recvSideInfo(), ch[(i + n - 1) % n]->sendSideInfo()), clbSuccess)
        << clb::lastError();
}

clbResult_t sendMsg(VerbsChannel& ch, uint64_t seq, uint64_t index, const std::vector<char>& data) {
  void* buf = nullptr;
  clbResult_t rc = ch.acquireSend(data.size(), &buf);
  if (rc != clbSuccess) return rc;
  if (!data.empty()) memcpy(buf, data.data(), data.size());
  return ch.postSend(MsgTag{desc(seq), index, data.size()});
}

// Receives one message and checks it against `expect`, byte by byte.
void recvCheck(VerbsChannel& ch, uint64_t seq, uint64_t index, const std::vector<char>& expect) {
  const void* p = nullptr;
  ASSERT_EQ(ch.waitRecv(MsgTag{desc(seq), index, expect.size()}, &p), clbSuccess) << clb::lastError();
  ASSERT_EQ(firstDiff(static_cast<const char*>(p), expect.data(), expect.size()), -1)
      << "message " << index << " of " << expect.size() << " bytes differs";
  ASSERT_EQ(ch.releaseRecv(), clbSuccess) << clb::lastError();
}

class EmulatorConfig {
 protected:
  static void configureEmulator() {
    emu::Config c;
    c.minTimeoutMs = 10;
    emu::configure(c);
  }
};

// Every channel test with 1 queue pair per link and with 3 (messages striped over them).
class VerbsChannelTest : public ::testing::TestWithParam<int>, protected EmulatorConfig {
 protected:
  void SetUp() override {
    configureEmulator();
    gQps = GetParam();
  }
  void TearDown() override {
    gQps = 1;
    emu::resetConfig();
  }

  void makePair(int slots = 4, int64_t timeoutMs = 3000, bool fastRetry = false) {
    ch_.clear();
    ch_.push_back(make(testOptions(0, 2, slots, timeoutMs, fastRetry)));
    ch_.push_back(make(testOptions(1, 2, slots, timeoutMs, fastRetry)));
    ASSERT_TRUE(ch_[0] && ch_[1]);
    ASSERT_NO_FATAL_FAILURE(connectRing(ch_));
  }
  std::vector<std::unique_ptr<VerbsChannel>> ch_;
};

TEST_P(VerbsChannelTest, ConnectChoosesRoceV2GidAndBothEndsAgree) {
  ASSERT_NO_FATAL_FAILURE(makePair());
  EXPECT_EQ(ch_[0]->gidIndex(), 1) << "the emulator's RoCE v2 GID is index 1";
  EXPECT_EQ(ch_[0]->pathMtu(), IBV_MTU_4096);
  const VerbsConnInfo& i = ch_[0]->sendSideInfo();
  EXPECT_EQ(i.magic, clb::verbs::kVerbsConnMagic);
  EXPECT_EQ(i.slots, 4u);
  EXPECT_LE(i.psn, 0xFFFFFFu);
  EXPECT_NE(i.ctlRkey, 0u);
  for (auto& c : ch_)
    for (ibv_qp* q : {c->sendQp(), c->recvQp()}) {
      ibv_qp_attr a;
      ibv_qp_init_attr ia;
      ASSERT_EQ(emu::api()->queryQp(q, &a, IBV_QP_STATE, &ia), 0);
      EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
    }
  VerbsOptions o = testOptions(0, 2);
  o.gidIndex = 0;
  auto c = make(o);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->gidIndex(), 0) << "an explicit GID index wins";
}

TEST_P(VerbsChannelTest, InfinibandUsesLids) {
  emu::Config c = emu::config();
  c.linkLayer = IBV_LINK_LAYER_INFINIBAND;
  emu::configure(c);
  ASSERT_NO_FATAL_FAILURE(makePair());
  EXPECT_NE(ch_[0]->recvSideInfo().lid, 0);
  ASSERT_EQ(ch_[0]->prepare(100), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[1]->prepare(100), clbSuccess) << clb::lastError();
  auto d = content(100, 5);
  ASSERT_EQ(sendMsg(*ch_[0], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 0, d));
}

TEST_P(VerbsChannelTest, RejectsSlotCountMismatchAndUseBeforeConnect) {
  auto a = make(testOptions(0, 2, 4));
  auto b = make(testOptions(1, 2, 8));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->prepare(10), clbInvalidUsage);
  EXPECT_NE(clb::lastError().find("before connect"), std::string::npos) << clb::lastError();
  EXPECT_EQ(a->connect(b->recvSideInfo(), b->sendSideInfo()), clbInvalidArgument);
  EXPECT_NE(clb::lastError().find("same slot count"), std::string::npos) << clb::lastError();
  VerbsConnInfo junk = b->recvSideInfo();
  junk.magic = 0;
  EXPECT_EQ(a->connect(junk, junk), clbInvalidArgument);
}

// Sizes 0, 1, 4095, 64 KiB, 1 MiB + 3 streamed one way with the sender far ahead of the receiver
// (more messages in flight than slots), and the other way at the same time.
TEST_P(VerbsChannelTest, StreamsMessagesInOrderBothWays) {
  ASSERT_NO_FATAL_FAILURE(makePair(4));
  const int kMsgs = 25;
  const size_t maxBytes = (1u << 20) + 3;
  std::vector<std::vector<char>> msgs[2];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < kMsgs; i++) msgs[r].push_back(content(kSizes[i % 5], 1000 * r + i));
  // Each rank sends two messages ahead of what it receives, like the ring's pipelining.
  auto rankSerial = [&](int r) {
    VerbsChannel& c = *ch_[r];
    ASSERT_EQ(c.prepare(maxBytes), clbSuccess) << clb::lastError();
    for (int i = 0; i < kMsgs; i++) {
      ASSERT_EQ(sendMsg(c, 7, i, msgs[r][i]), clbSuccess) << clb::lastError();
      if (i >= 2) {
        ASSERT_NO_FATAL_FAILURE(recvCheck(c, 7, i - 2, msgs[1 - r][i - 2]));
      }
    }
    for (int i = kMsgs - 2; i < kMsgs; i++) ASSERT_NO_FATAL_FAILURE(recvCheck(c, 7, i, msgs[1 - r][i]));
    ASSERT_EQ(c.finish(), clbSuccess) << clb::lastError();
  };
  std::thread t0(rankSerial, 0), t1(rankSerial, 1);
  t0.join();
  t1.join();
}

// One direction only: the sender runs ahead by 60 messages with 4 slots; the receiver is slow.
TEST_P(VerbsChannelTest, PipelineDeeperThanSlotsWaitsForCredits) {
  ASSERT_NO_FATAL_FAILURE(makePair(4));
  const int kMsgs = 60;
  std::vector<std::vector<char>> msgs;
  for (int i = 0; i < kMsgs; i++) msgs.push_back(content(kSizes[i % 4], 77 + i));
  ASSERT_EQ(ch_[1]->prepare(65536), clbSuccess) << clb::lastError();
  std::thread rx([&] {
    for (int i = 0; i < kMsgs; i++) {
      if (i % 10 == 0) std::this_thread::sleep_for(Ms(2));
      ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 3, i, msgs[i]));
    }
    ASSERT_EQ(ch_[1]->finish(), clbSuccess) << clb::lastError();
  });
  ASSERT_EQ(ch_[0]->prepare(65536), clbSuccess) << clb::lastError();
  for (int i = 0; i < kMsgs; i++) ASSERT_EQ(sendMsg(*ch_[0], 3, i, msgs[i]), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[0]->finish(), clbSuccess) << clb::lastError();
  rx.join();
}

// Without releases the sender gets exactly K messages out, then times out waiting for a credit.
TEST_P(VerbsChannelTest, CreditsBoundTheSender) {
  ASSERT_NO_FATAL_FAILURE(makePair(4, 300));
  ASSERT_EQ(ch_[1]->prepare(64), clbSuccess);
  ASSERT_EQ(ch_[0]->prepare(64), clbSuccess);
  auto d = content(64, 1);
  for (int i = 0; i < 4; i++) ASSERT_EQ(sendMsg(*ch_[0], 1, i, d), clbSuccess) << clb::lastError();
  auto t0 = Clock::now();
  EXPECT_EQ(sendMsg(*ch_[0], 1, 4, d), clbTimeout);
  EXPECT_LT(Clock::now() - t0, Ms(2000));
  EXPECT_NE(clb::lastError().find("credit"), std::string::npos) << clb::lastError();
  // The receiver has all four, in order.
  for (int i = 0; i < 4; i++) ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, i, d));
}

// Point-to-point mode (VerbsOptions::peer): rank 0 of 8 and rank 5 each open a channel whose
// links both go to the other, two of rank 0's channels share one device (and protection
// domain), and the non-blocking forms never wait: trySend gives no room before the receiver
// announced its slots and once its four slots are full, tryRecv gives nothing before a message
// arrives; messages arrive in order both ways, byte for byte, and a release gives room again.
TEST_P(VerbsChannelTest, PairChannelsShareADeviceAndNeverBlock) {
  VerbsOptions o0 = testOptions(0, 8), o5 = testOptions(5, 8);
  o0.peer = 5;
  o5.peer = 0;
  auto a = make(o0), b = make(o5);
  ASSERT_TRUE(a && b);
  VerbsOptions o0b = testOptions(0, 8);
  o0b.peer = 3;
  o0b.sharedDevice = a->device();
  auto c = make(o0b);  // rank 0's channel with rank 3: the same device as its channel with rank 5
  ASSERT_TRUE(c);
  EXPECT_EQ(c->device(), a->device());
  EXPECT_EQ(c->context(), a->context());
  EXPECT_NE(b->context(), a->context());
  ASSERT_EQ(a->connect(b->recvSideInfo(), b->sendSideInfo()), clbSuccess) << clb::lastError();
  ASSERT_EQ(b->connect(a->recvSideInfo(), a->sendSideInfo()), clbSuccess) << clb::lastError();
  ASSERT_EQ(a->prepare(4096), clbSuccess) << clb::lastError();
  void* buf = nullptr;
  // Rank 5 has not announced its slots: no room, at once.
  auto t0 = Clock::now();
  ASSERT_EQ(a->trySend(100, &buf), clbSuccess) << clb::lastError();
  EXPECT_EQ(buf, nullptr);
  MsgTag got{};
  const void* in = nullptr;
  ASSERT_EQ(b->tryRecvTag(&got, &in), clbSuccess) << clb::lastError();
  EXPECT_EQ(in, nullptr);
  EXPECT_LT(Clock::now() - t0, Ms(500)) << "a try waited";
  ASSERT_EQ(b->prepare(4096), clbSuccess) << clb::lastError();
  std::vector<std::vector<char>> sent;
  auto trySendUntil = [&](VerbsChannel& ch, size_t bytes, uint64_t index) -> bool {
    const auto end = Clock::now() + Ms(2000);
    for (;;) {
      void* p = nullptr;
      EXPECT_EQ(ch.trySend(bytes, &p), clbSuccess) << clb::lastError();
      if (p) {
        sent.push_back(content(bytes, (uint32_t)index + 7));
        memcpy(p, sent.back().data(), bytes);
        EXPECT_EQ(ch.postSend(MsgTag{desc(9), index, bytes}), clbSuccess) << clb::lastError();
        return true;
      }
      if (Clock::now() > end) return false;
      std::this_thread::sleep_for(Ms(1));
    }
  };
  // Four messages fill rank 5's four slots (the first waits for its announcement to arrive).
  for (uint64_t i = 0; i < 4; i++) ASSERT_TRUE(trySendUntil(*a, 1000 + i, i)) << "no room for message " << i;
  ASSERT_EQ(a->trySend(10, &buf), clbSuccess) << clb::lastError();
  EXPECT_EQ(buf, nullptr) << "room for a fifth message while four are unreleased";
  // They arrive in order, byte for byte; the first release gives room for a fifth.
  for (uint64_t i = 0; i < 4; i++) {
    const auto end = Clock::now() + Ms(2000);
    do {
      ASSERT_EQ(b->tryRecvTag(&got, &in), clbSuccess) << clb::lastError();
    } while (!in && Clock::now() < end);
    ASSERT_NE(in, nullptr) << "message " << i << " did not arrive";
    EXPECT_EQ(got.index, i);
    ASSERT_EQ(got.bytes, sent[i].size());
    EXPECT_EQ(firstDiff(static_cast<const char*>(in), sent[i].data(), sent[i].size()), -1) << "message " << i;
    ASSERT_EQ(b->releaseRecv(), clbSuccess) << clb::lastError();
  }
  ASSERT_EQ(b->tryRecvTag(&got, &in), clbSuccess) << clb::lastError();
  EXPECT_EQ(in, nullptr) << "a fifth message that was never sent";
  ASSERT_TRUE(trySendUntil(*a, 333, 4)) << "no room after the releases";
  // The other way, over the same pair of channels.
  ASSERT_EQ(sendMsg(*b, 9, 0, content(4096, 3)), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*a, 9, 0, content(4096, 3)));
  ASSERT_NO_FATAL_FAILURE(recvCheck(*b, 9, 4, sent[4]));
}

TEST_P(VerbsChannelTest, TagMismatchIsAnErrorNamingBothCalls) {
  ASSERT_NO_FATAL_FAILURE(makePair());
  ASSERT_EQ(ch_[0]->prepare(16), clbSuccess);
  ASSERT_EQ(ch_[1]->prepare(16), clbSuccess);
  auto d = content(16, 2);
  ASSERT_EQ(sendMsg(*ch_[0], 5, 0, d), clbSuccess) << clb::lastError();
  const void* p = nullptr;
  EXPECT_NE(ch_[1]->waitRecv(MsgTag{desc(6), 0, 16}, &p), clbSuccess);
  EXPECT_FALSE(clb::lastError().empty());
  const void* q = nullptr;
  EXPECT_NE(ch_[1]->waitRecv(MsgTag{desc(5), 0, 8}, &q), clbSuccess) << "size differs";
}

TEST_P(VerbsChannelTest, TrimGivesMemoryBackAndRePrepareGrows) {
  ASSERT_NO_FATAL_FAILURE(makePair(2));
  const int64_t base = ch_[0]->registeredBytes();
  EXPECT_EQ(base, 4096) << "only the control block before prepare";
  for (auto& c : ch_) ASSERT_EQ(c->prepare(4095), clbSuccess) << clb::lastError();
  EXPECT_GT(ch_[0]->registeredBytes(), base);
  for (int i = 0; i < 5; i++) {
    auto d = content(4095, 10 + i);
    ASSERT_EQ(sendMsg(*ch_[0], 1, i, d), clbSuccess) << clb::lastError();
    ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, i, d));
  }
  // Trim on both until the slot announcements are acknowledged.
  auto end = Clock::now() + Ms(2000);
  while (Clock::now() < end && (ch_[0]->registeredBytes() != base || ch_[1]->registeredBytes() != base)) {
    ASSERT_EQ(ch_[0]->trim(), clbSuccess) << clb::lastError();
    ASSERT_EQ(ch_[1]->trim(), clbSuccess) << clb::lastError();
  }
  EXPECT_EQ(ch_[0]->registeredBytes(), base);
  EXPECT_EQ(ch_[1]->registeredBytes(), base);
  // Bigger now, both ways.
  const size_t big = (1u << 20) + 3;
  for (auto& c : ch_) ASSERT_EQ(c->prepare(big), clbSuccess) << clb::lastError();
  EXPECT_GE(ch_[0]->registeredBytes(), (int64_t)(base + 2 * 2 * big));
  for (int i = 0; i < 3; i++) {
    auto d = content(big - i, 20 + i);
    ASSERT_EQ(sendMsg(*ch_[1], 2, i, d), clbSuccess) << clb::lastError();
    ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[0], 2, i, d));
    auto e = content(i * 1000, 30 + i);
    ASSERT_EQ(sendMsg(*ch_[0], 2, i, e), clbSuccess) << clb::lastError();
    ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 2, i, e));
  }
}

// Growing while messages of the smaller size are still buffered at the receiver.
TEST_P(VerbsChannelTest, GrowWithMessagesBuffered) {
  ASSERT_NO_FATAL_FAILURE(makePair(4));
  for (auto& c : ch_) ASSERT_EQ(c->prepare(100), clbSuccess);
  auto small = content(100, 1), large = content(300000, 2);
  ASSERT_EQ(sendMsg(*ch_[0], 1, 0, small), clbSuccess) << clb::lastError();
  ASSERT_EQ(sendMsg(*ch_[0], 1, 1, small), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[0]->finish(), clbSuccess);
  ASSERT_EQ(ch_[1]->prepare(300000), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[0]->prepare(300000), clbSuccess) << clb::lastError();
  ASSERT_EQ(sendMsg(*ch_[0], 2, 0, large), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 0, small));
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 1, small));
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 2, 0, large));
}

// The receiver's call prepared less than the sender's message (the ranks disagree on the call):
// the message's tag goes ahead as a notice, and the receiver's tag check fails at once naming
// the size, instead of both ends waiting until the timeout. The sender keeps waiting for slots
// that never come (a communicator's failure notice ends that wait; here its timeout does).
TEST_P(VerbsChannelTest, MessageLargerThanTheReceiverPreparedFailsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(makePair(4, 1000));
  ASSERT_EQ(ch_[1]->prepare(100), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[0]->prepare(300000), clbSuccess) << clb::lastError();
  clbResult_t sent = clbSuccess;
  std::thread tx([&] { sent = sendMsg(*ch_[0], 1, 0, content(300000, 3)); });
  const auto t0 = Clock::now();
  const void* p = nullptr;
  EXPECT_EQ(ch_[1]->waitRecv(MsgTag{desc(1), 0, 100}, &p), clbRemoteError);
  EXPECT_LT(Clock::now() - t0, Ms(500)) << "the disagreement must show before the timeout";
  const std::string err = clb::lastError();
  EXPECT_NE(err.find("300000"), std::string::npos) << err;
  EXPECT_NE(ch_[1]->waitRecv(MsgTag{desc(1), 0, 100}, &p), clbSuccess) << "the channel stays failed";
  tx.join();
  EXPECT_EQ(sent, clbTimeout);
}

// A notice whose message the receiver's next call prepares for is no disagreement: the receiver,
// still in its earlier call (slots of 100 bytes) when the large message's notice arrives, takes
// the earlier message, grows its slots and gets the large one, byte for byte.
TEST_P(VerbsChannelTest, NoticeOfAMessageTheReceiversNextCallHoldsIsDropped) {
  ASSERT_NO_FATAL_FAILURE(makePair(4));
  for (auto& c : ch_) ASSERT_EQ(c->prepare(100), clbSuccess) << clb::lastError();
  auto small = content(100, 4), large = content(300000, 5);
  std::thread tx([&] {
    ASSERT_EQ(sendMsg(*ch_[0], 1, 0, small), clbSuccess) << clb::lastError();
    ASSERT_EQ(ch_[0]->prepare(300000), clbSuccess) << clb::lastError();
    ASSERT_EQ(sendMsg(*ch_[0], 2, 0, large), clbSuccess) << clb::lastError();
    ASSERT_EQ(ch_[0]->finish(), clbSuccess) << clb::lastError();
  });
  std::this_thread::sleep_for(Ms(100));  // the notice is in
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 0, small));
  ASSERT_EQ(ch_[1]->prepare(300000), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 2, 0, large));
  tx.join();
}

TEST_P(VerbsChannelTest, ThreeRankRingInThreads) {
  ch_.clear();
  for (int r = 0; r < 3; r++) ch_.push_back(make(testOptions(r, 3, 3)));
  ASSERT_NO_FATAL_FAILURE(connectRing(ch_));
  const int kMsgs = 30;
  const size_t sizes[] = {0, 1, 4095, 65536, 200003};
  auto rankMain = [&](int r) {
    VerbsChannel& c = *ch_[r];
    int prev = (r + 2) % 3;
    ASSERT_EQ(c.prepare(200003), clbSuccess) << clb::lastError();
    // Like the ring: send, then receive-and-forward style alternation.
    for (int i = 0; i < kMsgs; i++) {
      ASSERT_EQ(sendMsg(c, 9, i, content(sizes[i % 5], 100 * r + i)), clbSuccess) << clb::lastError();
      ASSERT_NO_FATAL_FAILURE(recvCheck(c, 9, i, content(sizes[i % 5], 100 * prev + i)));
    }
    ASSERT_EQ(c.finish(), clbSuccess) << clb::lastError();
  };
  std::vector<std::thread> t;
  for (int r = 0; r < 3; r++) t.emplace_back(rankMain, r);
  for (auto& x : t) x.join();
}

// The ring's allgather pattern: each received block is forwarded from the receive slot (send
// acquired while the receive is held), over 4 ranks, with many rounds in flight.
TEST_P(VerbsChannelTest, FourRankRingForwardsWhileHoldingLikeAllGather) {
  ch_.clear();
  const int n = 4;
  for (int r = 0; r < n; r++) ch_.push_back(make(testOptions(r, n, 2)));
  ASSERT_NO_FATAL_FAILURE(connectRing(ch_));
  const int kRounds = 12;
  const size_t sizes[] = {1, 4095, 65536, 0, 30011};
  auto block = [&](int origin, int round) { return content(sizes[round % 5], 7000 * origin + round); };
  auto rankMain = [&](int r) {
    VerbsChannel& c = *ch_[r];
    ASSERT_EQ(c.prepare(65536), clbSuccess) << clb::lastError();
    uint64_t sent = 0, recvd = 0;
    for (int round = 0; round < kRounds; round++) {
      ASSERT_EQ(sendMsg(c, 3, sent++, block(r, round)), clbSuccess) << clb::lastError();
      for (int s = 0; s < n - 1; s++) {
        int origin = (r - 1 - s + 2 * n) % n;
        std::vector<char> expect = block(origin, round);
        const void* p = nullptr;
        ASSERT_EQ(c.waitRecv(MsgTag{desc(3), recvd++, expect.size()}, &p), clbSuccess) << clb::lastError();
        ASSERT_EQ(firstDiff(static_cast<const char*>(p), expect.data(), expect.size()), -1);
        if (s < n - 2) {
          void* q = nullptr;
          ASSERT_EQ(c.acquireSend(expect.size(), &q), clbSuccess) << clb::lastError();
          if (!expect.empty()) memcpy(q, p, expect.size());
          ASSERT_EQ(c.postSend(MsgTag{desc(3), sent++, expect.size()}), clbSuccess) << clb::lastError();
        }
        ASSERT_EQ(c.releaseRecv(), clbSuccess) << clb::lastError();
      }
    }
    ASSERT_EQ(c.finish(), clbSuccess) << clb::lastError();
  };
  std::vector<std::thread> t;
  for (int r = 0; r < n; r++) t.emplace_back(rankMain, r);
  for (auto& x : t) x.join();
}

TEST_P(VerbsChannelTest, PathMtuIsTheMinimumOfBothPorts) {
  emu::Config c = emu::config();
  c.activeMtu = IBV_MTU_1024;
  emu::configure(c);
  ch_.clear();
  ch_.push_back(make(testOptions(0, 2)));
  c.activeMtu = IBV_MTU_4096;
  emu::configure(c);
  ch_.push_back(make(testOptions(1, 2)));
  ASSERT_TRUE(ch_[0] && ch_[1]);
  EXPECT_EQ(ch_[0]->sendSideInfo().mtu, IBV_MTU_1024);
  EXPECT_EQ(ch_[1]->sendSideInfo().mtu, IBV_MTU_4096);
  ASSERT_NO_FATAL_FAILURE(connectRing(ch_));
  for (auto& x : ch_) {
    EXPECT_EQ(x->pathMtu(), IBV_MTU_1024);
    ibv_qp_attr a;
    ibv_qp_init_attr ia;
    ASSERT_EQ(emu::api()->queryQp(x->sendQp(), &a, IBV_QP_PATH_MTU, &ia), 0);
    EXPECT_EQ(a.path_mtu, IBV_MTU_1024);
  }
  for (auto& x : ch_) ASSERT_EQ(x->prepare(65536), clbSuccess) << clb::lastError();
  auto d = content(65536, 9);
  ASSERT_EQ(sendMsg(*ch_[1], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[0], 1, 0, d));
  ASSERT_EQ(sendMsg(*ch_[0], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 0, d));
}

// ---- faults ----------------------------------------------------------------------------------

TEST_P(VerbsChannelTest, PeerDestroyedMidStreamIsAnErrorWithinTheTimeout) {
  ASSERT_NO_FATAL_FAILURE(makePair(4, 500, true));
  for (auto& c : ch_) ASSERT_EQ(c->prepare(4096), clbSuccess);
  auto d = content(4096, 4);
  ASSERT_EQ(sendMsg(*ch_[0], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 0, d));
  ASSERT_EQ(sendMsg(*ch_[1], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[0], 1, 0, d));
  ch_[1].reset();  // rank 1 dies
  auto t0 = Clock::now();
  // Rank 0 keeps sending: the writes are not acknowledged any more.
  clbResult_t rc = clbSuccess;
  for (int i = 1; i < 10 && rc == clbSuccess; i++) rc = sendMsg(*ch_[0], 1, i, d);
  if (rc == clbSuccess) rc = ch_[0]->finish();
  EXPECT_NE(rc, clbSuccess);
  std::string err = clb::lastError();
  EXPECT_LT(Clock::now() - t0, Ms(1500));
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  // And waiting for its data ends too, with the same (sticky) error.
  const void* p = nullptr;
  t0 = Clock::now();
  EXPECT_NE(ch_[0]->waitRecv(MsgTag{desc(1), 1, 4096}, &p), clbSuccess);
  EXPECT_LT(Clock::now() - t0, Ms(1500));
}

TEST_P(VerbsChannelTest, ReceiverWaitingForADeadPeerGetsAnErrorInTime) {
  ASSERT_NO_FATAL_FAILURE(makePair(4, 300, true));
  for (auto& c : ch_) ASSERT_EQ(c->prepare(4096), clbSuccess);
  auto d = content(4096, 6);
  ASSERT_EQ(sendMsg(*ch_[1], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[0], 1, 0, d));
  ch_[1].reset();
  auto t0 = Clock::now();
  const void* p = nullptr;
  clbResult_t rc = ch_[0]->waitRecv(MsgTag{desc(1), 1, 4096}, &p);
  EXPECT_TRUE(rc == clbTimeout || rc == clbRemoteError) << rc;
  EXPECT_LT(Clock::now() - t0, Ms(1500));
  EXPECT_NE(clb::lastError().find("rank 1"), std::string::npos) << clb::lastError();
}

TEST_P(VerbsChannelTest, SilentPeerTimesOutWithTheGivenTimeout) {
  ASSERT_NO_FATAL_FAILURE(makePair(4, 250));
  for (auto& c : ch_) ASSERT_EQ(c->prepare(4096), clbSuccess);
  auto t0 = Clock::now();
  const void* p = nullptr;
  EXPECT_EQ(ch_[0]->waitRecv(MsgTag{desc(1), 0, 4096}, &p), clbTimeout);
  auto took = Clock::now() - t0;
  EXPECT_GE(took, Ms(240));
  EXPECT_LT(took, Ms(1000));
  std::string err = clb::lastError();
  EXPECT_NE(err.find("a ring message from the previous rank (rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("timeout"), std::string::npos) << err;
}

TEST_P(VerbsChannelTest, MemoryIsCountedInTheCommunicatorAndCapped) {
  clbComm comm[2];
  for (int r = 0; r < 2; r++) {
    comm[r].rank = r;
    comm[r].nranks = 2;
    comm[r].cfg.timeoutMs = 3000;
    comm[r].cfg.stagingCapBytes = 1 << 20;
  }
  std::vector<std::unique_ptr<VerbsChannel>> ch;  // destroyed before the communicators
  for (int r = 0; r < 2; r++) {
    std::unique_ptr<VerbsChannel> c;
    const clbNetHost_v1_t host = clb::netHostFor(&comm[r]);
    ASSERT_EQ(VerbsChannel::create(emu::api(), testOptions(9, 9, 2), &host, &c), clbSuccess) << clb::lastError();
    ch.push_back(std::move(c));
  }
  ASSERT_NO_FATAL_FAILURE(connectRing(ch));
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(ch[r]->prepare(10000), clbSuccess) << clb::lastError();
    // Registered memory and the queues' estimate (2 slots, q queue pairs per link each way:
    // q x 2 x (72 x 64 + 36 x 32) + (q x 2 x (72 + 36) + 16) x 64).
    const int q = GetParam();
    EXPECT_EQ(ch[r]->queueBytes(), q * 2 * (72 * 64 + 36 * 32) + (q * 2 * (72 + 36) + 16) * 64);
    EXPECT_EQ(comm[r].mem.host.load(), ch[r]->registeredBytes() + ch[r]->queueBytes());
    EXPECT_GE(comm[r].mem.host.load(), 4096 + 2 * 2 * 10000);
  }
  auto d = content(10000, 3);
  ASSERT_EQ(sendMsg(*ch[0], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch[1], 1, 0, d));
  EXPECT_EQ(ch[0]->prepare(600000), clbOutOfMemory) << "2 x 2 slots of 600 KB exceed the 1 MiB cap";
  EXPECT_NE(clb::lastError().find("stagingCapBytes"), std::string::npos) << clb::lastError();
  EXPECT_NE(clb::lastError().find("rank 0"), std::string::npos) << "the communicator's rank, not the options'";
  ch.clear();
  EXPECT_EQ(comm[0].mem.host.load(), 0);
  EXPECT_EQ(comm[1].mem.host.load(), 0);
}

TEST_P(VerbsChannelTest, DroppedPacketsReportRetryExceeded) {
  ASSERT_NO_FATAL_FAILURE(makePair(4, 2000, true));
  for (auto& c : ch_) ASSERT_EQ(c->prepare(8192), clbSuccess);
  auto d = content(8192, 8);
  ASSERT_EQ(sendMsg(*ch_[0], 1, 0, d), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch_[1], 1, 0, d));
  ASSERT_EQ(ch_[0]->finish(), clbSuccess) << clb::lastError();
  ASSERT_EQ(emu::dropPackets(ch_[0]->sendQp(), -1), 0);
  auto t0 = Clock::now();
  clbResult_t rc = sendMsg(*ch_[0], 1, 1, d);
  if (rc == clbSuccess) rc = ch_[0]->finish();
  EXPECT_EQ(rc, clbRemoteError);
  EXPECT_LT(Clock::now() - t0, Ms(1500));
  std::string err = clb::lastError();
  EXPECT_NE(err.find(emu::api()->wcStatusStr(IBV_WC_RETRY_EXC_ERR)), std::string::npos) << err;
  EXPECT_NE(err.find(clb::verbs::wcStatusHint(IBV_WC_RETRY_EXC_ERR)), std::string::npos) << err;
  EXPECT_NE(err.find("status 12"), std::string::npos) << err;
  // Sticky: later calls say the same.
  void* b = nullptr;
  EXPECT_EQ(ch_[0]->acquireSend(1, &b), clbRemoteError);
  EXPECT_NE(clb::lastError().find(emu::api()->wcStatusStr(IBV_WC_RETRY_EXC_ERR)), std::string::npos);
}

TEST_P(VerbsChannelTest, CorruptedRkeyReportsRemoteAccessError) {
  ch_.clear();
  ch_.push_back(make(testOptions(0, 2, 4, 1000)));
  ch_.push_back(make(testOptions(1, 2, 4, 1000)));
  ASSERT_TRUE(ch_[0] && ch_[1]);
  VerbsConnInfo bad = ch_[1]->sendSideInfo();
  bad.ctlRkey ^= 0x5a5a;  // rank 0 announces its slots with this key
  ASSERT_EQ(ch_[0]->connect(ch_[1]->recvSideInfo(), bad), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[1]->connect(ch_[0]->recvSideInfo(), ch_[0]->sendSideInfo()), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch_[0]->prepare(4096), clbSuccess) << clb::lastError();
  auto t0 = Clock::now();
  const void* p = nullptr;
  EXPECT_EQ(ch_[0]->waitRecv(MsgTag{desc(1), 0, 4096}, &p), clbRemoteError);
  EXPECT_LT(Clock::now() - t0, Ms(900)) << "the failed completion, not the timeout";
  std::string err = clb::lastError();
  EXPECT_NE(err.find(emu::api()->wcStatusStr(IBV_WC_REM_ACCESS_ERR)), std::string::npos) << err;
  EXPECT_NE(err.find(clb::verbs::wcStatusHint(IBV_WC_REM_ACCESS_ERR)), std::string::npos) << err;
  EXPECT_NE(err.find("announcing receive slots"), std::string::npos) << err;
}

// ---- two processes ---------------------------------------------------------------------------

constexpr const char* kPeerFdEnv = "COLIBRI_VERBS_CHANNEL_TEST_PEER_FD";

using clb::test::readAll;
using clb::test::writeAll;

// A 2-rank ring across processes: the infos travel over a socketpair, messages both ways.
void processRank(int fd, int rank) {
  auto ch = make(testOptions(rank, 2, 4, 5000));
  ASSERT_TRUE(ch);
  VerbsConnInfo mine[2] = {ch->sendSideInfo(), ch->recvSideInfo()}, peer[2];
  ASSERT_TRUE(writeAll(fd, mine, sizeof mine));
  ASSERT_TRUE(readAll(fd, peer, sizeof peer)) << "no connection info from the peer process";
  ASSERT_EQ(ch->connect(peer[1], peer[0]), clbSuccess) << clb::lastError();
  const int kMsgs = 12;
  ASSERT_EQ(ch->prepare((1u << 20) + 3), clbSuccess) << clb::lastError();
  for (int i = 0; i < kMsgs; i++) {
    ASSERT_EQ(sendMsg(*ch, 4, i, content(kSizes[i % 5], 500 * rank + i)), clbSuccess) << clb::lastError();
    ASSERT_NO_FATAL_FAILURE(recvCheck(*ch, 4, i, content(kSizes[i % 5], 500 * (1 - rank) + i)));
  }
  ASSERT_EQ(ch->finish(), clbSuccess) << clb::lastError();
  char done = 'd', peerDone = 0;
  ASSERT_TRUE(writeAll(fd, &done, 1));
  ASSERT_TRUE(readAll(fd, &peerDone, 1)) << "the peer did not finish";
}

INSTANTIATE_TEST_SUITE_P(Qps, VerbsChannelTest, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int>& i) { return "q" + std::to_string(i.param); });

// Both ends must use the same number of queue pairs; the message names the option.
TEST(VerbsChannelQps, CountMismatchIsRefusedNamingTheOption) {
  emu::Config c;
  emu::configure(c);
  VerbsOptions a = testOptions(0, 2), b = testOptions(1, 2);
  a.qpsPerConnection = 2;
  b.qpsPerConnection = 3;
  auto x = make(a), y = make(b);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->qpCount(), 2);
  EXPECT_EQ(x->connect(y->recvSideInfo(), y->sendSideInfo()), clbInvalidArgument);
  EXPECT_NE(clb::lastError().find("uses 3 queue pairs per link, rank 0 uses 2"), std::string::npos) << clb::lastError();
  EXPECT_NE(clb::lastError().find("verbsQpsPerConnection"), std::string::npos) << clb::lastError();
  VerbsOptions bad = testOptions(0, 2);
  bad.qpsPerConnection = 9;
  std::unique_ptr<VerbsChannel> none;
  EXPECT_EQ(VerbsChannel::create(emu::api(), bad, nullptr, &none), clbInvalidArgument);
  EXPECT_NE(clb::lastError().find("9 queue pairs per link asked; 1..8"), std::string::npos) << clb::lastError();
  emu::resetConfig();
}

// With 3 queue pairs every message's parts travel on all of them (the emulator counts packets
// per queue pair), and a message smaller than 3 x 64 bytes leaves some parts empty.
TEST(VerbsChannelQps, EveryQueuePairCarriesParts) {
  emu::Config c;
  emu::configure(c);
  gQps = 3;
  std::vector<std::unique_ptr<VerbsChannel>> ch;
  ch.push_back(make(testOptions(0, 2)));
  ch.push_back(make(testOptions(1, 2)));
  gQps = 1;
  ASSERT_TRUE(ch[0] && ch[1]);
  ASSERT_NO_FATAL_FAILURE(connectRing(ch));
  ASSERT_EQ(ch[0]->prepare(300000), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch[1]->prepare(300000), clbSuccess) << clb::lastError();
  emu::QpStats before[3];
  for (int j = 0; j < 3; j++) ASSERT_EQ(emu::queryStats(ch[0]->sendQp(j), &before[j]), 0);
  const size_t sizes[] = {300000, 100, 0, 191, 192, 193};
  for (size_t i = 0; i < 6; i++) {
    auto d = content(sizes[i], 40 + (uint32_t)i);
    ASSERT_EQ(sendMsg(*ch[0], 2, i, d), clbSuccess) << clb::lastError();
    ASSERT_NO_FATAL_FAILURE(recvCheck(*ch[1], 2, i, d));
  }
  ASSERT_EQ(ch[0]->finish(), clbSuccess) << clb::lastError();
  uint64_t sent[3], total = 0;
  for (int j = 0; j < 3; j++) {
    emu::QpStats after;
    ASSERT_EQ(emu::queryStats(ch[0]->sendQp(j), &after), 0);
    sent[j] = after.packetsSent - before[j].packetsSent;
    total += sent[j];
  }
  // The 300000-byte message is split in three equal parts: every queue pair carries a fair share.
  for (int j = 0; j < 3; j++) EXPECT_GE(sent[j] * 4, total) << "queue pair " << j << ": " << sent[j] << " of " << total;
  emu::resetConfig();
}

// A full send queue between two parts of a message makes post() poll completions, and a slot
// announcement may arrive then: it must apply after the message's last part, or the parts land
// in two regions (the receiver refused that as a protocol error, or, in device mode, read the
// payload from the wrong slots). The emulator's postSend is wrapped to report ENOMEM once, on
// queue pair 1, after the receiver announced bigger slots.
struct FullQueue {
  static clb::verbs::VerbsApi table;
  static ibv_qp* qp;
  static std::function<void()> before;
  static int post(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad) {
    if (q == qp) {
      qp = nullptr;
      before();
      std::this_thread::sleep_for(Ms(50));  // the emulated NIC delivers the announcement
      *bad = wr;
      return ENOMEM;
    }
    return emu::api()->postSend(q, wr, bad);
  }
};
clb::verbs::VerbsApi FullQueue::table;
ibv_qp* FullQueue::qp = nullptr;
std::function<void()> FullQueue::before;

TEST(VerbsChannelQps, AnnouncementBetweenTwoPartsAppliesAfterTheMessage) {
  emu::Config c;
  emu::configure(c);
  FullQueue::table = *emu::api();
  FullQueue::table.postSend = FullQueue::post;
  std::vector<std::unique_ptr<VerbsChannel>> ch;
  for (int r = 0; r < 2; r++) {
    VerbsOptions o = testOptions(r, 2);
    o.qpsPerConnection = 3;
    std::unique_ptr<VerbsChannel> x;
    ASSERT_EQ(VerbsChannel::create(&FullQueue::table, o, nullptr, &x), clbSuccess) << clb::lastError();
    ch.push_back(std::move(x));
  }
  ASSERT_NO_FATAL_FAILURE(connectRing(ch));
  ASSERT_EQ(ch[0]->prepare(4096), clbSuccess) << clb::lastError();
  ASSERT_EQ(ch[1]->prepare(4096), clbSuccess) << clb::lastError();
  auto small = content(3000, 5), big = content(60000, 6);
  ASSERT_EQ(sendMsg(*ch[0], 1, 0, small), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch[1], 1, 0, small));
  FullQueue::before = [&] { ASSERT_EQ(ch[1]->prepare(65536), clbSuccess) << clb::lastError(); };
  FullQueue::qp = ch[0]->sendQp(1);
  ASSERT_EQ(sendMsg(*ch[0], 1, 1, small), clbSuccess) << clb::lastError();
  EXPECT_EQ(FullQueue::qp, nullptr) << "the send queue was reported full once";
  ASSERT_EQ(ch[0]->prepare(65536), clbSuccess) << clb::lastError();
  ASSERT_EQ(sendMsg(*ch[0], 1, 2, big), clbSuccess) << clb::lastError();
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch[1], 1, 1, small));
  ASSERT_NO_FATAL_FAILURE(recvCheck(*ch[1], 1, 2, big));
  ASSERT_EQ(ch[0]->finish(), clbSuccess) << clb::lastError();
  ch.clear();
  emu::resetConfig();
}

class VerbsChannelProcTest : public ::testing::Test, protected EmulatorConfig {
 protected:
  void SetUp() override { configureEmulator(); }
  void TearDown() override { emu::resetConfig(); }
};

TEST_F(VerbsChannelProcTest, ProcessPeerSide) {
  const char* fdStr = getenv(kPeerFdEnv);
  if (!fdStr) GTEST_SKIP() << "runs only as the peer process of VerbsChannelProcTest.TwoProcesses";
  processRank(atoi(fdStr), 1);
}

TEST_F(VerbsChannelProcTest, TwoProcesses) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fcntl(sv[0], F_SETFD, FD_CLOEXEC);
  const pid_t pid = clb::test::spawnSelf("VerbsChannelProcTest.ProcessPeerSide",
                                         {std::string(kPeerFdEnv) + "=" + std::to_string(sv[1])});
  ASSERT_GT(pid, 0);
  close(sv[1]);
  processRank(sv[0], 0);
  close(sv[0]);
  int status = 0;
  if (!clb::test::waitOrKill(pid, 15000, &status)) FAIL() << "the peer process did not exit";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the peer process's checks failed (its output is above)";
}

}  // namespace
