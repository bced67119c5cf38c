// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// libnccl.so.2 on Colibri, as NCCL's clients use it (this program links only that library): the
// symbols PyTorch 2.11 and nccl-tests import are all there and nothing of Colibri's own leaks out;
// ncclGetVersion; then ranks as threads with host buffers and a NULL stream (Colibri's extension,
// so that this runs without a GPU): every collective and point-to-point call with NCCL's type and
// operation numbers (which differ from Colibri's) checked element by element against values
// computed here, fp8 moved as bytes and refused for reductions, split with NCCL_SPLIT_NOCOLOR,
// ncclCommInitAll, a non-blocking config, PreMulSum, every call Colibri does not support refused with
// ncclInvalidUsage and a ncclGetLastError text saying so, and NCCL's variables mapped to Colibri's.
// What depends on the transport (a split refused on one rank, an abort of a non-blocking init)
// runs over all four (NcclTransports).
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <atomic>
#include <chrono>
#include <future>
#include <cstring>
#include <strings.h>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl.h"
#include "tests/test_tls.h"

extern char** environ;

namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(NcclInterface, ExportsEverySymbolItsClientsImportAndNothingElse) {
  void* lib = dlopen(CLB_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  // PyTorch 2.11's libtorch_cuda.so (nm -D --undefined-only), nccl-tests 2.19.6, vLLM-style wrappers.
  for (const char* name : {"ncclAllGather",
                           "ncclAllReduce",
                           "ncclAlltoAll",
                           "ncclBcast",
                           "ncclBroadcast",
                           "ncclCommAbort",
                           "ncclCommCount",
                           "ncclCommDeregister",
                           "ncclCommDestroy",
                           "ncclCommFinalize",
                           "ncclCommGetAsyncError",
                           "ncclCommInitAll",
                           "ncclCommInitRank",
                           "ncclCommInitRankConfig",
                           "ncclCommInitRankScalable",
                           "ncclCommRegister",
                           "ncclCommRevoke",
                           "ncclCommShrink",
                           "ncclCommSplit",
                           "ncclCommUserRank",
                           "ncclCommWindowDeregister",
                           "ncclCommWindowRegister",
                           "ncclDevCommCreate",
                           "ncclDevCommDestroy",
                           "ncclGetErrorString",
                           "ncclGetLastError",
                           "ncclGetUniqueId",
                           "ncclGetVersion",
                           "ncclGroupEnd",
                           "ncclGroupSimulateEnd",
                           "ncclGroupStart",
                           "ncclMemAlloc",
                           "ncclMemFree",
                           "ncclRecv",
                           "ncclRedOpCreatePreMulSum",
                           "ncclRedOpDestroy",
                           "ncclReduce",
                           "ncclReduceScatter",
                           "ncclSend",
                           "ncclGather",
                           "ncclScatter",
                           "ncclCommCuDevice"})
    EXPECT_NE(dlsym(lib, name), nullptr) << name << " is missing";
  // Colibri's own interface stays in libcolibri.so (which libnccl.so.2 links): none of it is
  // libnccl.so.2's (a lookup searches the library first, then what it links).
  Dl_info info{};
  for (const char* name : {"clbAllReduce", "clbCommInitRank", "clbGetLastError"}) {
    void* f = dlsym(lib, name);
    ASSERT_NE(f, nullptr) << name << " (from libcolibri.so.0)";
    ASSERT_TRUE(dladdr(f, &info));
    EXPECT_FALSE(contains(info.dli_fname, "libnccl")) << name << " is exported by " << info.dli_fname;
  }
  void* ar = dlsym(lib, "ncclAllReduce");
  ASSERT_TRUE(ar && dladdr(ar, &info));
  EXPECT_TRUE(contains(info.dli_fname, "libnccl.so.2")) << info.dli_fname;
  dlclose(lib);
}

// The library and what it loads need neither the CUDA driver nor libibverbs to load (Colibri
// opens both at run time, where they are): a program that only links libnccl.so.2 starts on a
// machine without either.
TEST(NcclInterface, LoadsWithoutTheCudaDriverOrLibibverbs) {
  void* lib = dlopen(CLB_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  std::vector<std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &loaded);
  bool sawNccl = false, sawColibri = false;
  for (const std::string& name : loaded) {
    EXPECT_FALSE(contains(name, "libcuda.so")) << name << " is loaded with libnccl.so.2";
    EXPECT_FALSE(contains(name, "libcudart")) << name << " is loaded with libnccl.so.2";
    EXPECT_FALSE(contains(name, "libibverbs")) << name << " is loaded with libnccl.so.2";
    sawNccl |= contains(name, "libnccl.so.2");
    sawColibri |= contains(name, "libcolibri.so.0");
  }
  EXPECT_TRUE(sawNccl && sawColibri) << "libnccl.so.2 and the libcolibri.so.0 beside it are loaded";
  dlclose(lib);
}

TEST(NcclInterface, VersionIs2_28_9) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, 22809);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "version")) << ncclGetLastError(nullptr);
}

// Runs body(rank, comm) on n threads, each with a communicator of the same unique id, and
// destroys the communicator (a body that returns one: what it returns, nullptr if it freed it).
void runRanksOwning(int n, const std::function<ncclComm_t(int, ncclComm_t)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
      ncclComm_t left = body(r, comm);
      if (left) {
        EXPECT_EQ(ncclCommDestroy(left), ncclSuccess);
      }
    });
  for (auto& t : ts) t.join();
}

void runRanks(int n, const std::function<void(int, ncclComm_t)>& body) {
  runRanksOwning(n, [&](int r, ncclComm_t c) {
    body(r, c);
    return c;
  });
}

// The transports every multi-rank behaviour here runs over, as in the core's suites
// (tests/test_transports.h, which this binary cannot include: it links only libnccl.so.2): shm,
// socket, socket with TLS on every connection, and the verbs stand-in, the emulator's
// libibverbs.so.1 loaded into this process (its soname is what the verbs plugin opens).
const std::vector<std::string> kNets = {"shm", "socket", "socket_tls", "verbs_standin"};

class NetScope {
 public:
  explicit NetScope(const std::string& net)
      : env_{{"COLIBRI_TRANSPORT", net == "shm"             ? "shm"
                                   : net == "verbs_standin" ? "verbs"
                                                            : "socket"},
             {"COLIBRI_TLS", nullptr}} {
    if (net == "socket_tls") {
      if (!clbtest::pki().ok) {
        why_ = "TLS needs the openssl command and libssl.so.3: " + clbtest::pki().why;
        return;
      }
      tls_ = std::make_unique<clbtest::ScopedEnv>(clbtest::tlsEnv("all"));
    }
    if (net == "verbs_standin") {
#ifdef CLB_VERBS_EMU_LIBRARY
      if (!dlopen(CLB_VERBS_EMU_LIBRARY, RTLD_NOW | RTLD_GLOBAL))
        why_ = std::string("the verbs emulator: ") + dlerror();
#else
      why_ = "this build has no verbs emulator (no infiniband/verbs.h)";
#endif
    }
  }
  bool ready() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  // What a child process needs in its environment for the same transport.
  std::vector<std::string> childEnv() const {
    std::vector<std::string> e;
    for (const char* k : {"COLIBRI_TRANSPORT", "COLIBRI_TLS", "COLIBRI_TLS_CERT", "COLIBRI_TLS_KEY", "COLIBRI_TLS_CA"})
      if (const char* v = getenv(k)) e.push_back(std::string(k) + "=" + v);
    return e;
  }

 private:
  clbtest::ScopedEnv env_;
  std::unique_ptr<clbtest::ScopedEnv> tls_;
  std::string why_;
};

class NcclTransports : public ::testing::TestWithParam<std::string> {};

// The scope, or a skip that names why (a failure where CI requires the TLS tests).
#define NCCL_NET_SCOPE(scope)                                                                                \
  NetScope scope(GetParam());                                                                                \
  if (!scope.ready()) {                                                                                      \
    const char* req = getenv("COLIBRI_REQUIRE_TLS_TESTS");                                                   \
    if (GetParam() == "socket_tls" && req && !strcmp(req, "1")) FAIL() << GetParam() << ": " << scope.why(); \
    GTEST_SKIP() << GetParam() << ": " << scope.why();                                                       \
  }

double val(int rank, size_t i) { return (double)((rank + 1) * 3 + (int)(i % 7)); }

// bfloat16 from and to float (the values here are small integers: exact).
uint16_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

