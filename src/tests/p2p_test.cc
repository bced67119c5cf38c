// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point and the calls made of it, ranks as threads through the C ABI: sends and
// receives in groups posted in opposite orders, all-to-all against a group of sends and receives,
// all-to-allv with empty pairs, gather, scatter and reduce at every root (in place too), on every
// transport that carries them, every type, counts from 0 past the staging cap; groups (nested, one
// thread driving every rank's communicator, collectives inside); the memory a pair holds; and bad
// input, each refusal naming the argument or the peer. Every result is checked element by element
// against values computed here from (rank, index).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "base/dtype.h"
#include "bootstrap/net.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// A buffer of `type` elements set and read as doubles (small integers: exact in every type).
struct Buf {
  clbDataType_t type;
  std::vector<char> bytes;
  Buf(clbDataType_t t, size_t n) : type(t), bytes(n * clbTypeSize(t) + 1, (char)0x5a) {}
  void* data() { return bytes.data(); }
  size_t size() const { return bytes.size() / clbTypeSize(type); }
  void set(size_t i, double v) {
    char* p = bytes.data() + i * clbTypeSize(type);
    switch (type) {
      case clbInt8: {
        int8_t x = (int8_t)v;
        memcpy(p, &x, 1);
        break;
      }
      case clbUint8: {
        uint8_t x = (uint8_t)v;
        memcpy(p, &x, 1);
        break;
      }
      case clbInt32: {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
        break;
      }
      case clbUint32: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
      }
      case clbInt64: {
        int64_t x = (int64_t)v;
        memcpy(p, &x, 8);
        break;
      }
      case clbUint64: {
        uint64_t x = (uint64_t)v;
        memcpy(p, &x, 8);
        break;
      }
      case clbFloat16: {
        uint16_t x = clb::floatToHalf((float)v);
        memcpy(p, &x, 2);
        break;
      }
      case clbBfloat16: {
        uint16_t x = clb::floatToBfloat16((float)v);
        memcpy(p, &x, 2);
        break;
      }
      case clbFloat32: {
        float x = (float)v;
        memcpy(p, &x, 4);
        break;
      }
      default: {
        memcpy(p, &v, 8);
        break;
      }
    }
  }
  double get(size_t i) const {
    const char* p = bytes.data() + i * clbTypeSize(type);
    switch (type) {
      case clbInt8: {
        int8_t x;
        memcpy(&x, p, 1);
        return x;
      }
      case clbUint8: {
        uint8_t x;
        memcpy(&x, p, 1);
        return x;
      }
      case clbInt32: {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
      }
      case clbUint32: {
        uint32_t x;
        memcpy(&x, p, 4);
        return x;
      }
      case clbInt64: {
        int64_t x;
        memcpy(&x, p, 8);
        return (double)x;
      }
      case clbUint64: {
        uint64_t x;
        memcpy(&x, p, 8);
        return (double)x;
      }
      case clbFloat16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return clb::halfToFloat(x);
      }
      case clbBfloat16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return clb::bfloat16ToFloat(x);
      }
      case clbFloat32: {
        float x;
        memcpy(&x, p, 4);
        return x;
      }
      default: {
        double x;
        memcpy(&x, p, 8);
        return x;
      }
    }
  }
  // The guard byte after the last element is untouched.
  bool guardIntact() const { return bytes.back() == (char)0x5a; }
};

bool isUnsigned(clbDataType_t t) { return t == clbUint8 || t == clbUint32 || t == clbUint64; }

// What rank `from` sends to rank `to` at element i: small integers (sums of 8 stay exact in bf16
// and int8), different per pair so that a block in the wrong place shows.
double value(clbDataType_t t, int from, int to, size_t i) {
  const int v = (int)((from * 7 + to * 3 + i * 13) % 31);
  return isUnsigned(t) ? v % 16 : v - 15;
}

std::vector<std::string> runRanks(int n, int transport, const std::function<void(int, clbComm_t)>& body,
                                  int64_t chunk = 64 << 10, int64_t cap = CLB_DEFAULT_STAGING_CAP_BYTES,
                                  int64_t timeoutMs = 20000) {
  return clbtest::runThreadRanks(
      n,
      [&](int, clbConfig_t* cfg) {
        cfg->transport = transport;
        cfg->chunkBytes = chunk;
        cfg->stagingCapBytes = cap;
        cfg->timeoutMs = timeoutMs;
      },
      body);
}

void expectInitOk(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// The suites of single cases below run each of them over every transport (INSTANTIATE_TRANSPORTS
// at the end of the file): NET_SCOPE() takes the case's transport scope (COLIBRI_TLS=all and the
// test PKI for socket_tls; a skip naming why where one cannot run in this build) and names its
// clbTransport_t `transport`.
class OverNets : public ::testing::TestWithParam<clbtest::Net> {};
class PeerGroups : public OverNets {};
class PeerSendRecv : public OverNets {};
class PeerAllToAllv : public OverNets {};
class PeerAllToAll : public OverNets {};
class PeerRooted : public OverNets {};
class PeerBadInput : public OverNets {};
class PeerMemory : public OverNets {};
class PeerProcesses : public OverNets {};

#define NET_SCOPE()                       \
  CLB_TRANSPORT_SCOPE(scope, GetParam()); \
  const int transport = clbtest::netTransport(GetParam())

const clbDataType_t kAllTypes[] = {clbInt8,   clbUint8,   clbInt32,    clbUint32,  clbInt64,
                                   clbUint64, clbFloat16, clbBfloat16, clbFloat32, clbFloat64};

// ---- the matrix: ranks x transports x counts, every type ----

// Counts: 0, 1, 7, 1 000 003, and (kBeyondCap) one whose bytes exceed the staging cap the case
// configures (64 KiB), so that it only goes through in many messages of one FIFO.
constexpr size_t kBeyondCap = SIZE_MAX;   // marker, replaced by capElements()
constexpr int64_t kSmallCap = 256 << 10;  // above the 4 KiB ring and the 64 KiB FIFO, below the message
size_t capElements(clbDataType_t t) { return (size_t)(3 * kSmallCap) / clbTypeSize(t) + 5; }

using MatrixParam = std::tuple<int, clbtest::Net, size_t>;  // nranks, transport, count
class PeerMatrix : public ::testing::TestWithParam<MatrixParam> {};

// A ring exchange in one group, the even ranks posting send then receive and the odd ones the
// other way round; then an all-to-all compared with the same exchange built from a group of
// sends and receives; gather, scatter and reduce at the last root. Every type.
TEST_P(PeerMatrix, RingExchangeAllToAllGatherScatterReduce) {
  auto [n, net, countParam] = GetParam();
  CLB_TRANSPORT_SCOPE(scope, net);
  const bool smallCap = countParam == kBeyondCap;
  auto errors = clbtest::runOver(
      net, n, 20000,
      [&](int, clbConfig_t* cfg) {
        cfg->chunkBytes = 64 << 10;
        cfg->stagingCapBytes = smallCap ? kSmallCap : CLB_DEFAULT_STAGING_CAP_BYTES;
      },
      [&, n = n, countParam = countParam](int r, clbComm_t comm) {
        for (clbDataType_t t : kAllTypes) {
          const size_t count = smallCap ? capElements(t) : countParam;
          // Bytes per call stay moderate: the largest counts run for the 1-byte and 8-byte types.
          if (count > 100000 && clbTypeSize(t) != 1 && t != clbFloat64) continue;
          const std::string what = std::string(clb::typeName(t)) + " x " + std::to_string(count);
          const int next = (r + 1) % n, prev = (r + n - 1) % n;
          {
            Buf out(t, count), in(t, count);
            for (size_t i = 0; i < count; i++) out.set(i, value(t, r, next, i));
            ASSERT_EQ(clbGroupStart(), clbSuccess);
            if (r % 2 == 0) {
              ASSERT_EQ(clbSend(out.data(), count, t, next, comm, nullptr), clbSuccess) << clbGetLastError();
              ASSERT_EQ(clbRecv(in.data(), count, t, prev, comm, nullptr), clbSuccess) << clbGetLastError();
            } else {
              ASSERT_EQ(clbRecv(in.data(), count, t, prev, comm, nullptr), clbSuccess) << clbGetLastError();
              ASSERT_EQ(clbSend(out.data(), count, t, next, comm, nullptr), clbSuccess) << clbGetLastError();
            }
            ASSERT_EQ(clbGroupEnd(), clbSuccess) << what << ": " << clbGetLastError();
            for (size_t i = 0; i < count; i++)
              ASSERT_EQ(in.get(i), value(t, prev, r, i))
                  << "ring exchange " << what << " rank " << r << " element " << i;
            ASSERT_TRUE(in.guardIntact()) << what;
          }
          if (count > 100000) continue;  // all-to-all of n blocks of a million: covered by the pairs
          {
            // All-to-all, and the same exchange as a group of sends and receives (peers in reverse).
            Buf send(t, count * n), recv(t, count * n), recv2(t, count * n);
            for (int p = 0; p < n; p++)
              for (size_t i = 0; i < count; i++) send.set(p * count + i, value(t, r, p, i));
            ASSERT_EQ(clbAllToAll(send.data(), recv.data(), count, t, comm, nullptr), clbSuccess)
                << what << ": " << clbGetLastError();
            ASSERT_EQ(clbGroupStart(), clbSuccess);
            for (int p = n - 1; p >= 0; p--) {
              ASSERT_EQ(
                  clbRecv(static_cast<char*>(recv2.data()) + p * count * clbTypeSize(t), count, t, p, comm, nullptr),
                  clbSuccess)
                  << clbGetLastError();
              ASSERT_EQ(
                  clbSend(static_cast<char*>(send.data()) + p * count * clbTypeSize(t), count, t, p, comm, nullptr),
                  clbSuccess)
                  << clbGetLastError();
            }
            ASSERT_EQ(clbGroupEnd(), clbSuccess) << what << ": " << clbGetLastError();
            for (int p = 0; p < n; p++)
              for (size_t i = 0; i < count; i++) {
                ASSERT_EQ(recv.get(p * count + i), value(t, p, r, i)) << "allToAll " << what << " from " << p;
                ASSERT_EQ(recv2.get(p * count + i), value(t, p, r, i)) << "group all-to-all " << what << " from " << p;
              }
            ASSERT_TRUE(recv.guardIntact() && recv2.guardIntact()) << what;
          }
          {
            const int root = n - 1;
            Buf mine(t, count), all(t, count * n);
            for (size_t i = 0; i < count; i++) mine.set(i, value(t, r, root, i));
            ASSERT_EQ(clbGather(mine.data(), r == root ? all.data() : nullptr, count, t, root, comm, nullptr),
                      clbSuccess)
                << what << ": " << clbGetLastError();
            if (r == root)
              for (int p = 0; p < n; p++)
                for (size_t i = 0; i < count; i++)
                  ASSERT_EQ(all.get(p * count + i), value(t, p, root, i)) << "gather " << what << " block " << p;
            Buf parts(t, count * n), got(t, count);
            for (int p = 0; p < n; p++)
              for (size_t i = 0; i < count; i++) parts.set(p * count + i, value(t, r, p, i));
            ASSERT_EQ(clbScatter(r == root ? parts.data() : nullptr, got.data(), count, t, root, comm, nullptr),
                      clbSuccess)
                << what << ": " << clbGetLastError();
            for (size_t i = 0; i < count; i++) ASSERT_EQ(got.get(i), value(t, root, r, i)) << "scatter " << what;
            for (clbRedOp_t op : {clbSum, clbMax, clbMin}) {
              Buf red(t, count);
              ASSERT_EQ(clbReduce(mine.data(), r == root ? red.data() : nullptr, count, t, op, root, comm, nullptr),
                        clbSuccess)
                  << what << ": " << clbGetLastError();
              if (r != root) continue;
              for (size_t i = 0; i < count; i++) {
                double want = value(t, 0, root, i);
                for (int p = 1; p < n; p++) {
                  const double v = value(t, p, root, i);
                  want = op == clbSum ? want + v : op == clbMax ? std::max(want, v) : std::min(want, v);
                }
                ASSERT_EQ(red.get(i), want) << "reduce " << clb::opName(op) << " " << what << " element " << i;
              }
            }
          }
        }
      });
  expectInitOk(errors);
}

INSTANTIATE_TEST_SUITE_P(Host, PeerMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8), ::testing::ValuesIn(clbtest::allNets()),
                                            ::testing::Values(size_t(0), size_t(1), size_t(7), size_t(1000003),
                                                              kBeyondCap)),
                         [](const auto& info) {
                           const size_t c = std::get<2>(info.param);
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  clbtest::netName(std::get<1>(info.param)) + "_" +
                                  (c == kBeyondCap ? std::string("beyondCap") : "c" + std::to_string(c));
                         });

