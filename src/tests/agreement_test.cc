// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks that disagree on a call's arguments (root, count, type, op, the collective itself), on
// one rank only, over every transport, on host buffers: the call never returns success with data
// that its own arguments do not define, at least one rank fails at once (not at the timeout),
// and the next call, made alike by every rank, never delivers what the disagreeing call left
// behind (it fails, the communicator being failed, or it is right element by element). The
// disagreements the hostile tester found: a scatter whose ranks pass different roots returned
// success everywhere, and the next correct scatter delivered the stale block; a broadcast with
// different roots over socket returned success with different data on different ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_transports.h"

namespace {

using clbtest::Net;
using Clock = std::chrono::steady_clock;

constexpr int64_t kTimeoutMs = 4000;

int32_t value(int rank, size_t i) { return (int32_t)(rank * 100000 + (int32_t)i * 7 + 1); }

// What one rank saw: its call's result, message, how long it took, and whether its output is
// what its own arguments define (checked by the case).
struct Seen {
  clbResult_t rc = clbSuccess;
  std::string msg;
  double ms = 0;
  bool rightForItsArgs = true;
};

struct Case {
  const char* name;
  int nranks;
  size_t count;  // elements per rank's block
  // Makes rank r's call (disagreeing on one rank) and says whether a success left the output its
  // own arguments define.
  std::function<clbResult_t(int r, int n, clbComm_t comm, size_t count, bool* right)> call;
};

// The next call, every rank alike: an allGather of every rank's block, checked on success.
clbResult_t nextCall(int r, int n, clbComm_t comm, size_t count, bool* right) {
  std::vector<int32_t> in(count), out(count * n, -1);
  for (size_t i = 0; i < count; i++) in[i] = value(r, i) + 3;
  const clbResult_t rc = clbAllGather(in.data(), out.data(), count, clbInt32, comm, nullptr);
  if (rc == clbSuccess)
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) *right = *right && out[p * count + i] == value(p, i) + 3;
  return rc;
}

