// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Ranks in several processes that make different device calls: every rank's kernel must see it
// at once (REMOTE_ERROR from clbCommGetAsyncError naming both calls, long before the timeout),
// never finish with data its arguments do not define, and the communicator must refuse the next
// call. Ranks that share a process are compared by the host at their meeting before any launch
// (docs/device.md); between processes only the kernels meet, so the check is theirs (the call
// lines of ClbDevFlags). One rank deviates in each case, on every device path a call between
// processes takes: LL (in device and in host memory), the staged kernel (both), the copies.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "tests/cuda_test_util.h"

namespace {

void setPlacement(const std::string& path) {
  const bool viaHost = path == "viahost" || path == "viahoststaged";
  setenv("COLIBRI_DEVICE_PATH", path == "viahost" ? "auto" : path == "viahoststaged" ? "staged" : path.c_str(), 1);
  setenv("COLIBRI_DEVICE_P2P", viaHost ? "off" : "auto", 1);
  unsetenv("CLB_TEST_SPREAD");
}

constexpr int64_t kTimeoutMs = 30000;  // the communicator's; "at once" is under kAtOnceMs
constexpr int64_t kAtOnceMs = 5000;

// What rank `rank` calls in case `c` with base count `count`; `deviate` is the rank that differs.
enum class Kind { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kReduce, kBarrier };
struct DevCall {
  Kind kind = Kind::kAllReduce;
  size_t count = 0;
  clbDataType_t type = clbFloat32;
  clbRedOp_t op = clbSum;
  bool preMul = false;  // a PreMulSum (by 2) instead of op
  int root = 0;
};

DevCall callOf(const std::string& c, int rank, int deviate, size_t count) {
  DevCall k;
  k.count = count;
  const bool me = rank == deviate;
  if (c == "count" && me) k.count = count + 1;
  if (c == "op" && me) k.op = clbMax;
  if (c == "type" && me) k.type = clbInt32;
  if (c == "root") k.kind = Kind::kBroadcast, k.root = me ? deviate : 0;
  if (c == "collective" && me) k.kind = Kind::kAllGather;
  if (c == "path" && me) k.count = count * 256;  // beyond the LL limit: another kernel on this rank
  if (c == "premul" && me) k.preMul = true;
  if (c == "barrier") k.kind = me ? Kind::kBarrier : Kind::kAllReduce, k.count = 1, k.type = clbInt32;
  if (c == "rsop") k.kind = Kind::kReduceScatter, k.op = me ? clbMax : clbSum;
  if (c == "reduceroot") k.kind = Kind::kReduce, k.root = me ? deviate : 0;
  // Both ranks' first call beyond the LL limit, sized differently: the staging they would set up.
  if (c == "grow") k.count = me ? count * 1024 : count * 128;
  return k;
}

std::string describe(const DevCall& k) {
  const std::string type = k.type == clbInt32 ? "int32" : "float32", n = std::to_string(k.count);
  const std::string op = k.preMul ? "premulsum" : k.op == clbMax ? "max" : "sum";
  switch (k.kind) {
    case Kind::kBroadcast: return "broadcast of " + n + " " + type + " with root " + std::to_string(k.root);
    case Kind::kAllGather: return "allGather of " + n + " " + type + " per rank";
    case Kind::kReduceScatter: return "reduceScatter of " + n + " " + type + " per rank (" + op + ")";
    case Kind::kReduce: return "reduce of " + n + " " + type + " (" + op + ") with root " + std::to_string(k.root);
    case Kind::kBarrier: return "barrier";
    default: return "allReduce of " + n + " " + type + " (" + op + ")";
  }
}

clbResult_t issue(const DevCall& k, CUdeviceptr in, CUdeviceptr out, clbComm_t comm, CUstream s) {
  switch (k.kind) {
    case Kind::kBroadcast: return clbBroadcast((void*)in, (void*)out, k.count, k.type, k.root, comm, s);
    case Kind::kAllGather: return clbAllGather((void*)in, (void*)out, k.count, k.type, comm, s);
    case Kind::kReduceScatter: return clbReduceScatter((void*)in, (void*)out, k.count, k.type, k.op, comm, s);
    case Kind::kReduce: return clbReduce((void*)in, (void*)out, k.count, k.type, k.op, k.root, comm, s);
    case Kind::kBarrier: return clbBarrier(comm, s);
    default: break;
  }
  if (!k.preMul) return clbAllReduce((void*)in, (void*)out, k.count, k.type, k.op, comm, s);
  float two = 2.0f;
  clbRedOp_t op;
  if (clbRedOpCreatePreMulSum(&op, &two, k.type, clbScalarHostImmediate, comm) != clbSuccess) return clbInternalError;
  const clbResult_t rc = clbAllReduce((void*)in, (void*)out, k.count, k.type, op, comm, s);
  clbRedOpDestroy(op, comm);
  return rc;
}

// One rank process: a matching call first (the check must not refuse it), then the case's call,
// then a matching call that must be refused.
std::string agreementRank(const clbUniqueId& id, int rank, int n, const std::string& c, int deviate, size_t count) {
  const Driver* d = nullptr;
  CUstream stream = nullptr;
  clbComm_t comm = nullptr;
  if (std::string e = openRank(id, rank, n, &d, &stream, &comm, kTimeoutMs); !e.empty()) return e;
  const size_t most = count * 1024 * n + 64;  // room for every case's largest call (allGather's n blocks)
  CUdeviceptr in = 0, out = 0;
  CU_OK(d->cuMemAlloc(&in, most * 4));
  CU_OK(d->cuMemAlloc(&out, most * 4));
  std::vector<float> ones(most, 1.0f), got(count);
  CU_OK(upload(d, in, ones.data(), most * 4));
  std::string err;
  const DevCall same = callOf("none", rank, deviate, count);
  // "path": the staging is set up by a matching call first. Setting it up is a step every rank
  // takes over the host at the same call, so a rank alone in its first call beyond the LL limit
  // waits there, before any kernel, until the timeout (docs/semantics.md).
  if (c == "path" && issue(callOf("count", deviate, deviate, count * 256 - 1), in, out, comm, stream) != clbSuccess)
    err = std::string("the matching large call: ") + clbGetLastError();
  if (issue(same, in, out, comm, stream) != clbSuccess) err = std::string("the matching call: ") + clbGetLastError();
  CU_OK(d->cuStreamSynchronize(stream));
  CU_OK(d->cuMemcpyDtoH(got.data(), out, count * 4));
  for (size_t e = 0; e < count && err.empty(); e++)
    if (got[e] != (float)n) err = "the matching call: element " + std::to_string(e) + " = " + std::to_string(got[e]);
  const DevCall mine = callOf(c, rank, deviate, count);
  const auto t0 = std::chrono::steady_clock::now();
  if (err.empty()) {
    const clbResult_t rc = issue(mine, in, out, comm, stream);
    const std::string msg = clbGetLastError();
    CU_OK(d->cuStreamSynchronize(stream));
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    clbResult_t async = clbSuccess;
    const clbResult_t q = clbCommGetAsyncError(comm, &async);
    const std::string why = clbGetLastError();
    // The deviating rank names the others' call, the others the deviating rank's.
    const DevCall other = callOf(c, rank == deviate ? (deviate + 1) % n : deviate, deviate, count);
    if (c == "grow") {  // refused by the call itself, on every rank, before any kernel
      if (rc != clbInvalidUsage || msg.find("staging buffer of") == std::string::npos)
        err = "expected INVALID_USAGE naming the staging sizes, got " + std::to_string(rc) + ": " + msg;
    } else if (rc != clbSuccess)
      err = "the call itself failed (" + std::to_string(rc) + "): " + msg;
    else if (q != clbSuccess || async != clbRemoteError)
      err = "clbCommGetAsyncError gave " + std::to_string(async) + " (query " + std::to_string(q) + ") after " +
            std::to_string(ms) + " ms, not REMOTE_ERROR: " + why;
    else if (why.find(describe(mine)) == std::string::npos || why.find(describe(other)) == std::string::npos)
      err = "the error does not name '" + describe(mine) + "' and '" + describe(other) + "': " + why;
    else if (ms > kAtOnceMs)
      err = "seen after " + std::to_string(ms) + " ms, not at once (timeout " + std::to_string(kTimeoutMs) + " ms)";
  }
  if (err.empty()) {
    const clbResult_t rc = issue(same, in, out, comm, stream);
    if (rc == clbSuccess) err = "the call after the disagreement was accepted";
  }
  clbCommDestroy(comm);
  d->cuMemFree(in);
  d->cuMemFree(out);
  d->cuStreamDestroy(stream);
  return err;
}

}  // namespace

