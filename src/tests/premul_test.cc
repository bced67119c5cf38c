// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// PreMulSum operations (clbRedOpCreatePreMulSum) on host buffers, ranks as threads: allReduce,
// reduceScatter and reduce with a different scalar on every rank, both residences (host
// immediate; "device" with a host pointer, read when the call runs), in place and not, checked
// element by element against a reference computed here; the refusals, groups, memory and the
// mismatch with a plain sum; every case over every transport (shm, socket, socket with TLS, the
// verbs stand-in).
//
// The references are exact (tests/premul_reference.h says how).
#include <gtest/gtest.h>

#include <atomic>

#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "colibri/colibri.h"
#include "base/dtype.h"
#include "tests/premul_reference.h"
#include "tests/test_ranks.h"
#include "tests/test_transports.h"

namespace {

using namespace clbtest::premul;
using clbtest::Net;

// One rank's calls: for each residence an operation with this rank's scalar, then allReduce,
// reduceScatter and reduce (root: the last rank), in place with the immediate scalar and out of
// place with the "device" one, every element compared with the reference.
template <class R>
void rankCalls(int r, int n, clbComm_t comm, size_t count) {
  using S = typename R::S;
  const bool exact = exactFor(n);
  const clbDataType_t T = R::kType;
  auto sum = [n](size_t i) { return sumAt<R>(n, i); };
  for (int residence : {clbScalarHostImmediate, clbScalarDevice}) {
    const bool immediate = residence == clbScalarHostImmediate;
    const std::string what = std::string(immediate ? "host immediate" : "device (host pointer)") + ", rank " +
                             std::to_string(r) + " of " + std::to_string(n) + ", count " + std::to_string(count);
    // The scalar is read at creation (immediate) or when each call runs (device): it changes in between.
    S store = immediate ? R::scalar(r, exact) : R::junk();
    clbRedOp_t op = clbSum;
    ASSERT_EQ(clbRedOpCreatePreMulSum(&op, &store, T, residence, comm), clbSuccess) << clbGetLastError();
    ASSERT_GE((int)op, (int)clbNumOps);
    store = immediate ? R::junk() : R::scalar(r, exact);

    // allReduce: in place (immediate), out of place (device), the input then untouched.
    std::vector<S> in(count), out(count, R::junk());
    for (size_t i = 0; i < count; i++) in[i] = R::input(r, i, exact);
    S* result = immediate ? in.data() : out.data();
    ASSERT_EQ(clbAllReduce(in.data(), result, count, T, op, comm, nullptr), clbSuccess)
        << what << ": " << clbGetLastError();
    for (size_t i = 0; i < count; i++) {
      const S want = sum(i);
      ASSERT_TRUE(same(result[i], want)) << "allReduce, " << what << ", element " << i << ": " << show(result[i])
                                         << " instead of " << show(want);
      if (!immediate) {
        ASSERT_TRUE(same(in[i], R::input(r, i, exact))) << "allReduce changed send, element " << i;
      }
    }

    // reduceScatter: in place (recv = send + rank x count), out of place.
    std::vector<S> big(count * n), rs(count, R::junk());
    for (size_t j = 0; j < big.size(); j++) big[j] = R::input(r, j, exact);
    S* rsOut = immediate ? big.data() + r * count : rs.data();
    ASSERT_EQ(clbReduceScatter(big.data(), rsOut, count, T, op, comm, nullptr), clbSuccess)
        << what << ": " << clbGetLastError();
    for (size_t i = 0; i < count; i++) {
      const S want = sum(r * count + i);
      ASSERT_TRUE(same(rsOut[i], want)) << "reduceScatter, " << what << ", element " << i << ": " << show(rsOut[i])
                                        << " instead of " << show(want);
    }
    for (size_t j = 0; j < big.size() && !immediate; j++)
      ASSERT_TRUE(same(big[j], R::input(r, j, exact))) << "reduceScatter changed send, element " << j;

    // reduce to the last rank: in place there (immediate), out of place; the others' send untouched.
    const int root = n - 1;
    for (size_t i = 0; i < count; i++) in[i] = R::input(r, i, exact);
    std::vector<S> red(count, R::junk());
    S* redOut = r != root ? nullptr : immediate ? in.data() : red.data();
    ASSERT_EQ(clbReduce(in.data(), redOut, count, T, op, root, comm, nullptr), clbSuccess)
        << what << ": " << clbGetLastError();
    for (size_t i = 0; i < count && r == root; i++) {
      const S want = sum(i);
      ASSERT_TRUE(same(redOut[i], want)) << "reduce, " << what << ", element " << i << ": " << show(redOut[i])
                                         << " instead of " << show(want);
    }
    for (size_t i = 0; i < count && r != root; i++)
      ASSERT_TRUE(same(in[i], R::input(r, i, exact))) << "reduce changed send, element " << i;

    ASSERT_EQ(clbRedOpDestroy(op, comm), clbSuccess) << clbGetLastError();
  }
}

void runRanks(Net net, int n, const std::function<void(int, clbComm_t)>& body, int64_t timeoutMs = 30000) {
  std::vector<std::string> errors = clbtest::runOver(net, n, timeoutMs, nullptr, body);
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

class PreMulSum : public ::testing::TestWithParam<std::tuple<int, Net, int, size_t>> {};  // ranks, net, type, count

TEST_P(PreMulSum, AllReduceReduceScatterAndReduceMatchTheReference) {
  auto [n, net, type, count] = GetParam();
  CLB_TRANSPORT_SCOPE(scope, net);
  runRanks(net, n, [&, n = n, type = type, count = count](int r, clbComm_t comm) {
    switch (type) {
      case clbFloat32: rankCalls<F32>(r, n, comm, count); break;
      case clbFloat64: rankCalls<F64>(r, n, comm, count); break;
      case clbBfloat16: rankCalls<BF16>(r, n, comm, count); break;
      case clbInt32: rankCalls<I32>(r, n, comm, count); break;
      default: FAIL() << "type " << type;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Host, PreMulSum,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::ValuesIn(clbtest::allNets()),
                                            ::testing::Values(clbFloat32, clbFloat64, clbBfloat16, clbInt32),
                                            ::testing::Values(size_t(0), size_t(1), size_t(7), size_t(1000003))),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  clbtest::netName(std::get<1>(info.param)) + "_" +
                                  clb::typeName(std::get<2>(info.param)) + "_c" +
                                  std::to_string(std::get<3>(info.param));
                         });

// A communicator of one rank over `net`, in this thread.
clbComm_t soloComm(Net net) {
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) return nullptr;
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = clbtest::netTransport(net);
  clbComm_t comm = nullptr;
  if (clbCommInitRank(&comm, &id, 0, 1, &cfg) != clbSuccess) return nullptr;
  return comm;
}

// Expects `rc` to be INVALID_ARGUMENT with a message holding every one of `words`.
void refused(clbResult_t rc, const std::vector<std::string>& words, const std::string& what) {
  const std::string msg = clbGetLastError();
  EXPECT_EQ(rc, clbInvalidArgument) << what << ": " << msg;
  for (const std::string& w : words) EXPECT_NE(msg.find(w), std::string::npos) << what << ": '" << w << "' in " << msg;
}

// The calls below over every transport (the suite above is the reference matrix).
class PreMulSumCalls : public ::testing::TestWithParam<Net> {};

TEST_P(PreMulSumCalls, BadInputIsRefusedNamingTheArgument) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  clbComm_t a = soloComm(GetParam()), b = soloComm(GetParam()), c = soloComm(GetParam());
  ASSERT_TRUE(a && b && c) << clbGetLastError();
  float s = 2.0f;
  clbRedOp_t op = clbSum;
  // The creation's own arguments.
  refused(clbRedOpCreatePreMulSum(&op, nullptr, clbFloat32, clbScalarHostImmediate, a), {"scalar is NULL"},
          "NULL scalar");
  refused(clbRedOpCreatePreMulSum(nullptr, &s, clbFloat32, clbScalarHostImmediate, a), {"op (output) is NULL"},
          "NULL op");
  refused(clbRedOpCreatePreMulSum(&op, &s, clbFloat32, 7, a), {"residence 7"}, "bad residence");
  refused(clbRedOpCreatePreMulSum(&op, &s, (clbDataType_t)42, clbScalarHostImmediate, a), {"data type 42"}, "bad type");
  refused(clbRedOpCreatePreMulSum(&op, &s, clbFloat32, clbScalarHostImmediate, nullptr), {"communicator is NULL"},
          "NULL communicator");
  EXPECT_EQ(op, clbSum) << "nothing made";

  ASSERT_EQ(clbRedOpCreatePreMulSum(&op, &s, clbFloat32, clbScalarHostImmediate, a), clbSuccess) << clbGetLastError();
  const std::string name = "op " + std::to_string((int)op);
  float x[4] = {1, 2, 3, 4}, y[4] = {-1, -1, -1, -1};
  int32_t ix[4] = {1, 2, 3, 4}, iy[4] = {-1, -1, -1, -1};
  // Another communicator's operation, in every call that takes one.
  refused(clbAllReduce(x, y, 4, clbFloat32, op, b, nullptr), {name, "another communicator"}, "allReduce on b");
  refused(clbReduceScatter(x, y, 4, clbFloat32, op, b, nullptr), {name, "another communicator"}, "reduceScatter on b");
  refused(clbReduce(x, y, 4, clbFloat32, op, 0, b, nullptr), {name, "another communicator"}, "reduce on b");
  refused(clbRedOpDestroy(op, b), {name, "another communicator"}, "destroy on b");
  // A type that is not the operation's.
  refused(clbAllReduce(ix, iy, 4, clbInt32, op, a, nullptr), {name, "float32", "int32"}, "allReduce int32");
  refused(clbReduceScatter(ix, iy, 4, clbInt32, op, a, nullptr), {name, "float32", "int32"}, "reduceScatter int32");
  refused(clbReduce(ix, iy, 4, clbInt32, op, 0, a, nullptr), {name, "float32", "int32"}, "reduce int32");
  for (int i = 0; i < 4; i++) EXPECT_EQ(y[i], -1.0f) << "nothing written";
  for (int i = 0; i < 4; i++) EXPECT_EQ(iy[i], -1) << "nothing written";
  // It works where it belongs, with a count of 0 too.
  ASSERT_EQ(clbAllReduce(x, y, 4, clbFloat32, op, a, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(y[3], 8.0f);
  ASSERT_EQ(clbAllReduce(nullptr, nullptr, 0, clbFloat32, op, a, nullptr), clbSuccess) << clbGetLastError();
  // A built-in operation is not destroyed; a destroyed one is refused everywhere, also again.
  refused(clbRedOpDestroy(clbSum, a), {"op 0", "built-in"}, "destroy sum");
  ASSERT_EQ(clbRedOpDestroy(op, a), clbSuccess) << clbGetLastError();
  refused(clbAllReduce(x, y, 4, clbFloat32, op, a, nullptr), {name, "destroyed"}, "allReduce after destroy");
  refused(clbReduce(x, y, 4, clbFloat32, op, 0, a, nullptr), {name, "destroyed"}, "reduce after destroy");
  refused(clbRedOpDestroy(op, a), {name, "destroyed"}, "destroy twice");
  // A value nobody made, and a negative one.
  refused(clbAllReduce(x, y, 4, clbFloat32, (clbRedOp_t)0x7ffffff0, a, nullptr),
          {"unknown reduction op 2147483632", "clbRedOpCreatePreMulSum"}, "value never made");
  refused(clbAllReduce(x, y, 4, clbFloat32, (clbRedOp_t)-3, a, nullptr), {"op -3"}, "negative op");
  // The operations of a destroyed communicator are gone with it.
  clbRedOp_t opC = clbSum;
  ASSERT_EQ(clbRedOpCreatePreMulSum(&opC, &s, clbFloat32, clbScalarDevice, c), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbCommDestroy(c), clbSuccess);
  refused(clbAllReduce(x, y, 4, clbFloat32, opC, a, nullptr), {"op " + std::to_string((int)opC), "destroyed"},
          "an operation of a destroyed communicator");
  // Calls that take no operation are unaffected, and the communicators stay usable.
  ASSERT_EQ(clbAllReduce(x, y, 4, clbFloat32, clbSum, a, nullptr), clbSuccess) << clbGetLastError();
  ASSERT_EQ(clbAllReduce(x, y, 4, clbFloat32, clbSum, b, nullptr), clbSuccess) << clbGetLastError();
  EXPECT_EQ(y[2], 3.0f);
  clbCommDestroy(a);
  clbCommDestroy(b);
}

// Inside a group a call takes its operation when it is recorded, so the operation may be destroyed
// right after the call (PyTorch does so); a "device" scalar is read when the group runs.
TEST_P(PreMulSumCalls, InAGroupTheOperationMayBeDestroyedOnceTheCallReturned) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  runRanks(GetParam(), 2, [](int r, clbComm_t comm) {
    const size_t count = 1000;
    float immediate = r == 0 ? 0.5f : 3.0f;
    float later = -1.0f;  // device residence: the value at the group's end counts
    std::vector<float> in(count * 2), ar(count), rs(count), red(count);
    for (size_t i = 0; i < in.size(); i++) in[i] = (float)(i % 17) + r;
    ASSERT_EQ(clbGroupStart(), clbSuccess);
    clbRedOp_t op1 = clbSum, op2 = clbSum;
    ASSERT_EQ(clbRedOpCreatePreMulSum(&op1, &immediate, clbFloat32, clbScalarHostImmediate, comm), clbSuccess)
        << clbGetLastError();
    ASSERT_EQ(clbRedOpCreatePreMulSum(&op2, &later, clbFloat32, clbScalarDevice, comm), clbSuccess)
        << clbGetLastError();
    ASSERT_EQ(clbAllReduce(in.data(), ar.data(), count, clbFloat32, op1, comm, nullptr), clbSuccess)
        << clbGetLastError();
    ASSERT_EQ(clbReduceScatter(in.data(), rs.data(), count, clbFloat32, op2, comm, nullptr), clbSuccess)
        << clbGetLastError();
    ASSERT_EQ(clbReduce(in.data(), red.data(), count, clbFloat32, op1, 1, comm, nullptr), clbSuccess)
        << clbGetLastError();
    ASSERT_EQ(clbRedOpDestroy(op1, comm), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbRedOpDestroy(op2, comm), clbSuccess) << clbGetLastError();
    later = r == 0 ? 2.0f : -0.25f;
    ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
    auto x = [](int p, size_t i) { return (float)(i % 17) + p; };
    for (size_t i = 0; i < count; i++) {
      ASSERT_EQ(ar[i], 0.5f * x(0, i) + 3.0f * x(1, i)) << "allReduce element " << i;
      ASSERT_EQ(rs[i], 2.0f * x(0, r * count + i) + -0.25f * x(1, r * count + i)) << "reduceScatter element " << i;
      if (r == 1) {
        ASSERT_EQ(red[i], 0.5f * x(0, i) + 3.0f * x(1, i)) << "reduce element " << i;
      }
    }
  });
}

// The host scratch for scaled inputs (reduceScatter: nranks x count elements) is counted in
// memStats and given back by trim; allReduce needs none (it scales into recv).
TEST_P(PreMulSumCalls, HostScratchIsCountedAndTrimmed) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  runRanks(GetParam(), 2, [](int r, clbComm_t comm) {
    const size_t count = 1 << 18;
    std::vector<float> in(count * 2, 1.0f), out(count);
    float s = 0.5f;
    clbRedOp_t op = clbSum;
    ASSERT_EQ(clbRedOpCreatePreMulSum(&op, &s, clbFloat32, clbScalarHostImmediate, comm), clbSuccess);
    ASSERT_EQ(clbReduceScatter(in.data(), out.data(), count, clbFloat32, clbSum, comm, nullptr), clbSuccess);
    ASSERT_EQ(clbAllReduce(in.data(), out.data(), count, clbFloat32, op, comm, nullptr), clbSuccess);
    clbMemStats_t before{}, after{}, trimmed{};
    ASSERT_EQ(clbCommMemStats(comm, &before), clbSuccess);
    ASSERT_EQ(clbReduceScatter(in.data(), out.data(), count, clbFloat32, op, comm, nullptr), clbSuccess)
        << clbGetLastError();
    EXPECT_EQ(out[0], 1.0f);
    ASSERT_EQ(clbCommMemStats(comm, &after), clbSuccess);
    const int64_t scratch = (int64_t)(count * 2 * sizeof(float));
    EXPECT_GE(after.hostBytes - before.hostBytes, scratch) << "the scaled input is counted";
    EXPECT_LT(after.hostBytes - before.hostBytes, scratch + 8192) << "and nothing much beyond it";
    ASSERT_EQ(clbCommTrim(comm), clbSuccess) << clbGetLastError();
    ASSERT_EQ(clbCommMemStats(comm, &trimmed), clbSuccess);
    EXPECT_LE(trimmed.hostBytes, after.hostBytes - scratch) << "trim gave it back";
    // Made again by the next call that needs it.
    ASSERT_EQ(clbReduceScatter(in.data(), out.data(), count, clbFloat32, op, comm, nullptr), clbSuccess)
        << clbGetLastError();
    EXPECT_EQ(out[count - 1], 1.0f);
    ASSERT_EQ(clbRedOpDestroy(op, comm), clbSuccess);
  });
}

// A rank in a PreMulSum and one in a plain sum make different calls: both fail, and a rank that
// sees it names both (docs/semantics.md, "Ranks that disagree"). Over shm both see it (the direct
// algorithm's records, which every rank reads); over the ring the rank that reads the other's
// message sees it and fails the communicator, and the other is told which rank failed.
TEST_P(PreMulSumCalls, APlainSumOnAnotherRankIsAMismatch) {
  CLB_TRANSPORT_SCOPE(scope, GetParam());
  std::atomic<int> named{0};
  runRanks(
      GetParam(), 2,
      [&named](int r, clbComm_t comm) {
        std::vector<float> in(64, 1.0f), out(64);
        float s = 2.0f;
        clbRedOp_t op = clbSum;
        ASSERT_EQ(clbRedOpCreatePreMulSum(&op, &s, clbFloat32, clbScalarHostImmediate, comm), clbSuccess);
        clbResult_t rc = clbAllReduce(in.data(), out.data(), 64, clbFloat32, r == 0 ? op : clbSum, comm, nullptr);
        const std::string msg = clbGetLastError();
        EXPECT_EQ(rc, clbRemoteError) << msg;
        if (msg.find("premulsum") != std::string::npos && msg.find("sum") != std::string::npos)
          named++;
        else
          EXPECT_NE(msg.find("rank " + std::to_string(1 - r) + " failed"), std::string::npos) << msg;
      },
      10000);
  if (GetParam() == Net::kShm)
    EXPECT_EQ(named.load(), 2) << "over shm every rank reads the other's record";
  else
    EXPECT_GE(named.load(), 1) << "no rank named both calls";
}

INSTANTIATE_TRANSPORTS(PreMulSumCalls);

}  // namespace