// A scatter, then a second one that every rank makes alike: the disagreement's leftovers must not
// be delivered by it.
clbResult_t scatterAfterRootDisagreement(int r, int n, clbComm_t comm, size_t count, bool* right, int root) {
  std::vector<int32_t> whole(count * n), part(count, -1);
  for (size_t i = 0; i < whole.size(); i++) whole[i] = value(r, i);
  const clbResult_t rc = clbScatter(whole.data(), part.data(), count, clbInt32, root, comm, nullptr);
  if (rc == clbSuccess)
    for (size_t i = 0; i < count; i++) *right = *right && part[i] == value(root, r * count + i);
  return rc;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Broadcast: every rank thinks it is the root (2 ranks), or rank 1 alone names another root.
  for (size_t count : {size_t(16), size_t(100000)})  // shm: direct, then ring
    for (int n : {2, 3}) {
      v.push_back({"broadcast_roots", n, count, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                     const int root = nr == 2 ? r : (r == 1 ? 1 : 0);
                     std::vector<int32_t> in(cnt), out(cnt, -1);
                     for (size_t i = 0; i < cnt; i++) in[i] = value(r, i);
                     const clbResult_t rc = clbBroadcast(in.data(), out.data(), cnt, clbInt32, root, comm, nullptr);
                     if (rc == clbSuccess)
                       for (size_t i = 0; i < cnt; i++) *right = *right && out[i] == value(root, i);
                     return rc;
                   }});
    }
  for (int n : {2, 3})
    v.push_back({"scatter_roots", n, 64, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                   const int root = nr == 2 ? r : (r == 1 ? 1 : 0);
                   return scatterAfterRootDisagreement(r, nr, comm, cnt, right, root);
                 }});
  v.push_back({"gather_roots", 3, 64, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 const int root = r == 2 ? 2 : 0;
                 std::vector<int32_t> in(cnt), whole(cnt * nr, -1);
                 for (size_t i = 0; i < cnt; i++) in[i] = value(r, i);
                 const clbResult_t rc = clbGather(in.data(), whole.data(), cnt, clbInt32, root, comm, nullptr);
                 if (rc == clbSuccess && r == root)
                   for (int p = 0; p < nr; p++)
                     for (size_t i = 0; i < cnt; i++) *right = *right && whole[p * cnt + i] == value(p, i);
                 return rc;
               }});
  v.push_back({"allreduce_count", 3, 1000, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 const size_t mine = r == 1 ? cnt + 1 : cnt;
                 std::vector<int32_t> in(mine), out(mine, -1);
                 for (size_t i = 0; i < mine; i++) in[i] = value(r, i);
                 const clbResult_t rc = clbAllReduce(in.data(), out.data(), mine, clbInt32, clbSum, comm, nullptr);
                 if (rc == clbSuccess)
                   for (size_t i = 0; i < mine; i++) {
                     int32_t want = 0;
                     for (int p = 0; p < nr; p++) want += value(p, i);
                     *right = *right && out[i] == want;
                   }
                 return rc;
               }});
  v.push_back({"allreduce_op", 3, 1000, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 std::vector<int32_t> in(cnt), out(cnt, -1);
                 for (size_t i = 0; i < cnt; i++) in[i] = value(r, i);
                 const clbRedOp_t op = r == 2 ? clbMax : clbSum;
                 const clbResult_t rc = clbAllReduce(in.data(), out.data(), cnt, clbInt32, op, comm, nullptr);
                 if (rc == clbSuccess)
                   for (size_t i = 0; i < cnt; i++) {
                     int32_t want = op == clbMax ? value(0, i) : 0;
                     for (int p = 0; p < nr; p++)
                       want = op == clbMax ? std::max(want, value(p, i)) : want + value(p, i);
                     *right = *right && out[i] == want;
                   }
                 return rc;
               }});
  v.push_back({"allreduce_type", 2, 1000, [](int r, int, clbComm_t comm, size_t cnt, bool* right) {
                 // Same bytes, another type: int32 on rank 0, float32 on rank 1.
                 std::vector<int32_t> in(cnt, 1), out(cnt, -1);
                 const clbDataType_t t = r == 1 ? clbFloat32 : clbInt32;
                 const clbResult_t rc = clbAllReduce(in.data(), out.data(), cnt, t, clbSum, comm, nullptr);
                 if (rc == clbSuccess) *right = false;  // no answer is right for both types
                 return rc;
               }});
  v.push_back({"allgather_vs_broadcast", 2, 1000, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 std::vector<int32_t> in(cnt * nr), out(cnt * nr, -1);
                 for (size_t i = 0; i < in.size(); i++) in[i] = value(r, i);
                 const clbResult_t rc = r == 0
                                            ? clbAllGather(in.data(), out.data(), cnt, clbInt32, comm, nullptr)
                                            : clbBroadcast(in.data(), out.data(), cnt * nr, clbInt32, 1, comm, nullptr);
                 if (rc == clbSuccess) *right = false;  // the two calls cannot both complete rightly
                 return rc;
               }});
  // (Rank 1's broadcast messages are larger than the receive slots rank 0's allGather prepared:
  // over verbs the sender's notice of its message size is what shows the disagreement at once.)
  v.push_back({"alltoall_count", 3, 100, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 const size_t mine = r == 0 ? cnt + 2 : cnt;
                 std::vector<int32_t> in(mine * nr), out(mine * nr, -1);
                 for (size_t i = 0; i < in.size(); i++) in[i] = value(r, i);
                 const clbResult_t rc = clbAllToAll(in.data(), out.data(), mine, clbInt32, comm, nullptr);
                 if (rc == clbSuccess)
                   for (int p = 0; p < nr; p++)
                     for (size_t i = 0; i < mine; i++) *right = *right && out[p * mine + i] == value(p, r * mine + i);
                 return rc;
               }});
  v.push_back({"reduce_roots", 3, 500, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 const int root = r == 2 ? 2 : 0;
                 std::vector<int32_t> in(cnt), out(cnt, -1);
                 for (size_t i = 0; i < cnt; i++) in[i] = value(r, i);
                 const clbResult_t rc = clbReduce(in.data(), out.data(), cnt, clbInt32, clbSum, root, comm, nullptr);
                 if (rc == clbSuccess && r == root)
                   for (size_t i = 0; i < cnt; i++) {
                     int32_t want = 0;
                     for (int p = 0; p < nr; p++) want += value(p, i);
                     *right = *right && out[i] == want;
                   }
                 return rc;
               }});
  v.push_back({"reduce_op", 2, 500, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 std::vector<int32_t> in(cnt), out(cnt, -1);
                 for (size_t i = 0; i < cnt; i++) in[i] = value(r, i);
                 const clbRedOp_t op = r == 1 ? clbMax : clbSum;
                 const clbResult_t rc = clbReduce(in.data(), out.data(), cnt, clbInt32, op, 0, comm, nullptr);
                 if (rc == clbSuccess && r == 0)
                   for (size_t i = 0; i < cnt; i++) *right = *right && out[i] == value(0, i) + value(1, i);
                 (void)nr;
                 return rc;
               }});
  for (size_t count : {size_t(64), size_t(100000)})
    v.push_back({"reducescatter_op", 3, count, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                   std::vector<int32_t> in(cnt * nr), out(cnt, -1);
                   for (size_t i = 0; i < in.size(); i++) in[i] = value(r, i);
                   const clbRedOp_t op = r == 1 ? clbMax : clbSum;
                   const clbResult_t rc = clbReduceScatter(in.data(), out.data(), cnt, clbInt32, op, comm, nullptr);
                   if (rc == clbSuccess)
                     for (size_t i = 0; i < cnt; i++) {
                       int32_t want = op == clbMax ? value(0, r * cnt + i) : 0;
                       for (int p = 0; p < nr; p++)
                         want = op == clbMax ? std::max(want, value(p, r * cnt + i)) : want + value(p, r * cnt + i);
                       *right = *right && out[i] == want;
                     }
                   return rc;
                 }});
  v.push_back({"reducescatter_count", 2, 1000, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 const size_t mine = r == 1 ? cnt + 5 : cnt;
                 std::vector<int32_t> in(mine * nr), out(mine, -1);
                 for (size_t i = 0; i < in.size(); i++) in[i] = value(r, i);
                 const clbResult_t rc = clbReduceScatter(in.data(), out.data(), mine, clbInt32, clbSum, comm, nullptr);
                 if (rc == clbSuccess)
                   for (size_t i = 0; i < mine; i++) {
                     int32_t want = 0;
                     for (int p = 0; p < nr; p++) want += value(p, r * mine + i);
                     *right = *right && out[i] == want;
                   }
                 return rc;
               }});
  // All-to-allv: rank 1 sends rank 0 two elements more than rank 0 expects from it.
  v.push_back({"alltoallv_counts", 2, 100, [](int r, int nr, clbComm_t comm, size_t cnt, bool* right) {
                 std::vector<size_t> sc(nr, cnt), rc_(nr, cnt), sd(nr), rd(nr);
                 if (r == 1) sc[0] = cnt + 2;
                 for (int p = 0; p < nr; p++) sd[p] = p * (cnt + 2), rd[p] = p * (cnt + 2);
                 std::vector<int32_t> in(nr * (cnt + 2)), out(nr * (cnt + 2), -1);
                 for (size_t i = 0; i < in.size(); i++) in[i] = value(r, i);
                 const clbResult_t rc = clbAllToAllv(in.data(), sc.data(), sd.data(), out.data(), rc_.data(), rd.data(),
                                                     clbInt32, comm, nullptr);
                 if (rc == clbSuccess)
                   for (int p = 0; p < nr; p++)
                     for (size_t i = 0; i < rc_[p]; i++)
                       *right = *right && out[rd[p] + i] == value(p, r * (cnt + 2) + i);
                 return rc;
               }});
  // A send and its receive of the same bytes but another type.
  v.push_back({"sendrecv_type", 2, 1000, [](int r, int, clbComm_t comm, size_t cnt, bool* right) {
                 std::vector<int32_t> buf(cnt, -1);
                 for (size_t i = 0; i < cnt && r == 0; i++) buf[i] = value(0, i);
                 const clbResult_t rc = r == 0 ? clbSend(buf.data(), cnt, clbInt32, 1, comm, nullptr)
                                               : clbRecv(buf.data(), cnt, clbFloat32, 0, comm, nullptr);
                 if (rc == clbSuccess && r == 1) *right = false;  // no int32 is a right float32 here
                 return rc;
               }});
  return v;
}