TEST(NcclInterface, CollectivesOnHostBuffersUseNcclsTypeAndOperationNumbers) {
  const int n = 3;
  const size_t count = 1001;
  runRanks(n, [&](int r, ncclComm_t comm) {
    int k = 0, me = -1;
    ASSERT_EQ(ncclCommCount(comm, &k), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(comm, &me), ncclSuccess);
    EXPECT_EQ(k, n);
    EXPECT_EQ(me, r);
    // All-reduce in float32 with every operation: ncclMax is 2 and ncclMin 3 (Colibri's are the other way round).
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; i++) in[i] = (float)val(r, i);
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, op, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (size_t i = 0; i < count; i++) {
        double want = op == ncclProd ? 1 : op == ncclMax ? -1e9 : op == ncclMin ? 1e9 : 0;
        for (int p = 0; p < n; p++) {
          const double v = val(p, i);
          want = op == ncclProd  ? want * v
                 : op == ncclMax ? std::max(want, v)
                 : op == ncclMin ? std::min(want, v)
                                 : want + v;
        }
        if (op == ncclAvg) want /= n;
        ASSERT_NEAR(out[i], want, 1e-4) << "op " << op << " element " << i;
      }
    }
    // ncclBfloat16 (9) and ncclFloat64 (8): Colibri numbers them 7 and 9.
    std::vector<uint16_t> bin(count), bout(count);
    for (size_t i = 0; i < count; i++) bin[i] = toBf16((float)val(r, i));
    ASSERT_EQ(ncclAllReduce(bin.data(), bout.data(), count, ncclBfloat16, ncclSum, comm, nullptr), ncclSuccess);
    std::vector<double> din(count), dout(count);
    for (size_t i = 0; i < count; i++) din[i] = val(r, i);
    ASSERT_EQ(ncclAllReduce(din.data(), dout.data(), count, ncclFloat64, ncclMax, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < count; i++) {
      double sum = 0, max = -1;
      for (int p = 0; p < n; p++) sum += val(p, i), max = std::max(max, val(p, i));
      ASSERT_EQ(fromBf16(bout[i]), (float)sum) << "bfloat16 element " << i;
      ASSERT_EQ(dout[i], max) << "float64 element " << i;
    }
    // All-gather, reduce-scatter, reduce, broadcast (and ncclBcast in place) in int32.
    std::vector<int32_t> mine(count), all(count * n), part(count), red(count), bc(count);
    for (size_t i = 0; i < count; i++) mine[i] = (int32_t)val(r, i);
    ASSERT_EQ(ncclAllGather(mine.data(), all.data(), count, ncclInt32, comm, nullptr), ncclSuccess);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) ASSERT_EQ(all[p * count + i], (int32_t)val(p, i)) << "allGather";
    std::vector<int32_t> big(count * n);
    for (size_t i = 0; i < big.size(); i++) big[i] = (int32_t)val(r, i);
    ASSERT_EQ(ncclReduceScatter(big.data(), part.data(), count, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < count; i++) {
      int32_t want = 0;
      for (int p = 0; p < n; p++) want += (int32_t)val(p, r * count + i);
      ASSERT_EQ(part[i], want) << "reduceScatter element " << i;
    }
    ASSERT_EQ(ncclReduce(mine.data(), red.data(), count, ncclInt32, ncclMin, 1, comm, nullptr), ncclSuccess);
    if (r == 1) {
      for (size_t i = 0; i < count; i++) ASSERT_EQ(red[i], (int32_t)val(0, i)) << "reduce (min) element " << i;
    }
    for (size_t i = 0; i < count; i++) bc[i] = r == 2 ? (int32_t)(i * 5) : -1;
    ASSERT_EQ(ncclBcast(bc.data(), count, ncclInt32, 2, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < count; i++) ASSERT_EQ(bc[i], (int32_t)(i * 5)) << "bcast element " << i;
    // fp8 moves as bytes; a reduction of it is refused, saying so.
    std::vector<uint8_t> f8(count), f8all(count * n);
    for (size_t i = 0; i < count; i++) f8[i] = (uint8_t)(r * 31 + i);
    ASSERT_EQ(ncclAllGather(f8.data(), f8all.data(), count, ncclFloat8e4m3, comm, nullptr), ncclSuccess);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) ASSERT_EQ(f8all[p * count + i], (uint8_t)(p * 31 + i)) << "fp8 allGather";
    EXPECT_EQ(ncclAllReduce(f8.data(), f8.data(), count, ncclFloat8e5m2, ncclSum, comm, nullptr), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "ncclFloat8e5m2")) << ncclGetLastError(comm);
    // The refusal fails the communicator on every rank (each rank refused here, and each is told).
    EXPECT_TRUE(contains(ncclGetLastError(comm), "fails with it on every rank")) << ncclGetLastError(comm);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_NE(async, ncclSuccess);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "refused its ncclAllReduce: datatype ncclFloat8e5m2"))
        << ncclGetLastError(comm);
  });
}

TEST(NcclInterface, PointToPointAllToAllGatherAndScatterOnHostBuffers) {
  const int n = 4;
  const size_t count = 777;
  runRanks(n, [&](int r, ncclComm_t comm) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<int64_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; i++) out[i] = r * 100000 + (int64_t)i;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclRecv(in.data(), count, ncclInt64, prev, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclSend(out.data(), count, ncclInt64, next, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    for (size_t i = 0; i < count; i++) ASSERT_EQ(in[i], prev * 100000 + (int64_t)i) << "ring element " << i;
    std::vector<int64_t> s(count * n), a(count * n, -1), g(count * n, -1), sc(count, -1);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) s[p * count + i] = r * 1000000 + p * 1000 + (int64_t)i;
    ASSERT_EQ(ncclAlltoAll(s.data(), a.data(), count, ncclInt64, comm, nullptr), ncclSuccess);
    for (int p = 0; p < n; p++)
      for (size_t i = 0; i < count; i++) ASSERT_EQ(a[p * count + i], p * 1000000 + r * 1000 + (int64_t)i) << "alltoall";
    // In place, as nccl-tests' alltoall_perf calls it.
    std::vector<int64_t> inPlace = s;
    ASSERT_EQ(ncclAlltoAll(inPlace.data(), inPlace.data(), count, ncclInt64, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t i = 0; i < inPlace.size(); i++) ASSERT_EQ(inPlace[i], a[i]) << "alltoall in place, element " << i;
    ASSERT_EQ(ncclGather(out.data(), g.data(), count, ncclInt64, 3, comm, nullptr), ncclSuccess);
    if (r == 3) {
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < count; i++) ASSERT_EQ(g[p * count + i], p * 100000 + (int64_t)i) << "gather";
    }
    ASSERT_EQ(ncclScatter(s.data(), sc.data(), count, ncclInt64, 0, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < count; i++) ASSERT_EQ(sc[i], r * 1000 + (int64_t)i) << "scatter";
    // Split: even ranks together, rank 3 out (NCCL_SPLIT_NOCOLOR), the rest together.
    ncclComm_t sub = nullptr;
    const int color = r == 3 ? NCCL_SPLIT_NOCOLOR : r % 2;
    ASSERT_EQ(ncclCommSplit(comm, color, -r, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
    if (r == 3) {
      EXPECT_EQ(sub, nullptr);
    } else {
      int k = 0, me = -1;
      ASSERT_EQ(ncclCommCount(sub, &k), ncclSuccess);
      ASSERT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
      EXPECT_EQ(k, r % 2 ? 1 : 2);
      EXPECT_EQ(me, r == 0 ? 1 : 0);  // key -r: the higher rank first
      int64_t x = r + 1, y = 0;
      ASSERT_EQ(ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, sub, nullptr), ncclSuccess);
      EXPECT_EQ(y, r % 2 ? 2 : 1 + 3);
      EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
    }
  });
}

TEST(NcclInterface, InitAllAndANonBlockingConfigComplete) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; r++) {
    int me = -1;
    ASSERT_EQ(ncclCommUserRank(comms[r], &me), ncclSuccess);
    EXPECT_EQ(me, r);
  }
  // One thread drives both communicators in one group.
  int64_t x[2] = {5, 7}, y[2] = {0, 0};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    ASSERT_EQ(ncclAllReduce(&x[r], &y[r], 1, ncclInt64, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(y[0], 12);
  EXPECT_EQ(y[1], 12);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t one = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&one, 1, id, 0, &config);
  ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommFinalize(one), ncclSuccess);  // waits for the init
  ncclResult_t async = ncclInProgress;
  ASSERT_EQ(ncclCommGetAsyncError(one, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(one), ncclSuccess);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 1;
  EXPECT_EQ(ncclCommInitRankConfig(&one, 1, id, 0, &bad), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "NCCL_CONFIG_INITIALIZER")) << ncclGetLastError(nullptr);
}

// PreMulSum: each rank scales its input by a scalar of its own (read now, or from its pointer at
// each call: "device" residence, a host pointer on host buffers), then the ranks sum; in
// all-reduce, reduce-scatter and reduce, float32 and bfloat16. The operation belongs to its
// communicator and type: anything else is refused, as is a destroyed one.
TEST(NcclInterface, PreMulSumScalesEachRanksInputByItsOwnScalar) {
  const int n = 3;
  const size_t count = 1003;
  runRanks(n, [&](int r, ncclComm_t comm) {
    const float scale = 0.5f * (r + 1);  // 0.5, 1, 1.5: exact in bfloat16 too
    ncclRedOp_t now = ncclSum, later = ncclSum;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&now, (void*)&scale, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess)
        << ncclGetLastError(comm);
    float atCall = 1;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&later, &atCall, ncclFloat32, ncclScalarDevice, comm), ncclSuccess);
    EXPECT_GE((int)now, (int)ncclNumOps);
    std::vector<float> in(count), out(count), part(count / n);
    for (size_t i = 0; i < count; i++) in[i] = (float)val(r, i);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, now, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t i = 0; i < count; i++) {
      double want = 0;
      for (int p = 0; p < n; p++) want += 0.5 * (p + 1) * val(p, i);
      ASSERT_EQ(out[i], (float)want) << "allReduce element " << i;
    }
    atCall = 2.0f + r;  // read when the call runs
    ASSERT_EQ(ncclReduceScatter(in.data(), part.data(), count / n, ncclFloat32, later, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t i = 0; i < count / n; i++) {
      double want = 0;
      for (int p = 0; p < n; p++) want += (2.0 + p) * val(p, r * (count / n) + i);
      ASSERT_EQ(part[i], (float)want) << "reduceScatter element " << i;
    }
    ASSERT_EQ(ncclReduce(in.data(), out.data(), count, ncclFloat32, now, 1, comm, nullptr), ncclSuccess);
    if (r == 1) {
      for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int p = 0; p < n; p++) want += 0.5 * (p + 1) * val(p, i);
        ASSERT_EQ(out[i], (float)want) << "reduce element " << i;
      }
    }
    // bfloat16: the scalar is a bfloat16 too.
    const uint16_t bscale = toBf16(scale);
    ncclRedOp_t bop = ncclSum;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&bop, (void*)&bscale, ncclBfloat16, ncclScalarHostImmediate, comm), ncclSuccess);
    std::vector<uint16_t> bin(count), bout(count);
    for (size_t i = 0; i < count; i++) bin[i] = toBf16((float)val(r, i));
    ASSERT_EQ(ncclAllReduce(bin.data(), bout.data(), count, ncclBfloat16, bop, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t i = 0; i < count; i++) {
      double want = 0;
      for (int p = 0; p < n; p++) want += 0.5 * (p + 1) * val(p, i);
      ASSERT_EQ(fromBf16(bout[i]), (float)want) << "bfloat16 allReduce element " << i;
    }
    // The operation's type is the call's; a built-in operation is not destroyed; a destroyed one is refused.
    EXPECT_EQ(ncclAllReduce(bin.data(), bout.data(), count, ncclBfloat16, now, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "built-in")) << ncclGetLastError(comm);
    for (ncclRedOp_t o : {now, later, bop}) EXPECT_EQ(ncclRedOpDestroy(o, comm), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, now, comm, nullptr), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "destroyed")) << ncclGetLastError(comm);
  });
}