// ---- groups ----

// Ranks as threads whose communicators are driven by one thread: body(comms) runs on the thread
// of rank 0 once every rank initialized; the other threads wait for it, then destroy their own.
void runFromOneThread(int n, int transport, const std::function<void(std::vector<clbComm_t>&)>& body) {
  std::vector<clbComm_t> comms(n, nullptr);
  std::atomic<int> ready{0};
  std::atomic<bool> done{false};
  auto errors = runRanks(n, transport, [&](int r, clbComm_t comm) {
    comms[r] = comm;
    ready++;
    if (r == 0) {
      while (ready.load() < n) std::this_thread::yield();
      body(comms);
      done = true;
    } else {
      while (!done.load()) std::this_thread::yield();
    }
  });
  expectInitOk(errors);
}

TEST_P(PeerGroups, OneThreadDrivesEveryRankWithCollectivesInTheGroup) {
  NET_SCOPE();
  const int n = 4;
  const size_t count = 50001;
  runFromOneThread(n, transport, [&](std::vector<clbComm_t>& comms) {
    std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(count)), in(n, std::vector<int32_t>(count, -1)),
        sum(n, std::vector<int32_t>(count, -1));
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++) out[r][i] = (int32_t)(r * 100000 + i);
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    for (int r = 0; r < n; r++) {
      // The receive first on every rank: from one thread, outside a group, this would wait forever.
      ASSERT_EQ(clbRecv(in[r].data(), count, clbInt32, (r + n - 1) % n, comms[r], nullptr), clbSuccess);
      ASSERT_EQ(clbSend(out[r].data(), count, clbInt32, (r + 1) % n, comms[r], nullptr), clbSuccess);
      ASSERT_EQ(clbAllReduce(out[r].data(), sum[r].data(), count, clbInt32, clbSum, comms[r], nullptr), clbSuccess);
    }
    ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++) {
        ASSERT_EQ(in[r][i], (int32_t)(((r + n - 1) % n) * 100000 + i)) << "rank " << r << " element " << i;
        int32_t want = 0;
        for (int p = 0; p < n; p++) want += (int32_t)(p * 100000 + i);
        ASSERT_EQ(sum[r][i], want) << "allReduce in the group, rank " << r << " element " << i;
      }
  });
}

TEST_P(PeerGroups, NestedGroupsRunAtTheOutermostEnd) {
  NET_SCOPE();
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    const int peer = 1 - r;
    std::vector<int64_t> out(1000), in(1000, -1);
    for (size_t i = 0; i < out.size(); i++) out[i] = r * 7000 + (int64_t)i;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbRecv(in.data(), in.size(), clbInt64, peer, comm, nullptr), clbSuccess);
    ASSERT_EQ(clbGroupEnd(), clbSuccess);  // inner: nothing runs yet
    for (int64_t v : in) ASSERT_EQ(v, -1) << "the inner end ran the receive";
    ASSERT_EQ(clbSend(out.data(), out.size(), clbInt64, peer, comm, nullptr), clbSuccess);
    ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
    for (size_t i = 0; i < in.size(); i++) ASSERT_EQ(in[i], peer * 7000 + (int64_t)i);
  });
  expectInitOk(errors);
}

// No communicator, so no transport: it runs once.
TEST(PeerGroupsWithoutACommunicator, EndWithoutStartIsRefused) {
  EXPECT_EQ(clbGroupEnd(), clbInvalidUsage);
  EXPECT_TRUE(contains(clbGetLastError(), "without a clbGroupStart")) << clbGetLastError();
}

// A call refused inside a group returns its error; the end then runs nothing and says why, and the
// communicator fails with it (its peers are told: refusal_test.cc).
TEST_P(PeerGroups, ARefusedCallMakesTheEndRunNothing) {
  NET_SCOPE();
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    const int peer = 1 - r;
    int32_t x = r + 1, y = -1;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbSend(&x, 1, clbInt32, peer, comm, nullptr), clbSuccess);
    EXPECT_EQ(clbRecv(&y, 1, clbInt32, 5, comm, nullptr), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "peer=5 is out of range for 2 ranks")) << clbGetLastError();
    EXPECT_EQ(clbGroupEnd(), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "nothing in this group ran")) << clbGetLastError();
    EXPECT_TRUE(contains(clbGetLastError(), "peer=5")) << clbGetLastError();
    EXPECT_EQ(y, -1) << "the group's receive ran although a call in it was refused";
    // Failed: the next call says why.
    EXPECT_EQ(clbSend(&x, 1, clbInt32, peer, comm, nullptr), clbInvalidUsage);
    EXPECT_TRUE(contains(clbGetLastError(), "peer=5")) << clbGetLastError();
  });
  expectInitOk(errors);
}

