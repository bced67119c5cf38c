// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Transport verbs through the C ABI: threads as ranks, the four collectives through the verbs
// plugin over the verbs emulator (the stand-in libibverbs.so.1 this binary links), checked element by element with the
// references of collectives_test.cc; and the set-up failures every rank must report (no kernel RDMA support, port down,
// algorithm direct) without hanging. The same collectives with ranks as processes (the test binary spawned once per
// rank), and environment errors end to end through clbCommInitRank: RLIMIT_MEMLOCK too low, a path MTU mismatch between
// hosts, a GID index without a RoCE v2 GID.
#include <gtest/gtest.h>

#include "tests/test_fd_io.h"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "tests/test_ranks.h"
#include "algo/algorithms.h"
#include "core/comm.h"
#include "base/dtype.h"
#include "transport/channel.h"
#include "transport/transport.h"
#include "transport/net/net_plugin.h"
#include "transport/verbs/verbs_connect.h"
#include "transport/verbs/verbs_channel.h"
#include "tests/verbs_emu/emu_client.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// Sets (or, with NULL, unsets) an environment variable for the life of the object; the verbs
// emulator reads its knobs again on both ends (it keeps them once read).
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
    clbtest::emu::resetConfig();
  }
  ~EnvVar() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
    clbtest::emu::resetConfig();
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// Runs body(rank, comm) on nranks threads over transport verbs; returns each rank's init error
// ("" when it succeeded). `configure`, if given, changes each rank's config last.
std::vector<std::string> runVerbs(int nranks, const std::function<void(int, clbComm_t)>& body,
                                  int algorithm = clbAlgoRing, int64_t chunkBytes = 4096, int64_t timeoutMs = 20000,
                                  const std::function<void(clbConfig_t*)>& configure = {}) {
  return clbtest::runThreadRanks(
      nranks,
      [&](int, clbConfig_t* cfg) {
        cfg->transport = clbTransportVerbs;
        cfg->algorithm = algorithm;
        cfg->chunkBytes = chunkBytes;
        cfg->timeoutMs = timeoutMs;
        if (configure) configure(cfg);
      },
      body);
}

// The inputs of collectives_test.cc.
int64_t input(int rank, size_t i) { return (int64_t)((rank + 1) * 1000003ull + i * 7919ull) % 2001 - 1000; }

template <class T>
void checkAllFour(int nranks, int r, clbComm_t comm, size_t count, clbDataType_t type) {
  // allReduce sum (out of place) and max (in place).
  std::vector<T> in(count), out(count, T(-7));
  for (size_t i = 0; i < count; i++) in[i] = (T)input(r, i);
  ASSERT_EQ(clbAllReduce(in.data(), out.data(), count, type, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
  for (size_t i = 0; i < count; i++) {
    T want = 0;
    for (int p = 0; p < nranks; p++) want += (T)input(p, i);
    ASSERT_EQ(out[i], want) << "allReduce sum, rank " << r << " element " << i;
  }
  ASSERT_EQ(clbAllReduce(in.data(), in.data(), count, type, clbMax, comm, nullptr), clbSuccess) << clbGetLastError();
  for (size_t i = 0; i < count; i++) {
    T want = (T)input(0, i);
    for (int p = 1; p < nranks; p++) want = std::max(want, (T)input(p, i));
    ASSERT_EQ(in[i], want) << "allReduce max in place, rank " << r << " element " << i;
  }
  // allGather
  std::vector<T> g(count * nranks, T(-7));
  for (size_t i = 0; i < count; i++) in[i] = (T)input(r, i);
  ASSERT_EQ(clbAllGather(in.data(), g.data(), count, type, comm, nullptr), clbSuccess) << clbGetLastError();
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < count; i++) ASSERT_EQ(g[p * count + i], (T)input(p, i)) << "allGather, rank " << r;
  // reduceScatter (min): input nranks * count
  std::vector<T> big(count * nranks), rs(count, T(-7));
  for (size_t i = 0; i < big.size(); i++) big[i] = (T)input(r, i);
  ASSERT_EQ(clbReduceScatter(big.data(), rs.data(), count, type, clbMin, comm, nullptr), clbSuccess)
      << clbGetLastError();
  for (size_t i = 0; i < count; i++) {
    T want = (T)input(0, r * count + i);
    for (int p = 1; p < nranks; p++) want = std::min(want, (T)input(p, r * count + i));
    ASSERT_EQ(rs[i], want) << "reduceScatter min, rank " << r << " element " << i;
  }
  // broadcast from the last rank
  int root = nranks - 1;
  std::vector<T> b(count, T(-7));
  ASSERT_EQ(clbBroadcast(r == root ? in.data() : nullptr, b.data(), count, type, root, comm, nullptr), clbSuccess)
      << clbGetLastError();
  for (size_t i = 0; i < count; i++) ASSERT_EQ(b[i], (T)input(root, i)) << "broadcast, rank " << r;
  int algo = -1;
  clbCommLastAlgorithm(comm, &algo);
  if (count > 0) {
    EXPECT_EQ(algo, clbAlgoRing);
  }
}

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

class VerbsCollectives : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// chunkBytes 4096: 10007 int64 (80 KB) and 10007 float64 span many slot-sized messages.
TEST_P(VerbsCollectives, AllFourOverEmulatorMatchReference) {
  auto [nranks, count] = GetParam();
  auto start = Clock::now();
  expectNoErrors(runVerbs(nranks, [&, nranks = nranks, count = count](int r, clbComm_t comm) {
    checkAllFour<int64_t>(nranks, r, comm, count, clbInt64);
    checkAllFour<int32_t>(nranks, r, comm, count + 3, clbInt32);
    checkAllFour<double>(nranks, r, comm, count, clbFloat64);  // integer values: exact
  }));
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(s, 15.0) << "the emulated verbs suite took " << s << " s";
}

INSTANTIATE_TEST_SUITE_P(Emulator, VerbsCollectives,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(size_t(0), size_t(1), size_t(7), size_t(10007))),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_c" +
                                  std::to_string(std::get<1>(info.param));
                         });

// clbCommInfo of both ranks of a 2-rank verbs communicator.
std::vector<std::string> infosOfTwoRanks() {
  std::vector<std::string> infos(2);
  expectNoErrors(runVerbs(2, [&](int r, clbComm_t comm) {
    char b[4096];
    ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess);
    infos[r] = b;
  }));
  return infos;
}

// Messages striped over 3 queue pairs per link (verbsQpsPerConnection), through the C ABI: the
// same references, element by element, and the transport line says it.
TEST(VerbsCollectivesQps, AllFourOverThreeQueuePairsMatchReference) {
  for (int nranks : {2, 3}) {
    expectNoErrors(runVerbs(
        nranks,
        [&](int r, clbComm_t comm) {
          char b[4096];
          ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess);
          EXPECT_NE(std::string(b).find("3 queue pairs per link"), std::string::npos) << b;
          for (size_t count : {size_t(1), size_t(7), size_t(10007)}) {
            checkAllFour<int64_t>(nranks, r, comm, count, clbInt64);
            checkAllFour<double>(nranks, r, comm, count + 5, clbFloat64);
          }
        },
        clbAlgoRing, 4096, 20000, [](clbConfig_t* c) { c->verbsQpsPerConnection = 3; }));
  }
}

TEST(VerbsTransport, NameParsesAndInfoNamesTheEmulatorLink) {
  int t = -1;
  ASSERT_EQ(clbTransportFromName("verbs", &t), clbSuccess);
  EXPECT_EQ(t, clbTransportVerbs);
  EXPECT_STREQ(clbTransportName(clbTransportVerbs), "verbs");
  {
    EnvVar e("COLIBRI_TRANSPORT", "verbs");
    clbConfig_t cfg;
    ASSERT_EQ(clbConfigInit(&cfg), clbSuccess) << clbGetLastError();
    EXPECT_EQ(cfg.transport, clbTransportVerbs);
  }
  for (auto& i : infosOfTwoRanks()) {
    EXPECT_NE(i.find("transport: verbs"), std::string::npos) << i;
    EXPECT_NE(i.find("verbs: colibri_emu0 port 1, GID index"), std::string::npos) << i;
    EXPECT_NE(i.find("path MTU 4096"), std::string::npos) << i;
    // The emulator registers dma-bufs; what the GPU does is decided at the first device call.
    EXPECT_NE(i.find("device buffers: GPUDirect RDMA, decided at the first device call (dma-buf if the GPU driver "
                     "supports it, then nvidia-peermem"),
              std::string::npos)
        << i;
  }
}