// Inits inside a group complete at its end, so one thread can make every communicator of a clique
// (nccl-tests -g N, NCCL's grouped init); a split inside a group likewise. Before its group ends,
// a communicator refuses calls, saying why; an init that fails makes the group's end fail.
TEST(NcclInterface, InitsAndSplitsInsideAGroupCompleteAtItsEnd) {
  const int n = 3;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ASSERT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
  int k = 0;
  EXPECT_EQ(ncclCommCount(comms[0], &k), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclGroupEnd")) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  int64_t x[n], y[n];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    int me = -1;
    ASSERT_EQ(ncclCommUserRank(comms[r], &me), ncclSuccess);
    EXPECT_EQ(me, r);
    x[r] = 10 + r, y[r] = 0;
    ASSERT_EQ(ncclAllReduce(&x[r], &y[r], 1, ncclInt64, ncclSum, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; r++) EXPECT_EQ(y[r], 10 + 11 + 12) << "rank " << r;
  // Split from one thread: ranks 0 and 1 together (key: the reverse order), rank 2 out.
  ncclComm_t subs[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ASSERT_EQ(ncclCommSplit(comms[r], r == 2 ? NCCL_SPLIT_NOCOLOR : 0, -r, &subs[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(subs[2], nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    int me = -1, count = 0;
    ASSERT_EQ(ncclCommUserRank(subs[r], &me), ncclSuccess);
    ASSERT_EQ(ncclCommCount(subs[r], &count), ncclSuccess);
    EXPECT_EQ(me, 1 - r);
    EXPECT_EQ(count, 2);
    x[r] = 100 * (r + 1), y[r] = 0;
    ASSERT_EQ(ncclAllReduce(&x[r], &y[r], 1, ncclInt64, ncclSum, subs[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(y[0], 300);
  EXPECT_EQ(y[1], 300);
  for (ncclComm_t c : subs) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  // An init that fails inside a group: the group's end says so, and so does the communicator.
  ncclComm_t bad = nullptr;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&bad, 2, id, 5), ncclSuccess);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "init in this group failed")) << ncclGetLastError(nullptr);
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(bad, &async), ncclSuccess);
  EXPECT_NE(async, ncclSuccess);
  EXPECT_NE(ncclCommCount(bad, &k), ncclSuccess);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "init failed")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(bad), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // no group is open
}

// Non-blocking inits (config.blocking = 0) return ncclInProgress and complete on their own, so one
// thread can start every rank's init of a clique and poll ncclCommGetAsyncError; a call on a
// communicator whose init still runs waits for it.
// A call of a group that libnccl refuses by itself (fp8 in a reduction, an unknown type or
// operation, a NULL communicator) is the group's refusal too, as in NCCL and as Colibri's own
// refusals are: the group's end fails, saying why, and none of its calls ran. (Before, the end ran
// the rest of the group and succeeded.) A query refused inside a group (ncclCommCount on a
// communicator whose init waits for the group's end, above) is no call of the group.
TEST(NcclInterface, ACallRefusedInsideAGroupFailsTheGroupAndNothingRuns) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  for (int bad = 0; bad < 4; bad++) {
    float in[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    const ncclResult_t refused =
        bad == 0   ? ncclAllReduce(in, out, 4, ncclFloat8e4m3, ncclSum, comm, nullptr)
        : bad == 1 ? ncclAllGather(in, out, 1, static_cast<ncclDataType_t>(99), comm, nullptr)
        : bad == 2 ? ncclReduce(in, out, 4, ncclFloat32, static_cast<ncclRedOp_t>(-1), 0, comm, nullptr)
                   : ncclSend(in, 4, ncclFloat32, 0, nullptr, nullptr);
    EXPECT_EQ(refused, ncclInvalidArgument) << bad;
    const std::string why = ncclGetLastError(comm);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument) << bad;
    EXPECT_TRUE(contains(ncclGetLastError(comm), "nothing in this group ran")) << ncclGetLastError(comm);
    EXPECT_TRUE(contains(ncclGetLastError(comm), why)) << ncclGetLastError(comm) << " / " << why;
    EXPECT_EQ(out[0], 0.0f) << bad << ": a call of the refused group ran";
    // The next group is a group of its own.
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(out[3], 4.0f);
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(NcclInterface, NonBlockingInitsFromOneThreadCompleteWhileItPolls) {
  const int n = 2;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comms[n] = {};
  for (int r = 0; r < n; r++) ASSERT_EQ(ncclCommInitRankConfig(&comms[r], n, id, r, &config), ncclInProgress);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < n; r++) {
    ncclResult_t async = ncclInProgress;
    while (async == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(async, ncclSuccess) << "rank " << r << "'s init";
  }
  float x[n] = {1.5f, 2.25f}, y[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++)
    ASSERT_EQ(ncclAllReduce(&x[r], &y[r], 1, ncclFloat32, ncclMax, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(y[0], 2.25f);
  EXPECT_EQ(y[1], 2.25f);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(NcclInterface, WhatColibriDoesNotDoIsRefusedSayingSo) {
  runRanks(1, [](int, ncclComm_t comm) {
    char buf[64];
    ncclComm_t smaller = nullptr;
    int out = 0;
    // One rank: excluding itself is refused (ncclCommShrink itself: NcclTransports.Shrink...).
    EXPECT_EQ(ncclCommShrink(comm, &out, 1, &smaller, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "is in the exclusion list")) << ncclGetLastError(comm);
    EXPECT_EQ(smaller, nullptr);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
    EXPECT_EQ(ncclDevCommCreate(comm, nullptr, nullptr), ncclInvalidUsage);
    // Registration is local in NCCL and collective in Colibri: a token, nothing registered.
    void* handle = nullptr;
    EXPECT_EQ(ncclCommRegister(comm, buf, sizeof buf, &handle), ncclSuccess);
    EXPECT_NE(handle, nullptr);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
    ncclComm_t split = nullptr;
    EXPECT_EQ(ncclCommSplit(comm, -2, 0, &split, nullptr), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "NCCL_SPLIT_NOCOLOR")) << ncclGetLastError(comm);
    // A later call that works clears this library's own error.
    int k = 0;
    EXPECT_EQ(ncclCommCount(comm, &k), ncclSuccess);
    EXPECT_FALSE(contains(ncclGetLastError(comm), "not supported")) << ncclGetLastError(comm);
    EXPECT_STREQ(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)");
  });
}

// Issue 38, 6a: a bad color (below NCCL_SPLIT_NOCOLOR), a NULL newcomm or a config not made with
// NCCL_CONFIG_INITIALIZER (issue 42) on one rank only reaches
// the split's first exchange, so every rank's ncclCommSplit fails at once with ncclInvalidArgument
// naming that rank (not the others after the timeout), nobody gets a communicator, and the parent
// still runs collectives (and splits).
TEST_P(NcclTransports, ABadSplitOnOneRankFailsOnEveryRankAtOnceAndTheParentStaysUsable) {
  NCCL_NET_SCOPE(scope);
  const int n = 3;
  runRanks(n, [&](int r, ncclComm_t comm) {
    // 0: a bad color; 1: a NULL newcomm; 2: a config not made with NCCL_CONFIG_INITIALIZER,
    // which this library refuses before Colibri sees the split (clbCommSplitRefuse).
    for (int variant = 0; variant < 3; variant++) {
      ncclComm_t sub = reinterpret_cast<ncclComm_t>(&sub);  // overwritten with NULL
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      if (r == 1) config.magic = 7;
      const auto t0 = std::chrono::steady_clock::now();
      const ncclResult_t rc = variant == 0   ? ncclCommSplit(comm, r == 1 ? -5 : 0, r, &sub, nullptr)
                              : variant == 1 ? ncclCommSplit(comm, 0, r, r == 1 ? nullptr : &sub, nullptr)
                                             : ncclCommSplit(comm, 0, r, &sub, &config);
      EXPECT_EQ(rc, ncclInvalidArgument) << "rank " << r << ", variant " << variant;
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "rank " << r << " waited";
      const std::string e = ncclGetLastError(comm);
      EXPECT_TRUE(contains(e, variant == 0   ? "color=-5"
                              : variant == 1 ? "newcomm (output) is NULL"
                                             : "config was not set up with NCCL_CONFIG_INITIALIZER"))
          << e;
      if (variant == 0) {
        EXPECT_TRUE(contains(e, "NCCL_SPLIT_NOCOLOR")) << e;
      }
      if (r != 1) {
        EXPECT_TRUE(contains(e, "refused on rank 1")) << e;
      }
      if (variant != 1 || r != 1) {
        EXPECT_EQ(sub, nullptr);
      }
      int32_t x = r + 1, y = 0;
      ASSERT_EQ(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(y, 6);
    }
    ncclComm_t sub = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 0, r, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

// ncclCommGetUniqueId and ncclCommGrow (NCCL 2.29): two new ranks join a communicator of 2, one
// blocking and one not; the existing ranks keep their numbers and the grown communicator of 4
// sums right; a bad config on one existing rank refuses the grow on both at once first.
TEST_P(NcclTransports, GrowAddsRanksAndTheExistingKeepTheirNumbers) {
  NCCL_NET_SCOPE(scope);
  const int n = 2, grown = 4;
  auto check = [&](ncclComm_t c, int r) {
    int rank = -1, count = -1;
    ASSERT_EQ(ncclCommUserRank(c, &rank), ncclSuccess);
    ASSERT_EQ(ncclCommCount(c, &count), ncclSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, grown);
    std::vector<int64_t> in(999), out(999, -1);
    for (size_t i = 0; i < in.size(); i++) in[i] = (r + 1) * 1000 + (int64_t)i;
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt64, ncclSum, c, nullptr), ncclSuccess)
        << ncclGetLastError(c);
    for (size_t i = 0; i < in.size(); i++) {
      int64_t want = 0;
      for (int p = 0; p < grown; p++) want += (p + 1) * 1000 + (int64_t)i;
      ASSERT_EQ(out[i], want) << "rank " << r << ", element " << i;
    }
  };
  std::promise<ncclUniqueId> made;
  std::shared_future<ncclUniqueId> ready = made.get_future().share();
  std::atomic<bool> handedOut{false};
  std::vector<std::thread> joiners;
  for (int r = n; r < grown; r++)
    joiners.emplace_back([&, r] {
      const ncclUniqueId id = ready.get();
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = r == n ? 0 : 1;
      ncclComm_t c = nullptr;
      const ncclResult_t rc = ncclCommGrow(nullptr, grown, &id, r, &c, &config);
      ASSERT_TRUE(rc == ncclSuccess || (r == n && rc == ncclInProgress)) << rc << ": " << ncclGetLastError(nullptr);
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) ASSERT_EQ(ncclCommGetAsyncError(c, &state), ncclSuccess);
      ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(c);
      check(c, r);
      EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    });
  runRanks(n, [&](int r, ncclComm_t comm) {
    ncclUniqueId id;
    if (r == 0) {
      ASSERT_EQ(ncclCommGetUniqueId(comm, &id), ncclSuccess) << ncclGetLastError(comm);
    }
    // A config not made with NCCL_CONFIG_INITIALIZER on rank 1: both refused at once.
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 7;
    ncclComm_t g = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclCommGrow(comm, grown, r == 0 ? &id : nullptr, -1, &g, r == 1 ? &bad : nullptr), ncclInvalidArgument);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "rank " << r << " waited";
    EXPECT_EQ(g, nullptr);
    if (r == 0) {
      EXPECT_TRUE(contains(ncclGetLastError(comm), "refused on rank 1")) << ncclGetLastError(comm);
      made.set_value(id);
      handedOut = true;
    }
    ASSERT_EQ(ncclCommGrow(comm, grown, r == 0 ? &id : nullptr, -1, &g, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    check(g, r);
    EXPECT_EQ(ncclCommDestroy(g), ncclSuccess);
  });
  if (!handedOut) made.set_value(ncclUniqueId{});  // rank 0 failed first: the new ranks fail at once
  for (std::thread& t : joiners) t.join();
}

// Two ranks of a new communicator, each made on a thread of its own, for tests where one thread
// then drives both (a group): NULLs where an init failed.
void initPair(ncclComm_t comms[2]) {
  ncclUniqueId uid;
  ASSERT_EQ(ncclGetUniqueId(&uid), ncclSuccess);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] { ASSERT_EQ(ncclCommInitRank(&comms[r], 2, uid, r), ncclSuccess); });
  for (auto& t : ts) t.join();
}

// ---- grow attacks: a non-blocking grow and ncclCommAbort of one that waits; a bad config inside a group; a valid grow
// inside a group ----

// Non-blocking ncclCommGrow on the existing ranks, polled; then ncclCommAbort of a new communicator
// whose grow waits for a new rank that never comes: it should end within about 100 ms (as an
// aborted non-blocking init does), not at the timeout.
TEST_P(NcclTransports, GrowAttackNonBlockingAndAbortOfAGrowInProgress) {
  NCCL_NET_SCOPE(scope);
  clbtest::ScopedEnv env{{"COLIBRI_TIMEOUT_MS", "8000"}};
  std::promise<ncclUniqueId> made;
  std::shared_future<ncclUniqueId> ready = made.get_future().share();
  std::thread joiner([&] {
    const ncclUniqueId id = ready.get();
    ncclComm_t c = nullptr;
    ASSERT_EQ(ncclCommGrow(nullptr, 3, &id, 2, &c, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    std::vector<int64_t> in(100, 3), out(100, 0);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), 100, ncclInt64, ncclSum, c, nullptr), ncclSuccess);
    EXPECT_EQ(out[99], 9);
    ncclCommDestroy(c);
  });
  runRanks(2, [&](int r, ncclComm_t comm) {
    ncclUniqueId id;
    if (r == 0) {
      ASSERT_EQ(ncclCommGetUniqueId(comm, &id), ncclSuccess);
      made.set_value(id);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t g = nullptr;
    const ncclResult_t rc = ncclCommGrow(comm, 3, r == 0 ? &id : nullptr, -1, &g, &config);
    ASSERT_TRUE(rc == ncclInProgress || rc == ncclSuccess) << rc;
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) ASSERT_EQ(ncclCommGetAsyncError(g, &state), ncclSuccess);
    ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(g);
    std::vector<int64_t> in(100, 3), out(100, 0);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), 100, ncclInt64, ncclSum, g, nullptr), ncclSuccess);
    EXPECT_EQ(out[0], 9);
    ncclCommDestroy(g);
    // Again, with a new rank that never comes, then aborted.
    ncclUniqueId id2;
    if (r == 0) ASSERT_EQ(ncclCommGetUniqueId(comm, &id2), ncclSuccess);
    ncclComm_t g2 = nullptr;
    ASSERT_EQ(ncclCommGrow(comm, 3, r == 0 ? &id2 : nullptr, -1, &g2, &config), ncclInProgress);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclCommAbort(g2), ncclSuccess);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 2.0) << "rank " << r << ": ncclCommAbort of a non-blocking grow in progress took " << took << " s";
  });
  joiner.join();
}

// ncclCommGrow inside ncclGroupStart/ncclGroupEnd, one thread driving both existing ranks; first
// with a bad config on one of them (the refusal must not wait until the timeout), then right.
TEST_P(NcclTransports, GrowAttackInsideAGroupOneThread) {
  NCCL_NET_SCOPE(scope);
  clbtest::ScopedEnv env{{"COLIBRI_TIMEOUT_MS", "4000"}};
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  ASSERT_TRUE(comms[0] && comms[1]);
  ncclUniqueId id;
  ASSERT_EQ(ncclCommGetUniqueId(comms[0], &id), ncclSuccess);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 7;
  ncclComm_t g[2] = {nullptr, nullptr};
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(comms[0], 3, &id, -1, &g[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(comms[1], 3, nullptr, -1, &g[1], &bad), ncclInvalidArgument);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 2.0) << "the refused grow blocked the group's thread " << took << " s: " << ncclGetLastError(nullptr);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess);
  took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 2.0) << "the group took " << took << " s";
  // The parents must still be usable.
  for (int r = 0; r < 2; r++) {
    ncclResult_t err = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comms[r], &err), ncclSuccess);
    EXPECT_EQ(err, ncclSuccess) << "parent rank " << r << " failed by the refused grow: " << ncclGetLastError(comms[r]);
  }
  if (g[0]) ncclCommDestroy(g[0]);
  for (int r = 0; r < 2; r++) ncclCommAbort(comms[r]);
}