// ---- sends and receives outside groups, to itself, all-to-allv, in place ----

// Rank 0 sends more than its FIFO holds before rank 1 posts the receive: the send returns once
// the receiver took it all, in order.
TEST_P(PeerSendRecv, ABlockingSendLargerThanItsFifoWaitsForTheReceiver) {
  NET_SCOPE();
  const size_t count = 3000017;
  auto errors = runRanks(2, transport, [&](int r, clbComm_t comm) {
    std::vector<int32_t> buf(count);
    if (r == 0) {
      for (size_t i = 0; i < count; i++) buf[i] = (int32_t)(i * 3 + 1);
      ASSERT_EQ(clbSend(buf.data(), count, clbInt32, 1, comm, nullptr), clbSuccess) << clbGetLastError();
      ASSERT_EQ(clbSend(buf.data(), 5, clbInt32, 1, comm, nullptr), clbSuccess) << clbGetLastError();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_EQ(clbRecv(buf.data(), count, clbInt32, 0, comm, nullptr), clbSuccess) << clbGetLastError();
      for (size_t i = 0; i < count; i++) ASSERT_EQ(buf[i], (int32_t)(i * 3 + 1)) << i;
      std::vector<int32_t> five(5, -1);
      ASSERT_EQ(clbRecv(five.data(), 5, clbInt32, 0, comm, nullptr), clbSuccess) << clbGetLastError();
      for (size_t i = 0; i < 5; i++) ASSERT_EQ(five[i], (int32_t)(i * 3 + 1));
    }
  });
  expectInitOk(errors);
}

TEST_P(PeerSendRecv, ASendToItselfGoesToItsReceiveInTheSameGroupOnly) {
  NET_SCOPE();
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    std::vector<float> out(777), in(777, -1.f);
    for (size_t i = 0; i < out.size(); i++) out[i] = r * 1000.f + (float)i;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbRecv(in.data(), in.size(), clbFloat32, r, comm, nullptr), clbSuccess);
    ASSERT_EQ(clbSend(out.data(), out.size(), clbFloat32, r, comm, nullptr), clbSuccess);
    ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
    for (size_t i = 0; i < in.size(); i++) ASSERT_EQ(in[i], out[i]);
    EXPECT_EQ(clbSend(out.data(), out.size(), clbFloat32, r, comm, nullptr), clbInvalidUsage);
    EXPECT_TRUE(contains(clbGetLastError(), "put both in one group")) << clbGetLastError();
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbSend(out.data(), 5, clbFloat32, r, comm, nullptr), clbSuccess);
    ASSERT_EQ(clbRecv(in.data(), 6, clbFloat32, r, comm, nullptr), clbSuccess);
    EXPECT_EQ(clbGroupEnd(), clbInvalidArgument);
    EXPECT_TRUE(contains(clbGetLastError(), "must have the same count and type")) << clbGetLastError();
    // Still usable.
    int64_t a = r, b = -1;
    ASSERT_EQ(clbAllReduce(&a, &b, 1, clbInt64, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 1);
  });
  expectInitOk(errors);
}

// Uneven counts, some of them 0 (nothing moves between those two ranks), packed displacements in
// a permuted order; checked against the blocks computed here.
TEST_P(PeerAllToAllv, UnevenCountsWithEmptyPairs) {
  NET_SCOPE();
  for (int n : {1, 2, 3, 5, 8}) {
    auto cnt = [](int from, int to) {
      return (size_t)((from * 5 + to * 3) % 4 == 0 ? 0 : (from + 2 * to) % 7 * 1111 + 1);
    };
    auto errors = runRanks(n, transport, [&](int r, clbComm_t comm) {
      std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
      size_t so = 0, ro = 0;
      for (int k = 0; k < n; k++) {  // blocks laid out from the last peer to the first
        const int p = n - 1 - k;
        sc[p] = cnt(r, p), sd[p] = so, so += sc[p];
        rc[p] = cnt(p, r), rd[p] = ro, ro += rc[p];
      }
      std::vector<double> send(so), recv(ro + 1, -1.0);
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < sc[p]; i++) send[sd[p] + i] = value(clbFloat64, r, p, i);
      ASSERT_EQ(
          clbAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), clbFloat64, comm, nullptr),
          clbSuccess)
          << clbGetLastError();
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < rc[p]; i++)
          ASSERT_EQ(recv[rd[p] + i], value(clbFloat64, p, r, i)) << "n " << n << " rank " << r << " from " << p;
      ASSERT_EQ(recv[ro], -1.0) << "written past the last block";
    });
    expectInitOk(errors);
  }
}

// A block of 0 elements has no address: its displacement is never applied to its buffer. So a
// NULL buffer with displacements that are not 0 (all its counts 0), and a displacement of 2^62 - 16
// float32 elements (2^64 - 64 bytes: past the end of the address space from any buffer) for an
// empty block, are accepted and move nothing (the sanitizer build stops on the pointer arithmetic
// where the library does it all the same); the other blocks arrive, element by element, and every
// other element of a recv buffer stays as it was. Two rounds: rank 0 with a NULL send, then with a
// NULL recv.
TEST_P(PeerAllToAllv, EmptyBlocksIgnoreTheirDisplacementsEvenOnNullOrPastTheAddressSpace) {
  NET_SCOPE();
  constexpr size_t kFar = ((size_t)1 << 62) - 16, kLen = 8;
  struct Side {
    bool null;
    size_t counts[2], displs[2];
  };
  struct Layout {
    Side send, recv;
  };
  // [round][rank]
  const Layout layouts[2][2] = {
      {{{true, {0, 0}, {7, (size_t)1 << 40}}, {false, {0, 4}, {kFar, 2}}},
       {{false, {4, 3}, {3, 0}}, {false, {0, 3}, {kFar, 1}}}},
      {{{false, {0, 4}, {kFar, 1}}, {true, {0, 0}, {5, (size_t)1 << 40}}},
       {{false, {0, 3}, {kFar, 0}}, {false, {4, 3}, {4, 0}}}},
  };
  for (int round = 0; round < 2; round++) {
    auto errors = runRanks(2, transport, [&](int r, clbComm_t comm) {
      const Layout& l = layouts[round][r];
      std::vector<float> send(kLen, -2.f), recv(kLen, -1.f);
      for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < l.send.counts[p]; i++) send[l.send.displs[p] + i] = (float)value(clbFloat32, r, p, i);
      ASSERT_EQ(
          clbAllToAllv(l.send.null ? nullptr : send.data(), l.send.counts, l.send.displs,
                       l.recv.null ? nullptr : recv.data(), l.recv.counts, l.recv.displs, clbFloat32, comm, nullptr),
          clbSuccess)
          << "round " << round << " rank " << r << ": " << clbGetLastError();
      std::vector<float> want(kLen, -1.f);
      for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < l.recv.counts[p]; i++) want[l.recv.displs[p] + i] = (float)value(clbFloat32, p, r, i);
      for (size_t i = 0; i < kLen; i++)
        EXPECT_EQ(recv[i], want[i]) << "round " << round << " rank " << r << " element " << i;
    });
    expectInitOk(errors);
  }
}

// All-to-all in place (one buffer, the same layout for sending and receiving): every rank ends
// with what it would receive out of place, element by element, and the guard after the buffer is
// untouched. clbAllToAll and clbAllToAllv with uneven counts (symmetric, as one layout for both
// directions needs; some pairs empty), through the communicator's scratch (the input is copied
// aside before anything moves).
TEST_P(PeerAllToAll, InPlaceEveryRankGetsWhatOutOfPlaceGives) {
  NET_SCOPE();
  {
    for (int n : {1, 2, 3, 5}) {
      for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)100003}) {
        auto errors = runRanks(n, transport, [&](int r, clbComm_t comm) {
          for (clbDataType_t t : {clbInt8, clbBfloat16, clbFloat64}) {
            Buf b(t, count * n);
            for (int p = 0; p < n; p++)
              for (size_t i = 0; i < count; i++) b.set(p * count + i, value(t, r, p, i));
            ASSERT_EQ(clbAllToAll(b.data(), b.data(), count, t, comm, nullptr), clbSuccess) << clbGetLastError();
            for (int p = 0; p < n; p++) {
              for (size_t i = 0; i < count; i++) {
                ASSERT_EQ(b.get(p * count + i), value(t, p, r, i))
                    << "n " << n << " transport " << transport << " count " << count << " type " << t << " rank " << r
                    << " from " << p << " element " << i;
              }
            }
            ASSERT_TRUE(b.guardIntact());
          }
          // allToAllv: blocks from the last peer to the first, counts symmetric in the pair.
          auto cnt = [&](int a, int c) { return (a + c) % 3 == 0 ? 0 : (size_t)((a * c + a + c) % 5) * count + 1; };
          std::vector<size_t> counts(n), displs(n);
          size_t total = 0;
          for (int k = 0; k < n; k++) {
            const int p = n - 1 - k;
            counts[p] = cnt(r, p), displs[p] = total, total += counts[p];
          }
          Buf v(clbFloat32, total);
          for (int p = 0; p < n; p++)
            for (size_t i = 0; i < counts[p]; i++) v.set(displs[p] + i, value(clbFloat32, r, p, i));
          ASSERT_EQ(clbAllToAllv(v.data(), counts.data(), displs.data(), v.data(), counts.data(), displs.data(),
                                 clbFloat32, comm, nullptr),
                    clbSuccess)
              << clbGetLastError();
          for (int p = 0; p < n; p++) {
            for (size_t i = 0; i < counts[p]; i++) {
              ASSERT_EQ(v.get(displs[p] + i), value(clbFloat32, p, r, i))
                  << "allToAllv n " << n << " count " << count << " rank " << r << " from " << p << " element " << i;
            }
          }
          ASSERT_TRUE(v.guardIntact());
        });
        expectInitOk(errors);
      }
    }
  }
}