TEST(VerbsTransport, InfoSaysDeviceBuffersAreStagedWhenGpuMemoryIsHost) {
  EnvVar env("COLIBRI_VERBS_GPU_MEMORY", "host");
  for (auto& i : infosOfTwoRanks())
    EXPECT_NE(i.find("device buffers staged through pinned host memory (COLIBRI_VERBS_GPU_MEMORY=host)"),
              std::string::npos)
        << i;
}

// The same from the configuration alone (as Java's Options set it), the environment saying nothing:
// the plugin asks the communicator, not the environment.
TEST(VerbsTransport, InfoFollowsTheConfiguredGpuMemoryNotTheEnvironment) {
  EnvVar env("COLIBRI_VERBS_GPU_MEMORY", "");
  std::vector<std::string> infos(2);
  expectNoErrors(runVerbs(
      2,
      [&](int r, clbComm_t comm) {
        char b[4096];
        ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess);
        infos[r] = b;
      },
      clbAlgoRing, 4096, 20000,
      [](clbConfig_t* cfg) { ASSERT_EQ(clbConfigSet(cfg, "verbsGpuMemory", "host"), clbSuccess); }));
  for (auto& i : infos) EXPECT_NE(i.find("device buffers staged through pinned host memory"), std::string::npos) << i;
}

// Every rank fails with the same message, quickly (no rank waits for another until the timeout).
void expectAllFail(int nranks, const std::string& want, int algorithm = clbAlgoRing) {
  auto start = Clock::now();
  auto errors = runVerbs(
      nranks, [](int, clbComm_t) { ADD_FAILURE() << "init succeeded"; }, algorithm, 4096, 10000);
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  for (int r = 0; r < nranks; r++)
    EXPECT_NE(errors[r].find(want), std::string::npos) << "rank " << r << ": " << errors[r];
  EXPECT_LT(s, 5.0) << "failing init took " << s << " s";
}

TEST(VerbsTransport, EmulatedNoKernelSupportFailsOnEveryRank) {
  EnvVar nk("COLIBRI_VERBS_EMU_NO_KERNEL", "1");
  expectAllFail(3, "ENOSYS: this kernel has no RDMA support loaded");
}

TEST(VerbsTransport, PortDownFailsOnEveryRank) {
  EnvVar down("COLIBRI_VERBS_EMU_PORT_DOWN", "1");
  expectAllFail(2, "not ACTIVE");
}

TEST(VerbsTransport, UnknownDeviceAndBadPortAreClear) {
  {
    EnvVar d("COLIBRI_VERBS_DEVICE", "mlx5_9");
    expectAllFail(2, "no RDMA device named \"mlx5_9\"");
  }
  // A bad variable is refused by clbConfigInit (and by init without a config), naming it.
  EnvVar p("COLIBRI_VERBS_PORT", "x");
  clbConfig_t cfg;
  EXPECT_EQ(clbConfigInit(&cfg), clbInvalidArgument);
  EXPECT_NE(std::string(clbGetLastError()).find("COLIBRI_VERBS_PORT='x' is not an integer in 1..255"),
            std::string::npos)
      << clbGetLastError();
}

TEST(VerbsTransport, AlgorithmDirectIsRefused) {
  expectAllFail(2, "algorithm direct needs the shm transport", clbAlgoDirect);
}

// ---- ranks as processes ----
// The parent creates the unique id (its process hosts the bootstrap root) and spawns the test
// binary once per rank with a filter selecting VerbsProcesses.RankChild; the environment carries
// the rank, the rank count, the id in hex and what the child must check.
const char* const kRankEnv = "COLIBRI_TEST_VERBS_RANK";
const char* const kNranksEnv = "COLIBRI_TEST_VERBS_NRANKS";
const char* const kIdEnv = "COLIBRI_TEST_VERBS_ID";
const char* const kWantInfoEnv = "COLIBRI_TEST_VERBS_WANT_INFO";    // substring of clbCommInfo
const char* const kWantErrorEnv = "COLIBRI_TEST_VERBS_WANT_ERROR";  // init must fail with this

std::string toHex(const clbUniqueId& id) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < CLB_UNIQUE_ID_BYTES; i++) {
    unsigned char b = (unsigned char)id.internal[i];
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

bool fromHex(const std::string& s, clbUniqueId* id) {
  if (s.size() != 2 * CLB_UNIQUE_ID_BYTES) return false;
  auto nib = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  for (int i = 0; i < CLB_UNIQUE_ID_BYTES; i++) {
    int hi = nib(s[2 * i]), lo = nib(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id->internal[i] = (char)(hi * 16 + lo);
  }
  return true;
}

TEST(VerbsProcesses, RankChild) {
  const char* rankStr = getenv(kRankEnv);
  if (!rankStr) GTEST_SKIP() << "runs only as a rank process of the VerbsProcesses tests";
  const int r = atoi(rankStr), nranks = atoi(getenv(kNranksEnv));
  clbUniqueId id;
  ASSERT_TRUE(fromHex(getenv(kIdEnv), &id)) << "bad " << kIdEnv;
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = clbTransportVerbs;
  cfg.algorithm = clbAlgoRing;
  cfg.chunkBytes = 4096;
  cfg.timeoutMs = 20000;
  clbComm_t comm = nullptr;
  clbResult_t rc = clbCommInitRank(&comm, &id, r, nranks, &cfg);
  if (const char* want = getenv(kWantErrorEnv)) {
    ASSERT_NE(rc, clbSuccess) << "rank " << r << ": init succeeded, expected an error with: " << want;
    std::string e = clbGetLastError();
    // Several required substrings, separated by '|'.
    const std::string w = want;
    for (size_t b = 0; b <= w.size();) {
      size_t n = w.find('|', b);
      if (n == std::string::npos) n = w.size();
      std::string part = w.substr(b, n - b);
      EXPECT_NE(e.find(part), std::string::npos) << "rank " << r << " wants \"" << part << "\" in: " << e;
      b = n + 1;
    }
    return;
  }
  ASSERT_EQ(rc, clbSuccess) << "rank " << r << ": " << clbGetLastError();
  if (const char* want = getenv(kWantInfoEnv)) {
    char b[4096];
    ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess);
    EXPECT_NE(std::string(b).find(want), std::string::npos) << "rank " << r << " info: " << b;
  }
  for (size_t count : {size_t(1), size_t(7), size_t(1001), size_t(10007)}) {
    checkAllFour<int64_t>(nranks, r, comm, count, clbInt64);
    checkAllFour<int32_t>(nranks, r, comm, count + 2, clbInt32);
    checkAllFour<double>(nranks, r, comm, count, clbFloat64);  // integer values: exact
    if (HasFatalFailure()) break;
  }
  clbCommDestroy(comm);
}

// Spawns nranks rank processes (env: the common extras plus perRank[r]) and waits for them all,
// killing every one still running at the deadline. Each must exit 0.
void runRankProcesses(int nranks, const std::vector<std::string>& common,
                      const std::vector<std::vector<std::string>>& perRank = {}, double timeoutS = 30.0) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  const std::string hex = toHex(id);
  std::vector<pid_t> pids(nranks, -1);
  for (int r = 0; r < nranks; r++) {
    std::vector<std::string> extra = {std::string(kRankEnv) + "=" + std::to_string(r),
                                      std::string(kNranksEnv) + "=" + std::to_string(nranks),
                                      std::string(kIdEnv) + "=" + hex};
    extra.insert(extra.end(), common.begin(), common.end());
    if (r < (int)perRank.size()) extra.insert(extra.end(), perRank[r].begin(), perRank[r].end());
    pids[r] = clb::test::spawnSelf("VerbsProcesses.RankChild", extra);
    if (pids[r] < 0) ADD_FAILURE() << "could not start rank process " << r;
  }
  // One deadline for all ranks.
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutS));
  std::vector<int> status(nranks, 0);
  for (int r = 0; r < nranks; r++) {
    if (pids[r] < 0) continue;
    const int left =
        (int)std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (!clb::test::waitOrKill(pids[r], left, &status[r])) {
      ADD_FAILURE() << "rank process " << r << " did not exit within " << timeoutS << " s (killed)";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
        << "rank process " << r << " failed (status " << status[r] << "; its output is above)";
  }
}