// A good grow in a group, one thread for both existing ranks, a new rank on another.
TEST_P(NcclTransports, GrowAttackInsideAGroupValid) {
  NCCL_NET_SCOPE(scope);
  clbtest::ScopedEnv env{{"COLIBRI_TIMEOUT_MS", "4000"}};
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  ASSERT_TRUE(comms[0] && comms[1]);
  ncclComm_t g[2] = {nullptr, nullptr};
  ncclUniqueId id2;
  ASSERT_EQ(ncclCommGetUniqueId(comms[0], &id2), ncclSuccess);
  std::thread joiner([&] {
    ncclComm_t c = nullptr;
    ASSERT_EQ(ncclCommGrow(nullptr, 3, &id2, 2, &c, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    std::vector<int64_t> in(10, 5), out(10, 0);
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 10, ncclInt64, ncclSum, c, nullptr), ncclSuccess);
    EXPECT_EQ(out[9], 15);
    ncclCommDestroy(c);
  });
  g[0] = g[1] = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(comms[0], 3, &id2, -1, &g[0], nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(comms[1], 3, nullptr, -1, &g[1], nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; r++)
    ts.emplace_back([&, r] {
      if (!g[r]) return;
      int rank = -1;
      ncclCommUserRank(g[r], &rank);
      EXPECT_EQ(rank, r);
      std::vector<int64_t> in(10, 5), out(10, 0);
      EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 10, ncclInt64, ncclSum, g[r], nullptr), ncclSuccess);
      EXPECT_EQ(out[0], 15);
      ncclCommDestroy(g[r]);
    });
  for (auto& t : ts) t.join();
  joiner.join();
  for (int r = 0; r < 2; r++) ncclCommDestroy(comms[r]);
}