// The body of one rank process (started by DeviceAgreement); skipped when run on its own.
TEST(DeviceAgreementChild, Rank) {
  const char* spec = getenv("CLB_AGREE_CHILD");
  if (!spec) GTEST_SKIP() << "runs only as a child of DeviceAgreement";
  int rank = 0, n = 0, deviate = 0;
  unsigned long long count = 0;
  char c[32] = {0}, idHex[2 * CLB_UNIQUE_ID_BYTES + 1] = {0};
  ASSERT_EQ(sscanf(spec, "%d:%d:%d:%llu:%31[^:]:%256s", &rank, &n, &deviate, &count, c, idHex), 6);
  EXPECT_EQ(agreementRank(unhex(idHex), rank, n, c, deviate, count), "") << "rank " << rank;
}

// (path, case, ranks, base count)
using AgreeParam = std::tuple<std::string, std::string, int, size_t>;
class DeviceAgreement : public ::testing::TestWithParam<AgreeParam> {};

TEST_P(DeviceAgreement, ADeviatingRankIsSeenAtOnceByEveryRank) {
  if (!gpu()) GTEST_SKIP() << "no GPU here: " << why;
  const auto& [path, c, n, count] = GetParam();
  setPlacement(path);
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  const int deviate = n - 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    const std::string spec = std::to_string(r) + ":" + std::to_string(n) + ":" + std::to_string(deviate) + ":" +
                             std::to_string(count) + ":" + c + ":" + hex(id);
    pid_t pid = spawnGpuRank("DeviceAgreementChild.Rank", {"CLB_AGREE_CHILD=" + spec});
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  // Each child ends within its timeout (plus set-up) whatever happens; past that it is killed.
  expectRanksEnd(pids, std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs + 30000));
}