class VerbsProcessCollectives : public ::testing::TestWithParam<int> {};

TEST_P(VerbsProcessCollectives, AllFourOverEmulatorMatchReference) {
  auto start = Clock::now();
  runRankProcesses(GetParam(), {});
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(s, 25.0) << "the emulated verbs suite in processes took " << s << " s";
}

INSTANTIATE_TEST_SUITE_P(Emulator, VerbsProcessCollectives, ::testing::Values(2, 3),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// ---- environment errors, end to end through clbCommInitRank (issue #5) ----

// RLIMIT_MEMLOCK too low: the emulator's per-process byte limit makes ibv_reg_mr fail with ENOMEM
// on every rank process; the message names the limit and the fixes.
TEST(VerbsEnvironment, MemlockTooLowNamesRlimitAndTheFix) {
  runRankProcesses(
      2, {"COLIBRI_VERBS_EMU_MEMLOCK_BYTES=1",
          std::string(kWantErrorEnv) + "=RLIMIT_MEMLOCK|ulimit -l unlimited|limits.conf|--ulimit memlock=-1"});
}

// Different active MTUs on the emulated hosts: the path MTU is the minimum, and the collectives
// still work.
TEST(VerbsEnvironment, PathMtuMismatchUsesTheMinimum) {
  runRankProcesses(2, {std::string(kWantInfoEnv) + "=path MTU 1024"},
                   {{"COLIBRI_VERBS_EMU_MTU=1024"}, {"COLIBRI_VERBS_EMU_MTU=4096"}});
}

// A RoCE port without a RoCE v2 GID (the interface has no IP address): the automatic choice finds
// none, and every rank says so, with both fixes.
TEST(VerbsEnvironment, NoRoceV2GidNamesBothFixes) {
  EnvVar noV2("COLIBRI_VERBS_EMU_ROCE_V2", "0");
  expectAllFail(2, "has no RoCE v2 GID: give the interface an IP address, or set COLIBRI_VERBS_GID_INDEX");
}

// A GID index that names no usable RoCE v2 GID (an empty entry, one past the table): the message
// says to set COLIBRI_VERBS_GID_INDEX.
TEST(VerbsEnvironment, BadGidIndexNamesTheVariable) {
  for (const char* idx : {"5", "200"}) {
    EnvVar g("COLIBRI_VERBS_GID_INDEX", idx);
    expectAllFail(2, "set COLIBRI_VERBS_GID_INDEX to the index of a RoCE v2 GID");
  }
}

// Port not ACTIVE: VerbsTransport.PortDownFailsOnEveryRank.

// ---- the verbs options of clbConfig_t (verbsDevice ... verbsRetryCount, verbsQpsPerConnection) ----

// Unsets every COLIBRI_VERBS_* option variable for its life.
struct NoVerbsEnvironment {
  EnvVar device{"COLIBRI_VERBS_DEVICE", nullptr}, port{"COLIBRI_VERBS_PORT", nullptr},
      gid{"COLIBRI_VERBS_GID_INDEX", nullptr}, tc{"COLIBRI_VERBS_TRAFFIC_CLASS", nullptr},
      timeout{"COLIBRI_VERBS_TIMEOUT", nullptr}, retry{"COLIBRI_VERBS_RETRY_COUNT", nullptr},
      qps{"COLIBRI_VERBS_QPS_PER_CONNECTION", nullptr};
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Init of one rank on its own with `config` (NULL: clbConfigInit's); "" or the error.
std::string initAlone(const clbConfig_t* config, clbConfig_t* used = nullptr) {
  clbUniqueId id;
  EXPECT_EQ(clbGetUniqueId(&id), clbSuccess) << clbGetLastError();
  clbComm_t comm = nullptr;
  if (clbCommInitRank(&comm, &id, 0, 1, config) != clbSuccess) return clbGetLastError();
  if (used) *used = comm->cfg;
  clbCommDestroy(comm);
  return "";
}

TEST(VerbsConfig, DefaultsAndEnvironmentVariables) {
  NoVerbsEnvironment none;
  clbConfig_t cfg;
  ASSERT_EQ(clbConfigInit(&cfg), clbSuccess) << clbGetLastError();
  EXPECT_STREQ(cfg.verbsDevice, "");
  EXPECT_EQ(cfg.verbsPort, 1);
  EXPECT_EQ(cfg.verbsGidIndex, -1);
  EXPECT_EQ(cfg.verbsTrafficClass, 0);
  EXPECT_EQ(cfg.verbsTimeout, 14);
  EXPECT_EQ(cfg.verbsRetryCount, 7);
  EXPECT_EQ(cfg.verbsQpsPerConnection, 1);
  EXPECT_EQ(cfg.verbsQpsPerConnection, CLB_DEFAULT_VERBS_QPS_PER_CONNECTION);
  EXPECT_EQ(cfg.verbsTimeout, clb::verbs::VerbsOptions().timeout) << "the channel's default is the config's";
  EXPECT_EQ(cfg.verbsRetryCount, clb::verbs::VerbsOptions().retryCnt);
  EXPECT_EQ(cfg.verbsQpsPerConnection, clb::verbs::VerbsOptions().qpsPerConnection);
  EnvVar d("COLIBRI_VERBS_DEVICE", "mlx5_3"), p("COLIBRI_VERBS_PORT", "2"), g("COLIBRI_VERBS_GID_INDEX", "3"),
      t("COLIBRI_VERBS_TRAFFIC_CLASS", "106"), o("COLIBRI_VERBS_TIMEOUT", "20"), r("COLIBRI_VERBS_RETRY_COUNT", "5"),
      q("COLIBRI_VERBS_QPS_PER_CONNECTION", "4");
  ASSERT_EQ(clbConfigInit(&cfg), clbSuccess) << clbGetLastError();
  EXPECT_STREQ(cfg.verbsDevice, "mlx5_3");
  EXPECT_EQ(cfg.verbsPort, 2);
  EXPECT_EQ(cfg.verbsGidIndex, 3);
  EXPECT_EQ(cfg.verbsTrafficClass, 106);
  EXPECT_EQ(cfg.verbsTimeout, 20);
  EXPECT_EQ(cfg.verbsRetryCount, 5);
  EXPECT_EQ(cfg.verbsQpsPerConnection, 4);
}

// The channel options the plugin reads through the core's host (its option callback over the
// communicator's configuration) carry the config's verbs fields, the QP count among them.
TEST(VerbsConfig, OptionsThroughTheHostCarryTheConfigFields) {
  NoVerbsEnvironment none;
  for (int n : {1, 2, 8}) {
    auto errors = clbtest::runThreadRanks(
        1,
        [n](int, clbConfig_t* cfg) {
          cfg->verbsQpsPerConnection = n;
          cfg->verbsTrafficClass = 40 + n;
          cfg->verbsRetryCount = n % 8;
          cfg->pipelineDepth = 3;
          snprintf(cfg->verbsDevice, sizeof cfg->verbsDevice, "mlx5_%d", n);
        },
        [n](int, clbComm_t comm) {
          clb::verbs::VerbsOptions o;
          std::string device;
          ASSERT_EQ(clb::verbs::verbsOptionsFromHost(clb::netHostFor(comm), &o, &device), clbSuccess)
              << clbGetLastError();
          EXPECT_EQ(o.qpsPerConnection, n);
          EXPECT_EQ(o.trafficClass, 40 + n);
          EXPECT_EQ(o.retryCnt, n % 8);
          EXPECT_EQ(o.slots, 3);
          EXPECT_EQ(device, "mlx5_" + std::to_string(n));
          EXPECT_STREQ(o.deviceName, device.c_str());
        });
    EXPECT_EQ(errors[0], "");
  }
}

TEST(VerbsConfig, BadEnvironmentValuesNameTheVariableValueAndRange) {
  NoVerbsEnvironment none;
  const std::string longName(CLB_VERBS_DEVICE_BYTES, 'm');
  struct {
    const char* name;
    std::string value, want;
  } cases[] = {
      {"COLIBRI_VERBS_PORT", "0", "COLIBRI_VERBS_PORT='0' is not an integer in 1..255"},
      {"COLIBRI_VERBS_PORT", "256", "COLIBRI_VERBS_PORT='256' is not an integer in 1..255"},
      {"COLIBRI_VERBS_GID_INDEX", "-2", "COLIBRI_VERBS_GID_INDEX='-2' is not an integer in -1..255"},
      {"COLIBRI_VERBS_TRAFFIC_CLASS", "256", "COLIBRI_VERBS_TRAFFIC_CLASS='256' is not an integer in 0..255"},
      {"COLIBRI_VERBS_TRAFFIC_CLASS", "0x20", "COLIBRI_VERBS_TRAFFIC_CLASS='0x20' is not an integer in 0..255"},
      {"COLIBRI_VERBS_TIMEOUT", "32", "COLIBRI_VERBS_TIMEOUT='32' is not an integer in 0..31"},
      {"COLIBRI_VERBS_TIMEOUT", "-1", "COLIBRI_VERBS_TIMEOUT='-1' is not an integer in 0..31"},
      {"COLIBRI_VERBS_RETRY_COUNT", "8", "COLIBRI_VERBS_RETRY_COUNT='8' is not an integer in 0..7"},
      {"COLIBRI_VERBS_QPS_PER_CONNECTION", "0", "COLIBRI_VERBS_QPS_PER_CONNECTION='0' is not an integer in 1..8"},
      {"COLIBRI_VERBS_QPS_PER_CONNECTION", "9", "COLIBRI_VERBS_QPS_PER_CONNECTION='9' is not an integer in 1..8"},
      {"COLIBRI_VERBS_DEVICE", longName,
       "COLIBRI_VERBS_DEVICE='" + longName + "' is 64 bytes long; a device name may have at most 63"},
  };
  for (auto& c : cases) {
    EnvVar e(c.name, c.value.c_str());
    clbConfig_t cfg;
    EXPECT_EQ(clbConfigInit(&cfg), clbInvalidArgument) << c.name << "=" << c.value;
    EXPECT_TRUE(contains(clbGetLastError(), c.want)) << clbGetLastError();
    std::string err = initAlone(nullptr);  // init without a config reads the environment too
    EXPECT_TRUE(contains(err, c.want)) << err;
  }
}

TEST(VerbsConfig, OutOfRangeFieldsAreRefusedByInit) {
  NoVerbsEnvironment none;
  struct {
    std::function<void(clbConfig_t*)> set;
    const char* want;
  } cases[] = {
      {[](clbConfig_t* c) { c->verbsPort = 0; }, "config verbsPort=0 is out of range 1..255"},
      {[](clbConfig_t* c) { c->verbsGidIndex = 256; }, "config verbsGidIndex=256 is out of range -1..255"},
      {[](clbConfig_t* c) { c->verbsTrafficClass = -1; }, "config verbsTrafficClass=-1 is out of range 0..255"},
      {[](clbConfig_t* c) { c->verbsTimeout = 32; }, "config verbsTimeout=32 is out of range 0..31"},
      {[](clbConfig_t* c) { c->verbsRetryCount = 8; }, "config verbsRetryCount=8 is out of range 0..7"},
      {[](clbConfig_t* c) { c->verbsQpsPerConnection = 0; }, "config verbsQpsPerConnection=0 is out of range 1..8"},
      {[](clbConfig_t* c) { c->verbsQpsPerConnection = 9; }, "config verbsQpsPerConnection=9 is out of range 1..8"},
      {[](clbConfig_t* c) { memset(c->verbsDevice, 'x', sizeof c->verbsDevice); },
       "config verbsDevice is not a NUL-terminated string within its 64 bytes"},
  };
  for (auto& c : cases) {
    clbConfig_t cfg;
    ASSERT_EQ(clbConfigInit(&cfg), clbSuccess) << clbGetLastError();
    c.set(&cfg);
    std::string err = initAlone(&cfg);
    EXPECT_TRUE(contains(err, c.want)) << err;
  }
}

// A caller built against the first clbConfig_t (size 64, no verbs fields) still works: the verbs
// fields come from the defaults and COLIBRI_VERBS_*, never from the bytes past its struct.
TEST(VerbsConfig, StructOfTheFirstVersionGetsDefaultsForTheVerbsFields) {
  NoVerbsEnvironment none;
  EnvVar tc("COLIBRI_VERBS_TRAFFIC_CLASS", "40");
  clbConfig_t cfg;
  ASSERT_EQ(clbConfigInit(&cfg), clbSuccess) << clbGetLastError();
  cfg.timeoutMs = 12345;
  std::vector<unsigned char> old(sizeof(clbConfig_t), 0xAB);  // garbage where the new fields are
  memcpy(old.data(), &cfg, 60);                               // size .. versionCheck
  reinterpret_cast<clbConfig_t*>(old.data())->size = 64;
  clbConfig_t used;
  EXPECT_EQ(initAlone(reinterpret_cast<clbConfig_t*>(old.data()), &used), "");
  EXPECT_EQ(used.size, sizeof(clbConfig_t));
  EXPECT_EQ(used.timeoutMs, 12345);
  EXPECT_EQ(used.verbsPort, 1);
  EXPECT_EQ(used.verbsGidIndex, -1);
  EXPECT_EQ(used.verbsTrafficClass, 40);
  EXPECT_EQ(used.verbsTimeout, 14);
  EXPECT_EQ(used.verbsRetryCount, 7);
  EXPECT_EQ(used.verbsQpsPerConnection, 1);
  EXPECT_STREQ(used.verbsDevice, "");
  cfg.size = 100;
  EXPECT_TRUE(contains(initAlone(&cfg), "config.size=100 but this library expects")) << clbGetLastError();
}

// A program built against the first clbConfig_t calls the exported clbConfigInit (the header's
// macro passes the size as compiled): 64 bytes written, never more, and the result is accepted.
TEST(VerbsConfig, InitOfAnEarlierStructWritesOnlyItsBytes) {
  NoVerbsEnvironment none;
  std::vector<unsigned char> buf(sizeof(clbConfig_t) + 16, 0xAB);
  auto* old = reinterpret_cast<clbConfig_t*>(buf.data());
  ASSERT_EQ((clbConfigInit)(old), clbSuccess) << clbGetLastError();  // the function, not the macro
  EXPECT_EQ(old->size, 64u);
  EXPECT_EQ(old->timeoutMs, CLB_DEFAULT_TIMEOUT_MS);
  for (size_t i = 64; i < buf.size(); i++) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  clbConfig_t used;
  EXPECT_EQ(initAlone(old, &used), "");
  EXPECT_EQ(used.verbsPort, 1);
  clbConfig_t cur;
  EXPECT_EQ(clbConfigInitSized(&cur, 65), clbInvalidArgument);
  EXPECT_TRUE(contains(clbGetLastError(), "a clbConfig_t of 65 bytes")) << clbGetLastError();
  ASSERT_EQ(clbConfigInit(&cur), clbSuccess);
  EXPECT_EQ(cur.size, sizeof(clbConfig_t));
}

// A caller built against the second clbConfig_t (size 144: the verbs fields up to verbsDevice, no
// verbsQpsPerConnection) still works: its verbs fields are used, the QP count comes from the
// default and COLIBRI_VERBS_QPS_PER_CONNECTION, never from the bytes past its struct; and
// clbConfigInitSized(&x, 144) writes 144 bytes, never more.
TEST(VerbsConfig, StructOfTheSecondVersionGetsTheDefaultQueuePairCount) {
  NoVerbsEnvironment none;
  static_assert(offsetof(clbConfig_t, verbsQpsPerConnection) == 144, "the second version ends at 144 bytes");
  std::vector<unsigned char> buf(sizeof(clbConfig_t) + 16, 0xAB);
  auto* old = reinterpret_cast<clbConfig_t*>(buf.data());
  ASSERT_EQ(clbConfigInitSized(old, 144), clbSuccess) << clbGetLastError();
  EXPECT_EQ(old->size, 144u);
  EXPECT_EQ(old->verbsRetryCount, CLB_DEFAULT_VERBS_RETRY_COUNT);
  EXPECT_STREQ(old->verbsDevice, "");
  for (size_t i = 144; i < buf.size(); i++) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  old->timeoutMs = 12345;
  old->verbsTrafficClass = 40;
  old->verbsRetryCount = 3;  // the bytes past 144 stay 0xAB: garbage where verbsQpsPerConnection is
  clbConfig_t used;
  EXPECT_EQ(initAlone(old, &used), "");
  EXPECT_EQ(used.size, sizeof(clbConfig_t));
  EXPECT_EQ(used.timeoutMs, 12345);
  EXPECT_EQ(used.verbsTrafficClass, 40);
  EXPECT_EQ(used.verbsRetryCount, 3);
  EXPECT_EQ(used.verbsQpsPerConnection, CLB_DEFAULT_VERBS_QPS_PER_CONNECTION);
  {
    EnvVar q("COLIBRI_VERBS_QPS_PER_CONNECTION", "3");
    EXPECT_EQ(initAlone(old, &used), "");
    EXPECT_EQ(used.verbsQpsPerConnection, 3) << "the environment, as for the first version's verbs fields";
    EXPECT_EQ(used.verbsRetryCount, 3) << "the caller's own fields win";
  }
  clbConfig_t cur;
  EXPECT_EQ(clbConfigInitSized(&cur, 145), clbInvalidArgument);
  EXPECT_TRUE(contains(clbGetLastError(), "a clbConfig_t of 145 bytes")) << clbGetLastError();
  old->size = 145;
  EXPECT_TRUE(contains(initAlone(old), "config.size=145 but this library expects")) << clbGetLastError();
}

// Every queue pair of the communicator (as the emulator reports them: two per rank, one per link
// end) carries `tc`, `timeout`, `retry` and the GID index; the transport line of clbCommInfo says
// them.
void expectQueuePairs(const std::function<void(clbConfig_t*)>& configure, int tc, int timeout, int retry, int gid) {
  std::vector<std::string> infos(2);
  expectNoErrors(runVerbs(
      2,
      [&](int r, clbComm_t comm) {
        // Init is collective and connects every queue pair: all four exist until the all-reduce.
        ibv_qp* qps[8];
        ASSERT_EQ(clbtest::emu::liveQps(qps, 8), 4) << "a send and a receive queue pair per rank";
        for (ibv_qp* q : qps) {
          if (q == qps[4]) break;
          ibv_qp_attr a;
          ibv_qp_init_attr ia;
          ASSERT_EQ(
              clbtest::emu::api()->queryQp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &ia),
              0);
          EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
          EXPECT_EQ(a.ah_attr.is_global, 1) << "RoCE: a GRH on every packet";
          EXPECT_EQ(a.ah_attr.grh.traffic_class, tc) << "rank " << r;
          EXPECT_EQ(a.ah_attr.grh.sgid_index, gid) << "rank " << r;
          EXPECT_EQ(a.timeout, timeout) << "rank " << r;
          EXPECT_EQ(a.retry_cnt, retry) << "rank " << r;
        }
        int32_t x = r + 1;
        ASSERT_EQ(clbAllReduce(&x, &x, 1, clbInt32, clbSum, comm, nullptr), clbSuccess) << clbGetLastError();
        EXPECT_EQ(x, 3);
        char b[4096];
        ASSERT_EQ(clbCommInfo(comm, b, sizeof b), clbSuccess);
        infos[r] = b;
      },
      clbAlgoRing, 4096, 20000, configure));
  char want[200];
  snprintf(want, sizeof want,
           "colibri_emu0 port 1, GID index %d, path MTU 4096, traffic class %d, timeout %d, retry count %d", gid, tc,
           timeout, retry);
  for (auto& i : infos) {
    EXPECT_TRUE(contains(i, want)) << "want \"" << want << "\" in\n" << i;
    EXPECT_FALSE(contains(i, "queue pairs per link")) << "one queue pair per link (the default) goes unsaid:\n" << i;
  }
}

TEST(VerbsConfig, DefaultsReachTheQueuePairs) {
  NoVerbsEnvironment none;
  expectQueuePairs({}, 0, 14, 7, 1);
}

TEST(VerbsConfig, StructSettingsReachTheQueuePairsWithoutEnvironment) {
  NoVerbsEnvironment none;
  expectQueuePairs(
      [](clbConfig_t* c) {
        snprintf(c->verbsDevice, sizeof c->verbsDevice, "%s", "colibri_emu0");
        c->verbsPort = 1;
        c->verbsGidIndex = 1;
        c->verbsTrafficClass = 106;
        c->verbsTimeout = 9;
        c->verbsRetryCount = 3;
      },
      106, 9, 3, 1);
}

TEST(VerbsConfig, EnvironmentReachesTheQueuePairsAndTheStructWinsOverIt) {
  NoVerbsEnvironment none;
  EnvVar t("COLIBRI_VERBS_TRAFFIC_CLASS", "32"), o("COLIBRI_VERBS_TIMEOUT", "16"), r("COLIBRI_VERBS_RETRY_COUNT", "6");
  expectQueuePairs({}, 32, 16, 6, 1);
  expectQueuePairs([](clbConfig_t* c) { c->verbsTrafficClass = 184, c->verbsTimeout = 12, c->verbsRetryCount = 2; },
                   184, 12, 2, 1);
}

TEST(VerbsConfig, DeviceFromTheStructIsUsed) {
  NoVerbsEnvironment none;
  auto errors = runVerbs(
      2, [](int, clbComm_t) { ADD_FAILURE() << "init succeeded"; }, clbAlgoRing, 4096, 10000,
      [](clbConfig_t* c) { snprintf(c->verbsDevice, sizeof c->verbsDevice, "%s", "mlx5_7"); });
  for (auto& e : errors) EXPECT_TRUE(contains(e, "no RDMA device named \"mlx5_7\"")) << e;
}

// ---- device mode (GPUDirect RDMA) without a GPU ------------------------------------------------
// The verbs channel in device mode, driven by the ring, with "device memory" that is a memfd
// mapped in this process: the emulator registers it as a dma-buf (it maps the fd), so the whole
// device-mode protocol (payload WRITE into the slot, tag WRITE_WITH_IMM into the control block,
// dma-buf registration, device-byte accounting) runs in CI. Buffers are host memory here, so the
// ring's memory operations are memcpy and the host reductions, counted.

struct MemfdDevice {
  std::atomic<int64_t> live{0};
  std::atomic<int> allocs{0};
  static clbResult_t alloc(void* self, size_t bytes, void** mem, int* fd) {
    auto* m = static_cast<MemfdDevice*>(self);
    int f = memfd_create("colibri-test-device", MFD_CLOEXEC);
    if (f < 0 || ftruncate(f, (off_t)bytes) != 0) return clbSystemError;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p == MAP_FAILED) return clbSystemError;
    *mem = p;
    *fd = f;  // the channel registers it as a dma-buf and closes it
    m->live += (int64_t)bytes;
    m->allocs++;
    return clbSuccess;
  }
  static void release(void* self, void* mem, size_t bytes) {
    munmap(mem, bytes);
    static_cast<MemfdDevice*>(self)->live -= (int64_t)bytes;
  }
  // "User" buffers: memfds too, known by base, with an allocation ID (bumped to play "freed and
  // allocated again at the same address").
  struct User {
    char* p;
    size_t bytes;
    int fd;
    uint64_t id;
  };
  std::vector<User> users;
  std::atomic<int> lookups{0};
  ~MemfdDevice() {
    for (User& u : users) munmap(u.p, u.bytes), close(u.fd);
  }
  template <class T>
  T* allocUser(size_t count) {
    size_t bytes = (count * sizeof(T) + 4095) / 4096 * 4096;
    int f = memfd_create("colibri-test-user", MFD_CLOEXEC);
    EXPECT_EQ(ftruncate(f, (off_t)bytes), 0);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    EXPECT_NE(p, MAP_FAILED);
    users.push_back(User{static_cast<char*>(p), bytes, f, users.size() + 1});
    return static_cast<T*>(p);
  }
  static clbResult_t lookup(void* self, const void* p, size_t len, clb::verbs::UserRange* r, int* found) {
    auto* m = static_cast<MemfdDevice*>(self);
    m->lookups++;
    *found = false;
    for (User& u : m->users)
      if (p >= u.p && static_cast<const char*>(p) + len <= u.p + u.bytes) {
        *r = clb::verbs::UserRange{u.p, u.bytes, u.id};
        *found = true;
      }
    return clbSuccess;
  }
  static clbResult_t exportRange(void* self, void* base, size_t, int* fd) {
    for (User& u : static_cast<MemfdDevice*>(self)->users)
      if (u.p == base) *fd = dup(u.fd);
    return clbSuccess;
  }
};

// This rank's verbs channel, connected the way the plugin's connect does it (the plugin's own
// sources, linked into the tests, over the process's libibverbs: the stand-in), through the core's
// host for the communicator: so a test can reach the channel's statistics and limits.
clbResult_t connectChannel(clbComm_t comm, const clb::verbs::DeviceMemory* device,
                           std::unique_ptr<clb::verbs::VerbsChannel>* ch, std::string* describe) {
  const clb::verbs::VerbsApi* api = nullptr;
  clbResult_t rc = clb::verbs::loadLibibverbs(&api);
  return clb::verbs::connectVerbs(rc == clbSuccess ? api : nullptr, rc, clb::netHostFor(comm), device, ch, describe);
}

class CountingMemory : public clb::RingMemory {
 public:
  clbResult_t copy(void* dst, const void* src, size_t bytes) override {
    memcpy(dst, src, bytes);
    ops++;
    return clbSuccess;
  }
  clbResult_t reduce(void* dst, const void* recvd, const void* mine, size_t n, clbDataType_t type, clbRedOp_t op,
                     int divideBy) override {
    if (divideBy)
      clb::reducePairFinal(dst, recvd, mine, n, type, op, divideBy);
    else
      clb::reducePair(dst, recvd, mine, n, type, op);
    ops++;
    return clbSuccess;
  }
  clbResult_t arrived() override {
    arrivals++;
    return clbSuccess;
  }
  clbResult_t settle() override {
    settles++;
    return clbSuccess;
  }
  int ops = 0, arrivals = 0, settles = 0;
};

clb::CollArgs collArgs(clbComm_t comm, uint32_t coll, const void* in, void* out, size_t count, clbRedOp_t op,
                       int root = 0) {
  clb::CollArgs a{};
  a.desc.seq = ++comm->seq;
  a.desc.coll = coll;
  a.desc.dtype = clbInt64;
  a.desc.op = op;
  a.desc.algo = clbAlgoRing;
  a.desc.root = root;
  a.desc.count = count;
  a.send = in;
  a.recv = out;
  a.count = count;
  a.type = clbInt64;
  a.op = op;
  a.root = root;
  return a;
}

TEST(VerbsDeviceMode, RingOverDmabufSlotsMatchesReferenceAndCountsDeviceBytes) {
  // 10007 int64 with chunkBytes 4096: many messages per segment, slots reused many times; 2 over
  // 3 ranks: empty segments (messages without payload, which still need announced slots).
  // (ranks, count, queue pairs per link)
  for (auto [nranks, count, qps] :
       {std::tuple<int, size_t, int>{2, 10007, 1}, {3, 10007, 1}, {3, 2, 1}, {2, 1, 1}, {3, 10007, 3}, {2, 100, 2}}) {
    std::vector<MemfdDevice> dev(nranks);
    expectNoErrors(runVerbs(
        nranks,
        [&, nranks = nranks, count = count](int r, clbComm_t comm) {
          clb::verbs::DeviceMemory dm{
              MemfdDevice::alloc, MemfdDevice::release, &dev[r], "test memfd", nullptr, nullptr};
          std::unique_ptr<clb::verbs::VerbsChannel> ch;
          std::string info;
          ASSERT_EQ(connectChannel(comm, &dm, &ch, &info), clbSuccess) << clbGetLastError();
          EXPECT_NE(info.find("GPU memory registered through test memfd"), std::string::npos) << info;
          auto* vc = ch.get();
          ASSERT_TRUE(vc && vc->deviceMode());
          const int64_t devBefore = comm->mem.device;
          CountingMemory mem;
          std::vector<int64_t> in(count), out(count, -7);
          for (size_t i = 0; i < count; i++) in[i] = input(r, i);
          ASSERT_EQ(
              clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllReduce, in.data(), out.data(), count, clbSum)),
              clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) {
            int64_t want = 0;
            for (int p = 0; p < nranks; p++) want += input(p, i);
            ASSERT_EQ(out[i], want) << "allReduce over device-mode slots, rank " << r << " element " << i;
          }
          EXPECT_GT(mem.arrivals, 0);
          EXPECT_GE(mem.settles, mem.arrivals) << "every received message is settled before its slot is released";
          std::vector<int64_t> g(count * nranks, -7);
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllGather, in.data(), g.data(), count, clbSum)),
                    clbSuccess)
              << clbGetLastError();
          for (int p = 0; p < nranks; p++)
            for (size_t i = 0; i < count; i++) ASSERT_EQ(g[p * count + i], input(p, i)) << "allGather, rank " << r;
          std::vector<int64_t> big(count * nranks), rs(count, -7);
          for (size_t i = 0; i < big.size(); i++) big[i] = input(r, i);
          ASSERT_EQ(
              clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kReduceScatter, big.data(), rs.data(), count, clbMax)),
              clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) {
            int64_t want = input(0, r * count + i);
            for (int p = 1; p < nranks; p++) want = std::max(want, input(p, r * count + i));
            ASSERT_EQ(rs[i], want) << "reduceScatter max, rank " << r << " element " << i;
          }
          std::vector<int64_t> b(count, -7);
          const int root = nranks - 1;
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem,
                                   collArgs(comm, clb::kBroadcast, r == root ? in.data() : nullptr, b.data(), count,
                                            clbSum, root)),
                    clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) ASSERT_EQ(b[i], input(root, i)) << "broadcast, rank " << r;
          // Slots and staging are "device" memory: counted as device bytes, and all of it is this
          // channel's registered memory beyond the host control block.
          EXPECT_GT(comm->mem.device, devBefore);
          EXPECT_EQ(comm->mem.device - devBefore, dev[r].live.load());
          EXPECT_GE(dev[r].allocs.load(), 3) << "the probe page, the staging and the receive slots";
          EXPECT_EQ(comm->mem.device - devBefore, dev[r].live.load());
          ASSERT_EQ(ch->trim(), clbSuccess) << clbGetLastError();
          EXPECT_EQ(vc->qpCount(), qps);
        },
        clbAlgoRing, 4096, 20000, [qps = qps](clbConfig_t* c) { c->verbsQpsPerConnection = qps; }));
    for (auto& d : dev) EXPECT_EQ(d.live.load(), 0) << "device memory given back (trim, then destruction)";
  }
}