// ncclCommShrink (NCCL 2.27): rank 2 of 4 leaves in the middle of a stream (it aborts); the others
// shrink with NCCL_SHRINK_ABORT, blocking and not, and their new communicator of 3 sums right;
// a bad config on one survivor refuses the shrink on every survivor at once.
TEST_P(NcclTransports, ShrinkLeavesARankBehindAndTheSurvivorsGoOn) {
  NCCL_NET_SCOPE(scope);
  const int n = 4, gone = 2;
  runRanksOwning(n, [&](int r, ncclComm_t comm) -> ncclComm_t {
    int excluded = gone;
    if (r == gone) {
      ncclComm_t none = nullptr;
      EXPECT_EQ(ncclCommShrink(comm, &excluded, 1, &none, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);  // frees it, as NCCL's does
      return nullptr;
    }
    [&] {
      // A config not made with NCCL_CONFIG_INITIALIZER on rank 1: every survivor refused at once.
      ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
      bad.magic = 7;
      ncclComm_t sub = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(ncclCommShrink(comm, &excluded, 1, &sub, r == 1 ? &bad : nullptr, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument)
          << "rank " << r << ": " << ncclGetLastError(comm);
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "rank " << r << " waited";
      EXPECT_EQ(sub, nullptr);
      // Non-blocking on rank 0, blocking on the others.
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = r == 0 ? 0 : 1;
      const ncclResult_t rc = ncclCommShrink(comm, &excluded, 1, &sub, &config, NCCL_SHRINK_ABORT);
      ASSERT_TRUE(rc == ncclSuccess || (r == 0 && rc == ncclInProgress)) << rc << ": " << ncclGetLastError(comm);
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) ASSERT_EQ(ncclCommGetAsyncError(sub, &state), ncclSuccess);
      ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(sub);
      int rank = -1, count = -1;
      ASSERT_EQ(ncclCommUserRank(sub, &rank), ncclSuccess);
      ASSERT_EQ(ncclCommCount(sub, &count), ncclSuccess);
      EXPECT_EQ(rank, r < gone ? r : r - 1);
      EXPECT_EQ(count, n - 1);
      std::vector<float> in(1000), out(1000, -1);
      for (size_t i = 0; i < in.size(); i++) in[i] = (float)((r + 1) * 100 + (int)i);
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, sub, nullptr), ncclSuccess)
          << ncclGetLastError(sub);
      for (size_t i = 0; i < in.size(); i++) {
        float want = 0;
        for (int p = 0; p < n; p++)
          if (p != gone) want += (float)((p + 1) * 100 + (int)i);
        EXPECT_EQ(out[i], want) << "rank " << r << ", element " << i;
      }
      EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
    }();
    // ncclCommRevoke: a bad flag refused; then every later call on the parent is a usage refusal.
    EXPECT_EQ(ncclCommRevoke(comm, 3), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "NCCL_REVOKE_DEFAULT")) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclInvalidUsage);
    int32_t x = 1, y = 0;
    EXPECT_EQ(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "revoked")) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommRevoke(nullptr, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
    return comm;
  });
}

// Issue 38, 5, through this library: a buffer whose end would pass the last address (the address
// plus the size wraps around) is refused with ncclInvalidArgument, saying so, before anything
// moves (inside a group, so that a call wrongly taken is only recorded; a refused call after it
// makes the end run nothing); a registration of such a range too.
TEST(NcclInterface, BuffersWhoseEndWrapsTheAddressSpaceAreRefused) {
  runRanks(2, [](int, ncclComm_t comm) {
    static thread_local float buf[64];
    const size_t wrapping = (SIZE_MAX - reinterpret_cast<uintptr_t>(buf)) / (4 * 2) + 1;  // x 2 blocks of 4 bytes
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAlltoAll(buf, buf + 32, wrapping, ncclFloat32, comm, nullptr), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "runs past the end of the address space")) << ncclGetLastError(comm);
    EXPECT_NE(ncclSend(buf, 1, ncclFloat32, -1, comm, nullptr), ncclSuccess);  // failed, or refused
    EXPECT_NE(ncclGroupEnd(), ncclSuccess);
    void* handle = nullptr;
    EXPECT_EQ(ncclCommRegister(comm, buf + 8, SIZE_MAX - 4, &handle), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "runs past the end of the address space")) << ncclGetLastError(comm);
    EXPECT_EQ(handle, nullptr);
    // The refusals failed the communicator (its peer told at once): the next call says so.
    float x = 1, y = 0;
    EXPECT_NE(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "runs past the end of the address space")) << ncclGetLastError(comm);
  });
}

// ncclCommAbort from another thread while a receive waits for a send that never comes: the
// receive returns with an error, the abort frees the communicator once it has, and the peer,
// told of the abort, fails its own waiting call instead of waiting out the timeout.
TEST(NcclInterface, AbortFromAnotherThreadEndsAWaitingReceive) {
  runRanksOwning(2, [](int r, ncclComm_t comm) {
    int64_t x = 0;
    if (r == 0) {
      std::atomic<bool> receiving{false};
      std::thread aborter([&] {
        while (!receiving) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the receive is waiting by now
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess) << ncclGetLastError(comm);
      });
      const auto t0 = std::chrono::steady_clock::now();
      receiving = true;
      EXPECT_NE(ncclRecv(&x, 1, ncclInt64, 1, comm, nullptr), ncclSuccess);
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
      aborter.join();
      comm = nullptr;  // freed by the abort
    } else {
      EXPECT_NE(ncclRecv(&x, 1, ncclInt64, 0, comm, nullptr), ncclSuccess);
    }
    return comm;
  });
}

// NCCL's variables map onto Colibri's (docs/nccl-compat.md), in a child process: the mapping happens
// once, at the first call, and an explicit COLIBRI_* variable wins; NCCL_DEBUG=INFO prints which
// library answers.
TEST(NcclInterfaceChild, Variables) {
  if (!getenv("CLB_NCCL_CHILD")) GTEST_SKIP() << "runs only as a child of NcclInterface.NcclVariablesMapToColibris";
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  auto is = [](const char* name, const char* want) {
    const char* got = getenv(name);
    EXPECT_STREQ(got ? got : "(unset)", want) << name;
  };
  is("COLIBRI_LOG_LEVEL", "info");
  is("COLIBRI_VERBS_DEVICE", "mlx5_3");
  is("COLIBRI_VERBS_PORT", "2");
  is("COLIBRI_DEVICE_P2P", "off");
  is("COLIBRI_VERBS_GID_INDEX", "7");  // set: NCCL_IB_GID_INDEX=3 does not replace it
  is("COLIBRI_VERBS_TRAFFIC_CLASS", "106");
  is("COLIBRI_TRANSPORT", "(unset)");
  is("COLIBRI_SOCKET_IFNAME", "lo,eth");
}