TEST_P(PeerRooted, InPlaceAndEveryRootAvgAndProd) {
  NET_SCOPE();
  const int n = 3;
  const size_t count = 10007;
  auto errors = runRanks(n, transport, [&](int r, clbComm_t comm) {
    for (int root = 0; root < n; root++) {
      // gather in place: the root's block already sits at recv + root x count
      std::vector<int64_t> all(count * n, -1);
      std::vector<int64_t> mine(count);
      for (size_t i = 0; i < count; i++) mine[i] = r * 1000003 + (int64_t)i;
      if (r == root) std::copy(mine.begin(), mine.end(), all.begin() + root * count);
      ASSERT_EQ(clbGather(r == root ? all.data() + root * count : mine.data(), all.data(), count, clbInt64, root, comm,
                          nullptr),
                clbSuccess)
          << clbGetLastError();
      if (r == root)
        for (int p = 0; p < n; p++)
          for (size_t i = 0; i < count; i++) ASSERT_EQ(all[p * count + i], p * 1000003 + (int64_t)i);
      // scatter in place at the root
      std::vector<int64_t> parts(count * n), got(count, -1);
      for (size_t i = 0; i < parts.size(); i++) parts[i] = root * 5000000 + (int64_t)i;
      ASSERT_EQ(clbScatter(parts.data(), r == root ? parts.data() + root * count : got.data(), count, clbInt64, root,
                           comm, nullptr),
                clbSuccess)
          << clbGetLastError();
      const int64_t* mineGot = r == root ? parts.data() + root * count : got.data();
      for (size_t i = 0; i < count; i++) ASSERT_EQ(mineGot[i], root * 5000000 + (int64_t)(r * count + i));
      // reduce avg (float64, exact here) in place at the root, and prod (int64) out of place
      std::vector<double> v(count);
      for (size_t i = 0; i < count; i++) v[i] = (double)(r * 3 + (int)(i % 5));
      ASSERT_EQ(clbReduce(v.data(), r == root ? v.data() : nullptr, count, clbFloat64, clbAvg, root, comm, nullptr),
                clbSuccess)
          << clbGetLastError();
      if (r == root)
        for (size_t i = 0; i < count; i++) ASSERT_DOUBLE_EQ(v[i], (0 + 3 + 6) / 3.0 + (double)(i % 5));
      std::vector<int64_t> f(count), prod(count, -1);
      for (size_t i = 0; i < count; i++) f[i] = (int64_t)((i + r) % 3) - 1;
      ASSERT_EQ(clbReduce(f.data(), prod.data(), count, clbInt64, clbProd, root, comm, nullptr), clbSuccess)
          << clbGetLastError();
      if (r == root)
        for (size_t i = 0; i < count; i++) {
          int64_t want = 1;
          for (int p = 0; p < n; p++) want *= (int64_t)((i + p) % 3) - 1;
          ASSERT_EQ(prod[i], want) << i;
        }
    }
  });
  expectInitOk(errors);
}

// ---- bad input, mismatches, a receive without its send ----

TEST_P(PeerBadInput, EachRefusalNamesTheArgument) {
  NET_SCOPE();
  struct Case {
    std::function<clbResult_t(int32_t* x, int r, clbComm_t comm)> call;
    clbResult_t rc;
    const char* says;
  };
  static const size_t counts[2] = {1, 1}, displs[2] = {0, 1}, swapped[2] = {1, 0};
  const Case cases[] = {
      {[](int32_t* x, int, clbComm_t c) { return clbSend(x, 1, clbInt32, 2, c, nullptr); }, clbInvalidArgument,
       "peer=2 is out of range for 2 ranks"},
      {[](int32_t* x, int, clbComm_t c) { return clbRecv(x, 1, clbInt32, -1, c, nullptr); }, clbInvalidArgument,
       "peer=-1 is out of range"},
      {[](int32_t*, int r, clbComm_t c) { return clbSend(nullptr, 3, clbInt32, 1 - r, c, nullptr); },
       clbInvalidArgument, "buffer is NULL with count=3"},
      {[](int32_t* x, int r, clbComm_t c) { return clbRecv(x, 1, (clbDataType_t)42, 1 - r, c, nullptr); },
       clbInvalidArgument, "unknown data type 42"},
      {[](int32_t* x, int r, clbComm_t c) { return clbSend(x, SIZE_MAX / 2, clbInt32, 1 - r, c, nullptr); },
       clbInvalidArgument, "overflows"},
      {[](int32_t* x, int, clbComm_t c) {
         return clbAllToAllv(x, nullptr, displs, x + 4, counts, displs, clbInt32, c, nullptr);
       },
       clbInvalidArgument, "sendcounts is NULL"},
      {[](int32_t* x, int, clbComm_t c) { return clbAllToAll(x, x + 1, 2, clbInt32, c, nullptr); }, clbInvalidArgument,
       "overlap"},
      {[](int32_t* x, int, clbComm_t c) {
         return clbAllToAllv(x, counts, displs, x, counts, swapped, clbInt32, c, nullptr);
       },
       clbInvalidArgument, "not as in place (the same counts and displacements for sending and receiving)"},
      {[](int32_t* x, int, clbComm_t c) { return clbGather(x, x, 1, clbInt32, 3, c, nullptr); }, clbInvalidArgument,
       "root=3 is out of range"},
      {[](int32_t* x, int, clbComm_t c) { return clbScatter(x, x, 1, clbInt32, -2, c, nullptr); }, clbInvalidArgument,
       "root=-2 is out of range"},
      {[](int32_t* x, int, clbComm_t c) { return clbReduce(x, x, 1, clbInt32, (clbRedOp_t)2000000009, 0, c, nullptr); },
       clbInvalidArgument, "unknown reduction op 2000000009"},
      {[](int32_t* x, int r, clbComm_t c) { return clbReduce(x, x + 1, 2, clbInt32, clbSum, r, c, nullptr); },
       clbInvalidArgument, "overlap"},
      {[](int32_t* x, int r, clbComm_t) { return clbSend(x, 1, clbInt32, 1 - r, nullptr, nullptr); },
       clbInvalidArgument, "communicator is NULL"},
  };
  // Each refusal fails its communicator and tells the peer (refusal_test.cc), so each on its own.
  for (const Case& k : cases) {
    auto errors = runRanks(2, transport, [&](int r, clbComm_t comm) {
      int32_t x[8] = {0};
      EXPECT_EQ(k.call(x, r, comm), k.rc) << k.says;
      EXPECT_TRUE(contains(clbGetLastError(), k.says)) << "want \"" << k.says << "\", got: " << clbGetLastError();
    });
    expectInitOk(errors);
  }
  // A NULL communicator fails nothing: the ones here go on.
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    int32_t x = 0;
    EXPECT_EQ(clbSend(&x, 1, clbInt32, 1 - r, nullptr, nullptr), clbInvalidArgument);
    int64_t a = 1, b = 0;
    ASSERT_EQ(clbAllReduce(&a, &b, 1, clbInt64, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
    EXPECT_EQ(b, 2);
  });
  expectInitOk(errors);
}