// Device mode sends straight from user buffers whose allocation can be registered: every
// collective still matches the reference, the registrations are cached by allocation (hits on
// later calls), an allocation that changed behind the same address is registered again, the
// cache stays within its bounds (least recently used dropped), and trim drops it.
TEST(VerbsDeviceMode, UserBuffersAreSentWithoutACopyAndCachedByAllocation) {
  for (auto [nranks, qps] : {std::pair<int, int>{2, 1}, {3, 2}}) {
    std::vector<MemfdDevice> dev(nranks);
    expectNoErrors(runVerbs(
        nranks,
        [&, nranks = nranks](int r, clbComm_t comm) {
          clb::verbs::DeviceMemory dm{MemfdDevice::alloc, MemfdDevice::release, &dev[r],
                                      "test memfd",       MemfdDevice::lookup,  MemfdDevice::exportRange};
          std::unique_ptr<clb::verbs::VerbsChannel> ch;
          std::string info;
          ASSERT_EQ(connectChannel(comm, &dm, &ch, &info), clbSuccess) << clbGetLastError();
          auto* vc = ch.get();
          ASSERT_TRUE(vc);
          const size_t count = 10007;
          int64_t* in = dev[r].allocUser<int64_t>(count);
          int64_t* out = dev[r].allocUser<int64_t>(count * nranks);
          auto fill = [&] {
            for (size_t i = 0; i < count; i++) in[i] = input(r, i);
            for (size_t i = 0; i < count * nranks; i++) out[i] = -7;
          };
          auto sumAt = [&](size_t i) {
            int64_t want = 0;
            for (int p = 0; p < nranks; p++) want += input(p, i);
            return want;
          };
          CountingMemory mem;
          for (int call = 0; call < 3; call++) {
            fill();
            ASSERT_EQ(clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllReduce, in, out, count, clbSum)),
                      clbSuccess)
                << clbGetLastError();
            for (size_t i = 0; i < count; i++) ASSERT_EQ(out[i], sumAt(i)) << "call " << call << " element " << i;
          }
          auto st = vc->userRegStats();
          EXPECT_EQ(st.registered, 2u) << "the input's and the output's allocations, once";
          EXPECT_GT(st.hits, 0u);
          EXPECT_EQ(st.cached, 2u);
          // In place, then allGather and broadcast (sent from the output / the root's input).
          fill();
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllReduce, in, in, count, clbSum)), clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) ASSERT_EQ(in[i], sumAt(i)) << "in place, element " << i;
          fill();
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllGather, in, out, count, clbSum)), clbSuccess)
              << clbGetLastError();
          for (int p = 0; p < nranks; p++)
            for (size_t i = 0; i < count; i++) ASSERT_EQ(out[p * count + i], input(p, i)) << "allGather from " << p;
          fill();
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem,
                                   collArgs(comm, clb::kBroadcast, r == 0 ? in : nullptr, out, count, clbSum, 0)),
                    clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) ASSERT_EQ(out[i], input(0, i)) << "broadcast element " << i;
          // The input's allocation "freed and allocated again" at the same address: registered anew.
          dev[r].users[0].id += 100;
          fill();
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllReduce, in, out, count, clbSum)), clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) ASSERT_EQ(out[i], sumAt(i)) << "after the change, element " << i;
          st = vc->userRegStats();
          EXPECT_EQ(st.stale, 1u);
          EXPECT_EQ(st.registered, 3u);
          // Bounded: one registration at most, so alternating buffers evicts.
          ASSERT_EQ(vc->setUserRegLimits(1, 1ll << 30), clbSuccess) << clbGetLastError();
          EXPECT_EQ(vc->userRegStats().cached, 1u) << "the least recently used one dropped at once";
          fill();
          ASSERT_EQ(clb::ringRunOn(comm, *ch, mem, collArgs(comm, clb::kAllReduce, in, out, count, clbSum)), clbSuccess)
              << clbGetLastError();
          for (size_t i = 0; i < count; i++) ASSERT_EQ(out[i], sumAt(i)) << "bounded cache, element " << i;
          st = vc->userRegStats();
          EXPECT_LE(st.cached, 1u);
          EXPECT_GT(st.evicted, 0u);
          ASSERT_EQ(ch->trim(), clbSuccess) << clbGetLastError();
          EXPECT_EQ(vc->userRegStats().cached, 0u);
          EXPECT_EQ(vc->userRegStats().cachedBytes, 0);
        },
        clbAlgoRing, 4096, 20000, [qps = qps](clbConfig_t* c) { c->verbsQpsPerConnection = qps; }));
  }
}