// This test program again, running only `filter`, with NCCL's and Colibri's variables replaced by
// `envs`, its stderr into `log` (when given).
pid_t spawnSelf(const std::string& filter, std::vector<std::string> envs, const char* log) {
  for (char** e = environ; *e; e++)
    if (strncmp(*e, "COLIBRI_", 8) != 0 && strncmp(*e, "NCCL_", 5) != 0) envs.push_back(*e);
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (log) posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_TRUNC, 0);
  std::string self = "/proc/self/exe", arg = "--gtest_filter=" + filter;
  char* argv[] = {self.data(), arg.data(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Whether the child exited with 0; `timeoutMs` >= 0: killed (and false) once that passed.
bool exitedCleanly(pid_t pid, int timeoutMs = -1) {
  int status = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  pid_t w = 0;
  while (timeoutMs >= 0 && (w = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (timeoutMs >= 0 && w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return false;
  }
  if (timeoutMs < 0) w = waitpid(pid, &status, 0);
  return w == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The child test `filter` of this program run with `envs` (spawnSelf): whether it passed, and its
// stderr into *text.
bool runChild(const std::string& filter, std::vector<std::string> envs, std::string* text) {
  char log[] = "/tmp/colibri-nccl-child-XXXXXX";
  const int fd = mkstemp(log);
  if (fd < 0) return false;
  close(fd);
  const pid_t pid = spawnSelf(filter, std::move(envs), log);
  const bool ok = pid > 0 && exitedCleanly(pid);
  text->clear();
  if (FILE* f = fopen(log, "r")) {
    char b[512];
    while (fgets(b, sizeof b, f)) *text += b;
    fclose(f);
  }
  unlink(log);
  return ok;
}

TEST(NcclInterface, NcclVariablesMapToColibris) {
  std::string text;
  EXPECT_TRUE(
      runChild("NcclInterfaceChild.Variables",
               {"CLB_NCCL_CHILD=1", "NCCL_DEBUG=info", "NCCL_IB_HCA==mlx5_3:2,mlx5_4:1", "NCCL_P2P_DISABLE=1",
                "NCCL_IB_GID_INDEX=3", "COLIBRI_VERBS_GID_INDEX=7", "NCCL_IB_TC=106", "NCCL_SOCKET_IFNAME==lo,eth"},
               &text))
      << "the child's checks failed:\n"
      << text;
  EXPECT_TRUE(contains(text, "NCCL version 2.28.9+colibri")) << text;
}

// A failed call says why on stderr when NCCL_DEBUG is WARN (or more), as NCCL does: clients
// answer a failure with "run with NCCL_DEBUG=WARN for details". The child makes three calls that
// fail (one refused by the interface, two by Colibri's core) and one that succeeds.
TEST(NcclInterfaceChild, FailedCalls) {
  if (!getenv("CLB_NCCL_CHILD"))
    GTEST_SKIP() << "runs only as a child of NcclInterface.FailedCallsSayWhyWhenNcclDebugAsks";
  EXPECT_EQ(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  float x = 1;
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 5, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, static_cast<ncclRedOp_t>(999), comm, nullptr), ncclInvalidArgument);
  ncclCommDestroy(comm);
}

TEST(NcclInterface, FailedCallsSayWhyWhenNcclDebugAsks) {
  for (const char* level : {"WARN", "info", "VERSION", ""}) {
    std::vector<std::string> envs = {"CLB_NCCL_CHILD=1"};
    if (*level) envs.push_back(std::string("NCCL_DEBUG=") + level);
    std::string text;
    EXPECT_TRUE(runChild("NcclInterfaceChild.FailedCalls", envs, &text)) << "the child's checks failed:\n" << text;
    size_t warns = 0;
    for (size_t at = text.find("NCCL WARN"); at != std::string::npos; at = text.find("NCCL WARN", at + 1)) warns++;
    const bool says = strcasecmp(level, "WARN") == 0 || strcasecmp(level, "INFO") == 0;
    EXPECT_EQ(warns, says ? 3u : 0u) << "NCCL_DEBUG=" << level << ":\n" << text;
    if (says) {
      EXPECT_TRUE(contains(text, "uniqueId (output) is NULL")) << text;
      EXPECT_TRUE(contains(text, "peer=5 is out of range for 1 ranks")) << text;
      EXPECT_TRUE(contains(text, "reduction op 999")) << text;
    }
  }
}

// Issue 38, 6b: ncclCommAbort on a communicator whose non-blocking init (config.blocking = 0) waits
// for a rank that never comes ends the init at once (not at its timeout) and frees all of it: the
// process has the descriptors and threads it had before the init, and a call that waited for the
// init on another thread returns an error. In a child process (the root of the unique id is the
// parent's, so that none of its connections count here); CLB_NCCL_ID is the id.
// A unique id as text, for a child's environment (CLB_NCCL_ID), and back.
std::string hexOf(const ncclUniqueId& id) {
  std::string hex;
  for (char c : id.internal) {
    char b[3];
    snprintf(b, sizeof b, "%02x", (unsigned char)c);
    hex += b;
  }
  return hex;
}

ncclUniqueId idOf(const std::string& hex) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof id.internal && 2 * i + 1 < hex.size(); i++)
    id.internal[i] = (char)std::stoi(hex.substr(2 * i, 2), nullptr, 16);
  return id;
}

size_t entries(const char* dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

TEST(NcclInterfaceChild, AbortNonBlockingInit) {
  const char* hex = getenv("CLB_NCCL_ID");
  if (!getenv("CLB_NCCL_CHILD") || !hex)
    GTEST_SKIP() << "runs only as a child of NcclTransports.AbortEndsANonBlockingInitAtOnceAndFreesIt";
  const ncclUniqueId id = idOf(hex);
#ifdef CLB_VERBS_EMU_LIBRARY
  if (getenv("CLB_NCCL_VERBS_EMU")) {
    ASSERT_NE(dlopen(CLB_VERBS_EMU_LIBRARY, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
  }
#endif
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);  // the library's own set-up done before counting
  for (int round = 0; round < 3; round++) {
    const size_t fds = entries("/proc/self/fd"), threads = entries("/proc/self/task");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInProgress) << ncclGetLastError(nullptr);
    ncclResult_t waited = ncclSuccess;
    std::thread caller([&] {
      int64_t x = 1, y = 0;
      waited = ncclAllReduce(&x, &y, 1, ncclInt64, ncclSum, comm, nullptr);  // waits for the init
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the init waits for rank 1 by now
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclInProgress);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess) << ncclGetLastError(nullptr);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, std::chrono::seconds(3)) << "ncclCommAbort waited for the init's timeout";
    caller.join();
    EXPECT_EQ(waited, ncclRemoteError) << "round " << round;
    EXPECT_EQ(entries("/proc/self/fd"), fds) << "round " << round << ": descriptors left open";
    // A joined thread leaves /proc/self/task a moment after pthread_join returns (the kernel wakes
    // the joiner before it reaps the task): a thread the abort left running stays past the wait.
    size_t now = entries("/proc/self/task");
    for (int i = 0; i < 200 && now > threads; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      now = entries("/proc/self/task");
    }
    EXPECT_EQ(now, threads) << "round " << round << ": threads left running";
  }
}

TEST_P(NcclTransports, AbortEndsANonBlockingInitAtOnceAndFreesIt) {
  NCCL_NET_SCOPE(scope);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  const std::string hex = hexOf(id);
  std::vector<std::string> env = {"CLB_NCCL_CHILD=1", "CLB_NCCL_ID=" + hex, "COLIBRI_TIMEOUT_MS=15000"};
  for (const std::string& e : scope.childEnv()) env.push_back(e);
  if (GetParam() == "verbs_standin") env.push_back(std::string("CLB_NCCL_VERBS_EMU=1"));
  std::string text;
  EXPECT_TRUE(runChild("NcclInterfaceChild.AbortNonBlockingInit", env, &text)) << "the child's checks failed:\n"
                                                                               << text;
}

// Issue 38, 6c: a second ncclCommDestroy (or one after ncclCommAbort), and every call on a handle
// destroyed, returns ncclInvalidArgument saying that it is not alive, reads nothing of it and never
// hangs (it hung before); a communicator split from it before lives on. In a child process, killed
// if it hangs.
TEST(NcclInterfaceChild, DestroyedCommunicator) {
  if (!getenv("CLB_NCCL_CHILD"))
    GTEST_SKIP() << "runs only as a child of "
                    "NcclInterface.ASecondDestroyAndCallsOnADestroyedCommunicatorAreRefusedOneRankNoTransport";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr, sub = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommSplit(comm, 0, 0, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  auto refused = [](ncclResult_t rc, const char* says) {
    EXPECT_EQ(rc, ncclInvalidArgument) << says;
    const std::string e = ncclGetLastError(nullptr);
    EXPECT_TRUE(contains(e, says)) << e;
    EXPECT_TRUE(contains(e, "is not alive in this process: it was destroyed already")) << e;
  };
  refused(ncclCommDestroy(comm), "ncclCommDestroy: comm 0x");
  float x = 1, y = 0;
  int k = 0;
  ncclResult_t async = ncclSuccess;
  void* handle = nullptr;
  ncclComm_t again = nullptr;
  refused(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr), "ncclAllReduce: comm 0x");
  refused(ncclSend(&x, 1, ncclFloat32, 0, comm, nullptr), "ncclSend: comm 0x");
  refused(ncclCommCount(comm, &k), "ncclCommCount: comm 0x");
  refused(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError: comm 0x");
  refused(ncclCommCuDevice(comm, &k), "ncclCommCuDevice: comm 0x");
  refused(ncclCommRegister(comm, &x, sizeof x, &handle), "ncclCommRegister: comm 0x");
  refused(ncclCommFinalize(comm), "ncclCommFinalize: comm 0x");
  refused(ncclCommSplit(comm, 0, 0, &again, nullptr), "ncclCommSplit: comm 0x");
  refused(ncclCommAbort(comm), "ncclCommAbort: comm 0x");
  // The split's communicator is its own; aborted, it is freed, and a destroy after is refused.
  ASSERT_EQ(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, sub, nullptr), ncclSuccess) << ncclGetLastError(sub);
  EXPECT_EQ(y, 1.f);
  EXPECT_EQ(ncclCommAbort(sub), ncclSuccess) << ncclGetLastError(nullptr);
  refused(ncclCommDestroy(sub), "ncclCommDestroy: comm 0x");
  // A non-blocking init's handle likewise.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t nb = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&nb, 1, id, 0, &config);
  ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(nb), ncclSuccess) << ncclGetLastError(nullptr);
  refused(ncclCommDestroy(nb), "ncclCommDestroy: comm 0x");
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);  // NULL stays a no-op
}

// One rank (a communicator of one rank opens no transport), so it runs once, not per transport.
TEST(NcclInterface, ASecondDestroyAndCallsOnADestroyedCommunicatorAreRefusedOneRankNoTransport) {
  const pid_t pid = spawnSelf("NcclInterfaceChild.DestroyedCommunicator", {"CLB_NCCL_CHILD=1"}, nullptr);
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(exitedCleanly(pid, 30000)) << "the child failed or hung (killed after 30 s); its output is above";
}