// A receive that meets a send of another type (or count, or call) fails on the receiver, the
// message naming both; never data reinterpreted.
TEST_P(PeerBadInput, AMismatchedSendIsNamedNotDelivered) {
  NET_SCOPE();
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    std::vector<int32_t> x(10, 7);
    std::vector<float> y(10, -1.f);
    if (r == 0) {
      ASSERT_EQ(clbSend(x.data(), 10, clbInt32, 1, comm, nullptr), clbSuccess) << clbGetLastError();
      // Rank 1 never makes this gather (its receive failed first): the gather's sender waits for
      // its root to say it is in the same call, so it learns of rank 1's failure instead of
      // returning success.
      EXPECT_EQ(clbGather(x.data(), nullptr, 10, clbInt32, 1, comm, nullptr), clbRemoteError);
      EXPECT_TRUE(contains(clbGetLastError(), "rank 1 failed")) << clbGetLastError();
    } else {
      EXPECT_EQ(clbRecv(y.data(), 10, clbFloat32, 0, comm, nullptr), clbRemoteError);
      const std::string e = clbGetLastError();
      EXPECT_TRUE(contains(e, "float32")) << e;
      EXPECT_TRUE(contains(e, "int32")) << e;
      EXPECT_TRUE(contains(e, "same order, with the same count and type")) << e;
      for (float v : y) EXPECT_EQ(v, -1.f) << "data of the wrong type was delivered";
    }
  });
  expectInitOk(errors);
}