// A device-mode channel and a host-mode channel cannot be linked: both ranks fail, naming it.
TEST(VerbsDeviceMode, MixedHostAndDeviceEndsAreRefusedByName) {
  std::vector<MemfdDevice> dev(2);
  expectNoErrors(runVerbs(2, [&](int r, clbComm_t comm) {
    clb::verbs::DeviceMemory dm{MemfdDevice::alloc, MemfdDevice::release, &dev[r], "test memfd", nullptr, nullptr};
    std::unique_ptr<clb::verbs::VerbsChannel> ch;
    std::string info;
    clbResult_t rc = connectChannel(comm, r == 0 ? &dm : nullptr, &ch, &info);
    std::string e = clbGetLastError();
    EXPECT_NE(rc, clbSuccess) << e;
    EXPECT_TRUE(contains(e, "both ends of a link must be set up alike") || contains(e, "could not connect")) << e;
  }));
}

// Registration of the device memory fails (a dma-buf the NIC cannot take): every rank fails at
// set-up, the failing one with the reason and the fix, the others naming it.
TEST(VerbsDeviceMode, DmabufRegistrationFailureIsReportedOnEveryRank) {
  EnvVar noDmabuf("COLIBRI_VERBS_EMU_DMABUF", "0");
  std::vector<MemfdDevice> dev(2);
  expectNoErrors(runVerbs(2, [&](int r, clbComm_t comm) {
    clb::verbs::DeviceMemory dm{MemfdDevice::alloc, MemfdDevice::release, &dev[r], "test memfd", nullptr, nullptr};
    std::unique_ptr<clb::verbs::VerbsChannel> ch;
    std::string info;
    EXPECT_NE(connectChannel(comm, &dm, &ch, &info), clbSuccess);
    std::string e = clbGetLastError();
    EXPECT_TRUE(contains(e, "ibv_reg_dmabuf_mr") || contains(e, "could not set up the verbs transport")) << e;
    if (contains(e, "ibv_reg_dmabuf_mr")) {
      EXPECT_TRUE(contains(e, "COLIBRI_VERBS_GPU_MEMORY=host")) << e;
    }
  }));
  for (auto& d : dev) EXPECT_EQ(d.live.load(), 0) << "the probe page is given back";
}