class Disagreement : public ::testing::TestWithParam<std::tuple<Net, int>> {};

TEST_P(Disagreement, NeverSucceedsWithDataItsArgumentsDoNotDefineAndLeavesNothingBehind) {
  const auto [net, index] = GetParam();
  CLB_TRANSPORT_SCOPE(scope, net);
  const Case c = cases()[index];
  std::vector<Seen> first(c.nranks), second(c.nranks);
  auto errors = clbtest::runOver(net, c.nranks, kTimeoutMs, {}, [&](int r, clbComm_t comm) {
    const auto t0 = Clock::now();
    first[r].rc = c.call(r, c.nranks, comm, c.count, &first[r].rightForItsArgs);
    first[r].ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (first[r].rc != clbSuccess) first[r].msg = clbGetLastError();
    second[r].rc = nextCall(r, c.nranks, comm, c.count, &second[r].rightForItsArgs);
    if (second[r].rc != clbSuccess) second[r].msg = clbGetLastError();
  });
  for (int r = 0; r < c.nranks; r++) ASSERT_EQ(errors[r], "") << "rank " << r;
  int failedAtOnce = 0;
  for (int r = 0; r < c.nranks; r++) {
    SCOPED_TRACE(std::string(c.name) + ", rank " + std::to_string(r));
    if (first[r].rc == clbSuccess)
      EXPECT_TRUE(first[r].rightForItsArgs) << "succeeded with data its arguments do not define";
    if (first[r].rc != clbSuccess && first[r].ms < kTimeoutMs / 2) failedAtOnce++;
    if (second[r].rc == clbSuccess) EXPECT_TRUE(second[r].rightForItsArgs) << "the next call delivered stale data";
    printf("%s n=%d count=%zu rank %d: %s (%.0f ms) %s | next: %s %s\n", c.name, c.nranks, c.count, r,
           clbGetErrorString(first[r].rc), first[r].ms, first[r].msg.substr(0, 160).c_str(),
           clbGetErrorString(second[r].rc), second[r].msg.substr(0, 100).c_str());
  }
  EXPECT_GE(failedAtOnce, 1) << "some rank must see the disagreement at once, not at its timeout";
}

INSTANTIATE_TEST_SUITE_P(Transports, Disagreement,
                         ::testing::Combine(::testing::ValuesIn(clbtest::allNets()),
                                            ::testing::Range(0, (int)cases().size())),
                         [](const ::testing::TestParamInfo<std::tuple<Net, int>>& i) {
                           const Case c = cases()[std::get<1>(i.param)];
                           return std::string(clbtest::netName(std::get<0>(i.param))) + "_" + c.name + "_n" +
                                  std::to_string(c.nranks) + "_c" + std::to_string(c.count);
                         });

}  // namespace