TEST_P(PeerBadInput, AReceiveWithoutItsSendTimesOutNamingThePeer) {
  NET_SCOPE();
  std::atomic<bool> done{false};
  auto errors = runRanks(
      2, transport,
      [&](int r, clbComm_t comm) {
        if (r == 1) {
          int32_t y = 0;
          const int64_t t0 = clb::nowMs();
          EXPECT_EQ(clbRecv(&y, 1, clbInt32, 0, comm, nullptr), clbTimeout);
          const std::string e = clbGetLastError();
          EXPECT_TRUE(contains(e, "a receive from rank 0")) << e;
          EXPECT_TRUE(contains(e, "send/recv of 1 int32")) << e;
          EXPECT_GE(clb::nowMs() - t0, 400);
          done = true;
        } else {
          while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      },
      64 << 10, CLB_DEFAULT_STAGING_CAP_BYTES, 500);
  expectInitOk(errors);
}

// An abort from another thread ends a receive that waits for a send that never comes, at once,
// on every transport.
TEST_P(PeerBadInput, AbortEndsAWaitingReceive) {
  NET_SCOPE();
  {
    std::atomic<bool> done{false};
    auto errors = runRanks(2, transport, [&](int r, clbComm_t comm) {
      if (r == 1) {
        std::thread aborter([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          clbCommAbort(comm);
        });
        int64_t y = 0;
        const int64_t t0 = clb::nowMs();
        EXPECT_EQ(clbRecv(&y, 1, clbInt64, 0, comm, nullptr), clbAborted) << clbGetLastError();
        EXPECT_LT(clb::nowMs() - t0, 5000) << "the abort did not end the wait";
        aborter.join();
        done = true;
      } else {
        while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    expectInitOk(errors);
  }
}

// One page of a rank's buffers between two inaccessible pages (PROT_NONE): every byte of it starts
// as 0x5a, so that a byte written outside the buffers the call was given shows (and an access
// farther away faults).
struct GuardedPage {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char* base = static_cast<char*>(mmap(nullptr, 3 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  char* mid = base + page;
  std::vector<char> before;
  GuardedPage() {
    mprotect(mid, page, PROT_READ | PROT_WRITE);
    memset(mid, 0x5a, page);
  }
  ~GuardedPage() { munmap(base, 3 * page); }
  void snapshot() { before.assign(mid, mid + page); }
  // The first byte that changed since snapshot(), as its offset in the page; -1 if none did.
  long firstChange() const {
    for (size_t i = 0; i < page; i++)
      if (mid[i] != before[i]) return (long)i;
    return -1;
  }
};

// Issue 38, 5: an all-to-allv displacement so large that the buffer's address plus it wraps around
// (2^62 - 16 float32 elements: 2^64 - 64 bytes, i.e. 64 bytes below the buffer) is refused on the
// calling rank, naming the block, before anything moves: nothing is written below its recv or read
// below its send (its page is as it was), and its peer, whose matching call never gets the data,
// is told at once (clbRemoteError naming rank 0 and the block, long before the timeout) with its
// recv untouched.
TEST_P(PeerBadInput, AnAllToAllvDisplacementThatWrapsTheAddressSpaceIsRefusedAndNothingMoves) {
  NET_SCOPE();
  const int64_t timeoutMs = 60000;
  std::atomic<bool> peerDone{false};
  auto errors = runRanks(
      2, transport,
      [&](int r, clbComm_t comm) {
        GuardedPage g;
        float* send = reinterpret_cast<float*>(g.mid + 1024);
        float* recv = reinterpret_cast<float*>(g.mid + 2048);
        for (int i = 0; i < 8; i++) send[i] = (float)(r * 100 + i), recv[i] = -1.f;
        g.snapshot();
        const size_t wrap = ((size_t)1 << 62) - 16;  // x 4 bytes = 2^64 - 64
        size_t counts[2] = {4, 4}, displs[2] = {0, 4};
        if (r == 0) {
          size_t bad[2] = {0, wrap};
          EXPECT_EQ(clbAllToAllv(send, counts, bad, recv, counts, bad, clbFloat32, comm, nullptr), clbInvalidArgument);
          const std::string e = clbGetLastError();
          EXPECT_TRUE(contains(e, "clbAllToAllv: the send block of peer 1 (sdispls[1]=4611686018427387888")) << e;
          EXPECT_TRUE(contains(e, "runs past the end of the address space")) << e;
          EXPECT_TRUE(contains(e, "pass counts and displacements that stay inside")) << e;
          EXPECT_EQ(g.firstChange(), -1) << "rank 0 wrote outside its buffers (or inside them, though refused)";
          // Its communicator stays until the peer is done (its end is then no notice of its own).
          while (!peerDone.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } else {
          const int64_t t0 = clb::nowMs();
          EXPECT_EQ(clbAllToAllv(send, counts, displs, recv, counts, displs, clbFloat32, comm, nullptr), clbRemoteError)
              << clbGetLastError();
          const std::string e = clbGetLastError();
          EXPECT_TRUE(contains(e, "rank 0 refused clbAllToAllv: the send block of peer 1")) << e;
          EXPECT_LT(clb::nowMs() - t0, timeoutMs / 4) << "the peer of the refused call was not told at once: " << e;
          for (int i = 0; i < 4; i++) EXPECT_EQ(recv[i], -1.f) << "rank 1 received a block rank 0 refused to send";
          // Its own block (recv[4..8), 16 bytes at 2064) may be copied; nothing else changes.
          const long changed = g.firstChange();
          EXPECT_TRUE(changed == -1 || (changed >= 2064 && changed < 2080)) << "rank 1's page changed at " << changed;
          peerDone = true;
        }
      },
      64 << 10, CLB_DEFAULT_STAGING_CAP_BYTES, timeoutMs);
  expectInitOk(errors);
}

// Every buffer of every call whose end would pass the last address is refused at the call, naming
// the call and the buffer: sends, receives, the collectives (the nranks x count buffers of
// all-gather and reduce-scatter too), reduce, gather and scatter at the root, all-to-all. Inside a
// group, so that a call wrongly taken is only recorded (a refused call after it makes the group's
// end run nothing).
TEST_P(PeerBadInput, EveryBufferWhoseEndWrapsTheAddressSpaceIsRefused) {
  NET_SCOPE();
  // Each refusal fails its communicator (refusal_test.cc), so each case on communicators of its own.
  for (int k = 0; k < 11; k++) {
    auto errors = runRanks(2, transport, [k](int r, clbComm_t comm) {
      static thread_local float buf[128];
      float* x = buf;
      float* y = buf + 64;  // above x: an end that wraps from y does not from x
      const int n = 2;
      // Elements of float32 from x (or y) to just past the last address; for a buffer of n blocks,
      // so many per block.
      auto past = [](const void* p, size_t blocks) {
        return (SIZE_MAX - reinterpret_cast<uintptr_t>(p)) / (4 * blocks) + 1;
      };
      const int peer = 1 - r;
      size_t counts[2] = {1, 1}, displs[2] = {0, 1};
      size_t far[2] = {0, 1};
      far[peer] = (SIZE_MAX - reinterpret_cast<uintptr_t>(y)) / 4;  // y + far x 4 bytes + 4 bytes wraps
      struct Case {
        const char* name;
        std::function<clbResult_t()> call;
        const char* says;
      } cases[] = {
          {"send", [&] { return clbSend(x, past(x, 1), clbFloat32, peer, comm, nullptr); }, "clbSend: the buffer ["},
          {"recv", [&] { return clbRecv(y, past(y, 1), clbFloat32, peer, comm, nullptr); }, "clbRecv: the buffer ["},
          {"allReduce", [&] { return clbAllReduce(x, y, past(x, 1), clbFloat32, clbSum, comm, nullptr); },
           "allReduce: send ["},
          {"allGather", [&] { return clbAllGather(x, y, past(y, n), clbFloat32, comm, nullptr); }, "allGather: recv ["},
          {"reduceScatter", [&] { return clbReduceScatter(x, y, past(x, n), clbFloat32, clbSum, comm, nullptr); },
           "reduceScatter: send ["},
          {"broadcast", [&] { return clbBroadcast(x, y, past(y, 1), clbFloat32, peer, comm, nullptr); },
           "broadcast: recv ["},
          {"reduce", [&] { return clbReduce(x, y, past(y, 1), clbFloat32, clbSum, r, comm, nullptr); },
           "clbReduce: recv ["},
          {"gather", [&] { return clbGather(x, y, past(y, n), clbFloat32, r, comm, nullptr); },
           "clbGather: recv (nranks x count elements) ["},
          {"scatter", [&] { return clbScatter(x, y, past(x, n), clbFloat32, r, comm, nullptr); },
           "clbScatter: send (nranks x count elements) ["},
          {"allToAll", [&] { return clbAllToAll(x, y, past(x, n), clbFloat32, comm, nullptr); },
           "clbAllToAll: the send block of peer"},
          {"allToAllv", [&] { return clbAllToAllv(x, counts, displs, y, counts, far, clbFloat32, comm, nullptr); },
           "clbAllToAllv: the recv block of peer"},
      };
      static_assert(sizeof cases / sizeof cases[0] == 11, "the loop above counts them");
      {
        const Case& c = cases[k];
        ASSERT_EQ(clbGroupStart(), clbSuccess);
        EXPECT_EQ(c.call(), clbInvalidArgument) << c.name;
        const std::string e = clbGetLastError();
        EXPECT_TRUE(contains(e, c.says)) << c.name << ": want \"" << c.says << "\", got: " << e;
        EXPECT_TRUE(contains(e, "runs past the end of the address space")) << c.name << ": " << e;
        EXPECT_NE(clbSend(x, 1, clbFloat32, -1, comm, nullptr), clbSuccess);  // the group runs nothing
        EXPECT_NE(clbGroupEnd(), clbSuccess) << c.name;
      }
    });
    expectInitOk(errors);
  }
}

// A send that fits the pair's staging returns before its receive is posted, whichever rank of the
// pair it is from and whichever transport (over sockets the higher rank dials too: it used to
// wait for the lower rank's first call with it, here at the receive after the barrier).
TEST_P(PeerSendRecv, ASmallSendReturnsBeforeItsReceiveIsPosted) {
  NET_SCOPE();
  {
    auto errors = runRanks(
        2, transport,
        [&](int r, clbComm_t comm) {
          int64_t x = 7, y = 0;
          if (r == 1) {
            ASSERT_EQ(clbSend(&x, 1, clbInt64, 0, comm, nullptr), clbSuccess) << clbGetLastError();
            ASSERT_EQ(clbBarrier(comm, nullptr), clbSuccess) << clbGetLastError();
          } else {
            ASSERT_EQ(clbBarrier(comm, nullptr), clbSuccess) << clbGetLastError();
            ASSERT_EQ(clbRecv(&y, 1, clbInt64, 1, comm, nullptr), clbSuccess) << clbGetLastError();
            EXPECT_EQ(y, 7);
          }
        },
        64 << 10, CLB_DEFAULT_STAGING_CAP_BYTES, 3000);
    expectInitOk(errors);
  }
}

TEST_P(PeerSendRecv, CountZeroToItselfIsANoOpInsideAndOutsideAGroup) {
  NET_SCOPE();
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    int32_t x = 1;
    EXPECT_EQ(clbSend(&x, 0, clbInt32, r, comm, nullptr), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    EXPECT_EQ(clbSend(&x, 0, clbInt32, r, comm, nullptr), clbSuccess);
    EXPECT_EQ(clbRecv(&x, 0, clbInt32, 1 - r, comm, nullptr), clbSuccess);
    EXPECT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
  });
  expectInitOk(errors);
}

// Calls of 0 elements move nothing and wait for no one, with a stream too (nccl-tests' alltoall
// passes count 0 on its stream for its smallest sizes: refused once as "a stream with host
// buffers"), and whether or not the peer posts a matching one: here rank 0 alone makes them, then
// both exchange real data, which arrives intact (no zero-size message was left between them).
TEST_P(PeerSendRecv, CallsOfZeroElementsMoveNothingAndWaitForNoOneWithAStreamToo) {
  NET_SCOPE();
  {
    auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
      void* const stream = reinterpret_cast<void*>(0x1);  // never used: nothing is enqueued
      const int peer = 1 - r;
      float one = 1, sum = 0;  // a collective first: the all-to-all after it ran no algorithm
      EXPECT_EQ(clbAllReduce(&one, &sum, 1, clbFloat32, clbSum, comm, nullptr), clbSuccess);
      if (r == 0) {
        EXPECT_EQ(clbAllToAll(nullptr, nullptr, 0, clbFloat32, comm, stream), clbSuccess) << clbGetLastError();
        int algo = -1;
        EXPECT_EQ(clbCommLastAlgorithm(comm, &algo), clbSuccess);
        EXPECT_EQ(algo, (int)clbAlgoNone) << "an all-to-all of 0 elements reports the collective before it";
        EXPECT_EQ(clbSend(nullptr, 0, clbFloat32, peer, comm, stream), clbSuccess) << clbGetLastError();
        EXPECT_EQ(clbRecv(nullptr, 0, clbFloat32, peer, comm, nullptr), clbSuccess) << clbGetLastError();
        const size_t zeros[2] = {0, 0};
        EXPECT_EQ(clbAllToAllv(nullptr, zeros, zeros, nullptr, zeros, zeros, clbFloat32, comm, stream), clbSuccess)
            << clbGetLastError();
        ASSERT_EQ(clbGroupStart(), clbSuccess);
        EXPECT_EQ(clbSend(nullptr, 0, clbInt32, peer, comm, stream), clbSuccess);
        EXPECT_EQ(clbRecv(nullptr, 0, clbInt32, peer, comm, stream), clbSuccess);
        EXPECT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
      }
      int32_t out[3] = {r * 10 + 1, r * 10 + 2, r * 10 + 3}, in[3] = {-1, -1, -1};
      ASSERT_EQ(clbGroupStart(), clbSuccess);
      ASSERT_EQ(clbSend(out, 3, clbInt32, peer, comm, nullptr), clbSuccess);
      ASSERT_EQ(clbRecv(in, 3, clbInt32, peer, comm, nullptr), clbSuccess);
      ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
      for (int i = 0; i < 3; i++) EXPECT_EQ(in[i], peer * 10 + i + 1) << "rank " << r << " element " << i;
    });
    expectInitOk(errors);
  }
}

// A collective refused inside a group (a bad op, a NULL communicator) is refused at the call and
// makes the end run nothing: the group's receive does not happen, its buffer keeps its bytes. The
// group's communicator fails with it, its peer told (refusal_test.cc): each variant on its own.
TEST_P(PeerGroups, ARefusedCollectiveMakesTheEndRunNothing) {
  NET_SCOPE();
  for (int variant = 0; variant < 2; variant++) {
    auto errors = runRanks(2, transport, [variant](int r, clbComm_t comm) {
      const int peer = 1 - r;
      int32_t x = r + 1, y = -1, z = 0;
      ASSERT_EQ(clbGroupStart(), clbSuccess);
      ASSERT_EQ(clbSend(&x, 1, clbInt32, peer, comm, nullptr), clbSuccess);
      ASSERT_EQ(clbRecv(&y, 1, clbInt32, peer, comm, nullptr), clbSuccess);
      if (variant == 0) {
        EXPECT_EQ(clbAllReduce(&x, &z, 1, clbInt32, (clbRedOp_t)2000000099, comm, nullptr), clbInvalidArgument);
        EXPECT_TRUE(contains(clbGetLastError(), "unknown reduction op 2000000099")) << clbGetLastError();
      } else {
        EXPECT_EQ(clbBarrier(nullptr, nullptr), clbInvalidArgument);
      }
      EXPECT_NE(clbGroupEnd(), clbSuccess);
      EXPECT_TRUE(contains(clbGetLastError(), "nothing in this group ran")) << clbGetLastError();
      EXPECT_EQ(y, -1) << "the group's receive ran although a call in it was refused";
      EXPECT_EQ(clbSend(&x, 1, clbInt32, peer, comm, nullptr), clbInvalidUsage) << "the communicator did not fail";
    });
    expectInitOk(errors);
  }
}

// A refusal found at the end (an unmatched send to itself) on one communicator of a group runs
// nothing on any: no communicator waits for the refused one, and nothing is written. The
// communicator whose group calls had a peer fails and tells that peer (here driven by the same
// thread); the other's calls were with itself only, and it goes on.
TEST_P(PeerGroups, ARefusalOnOneCommunicatorRunsNothingOnAny) {
  NET_SCOPE();
  const int n = 2;
  runFromOneThread(n, transport, [&](std::vector<clbComm_t>& comms) {
    int64_t in = -1, self = 5, all[2] = {-1, -1}, mine = 9;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    ASSERT_EQ(clbRecv(&in, 1, clbInt64, 1, comms[0], nullptr), clbSuccess);
    ASSERT_EQ(clbGather(&mine, all, 1, clbInt64, 0, comms[0], nullptr), clbSuccess);
    ASSERT_EQ(clbSend(&self, 1, clbInt64, 1, comms[1], nullptr), clbSuccess);  // to itself, no receive
    const int64_t t0 = clb::nowMs();
    EXPECT_EQ(clbGroupEnd(), clbInvalidUsage);
    const std::string e = clbGetLastError();
    EXPECT_TRUE(contains(e, "rank 1 posted 1 send(s) to itself and 0 receive(s)")) << e;
    EXPECT_LT(clb::nowMs() - t0, 1000) << "a communicator waited for the refused one";
    EXPECT_EQ(in, -1);
    EXPECT_EQ(all[0], -1) << "the root's own block of the gather was written";
    // Rank 0's communicator failed; rank 1's learns it from rank 0, naming the refusal.
    EXPECT_EQ(clbAllReduce(&self, &all[0], 1, clbInt64, clbSum, comms[0], nullptr), clbInvalidUsage);
    clbResult_t async = clbSuccess;
    for (int64_t t = clb::nowMs(); clb::nowMs() - t < 15000 && async == clbSuccess;)
      ASSERT_EQ(clbCommGetAsyncError(comms[1], &async), clbSuccess);
    EXPECT_EQ(async, clbRemoteError);
    EXPECT_TRUE(contains(clbGetLastError(), "rank 0 refused its group")) << clbGetLastError();
  });
}

// ---- memory: per peer, at first use, counted, given back ----

// Shm only, as its name says: it measures the shared-memory transport's per-pair FIFO (pipelineDepth
// slots of the message size and a header); socket and verbs stage differently, and the next test
// runs trim between messages over every transport.
TEST(PeerMemoryShm, OnlyThePeersUsedHoldAnythingAndTrimGivesItBackOnShm) {
  const int n = 4;
  std::vector<clbMemStats_t> before(n), after(n), trimmed(n);
  std::atomic<int> phase{0};
  auto errors = runRanks(n, clbTransportShm, [&](int r, clbComm_t comm) {
    clbCommMemStats(comm, &before[r]);
    std::vector<char> buf(8192, (char)r);
    // A pipeline step: 0 -> 1 only.
    if (r == 0) ASSERT_EQ(clbSend(buf.data(), buf.size(), clbUint8, 1, comm, nullptr), clbSuccess) << clbGetLastError();
    if (r == 1) ASSERT_EQ(clbRecv(buf.data(), buf.size(), clbUint8, 0, comm, nullptr), clbSuccess) << clbGetLastError();
    clbCommMemStats(comm, &after[r]);
    phase++;
    while (phase.load() < n) std::this_thread::yield();
    ASSERT_EQ(clbCommTrim(comm), clbSuccess) << clbGetLastError();
    clbCommMemStats(comm, &trimmed[r]);
    phase++;
    while (phase.load() < 2 * n) std::this_thread::yield();
  });
  expectInitOk(errors);
  // The sender holds one FIFO of pipelineDepth slots of 8 KiB (and a header), nothing more.
  const int64_t fifo = after[0].hostBytes - before[0].hostBytes;
  EXPECT_GE(fifo, CLB_DEFAULT_PIPELINE_DEPTH * 8192);
  EXPECT_LE(fifo, CLB_DEFAULT_PIPELINE_DEPTH * 8192 + 8192);
  for (int r = 1; r < n; r++) EXPECT_EQ(after[r].hostBytes, before[r].hostBytes) << "rank " << r << " holds memory";
  EXPECT_EQ(trimmed[0].hostBytes, before[0].hostBytes) << "trim left the FIFO";
}

// Trim on either side between messages of growing and shrinking size: the receiver finds the
// sender's next FIFO whether it let go of the last one first or not.
TEST_P(PeerMemory, TrimOnEitherSideBetweenMessagesOfChangingSize) {
  NET_SCOPE();
  auto errors = runRanks(2, transport, [](int r, clbComm_t comm) {
    const size_t sizes[] = {8192, 100000, 8192, 1 << 20, 5, 300000};
    for (int round = 0; round < 6; round++) {
      const size_t count = sizes[round];
      std::vector<uint8_t> buf(count);
      if (r == 0) {
        for (size_t i = 0; i < count; i++) buf[i] = (uint8_t)(i * 7 + round);
        ASSERT_EQ(clbSend(buf.data(), count, clbUint8, 1, comm, nullptr), clbSuccess) << clbGetLastError();
        if (round % 2) ASSERT_EQ(clbCommTrim(comm), clbSuccess);
      } else {
        ASSERT_EQ(clbRecv(buf.data(), count, clbUint8, 0, comm, nullptr), clbSuccess) << clbGetLastError();
        for (size_t i = 0; i < count; i++) ASSERT_EQ(buf[i], (uint8_t)(i * 7 + round)) << "round " << round;
        if (round % 3 != 2) ASSERT_EQ(clbCommTrim(comm), clbSuccess);
        // Late for the next message: the sender has replaced the FIFO that was let go by then.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
  expectInitOk(errors);
}

// ---- ranks as processes ----

TEST(PeerChild, RingAndAllToAll) {
  const char* id = getenv("CLB_P2P_ID");
  if (!id) GTEST_SKIP() << "runs only as a rank process of PeerProcesses";
  const clbUniqueId uid = clbtest::unhex(id);
  const int r = atoi(getenv("CLB_P2P_RANK")), n = atoi(getenv("CLB_P2P_NRANKS"));
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = atoi(getenv("CLB_P2P_TRANSPORT"));
  cfg.timeoutMs = 20000;
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &uid, r, n, &cfg), clbSuccess) << clbGetLastError();
  const size_t count = 300007;
  std::vector<int32_t> out(count), in(count, -1);
  for (size_t i = 0; i < count; i++) out[i] = (int32_t)(r * 1000000 + i);
  ASSERT_EQ(clbGroupStart(), clbSuccess);
  ASSERT_EQ(clbRecv(in.data(), count, clbInt32, (r + n - 1) % n, comm, nullptr), clbSuccess);
  ASSERT_EQ(clbSend(out.data(), count, clbInt32, (r + 1) % n, comm, nullptr), clbSuccess);
  ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
  for (size_t i = 0; i < count; i++) ASSERT_EQ(in[i], (int32_t)(((r + n - 1) % n) * 1000000 + i));
  const size_t c2 = 1001;
  std::vector<int64_t> s(c2 * n), g(c2 * n, -1);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < c2; i++) s[p * c2 + i] = r * 100000 + p * 1000 + (int64_t)i;
  ASSERT_EQ(clbAllToAll(s.data(), g.data(), c2, clbInt64, comm, nullptr), clbSuccess) << clbGetLastError();
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < c2; i++) ASSERT_EQ(g[p * c2 + i], p * 100000 + r * 1000 + (int64_t)i);
  ASSERT_EQ(clbCommDestroy(comm), clbSuccess);
}

void runProcesses(int n, int transport) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++)
    pids.push_back(
        clbtest::spawnSelf("PeerChild.RingAndAllToAll",
                           {"CLB_P2P_ID=" + clbtest::hex(id), "CLB_P2P_RANK=" + std::to_string(r),
                            "CLB_P2P_NRANKS=" + std::to_string(n), "CLB_P2P_TRANSPORT=" + std::to_string(transport)}));
  for (int r = 0; r < n; r++) {
    ASSERT_GT(pids[r], 0);
    int status = 0;
    ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank process " << r << " failed (status " << status << ")";
  }
  clbUniqueIdRelease(&id);
}

// A rank process that dies while its peer waits for its send: the receive ends with the dead rank
// named (shm: its pidfd; socket: its connection; verbs: the connection that set its channel up),
// not at the timeout.
TEST(PeerChild, DiesBeforeItsSend) {
  const char* id = getenv("CLB_P2P_DIE_ID");
  if (!id) GTEST_SKIP() << "runs only as a rank process of PeerProcesses";
  const clbUniqueId uid = clbtest::unhex(id);
  const int r = atoi(getenv("CLB_P2P_RANK"));
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = atoi(getenv("CLB_P2P_TRANSPORT"));
  cfg.timeoutMs = 30000;
  clbComm_t comm = nullptr;
  ASSERT_EQ(clbCommInitRank(&comm, &uid, r, 2, &cfg), clbSuccess) << clbGetLastError();
  int64_t x = 42;
  // Both ranks exchange once (the pair's channel is up), then rank 0 dies before its second send.
  ASSERT_EQ(clbGroupStart(), clbSuccess);
  ASSERT_EQ(clbSend(&x, 1, clbInt64, 1 - r, comm, nullptr), clbSuccess);
  ASSERT_EQ(clbRecv(&x, 1, clbInt64, 1 - r, comm, nullptr), clbSuccess);
  ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
  if (r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    _exit(0);  // gone without a word
  }
  const int64_t t0 = clb::nowMs();
  const clbResult_t rc = clbRecv(&x, 1, clbInt64, 0, comm, nullptr);
  const std::string e = clbGetLastError();
  EXPECT_EQ(rc, clbRemoteError) << e;
  EXPECT_TRUE(contains(e, "rank 0")) << e;
  EXPECT_LT(clb::nowMs() - t0, 10000) << "found at the timeout, not by the death: " << e;
  clbCommDestroy(comm);
}

TEST_P(PeerProcesses, APeerThatDiesIsNamedByTheWaitingReceive) {
  NET_SCOPE();  // the rank processes inherit the scope's environment (TLS and its files)
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; r++)
    pids.push_back(clbtest::spawnSelf("PeerChild.DiesBeforeItsSend",
                                      {"CLB_P2P_DIE_ID=" + clbtest::hex(id), "CLB_P2P_RANK=" + std::to_string(r),
                                       "CLB_P2P_TRANSPORT=" + std::to_string(transport)}));
  for (int r = 0; r < 2; r++) {
    ASSERT_GT(pids[r], 0);
    int status = 0;
    ASSERT_EQ(waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << clbtest::netName(GetParam()) << ": rank process " << r << " failed (status " << status << ")";
  }
  clbUniqueIdRelease(&id);
}

// Under transport verbs the pairs' messages move over queue pairs of their own (RDMA WRITE with
// immediate into the peer's receive slots), set up from the pair's first message over its TCP
// connection: every rank logs its channel with every peer of repeated all-to-alls, nothing says
// that point-to-point goes over TCP, and every element arrives (messages of several slots each way).
TEST(PeerVerbs, PairsMoveOverQueuePairsOfTheirOwn) {
  std::vector<std::string> lines;
  const int n = 3;
  const size_t count = 300007;  // int32: about 1.2 MiB per peer, many 64 KiB messages
  clbtest::LogLines log;
  auto errors = runRanks(n, clbTransportVerbs, [&](int r, clbComm_t comm) {
    // Several calls: the first messages of a pair may go over its TCP connection while the
    // channel is set up (a send does not wait for that), the later ones over the channel.
    for (int round = 0; round < 6; round++) {
      std::vector<int32_t> out((size_t)n * count), in((size_t)n * count, -1);
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++) out[p * count + i] = (int32_t)(r * 1000003 + p * 7919 + round + (int64_t)i);
      ASSERT_EQ(clbAllToAll(out.data(), in.data(), count, clbInt32, comm, nullptr), clbSuccess) << clbGetLastError();
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++)
          ASSERT_EQ(in[p * count + i], (int32_t)(p * 1000003 + r * 7919 + round + (int64_t)i))
              << "round " << round << " from rank " << p << ", element " << i;
    }
  });
  lines = log.lines();
  expectInitOk(errors);
  for (int r = 0; r < n; r++)
    for (int p = 0; p < n; p++) {
      if (p == r) continue;
      const std::string want =
          "rank " + std::to_string(r) + ": point-to-point channel with rank " + std::to_string(p) + " over verbs";
      bool found = false;
      for (const std::string& l : lines) found = found || l == want;
      EXPECT_TRUE(found) << "no log line \"" << want << "\"";
    }
  for (const std::string& l : lines) EXPECT_FALSE(contains(l, "over TCP")) << l;
}