// ---- point-to-point channels in device mode (GPUDirect RDMA) without a GPU --------------------
// A rank's PeerDeviceMemory (clbComm::peerDeviceMemory: what the device layer makes at the first
// point-to-point call on device buffers over verbs) is memfd "GPU memory" here, reached with
// memcpy, counted. Host buffers: the batch moves every message between the buffer and the slots
// through it, as it does for device buffers on a GPU.
struct PeerMemfd {
  MemfdDevice dev;
  std::atomic<int> copies{0}, arrivals{0};
  bool failAlloc = false;
  size_t maxAlloc = 0;  // larger allocations fail (0: none do)
  static clbResult_t alloc(void* self, size_t bytes, void** mem, int* fd) {
    auto* m = static_cast<PeerMemfd*>(self);
    if (m->failAlloc) return clb::setError(clbSystemError, "test: this rank's GPU memory cannot be had");
    if (m->maxAlloc && bytes > m->maxAlloc)
      return clb::setError(clbOutOfMemory, "test: no %zu bytes of GPU memory on this rank", bytes);
    return MemfdDevice::alloc(&m->dev, bytes, mem, fd);
  }
  static void release(void* self, void* mem, size_t bytes) {
    MemfdDevice::release(&static_cast<PeerMemfd*>(self)->dev, mem, bytes);
  }
  static clbResult_t copy(void* self, void* dst, const void* src, size_t bytes, void*) {
    memcpy(dst, src, bytes);
    static_cast<PeerMemfd*>(self)->copies++;
    return clbSuccess;
  }
  static clbResult_t arrived(void* self) {
    static_cast<PeerMemfd*>(self)->arrivals++;
    return clbSuccess;
  }
  std::shared_ptr<clb::PeerDeviceMemory> memory() {
    auto m = std::make_shared<clb::PeerDeviceMemory>();
    m->nic = clb::verbs::DeviceMemory{alloc, release, this, "test memfd", nullptr, nullptr};
    m->copy = copy;
    m->arrived = arrived;
    m->self = this;
    m->name = "test memfd";
    return m;
  }
};