// Ranks as processes (host buffers): each child is one rank of a clique whose unique id the parent
// made, running collectives, a ring of sends and receives in a group, an all-to-all and a split,
// each result checked against values computed here. CLB_NCCL_RANK / _NRANKS / _ID tell a child
// who it is.
TEST(NcclInterfaceChild, Rank) {
  const char* rankVar = getenv("CLB_NCCL_RANK");
  if (!rankVar) GTEST_SKIP() << "runs only as a child of NcclInterface.RanksAsProcesses";
  const int r = atoi(rankVar), n = atoi(getenv("CLB_NCCL_NRANKS"));
  const std::string hex = getenv("CLB_NCCL_ID");
  ASSERT_EQ(hex.size(), 2 * sizeof(ncclUniqueId::internal));
  const ncclUniqueId id = idOf(hex);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess) << ncclGetLastError(nullptr);
  const size_t count = 100003;
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; i++) in[i] = (float)val(r, i);
  ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  for (size_t i = 0; i < count; i++) {
    double want = 0;
    for (int p = 0; p < n; p++) want += val(p, i);
    ASSERT_EQ(out[i], (float)want) << "allReduce element " << i;
  }
  std::vector<int32_t> ring(count, -1), mine(count), all(count * n), a2a(count * n), got(count * n, -1);
  for (size_t i = 0; i < count; i++) mine[i] = r * 1000003 + (int32_t)i;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(mine.data(), count, ncclInt32, (r + 1) % n, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclRecv(ring.data(), count, ncclInt32, (r + n - 1) % n, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
  for (size_t i = 0; i < count; i++)
    ASSERT_EQ(ring[i], ((r + n - 1) % n) * 1000003 + (int32_t)i) << "ring element " << i;
  ASSERT_EQ(ncclAllGather(mine.data(), all.data(), count, ncclInt32, comm, nullptr), ncclSuccess);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++) ASSERT_EQ(all[p * count + i], p * 1000003 + (int32_t)i) << "allGather";
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++) a2a[p * count + i] = r * 100 + p + (int32_t)(i % 13) * 10000;
  ASSERT_EQ(ncclAlltoAll(a2a.data(), got.data(), count, ncclInt32, comm, nullptr), ncclSuccess);
  for (int p = 0; p < n; p++)
    for (size_t i = 0; i < count; i++)
      ASSERT_EQ(got[p * count + i], p * 100 + r + (int32_t)(i % 13) * 10000) << "alltoall";
  ncclComm_t sub = nullptr;
  ASSERT_EQ(ncclCommSplit(comm, r % 2, r, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
  int64_t x = r, y = -1;
  ASSERT_EQ(ncclAllReduce(&x, &y, 1, ncclInt64, ncclMax, sub, nullptr), ncclSuccess);
  int64_t want = -1;
  for (int p = r % 2; p < n; p += 2) want = p;
  EXPECT_EQ(y, want);
  EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(NcclInterface, RanksAsProcesses) {
  for (int n : {2, 4}) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
    const std::string hex = hexOf(id);
    std::vector<pid_t> pids;
    for (int r = 0; r < n; r++)
      pids.push_back(spawnSelf(
          "NcclInterfaceChild.Rank",
          {"CLB_NCCL_RANK=" + std::to_string(r), "CLB_NCCL_NRANKS=" + std::to_string(n), "CLB_NCCL_ID=" + hex},
          nullptr));
    for (int r = 0; r < n; r++) {
      ASSERT_GT(pids[r], 0);
      EXPECT_TRUE(exitedCleanly(pids[r])) << "rank " << r << " of " << n << " failed (its output is above)";
    }
  }
}

// NCCL 2.29's ncclCommSuspend / ncclCommResume / ncclCommMemStats (issue 43): flags without
// NCCL_SUSPEND_MEM do nothing; with it the calls between are refused (ncclInvalidUsage, the
// communicator goes on), the statistics say suspended, and after the resume an all-reduce is
// correct.
TEST_P(NcclTransports, SuspendAndResumeGiveMemoryBackAndTheCommunicatorGoesOn) {
  NCCL_NET_SCOPE(scope);
  const int n = 2;
  runRanks(n, [&](int r, ncclComm_t comm) {
    float x[8], y[8];
    for (int i = 0; i < 8; i++) x[i] = (float)(r * 10 + i);
    ASSERT_EQ(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    ASSERT_EQ(ncclCommSuspend(comm, 0), ncclSuccess);  // no flag: nothing happens
    ASSERT_EQ(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    uint64_t v = 7;
    ASSERT_EQ(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
    EXPECT_EQ(v, 0u);
    ASSERT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess) << ncclGetLastError(comm);
    ASSERT_EQ(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
    EXPECT_EQ(v, 1u);
    for (ncclCommMemStat_t st : {ncclStatGpuMemSuspend, ncclStatGpuMemPersist, ncclStatGpuMemTotal}) {
      v = 7;
      ASSERT_EQ(ncclCommMemStats(comm, st, &v), ncclSuccess);
      EXPECT_EQ(v, 0u) << "stat " << (int)st << ": no device memory is held here";
    }
    EXPECT_EQ(ncclCommMemStats(comm, static_cast<ncclCommMemStat_t>(9), &v), ncclInvalidArgument);
    EXPECT_EQ(ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "suspended")) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
    ASSERT_EQ(ncclCommResume(comm), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommResume(comm), ncclInvalidUsage);
    for (int i = 0; i < 8; i++) y[i] = -1;
    ASSERT_EQ(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    for (int i = 0; i < 8; i++) EXPECT_EQ(y[i], (float)(10 + 2 * i)) << "element " << i;
  });
}

// ncclCommQueryProperties fills what the caller's struct holds (NCCL 2.29.7's layout, or a
// shorter one), refuses one not made with NCCL_COMM_PROPERTIES_INITIALIZER; windows: a host
// buffer cannot be registered, and the refusal reaches every rank at once (no rank waits); the
// calls on windows refuse what is no window.
TEST(NcclInterface, PropertiesAndWindowsOfNccl229) {
  runRanks(2, [](int r, ncclComm_t comm) {
    ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
    p.deviceApiSupport = true;
    p.ginType = NCCL_GIN_TYPE_PROXY;
    ASSERT_EQ(ncclCommQueryProperties(comm, &p), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(p.rank, r);
    EXPECT_EQ(p.nRanks, 2);
    EXPECT_FALSE(p.deviceApiSupport);
    EXPECT_FALSE(p.multimemSupport);
    EXPECT_EQ(p.ginType, NCCL_GIN_TYPE_NONE);
    EXPECT_EQ(p.nLsaTeams, 0);
    // A caller whose struct ends after nRanks: nothing written past it.
    struct {
      ncclCommProperties_t head;
      char guard[64];
    } shortOne;
    memset(&shortOne, 0x5a, sizeof shortOne);
    shortOne.head.size = offsetof(ncclCommProperties_t, cudaDev);
    shortOne.head.magic = NCCL_API_MAGIC;
    ASSERT_EQ(ncclCommQueryProperties(comm, &shortOne.head), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(shortOne.head.nRanks, 2);
    const unsigned char* tail =
        reinterpret_cast<const unsigned char*>(&shortOne) + offsetof(ncclCommProperties_t, cudaDev);
    for (size_t i = 0; i < sizeof shortOne - offsetof(ncclCommProperties_t, cudaDev); i++)
      ASSERT_EQ(tail[i], 0x5a) << "byte " << i << " past the caller's struct was written";
    ncclCommProperties_t bad = NCCL_COMM_PROPERTIES_INITIALIZER;
    bad.magic = 1;
    EXPECT_EQ(ncclCommQueryProperties(comm, &bad), ncclInvalidUsage);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "NCCL_COMM_PROPERTIES_INITIALIZER")) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommQueryProperties(comm, nullptr), ncclInvalidArgument);

    static thread_local char host[8192];
    ncclWindow_t win = reinterpret_cast<ncclWindow_t>(&win);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_NE(ncclCommWindowRegister(comm, host, sizeof host, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "rank " << r << " waited";
    EXPECT_EQ(win, nullptr);
    EXPECT_NE(std::string(ncclGetLastError(comm)), "");
    void* user = nullptr;
    ncclWindow_t bogus = reinterpret_cast<ncclWindow_t>(host);
    EXPECT_EQ(ncclWinGetUserPtr(comm, bogus, &user), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "not a window alive")) << ncclGetLastError(comm);
    EXPECT_EQ(ncclWinGetUserPtr(comm, bogus, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclCommWindowDeregister(comm, bogus), ncclInvalidArgument);
    EXPECT_EQ(ncclCommWindowDeregister(comm, nullptr), ncclInvalidArgument);
    // The communicator goes on.
    int32_t a = r + 1, b = 0;
    ASSERT_EQ(ncclAllReduce(&a, &b, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(b, 3);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, NcclTransports, ::testing::ValuesIn(kNets),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace

// ---- attacks on NCCL 2.29's suspend / windows / properties and on the refusals through the
// drop-in (suspend_attack_test.cc holds the core's) ----
namespace {

// A short timeout for every communicator these cases make: a wait that runs to it costs this.
constexpr int kAttackTimeoutMs = 5000;
constexpr int kAttackAtOnceMs = 2500;

int64_t attackNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One thread drives both ranks (as in InitsAndSplitsInsideAGroupCompleteAtItsEnd): inside a group
// each ncclCommSplit is only recorded and runs at ncclGroupEnd. A config not made with
// NCCL_CONFIG_INITIALIZER on rank 1's split must not run that rank's part of the split now (it
// would wait for rank 0's, which this same thread makes only at the group's end).
TEST(NcclAttack, ABadConfigSplitInsideAGroupDrivenFromOneThreadDoesNotBlockIt) {
  clbtest::ScopedEnv env({{"COLIBRI_TIMEOUT_MS", "5000"}});
  const int n = 2;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) ASSERT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 7;
  ncclComm_t subs[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommSplit(comms[0], 0, 0, &subs[0], nullptr), ncclSuccess);
  const int64_t t0 = attackNowMs();
  const ncclResult_t rc = ncclCommSplit(comms[1], 0, 1, &subs[1], &bad);
  const int64_t took = attackNowMs() - t0;
  const std::string e = ncclGetLastError(comms[1]);
  std::cerr << "[ info ] rank 1's bad-config split inside the group: " << rc << " after " << took << " ms: " << e
            << "\n";
  EXPECT_EQ(rc, ncclInvalidArgument);
  EXPECT_LT(took, kAttackAtOnceMs) << "ncclCommSplit blocked inside a group: " << e;
  EXPECT_TRUE(contains(e, "NCCL_CONFIG_INITIALIZER")) << e;
  const ncclResult_t end = ncclGroupEnd();
  std::cerr << "[ info ] group end: " << end << ": " << ncclGetLastError(nullptr) << "\n";
  EXPECT_NE(end, ncclSuccess);
  for (ncclComm_t s : subs) {
    if (!s) continue;  // a split recorded in the group has a handle whose init failed
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(s, &async), ncclSuccess);
    EXPECT_NE(async, ncclSuccess);
  }
  // The parents go on (the split was refused, as ABadSplitOnOneRank... says).
  int32_t x[n] = {1, 2}, y[n] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) ncclAllReduce(&x[r], &y[r], 1, ncclInt32, ncclSum, comms[r], nullptr);
  const ncclResult_t ar = ncclGroupEnd();
  EXPECT_EQ(ar, ncclSuccess) << "the parents did not go on: " << ncclGetLastError(nullptr);
  for (int r = 0; r < n && ar == ncclSuccess; r++) EXPECT_EQ(y[r], 3);
  for (ncclComm_t c : subs)
    if (c) ncclCommDestroy(c);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Every rank's config is bad: every rank fails at once, each with its own message; the parent goes
// on; a NULL parent with a bad config says the config.
TEST(NcclAttack, ABadConfigSplitOnEveryRankFailsAtOnceAndTheParentGoesOn) {
  clbtest::ScopedEnv env({{"COLIBRI_TIMEOUT_MS", "5000"}});
  runRanks(3, [](int r, ncclComm_t comm) {
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.size = 3;
    ncclComm_t sub = reinterpret_cast<ncclComm_t>(&bad);
    const int64_t t0 = attackNowMs();
    EXPECT_EQ(ncclCommSplit(comm, 0, r, &sub, &bad), ncclInvalidArgument);
    EXPECT_LT(attackNowMs() - t0, kAttackAtOnceMs);
    EXPECT_EQ(sub, nullptr);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "NCCL_CONFIG_INITIALIZER")) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommSplit(nullptr, 0, r, &sub, &bad), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(nullptr), "NCCL_CONFIG_INITIALIZER")) << ncclGetLastError(nullptr);
    int32_t a = 1, b = 0;
    ASSERT_EQ(ncclAllReduce(&a, &b, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(b, 3);
  });
}

// The core refuses every call on a suspended communicator with a usage refusal that changes nothing
// (a bad type too: clbAllReduce checks the suspended state first). Through the drop-in, a call with
// an unknown datatype on a suspended communicator must not fail it on every rank either.
TEST_P(NcclTransports, ABadDatatypeOnASuspendedCommunicatorChangesNothing) {
  NCCL_NET_SCOPE(scope);
  clbtest::ScopedEnv env({{"COLIBRI_TIMEOUT_MS", "5000"}});
  runRanks(2, [](int r, ncclComm_t comm) {
    ASSERT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess) << ncclGetLastError(comm);
    int32_t x = r + 1, y = 0;
    if (r == 0) {
      const ncclResult_t rc = ncclAllReduce(&x, &y, 1, (ncclDataType_t)99, ncclSum, comm, nullptr);
      const std::string e = ncclGetLastError(comm);
      std::cerr << "[ info ] bad type on a suspended communicator: " << rc << ": " << e << "\n";
      EXPECT_EQ(rc, ncclInvalidUsage) << e;
      EXPECT_FALSE(contains(e, "fails with it on every rank")) << e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ncclResult_t async = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess) << "rank " << r << ": the suspended communicator failed: " << ncclGetLastError(comm);
    ASSERT_EQ(ncclCommResume(comm), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
        << "rank " << r << ": " << ncclGetLastError(comm);
  });
}

// ncclCommSuspend's odd flags: bits other than NCCL_SUSPEND_MEM alone do nothing, -1 suspends
// (collectively); ncclCommSuspend(0) of a suspended communicator is harmless; the statistics of a
// destroyed or NULL communicator are refused without writing the value.
TEST(NcclAttack, SuspendFlagsAndStatisticsOfDeadCommunicators) {
  clbtest::ScopedEnv env({{"COLIBRI_TIMEOUT_MS", "5000"}});
  runRanksOwning(2, [](int r, ncclComm_t comm) -> ncclComm_t {
    uint64_t v = 77;
    EXPECT_EQ(ncclCommSuspend(comm, 0x2), ncclSuccess);
    EXPECT_EQ(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
    EXPECT_EQ(v, 0u);
    EXPECT_EQ(ncclCommSuspend(comm, -1), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v), ncclSuccess);
    EXPECT_EQ(v, 1u);
    EXPECT_EQ(ncclCommSuspend(comm, 0), ncclSuccess);
    EXPECT_EQ(ncclCommMemStats(comm, (ncclCommMemStat_t)-1, &v), ncclInvalidArgument);
    EXPECT_EQ(v, 1u);
    EXPECT_EQ(ncclCommResume(comm), ncclSuccess) << ncclGetLastError(comm);
    int32_t a = r, b = -1;
    EXPECT_EQ(ncclAllReduce(&a, &b, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(b, 1);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    v = 77;
    EXPECT_NE(ncclCommMemStats(comm, ncclStatGpuMemTotal, &v), ncclSuccess);
    EXPECT_EQ(v, 77u);
    EXPECT_NE(ncclCommMemStats(nullptr, ncclStatGpuMemTotal, &v), ncclSuccess);
    EXPECT_EQ(v, 77u);
    EXPECT_NE(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
    EXPECT_NE(ncclCommResume(comm), ncclSuccess);
    EXPECT_NE(ncclCommSuspend(nullptr, NCCL_SUSPEND_MEM), ncclSuccess);
    ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
    p.rank = -5;
    EXPECT_NE(ncclCommQueryProperties(comm, &p), ncclSuccess);
    EXPECT_EQ(p.rank, -5);
    return nullptr;
  });
}

// ncclCommQueryProperties with size 0, a size smaller than the header, a huge size (only the
// fields of the struct it knows are written: a guard after the struct stays), and every size in
// between: nothing is written past min(size, sizeof).
TEST(NcclAttack, QueryPropertiesSizesNeverWritePastTheCallersStruct) {
  runRanks(1, [](int, ncclComm_t comm) {
    struct {
      ncclCommProperties_t p;
      unsigned char guard[256];
    } s;
    for (size_t size : {(size_t)0, (size_t)1, sizeof(size_t), offsetof(ncclCommProperties_t, rank) - 1}) {
      memset(&s, 0x5a, sizeof s);
      s.p.size = size;
      s.p.magic = NCCL_API_MAGIC;
      EXPECT_EQ(ncclCommQueryProperties(comm, &s.p), ncclInvalidUsage) << "size " << size;
    }
    for (size_t size : {SIZE_MAX, (size_t)1 << 40, sizeof(ncclCommProperties_t) + 200}) {
      memset(&s, 0x5a, sizeof s);
      s.p.size = size;
      s.p.magic = NCCL_API_MAGIC;
      ASSERT_EQ(ncclCommQueryProperties(comm, &s.p), ncclSuccess) << "size " << size << ": " << ncclGetLastError(comm);
      EXPECT_EQ(s.p.nRanks, 1);
      for (size_t i = 0; i < sizeof s.guard; i++) ASSERT_EQ(s.guard[i], 0x5a) << "size " << size << ", byte " << i;
    }
    for (size_t size = offsetof(ncclCommProperties_t, rank); size <= sizeof(ncclCommProperties_t); size++) {
      memset(&s, 0x5a, sizeof s);
      s.p.size = size;
      s.p.magic = NCCL_API_MAGIC;
      ASSERT_EQ(ncclCommQueryProperties(comm, &s.p), ncclSuccess) << "size " << size;
      const unsigned char* b = reinterpret_cast<const unsigned char*>(&s);
      for (size_t i = size; i < sizeof s; i++) ASSERT_EQ(b[i], 0x5a) << "size " << size << ": byte " << i << " written";
    }
  });
}

// Windows with NULL or dead communicators and windows, twice deregistered, or of another
// communicator: refused, nothing read; the communicator goes on.
TEST(NcclAttack, WindowsWithNullDeadAndForeignHandles) {
  clbtest::ScopedEnv env({{"COLIBRI_TIMEOUT_MS", "5000"}});
  runRanks(2, [](int r, ncclComm_t comm) {
    static thread_local char host[4096];
    ncclWindow_t win = reinterpret_cast<ncclWindow_t>(host);
    EXPECT_NE(ncclCommWindowRegister(nullptr, host, sizeof host, &win, 0), ncclSuccess);
    EXPECT_EQ(win, nullptr);
    const int64_t t0 = attackNowMs();
    // NULL win on rank 1 only (rank 0 registers normally): every rank refused, nobody waits.
    win = reinterpret_cast<ncclWindow_t>(host);
    const ncclResult_t rc =
        ncclCommWindowRegister(comm, host, sizeof host, r == 1 ? nullptr : &win, NCCL_WIN_COLL_SYMMETRIC);
    EXPECT_NE(rc, ncclSuccess);
    EXPECT_LT(attackNowMs() - t0, kAttackAtOnceMs) << ncclGetLastError(comm);
    if (r == 0) {
      EXPECT_EQ(win, nullptr);
    }
    void* user = host;
    EXPECT_EQ(ncclWinGetUserPtr(nullptr, nullptr, &user), ncclInvalidArgument);
    EXPECT_EQ(ncclWinGetUserPtr(comm, nullptr, &user), ncclInvalidArgument);
    EXPECT_EQ(user, (void*)host);
    ncclWindow_t bogus = reinterpret_cast<ncclWindow_t>(&user);
    EXPECT_NE(ncclCommWindowDeregister(nullptr, bogus), ncclSuccess);
    EXPECT_EQ(ncclCommWindowDeregister(comm, bogus), ncclInvalidArgument);
    EXPECT_EQ(ncclCommWindowDeregister(comm, bogus), ncclInvalidArgument);
    int32_t a = r + 1, b = 0;
    ASSERT_EQ(ncclAllReduce(&a, &b, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(b, 3);
  });
}

// A group over two communicators through the drop-in: rank 0's send on the child has an unknown
// type (refused by libnccl itself, tellPeers); rank 1's group holds the matching receive and an
// all-reduce on the parent. Both ranks' group ends fail at once, nothing ran on rank 0, and what
// rank 1 hears on the parent names rank 0's real reason (the datatype), not the placeholder call
// (clbSend on a NULL communicator) that marks Colibri's group as refused. Rank 0 stays alive until
// rank 1 is done (a peer that closes makes rank 1's first point-to-point connection wait to the
// timeout: AFirstReceiveFromARankThatRefusedAndClosedIsToldAtOnce in suspend_attack_test.cc).
TEST_P(NcclTransports, AGroupRefusalOverTwoCommunicatorsThroughTheDropIn) {
  NCCL_NET_SCOPE(scope);
  clbtest::ScopedEnv env({{"COLIBRI_TIMEOUT_MS", "8000"}});
  std::atomic<bool> rank1Done{false};
  runRanks(2, [&](int r, ncclComm_t comm) {
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 0, r, &child, nullptr), ncclSuccess) << ncclGetLastError(comm);
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {-1, -1, -1, -1}, z = -1, w = 5;
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 refuses first
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ncclAllReduce(x, y, 4, ncclInt32, ncclSum, comm, nullptr);
    if (r == 0)
      EXPECT_EQ(ncclSend(&w, 1, (ncclDataType_t)99, 1, child, nullptr), ncclInvalidArgument);
    else
      EXPECT_EQ(ncclRecv(&z, 1, ncclInt32, 0, child, nullptr), ncclSuccess);
    const int64_t t0 = attackNowMs();
    const ncclResult_t rc = ncclGroupEnd();
    const int64_t took = attackNowMs() - t0;
    const std::string e = ncclGetLastError(nullptr);
    std::cerr << "[ info ] rank " << r << " group end: " << rc << " after " << took << " ms: " << e << "\n";
    EXPECT_NE(rc, ncclSuccess);
    EXPECT_LT(took, 2 * kAttackAtOnceMs) << "rank " << r << ": " << e;
    if (r == 0) {
      for (int i = 0; i < 4; i++) EXPECT_EQ(y[i], -1) << "rank 0 ran part of a refused group";
    } else {
      EXPECT_TRUE(contains(e, "datatype 99")) << "rank 1 was not told rank 0's reason: " << e;
      EXPECT_FALSE(contains(e, "communicator is NULL")) << "rank 1 was told a placeholder's reason: " << e;
      rank1Done = true;
    }
    EXPECT_EQ(z, -1);
    for (ncclComm_t c : {comm, child}) {
      ncclResult_t async = ncclSuccess;
      ASSERT_EQ(ncclCommGetAsyncError(c, &async), ncclSuccess);
      EXPECT_NE(async, ncclSuccess) << "rank " << r << ", " << (c == comm ? "parent" : "child") << " did not fail";
    }
    for (int i = 0; i < 1000 && r == 0 && !rank1Done; i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
}

}  // namespace