// LL ("auto": small calls between processes), the staged kernel, and the same in host memory
// (GPUs without peer access: LL, then the copies above the LL limit, and the staged kernel).
INSTANTIATE_TEST_SUITE_P(
    Paths, DeviceAgreement,
    ::testing::Values(AgreeParam{"auto", "count", 2, 1000}, AgreeParam{"auto", "op", 2, 1000},
                      AgreeParam{"auto", "type", 2, 1000}, AgreeParam{"auto", "root", 2, 1000},
                      AgreeParam{"auto", "collective", 2, 1000}, AgreeParam{"auto", "path", 2, 1000},
                      AgreeParam{"auto", "op", 3, 1000}, AgreeParam{"auto", "root", 3, 1000},
                      AgreeParam{"staged", "count", 2, 1000}, AgreeParam{"staged", "op", 2, 1000},
                      AgreeParam{"staged", "root", 2, 1000}, AgreeParam{"staged", "collective", 2, 1000},
                      AgreeParam{"viahost", "op", 2, 1000}, AgreeParam{"viahost", "count", 2, 1000},
                      AgreeParam{"viahost", "op", 2, 200000}, AgreeParam{"viahost", "count", 2, 200000},
                      AgreeParam{"viahost", "root", 2, 200000}, AgreeParam{"viahoststaged", "type", 2, 1000},
                      AgreeParam{"auto", "premul", 2, 1000}, AgreeParam{"staged", "premul", 2, 1000},
                      AgreeParam{"auto", "barrier", 2, 1}, AgreeParam{"auto", "rsop", 2, 1000},
                      AgreeParam{"staged", "rsop", 3, 1000}, AgreeParam{"auto", "reduceroot", 2, 1000},
                      AgreeParam{"staged", "reduceroot", 3, 1000}, AgreeParam{"auto", "grow", 2, 1000},
                      AgreeParam{"viahost", "grow", 2, 1000}),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" + std::to_string(std::get<2>(info.param)) +
             "ranks_c" + std::to_string(std::get<3>(info.param));
    });