struct CollectLogs {
  std::mutex mu;
  std::vector<std::string> lines;
  int level = clbLogWarn;
  CollectLogs() {
    clbGetLogLevel(&level);
    clbSetLogLevel(clbLogInfo);
    clbSetLogCallback(&CollectLogs::add, this);
  }
  ~CollectLogs() {
    clbSetLogCallback(nullptr, nullptr);
    clbSetLogLevel(level);
  }
  static void add(int, const char* m, void* self) {
    auto* c = static_cast<CollectLogs*>(self);
    std::lock_guard<std::mutex> g(c->mu);
    c->lines.emplace_back(m);
  }
  bool has(const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    for (const std::string& l : lines)
      if (contains(l, what)) return true;
    return false;
  }
};

// Three ranks, `withMemory[r]`: whether rank r has GPU memory for channels (and whether its alloc
// fails). Rounds of a ring exchange in both directions and an all-to-all, host buffers, the
// first messages of each pair over its TCP link and the rest over the channel; every element
// checked. Returns each rank's channel mode with each peer (deviceSlots), the copies and
// arrivals through each rank's memory.
struct PeerRun {
  std::vector<std::vector<int>> slots;  // [rank][peer]: 1 GPU memory, 0 host, -1 itself
  std::vector<int> copies, arrivals;
  std::vector<int64_t> deviceBytes;  // the communicator's device bytes after the exchanges
};
PeerRun runPeersWithMemory(const std::vector<int>& withMemory, bool failAlloc = false, size_t maxAlloc = 0) {
  const int n = (int)withMemory.size();
  std::vector<PeerMemfd> mem(n);
  PeerRun out;
  out.slots.assign(n, std::vector<int>(n, -1));
  out.copies.assign(n, 0);
  out.arrivals.assign(n, 0);
  out.deviceBytes.assign(n, 0);
  const size_t count = 30011;  // int64: about 235 KiB per message, several slots each
  expectNoErrors(runVerbs(
      n,
      [&](int r, clbComm_t comm) {
        mem[r].failAlloc = failAlloc && r == 0;
        if (r == 0) mem[r].maxAlloc = maxAlloc;
        if (withMemory[r]) comm->peerDeviceMemory = mem[r].memory();
        auto value = [](int from, int to, int round, size_t i) {
          return (int64_t)from * 1000003 + to * 7919 + round * 31 + (int64_t)i;
        };
        for (int round = 0; round < 4; round++) {
          const int next = (r + 1) % n, prev = (r + n - 1) % n;
          std::vector<int64_t> toNext(count), toPrev(count), fromPrev(count, -1), fromNext(count, -1);
          for (size_t i = 0; i < count; i++) toNext[i] = value(r, next, round, i), toPrev[i] = value(r, prev, round, i);
          ASSERT_EQ(clbGroupStart(), clbSuccess);
          // Receives first on even ranks, sends first on odd ones: any order completes in a group.
          if (r % 2 == 0) {
            ASSERT_EQ(clbRecv(fromPrev.data(), count, clbInt64, prev, comm, nullptr), clbSuccess);
            ASSERT_EQ(clbRecv(fromNext.data(), count, clbInt64, next, comm, nullptr), clbSuccess);
          }
          ASSERT_EQ(clbSend(toNext.data(), count, clbInt64, next, comm, nullptr), clbSuccess);
          ASSERT_EQ(clbSend(toPrev.data(), count, clbInt64, prev, comm, nullptr), clbSuccess);
          if (r % 2 == 1) {
            ASSERT_EQ(clbRecv(fromPrev.data(), count, clbInt64, prev, comm, nullptr), clbSuccess);
            ASSERT_EQ(clbRecv(fromNext.data(), count, clbInt64, next, comm, nullptr), clbSuccess);
          }
          ASSERT_EQ(clbGroupEnd(), clbSuccess) << clbGetLastError();
          for (size_t i = 0; i < count; i++) {
            ASSERT_EQ(fromPrev[i], value(prev, r, round, i))
                << "round " << round << ", from rank " << prev << ", element " << i;
            ASSERT_EQ(fromNext[i], value(next, r, round, i))
                << "round " << round << ", from rank " << next << ", element " << i;
          }
          std::vector<int64_t> a((size_t)n * 1001), b((size_t)n * 1001, -1);
          for (int p = 0; p < n; p++)
            for (size_t i = 0; i < 1001; i++) a[p * 1001 + i] = value(r, p, round, i);
          ASSERT_EQ(clbAllToAll(a.data(), b.data(), 1001, clbInt64, comm, nullptr), clbSuccess) << clbGetLastError();
          for (int p = 0; p < n; p++)
            for (size_t i = 0; i < 1001; i++)
              ASSERT_EQ(b[p * 1001 + i], value(p, r, round, i)) << "all-to-all round " << round << " from rank " << p;
        }
        for (int p = 0; p < n; p++) {
          if (p == r) continue;
          clb::PeerChannel* ch = nullptr;
          ASSERT_EQ(comm->carrier->peer(p, &ch), clbSuccess);
          auto* net = dynamic_cast<clb::NetPeerChannel*>(ch);
          ASSERT_NE(net, nullptr) << "rank " << r << ": the pair with rank " << p << " is not over the plugin";
          EXPECT_TRUE(net->ready()) << "rank " << r << ": the pair with rank " << p << " never switched to its channel";
          out.slots[r][p] = net->deviceSlots() ? 1 : 0;
        }
        out.copies[r] = mem[r].copies;
        out.arrivals[r] = mem[r].arrivals;
        out.deviceBytes[r] = comm->mem.device;
      },
      clbAlgoRing, 64 << 10));
  for (int r = 0; r < n; r++) EXPECT_EQ(mem[r].dev.live.load(), 0) << "rank " << r << ": GPU memory left after destroy";
  return out;
}