// A send returns as soon as the pair's staging takes it, before its peer is in any call with this
// rank: rank 0 sends to 1 then to 2, rank 1 receives from 2 then from 0, rank 2 receives from 0
// then sends to 1, each call alone. Rank 0's first send must not wait for rank 1 (busy waiting for
// rank 2, which waits for rank 0's second send). Over verbs the pair's channel is not set up at
// that point (it needs both ranks), so those messages go over the pair's TCP connection first.
TEST(PeerVerbs, ASendDoesNotWaitForItsPeerToSetTheChannelUp) {
  for (int transport : {clbTransportSocket, clbTransportVerbs}) {
    auto errors = runRanks(
        3, transport,
        [&](int r, clbComm_t comm) {
          std::vector<int64_t> a(1000), b(1000);
          auto fill = [](std::vector<int64_t>& v, int from, int to) {
            for (size_t i = 0; i < v.size(); i++) v[i] = from * 1000003 + to * 7919 + (int64_t)i;
          };
          auto expect = [](const std::vector<int64_t>& v, int from, int to) {
            for (size_t i = 0; i < v.size(); i++)
              if (v[i] != from * 1000003 + to * 7919 + (int64_t)i) return false;
            return true;
          };
          if (r == 0) {
            fill(a, 0, 1);
            fill(b, 0, 2);
            ASSERT_EQ(clbSend(a.data(), a.size(), clbInt64, 1, comm, nullptr), clbSuccess) << clbGetLastError();
            ASSERT_EQ(clbSend(b.data(), b.size(), clbInt64, 2, comm, nullptr), clbSuccess) << clbGetLastError();
          } else if (r == 1) {
            ASSERT_EQ(clbRecv(a.data(), a.size(), clbInt64, 2, comm, nullptr), clbSuccess) << clbGetLastError();
            ASSERT_EQ(clbRecv(b.data(), b.size(), clbInt64, 0, comm, nullptr), clbSuccess) << clbGetLastError();
            EXPECT_TRUE(expect(a, 2, 1)) << "from rank 2";
            EXPECT_TRUE(expect(b, 0, 1)) << "from rank 0";
          } else {
            ASSERT_EQ(clbRecv(a.data(), a.size(), clbInt64, 0, comm, nullptr), clbSuccess) << clbGetLastError();
            EXPECT_TRUE(expect(a, 0, 2)) << "from rank 0";
            fill(b, 2, 1);
            ASSERT_EQ(clbSend(b.data(), b.size(), clbInt64, 1, comm, nullptr), clbSuccess) << clbGetLastError();
          }
          // Then many messages both ways on every pair, over the channels once they are up.
          for (int round = 0; round < 20; round++) {
            std::vector<int64_t> out(3000), in(3000);
            const int next = (r + 1) % 3, prev = (r + 2) % 3;
            fill(out, r * 10 + round, next);
            ASSERT_EQ(clbGroupStart(), clbSuccess);
            ASSERT_EQ(clbSend(out.data(), out.size(), clbInt64, next, comm, nullptr), clbSuccess);
            ASSERT_EQ(clbRecv(in.data(), in.size(), clbInt64, prev, comm, nullptr), clbSuccess);
            ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
            ASSERT_TRUE(expect(in, prev * 10 + round, r)) << "round " << round;
          }
        },
        64 << 10, CLB_DEFAULT_STAGING_CAP_BYTES, 10000);
    expectInitOk(errors);
  }
}

// Ranks as processes: 3 over shm, 4 over socket, 3 over socket with TLS (every handshake costs) and
// 2 over the verbs stand-in (its emulated links are the slowest to set up).
TEST_P(PeerProcesses, RingAndAllToAllAcrossProcesses) {
  NET_SCOPE();  // the rank processes inherit the scope's environment (TLS and its files)
  const Net net = GetParam();
  runProcesses(net == Net::kShm ? 3 : net == Net::kSocket ? 4 : net == Net::kSocketTls ? 3 : 2, transport);
}

INSTANTIATE_TRANSPORTS(PeerGroups);
INSTANTIATE_TRANSPORTS(PeerSendRecv);
INSTANTIATE_TRANSPORTS(PeerAllToAllv);
INSTANTIATE_TRANSPORTS(PeerAllToAll);
INSTANTIATE_TRANSPORTS(PeerRooted);
INSTANTIATE_TRANSPORTS(PeerBadInput);
INSTANTIATE_TRANSPORTS(PeerMemory);
INSTANTIATE_TRANSPORTS(PeerProcesses);

}  // namespace