TEST(VerbsDeviceMode, PeerChannelsAreInGpuMemoryWhenBothRanksHaveIt) {
  CollectLogs logs;
  PeerRun run = runPeersWithMemory({1, 1, 1});
  for (int r = 0; r < 3; r++) {
    for (int p = 0; p < 3; p++)
      if (p != r) EXPECT_EQ(run.slots[r][p], 1) << "rank " << r << " with rank " << p;
    EXPECT_GT(run.copies[r], 0) << "rank " << r << ": no message went through its GPU memory";
    EXPECT_GT(run.arrivals[r], 0) << "rank " << r << ": no message read out of GPU memory was announced";
    EXPECT_GT(run.deviceBytes[r], 0) << "rank " << r << ": the channels' GPU memory is not counted";
  }
  EXPECT_TRUE(logs.has("rank 0: point-to-point channel with rank 1 over verbs, slots in GPU memory: test memfd"));
}

TEST(VerbsDeviceMode, PeerChannelIsInHostMemoryWhenOneRankHasNoGpuMemory) {
  CollectLogs logs;
  // Rank 1 has none: its pairs with 0 and 2 agree on host memory whichever side opened first;
  // the pair 0-2 has GPU memory on both sides.
  PeerRun run = runPeersWithMemory({1, 0, 1});
  // [rank][peer]: 1 slots in GPU memory, 0 in host memory.
  EXPECT_EQ(run.slots, (std::vector<std::vector<int>>{{-1, 0, 1}, {0, -1, 0}, {1, 0, -1}}));
  EXPECT_EQ(run.copies[1], 0);
  EXPECT_TRUE(logs.has("rank 0: point-to-point channel with rank 1 in host memory (rank 1 has no GPU memory for it)"));
}

// Rank 0 can have a page of GPU memory but not the channels' slots and staging (a GPU short of
// memory or of NIC-mappable space): its open in device mode asks for all of it at once and fails,
// so its pairs choose host memory before either side starts, instead of failing at the start.
TEST(VerbsDeviceMode, PeerChannelFallsBackToHostMemoryWhenItsSlotsDoNotFit) {
  CollectLogs logs;
  PeerRun run = runPeersWithMemory({1, 1, 1}, false, /*maxAlloc (rank 0)=*/64 << 10);
  EXPECT_EQ(run.slots, (std::vector<std::vector<int>>{{-1, 0, 0}, {0, -1, 1}, {0, 1, -1}}));
  EXPECT_TRUE(
      logs.has("rank 0: point-to-point channel with rank 1 in host memory: its GPU memory could not be set up "
               "for verbs (test: no 262144 bytes of GPU memory on this rank"));
}

TEST(VerbsDeviceMode, PeerChannelFallsBackToHostMemoryWhenItsGpuMemoryFails) {
  CollectLogs logs;
  PeerRun run = runPeersWithMemory({1, 1, 1}, /*failAlloc (rank 0)=*/true);
  EXPECT_EQ(run.slots, (std::vector<std::vector<int>>{{-1, 0, 0}, {0, -1, 1}, {0, 1, -1}}));
  EXPECT_TRUE(
      logs.has("rank 0: point-to-point channel with rank 1 in host memory: its GPU memory could not be set up "
               "for verbs (test: this rank's GPU memory cannot be had"));
}

}  // namespace
