// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Settings that must agree across ranks (bootstrap/agree.h): a rank that resolved another value is
// refused at init, on every rank at once (well within 2 s of a 20 s timeout), by a message that
// names the setting, both values and the ranks; settings that may differ, or that do not apply to
// the transport and algorithm in use, are accepted. The settings read from the environment are
// tested with each rank in a process of its own, as a launcher starts them.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/net.h"
#include "tests/test_ranks.h"

namespace {

// What a rank process did: init's result and message, and when init started and returned
// (CLOCK_MONOTONIC, the same clock in every process).
struct Outcome {
  int rc = -1;
  int64_t startMs = 0, endMs = 0;
  std::string msg;
  std::string problem;  // the process could not be run or said nothing
};

// The body of a rank process: init with the configuration of its environment (clbConfigInit and
// COLIBRI_*), its outcome written to CLB_AGREE_OUT.
TEST(AgreeChild, InitFromTheEnvironment) {
  const char* id = getenv("CLB_AGREE_ID");
  if (!id) GTEST_SKIP() << "runs only as a rank process of the Agree tests";
  const clbUniqueId uid = clbtest::unhex(id);
  const int rank = atoi(getenv("CLB_AGREE_RANK")), nranks = atoi(getenv("CLB_AGREE_NRANKS"));
  clbComm_t comm = nullptr;
  const int64_t start = clb::nowMs();
  const clbResult_t rc = clbCommInitRank(&comm, &uid, rank, nranks, nullptr);
  const int64_t end = clb::nowMs();
  const std::string msg = rc == clbSuccess ? "" : clbGetLastError();
  if (comm) clbCommDestroy(comm);
  std::ofstream out(getenv("CLB_AGREE_OUT"));
  out << rc << "\n" << start << "\n" << end << "\n" << msg;
}

// Runs rank r of a communicator in a process of its own with env[r] added to this environment
// (COLIBRI_TIMEOUT_MS=20000 unless env says otherwise), the root in this process.
std::vector<Outcome> runRankProcesses(const std::vector<std::vector<std::string>>& env) {
  const int n = (int)env.size();
  std::vector<Outcome> out(n);
  clbUniqueId id;
  if (clbGetUniqueId(&id) != clbSuccess) {
    for (auto& o : out) o.problem = clbGetLastError();
    return out;
  }
  char dir[] = "/tmp/clb-agree-XXXXXX";
  if (!mkdtemp(dir)) {
    for (auto& o : out) o.problem = "mkdtemp failed";
    return out;
  }
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; r++) {
    std::vector<std::string> e{"CLB_AGREE_ID=" + clbtest::hex(id), "CLB_AGREE_RANK=" + std::to_string(r),
                               "CLB_AGREE_NRANKS=" + std::to_string(n),
                               "CLB_AGREE_OUT=" + std::string(dir) + "/" + std::to_string(r),
                               "COLIBRI_TIMEOUT_MS=20000"};
    e.insert(e.end(), env[r].begin(), env[r].end());  // later entries win (spawnSelf keeps the first of a name)
    std::vector<std::string> unique;
    for (auto it = e.rbegin(); it != e.rend(); ++it) {
      const std::string name = it->substr(0, it->find('=') + 1);
      bool seen = false;
      for (const auto& u : unique) seen = seen || u.compare(0, name.size(), name) == 0;
      if (!seen) unique.push_back(*it);
    }
    pids[r] = clbtest::spawnSelf("AgreeChild.InitFromTheEnvironment", unique);
  }
  const int64_t deadline = clb::nowMs() + 40000;  // well past the ranks' 20 s timeout
  for (int r = 0; r < n; r++) {
    if (pids[r] < 0) {
      out[r].problem = "could not start the rank process";
      continue;
    }
    int status = 0;
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (clb::nowMs() > deadline) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        out[r].problem = "the rank process did not finish within 40 s";
        break;
      }
      usleep(2000);
    }
    const std::string file = std::string(dir) + "/" + std::to_string(r);
    std::ifstream in(file);
    if (out[r].problem.empty() && !(in >> out[r].rc >> out[r].startMs >> out[r].endMs))
      out[r].problem = "the rank process wrote no outcome";
    std::stringstream rest;
    rest << in.rdbuf();
    out[r].msg = rest.str();
    if (!out[r].msg.empty() && out[r].msg[0] == '\n') out[r].msg.erase(0, 1);
    unlink(file.c_str());
  }
  rmdir(dir);
  clbUniqueIdRelease(&id);
  return out;
}

// One setting that must agree: the environment both ranks share, and the variable with the value of
// rank 0 and of rank 1 ("" unsets it), as each resolves it in the message.
struct Row {
  const char* name;
  std::vector<std::string> both;
  const char* var;
  const char* v0;
  const char* v1;
  const char* shown0;
  const char* shown1;
};

// Everything the rows set, unset unless a row says otherwise (this process's environment may hold
// some from other tests, and rank processes inherit it).
const char* const kRowVars[] = {
    "COLIBRI_TRANSPORT",
    "COLIBRI_ALGORITHM",
    "COLIBRI_CHUNK_BYTES",
    "COLIBRI_PIPELINE_DEPTH",
    "COLIBRI_DIRECT_MAX_BYTES",
    "COLIBRI_STAGING_CAP_BYTES",
    "COLIBRI_VERBS_QPS_PER_CONNECTION",
    "COLIBRI_VERBS_GPU_MEMORY",
    "COLIBRI_DEVICE_PATH",
    "COLIBRI_DEVICE_LL_MAX_BYTES",
    "COLIBRI_DEVICE_DIRECT_MIN_BYTES",
    "COLIBRI_DEVICE_CHECK_CALLS",
};

const std::vector<std::string> kVerbs{"COLIBRI_TRANSPORT=verbs"};  // over the stand-in libibverbs the tests load

const Row kRows[] = {
    // The user's case: socket on one rank only, the other on auto (shm on one host).
    {"Transport", {}, "COLIBRI_TRANSPORT", "", "socket", "shm", "socket"},
    {"Algorithm", {}, "COLIBRI_ALGORITHM", "ring", "direct", "ring", "direct"},
    {"ChunkBytes", {}, "COLIBRI_CHUNK_BYTES", "65536", "131072", "65536", "131072"},
    {"PipelineDepth", {"COLIBRI_TRANSPORT=socket"}, "COLIBRI_PIPELINE_DEPTH", "", "8", "4", "8"},
    {"DirectMaxBytes", {}, "COLIBRI_DIRECT_MAX_BYTES", "0", "", "0", "65536"},
    {"StagingCapBytes", {}, "COLIBRI_STAGING_CAP_BYTES", "33554432", "", "33554432", "67108864"},
    {"VerbsQpsPerConnection", kVerbs, "COLIBRI_VERBS_QPS_PER_CONNECTION", "1", "2", "1", "2"},
    {"VerbsGpuMemory", kVerbs, "COLIBRI_VERBS_GPU_MEMORY", "", "host", "auto", "host"},
    {"DevicePath", {}, "COLIBRI_DEVICE_PATH", "staged", "", "staged", "auto"},
    {"DeviceLLMaxBytes", {}, "COLIBRI_DEVICE_LL_MAX_BYTES", "65536", "131072", "65536", "131072"},
    {"DeviceDirectMinBytes", {}, "COLIBRI_DEVICE_DIRECT_MIN_BYTES", "", "1048576", "0", "1048576"},
    {"DeviceCheckCalls", {}, "COLIBRI_DEVICE_CHECK_CALLS", "1", "0", "1", "0"},
};

void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

class MustAgree : public ::testing::TestWithParam<Row> {};

TEST_P(MustAgree, EveryRankIsRefusedAtOnceNamingTheSettingAndBothValues) {
  const Row& row = GetParam();
  std::vector<std::vector<std::string>> env(2);
  for (int r = 0; r < 2; r++) {
    for (const char* v : kRowVars) env[r].push_back(std::string(v) + "=");
    env[r].insert(env[r].end(), row.both.begin(), row.both.end());
    env[r].push_back(std::string(row.var) + "=" + (r == 0 ? row.v0 : row.v1));
  }
  const std::vector<Outcome> out = runRankProcesses(env);
  const int64_t lastStart = std::max(out[0].startMs, out[1].startMs);
  const std::string want =
      std::string(row.var) + " differs across ranks: rank 0 resolved " + row.shown0 + ", rank 1 resolved " + row.shown1;
  for (int r = 0; r < 2; r++) {
    ASSERT_TRUE(out[r].problem.empty()) << "rank " << r << ": " << out[r].problem;
    EXPECT_EQ(out[r].rc, clbInvalidUsage) << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find(want), std::string::npos) << "rank " << r << ": " << out[r].msg;
    EXPECT_NE(out[r].msg.find("alike on every rank"), std::string::npos) << out[r].msg;
    // One setting differs: nothing else is named (a transport of its own does not make auto another algorithm).
    EXPECT_EQ(out[r].msg.find("these differ too"), std::string::npos) << out[r].msg;
    EXPECT_LT(out[r].endMs - lastStart, 2000) << "rank " << r << " fails at once, not at its 20 s timeout";
  }
}

INSTANTIATE_TEST_SUITE_P(Settings, MustAgree, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& i) { return std::string(i.param.name); });

// A setting that is not valid, on one rank only: that rank cannot take part, so rather than let
// the others wait for it until their timeout, it joins with the defaults only to say so, and
// every rank refuses the communicator at init, the bad rank saying what was wrong, the others
// which rank. Device settings (whose rank would fail its first device call while the others wait
// in the device set-up) and the ring's alike; a value out of range as well as one that does not
// parse.
TEST(Agree, ASettingThatIsNotValidOnOneRankFailsEveryRankAtOnce) {
  for (const char* bad : {"COLIBRI_DEVICE_LL_MAX_BYTES=abc", "COLIBRI_DEVICE_LAUNCH=graphs",
                          "COLIBRI_STUCK_WARN_PERCENT=100", "COLIBRI_CHUNK_BYTES=100", "COLIBRI_TRANSPORT=tcp"}) {
    std::vector<std::vector<std::string>> env(2);
    for (int r = 0; r < 2; r++) {
      for (const char* v : kRowVars) env[r].push_back(std::string(v) + "=");
      env[r].push_back("COLIBRI_DEVICE_LAUNCH=");
      env[r].push_back("COLIBRI_STUCK_WARN_PERCENT=");
    }
    env[1].push_back(bad);
    const std::string var = std::string(bad).substr(0, std::string(bad).find('='));
    const std::vector<Outcome> out = runRankProcesses(env);
    const int64_t lastStart = std::max(out[0].startMs, out[1].startMs);
    for (int r = 0; r < 2; r++) ASSERT_TRUE(out[r].problem.empty()) << bad << ", rank " << r << ": " << out[r].problem;
    EXPECT_EQ(out[1].rc, clbInvalidArgument) << bad << ": " << out[1].msg;
    EXPECT_NE(out[1].msg.find(var), std::string::npos) << bad << ": " << out[1].msg;
    EXPECT_NE(out[1].msg.find("every rank of the communicator refuses it"), std::string::npos) << out[1].msg;
    EXPECT_EQ(out[0].rc, clbInvalidUsage) << bad << ": " << out[0].msg;
    EXPECT_NE(out[0].msg.find("rank 1 holds a setting that is not valid"), std::string::npos)
        << bad << ": " << out[0].msg;
    for (int r = 0; r < 2; r++)
      EXPECT_LT(out[r].endMs - lastStart, 2000) << bad << ": rank " << r << " fails at once, not at its 20 s timeout";
  }
}

// The control: the same two processes with the same settings form their communicator.
TEST(Agree, RankProcessesWithTheSameSettingsInit) {
  std::vector<std::vector<std::string>> env(2, {"COLIBRI_TRANSPORT=", "COLIBRI_CHUNK_BYTES=65536"});
  const std::vector<Outcome> out = runRankProcesses(env);
  for (int r = 0; r < 2; r++) {
    ASSERT_TRUE(out[r].problem.empty()) << out[r].problem;
    EXPECT_EQ(out[r].rc, clbSuccess) << "rank " << r << ": " << out[r].msg;
  }
}

clbConfig_t base() {
  clbConfig_t c;
  clbConfigInit(&c);
  c.timeoutMs = 20000;
  return c;
}

// Settings that may differ (each rank's own timeout, log level, version check, verbs port and
// device, ...) and settings that do not apply to what runs: init succeeds and a collective works.
TEST(Agree, SettingsThatMayDifferOrDoNotApplyAreAccepted) {
  struct Case {
    const char* name;
    std::function<void(int, clbConfig_t*)> configure;
  } cases[] = {
      {"per-rank settings",
       [](int r, clbConfig_t* c) {
         if (r == 1) {
           c->timeoutMs = 30000;
           c->logLevel = clbLogError;
           c->versionCheck = clbVersionCheckWarn;
           c->verbsPort = 2;
           c->verbsGidIndex = 3;
           c->verbsTrafficClass = 104;
           c->verbsTimeout = 18;
           c->verbsRetryCount = 3;
           snprintf(c->verbsDevice, sizeof c->verbsDevice, "mlx5_1");
         }
       }},
      {"shm and auto resolve alike on one host",
       [](int r, clbConfig_t* c) { c->transport = r ? clbTransportShm : clbTransportAuto; }},
      {"auto is ring off shm; the direct path's thresholds do not apply there",
       [](int r, clbConfig_t* c) {
         c->transport = clbTransportSocket;
         c->algorithm = r ? clbAlgoRing : clbAlgoAuto;
         c->directMaxBytes = r ? 0 : 1 << 20;
         c->stagingCapBytes = r ? 32 << 20 : 64 << 20;
         c->verbsQpsPerConnection = r ? 4 : 1;
       }},
      {"pipelineDepth 1 runs as 2", [](int r, clbConfig_t* c) { c->pipelineDepth = r ? 2 : 1; }},
      {"the ring's settings do not apply to algorithm direct",
       [](int r, clbConfig_t* c) {
         c->algorithm = clbAlgoDirect;
         c->chunkBytes = r ? 65536 : 131072;
         c->pipelineDepth = r ? 8 : 4;
       }},
  };
  for (const Case& k : cases) {
    std::vector<int> sums(2, 0);
    const auto errors = clbtest::runThreadRanks(2, k.configure, [&](int r, clbComm_t comm) {
      int v = r + 1;
      if (clbAllReduce(&v, &sums[r], 1, clbInt32, clbSum, comm, nullptr) != clbSuccess) sums[r] = -1;
    });
    for (int r = 0; r < 2; r++) {
      EXPECT_EQ(errors[r], "") << k.name << ", rank " << r;
      EXPECT_EQ(sums[r], 3) << k.name << ", rank " << r;
    }
  }
}

// With more ranks the message shows every rank's value, and the other settings that differ too;
// every rank gets the same message.
TEST(Agree, ThreeRanksShowEveryValueAndTheOtherDifferences) {
  const auto errors = clbtest::runThreadRanks(
      3,
      [](int r, clbConfig_t* c) {
        *c = base();
        c->transport = clbTransportSocket;
        if (r == 2) {
          c->chunkBytes = 131072;
          c->pipelineDepth = 8;
        } else {
          c->chunkBytes = 65536;
        }
      },
      [](int, clbComm_t) {});
  for (int r = 0; r < 3; r++) {
    EXPECT_NE(errors[r].find("COLIBRI_CHUNK_BYTES differs across ranks: rank 0 resolved 65536, rank 2 resolved "
                             "131072 (65536 on ranks 0,1, 131072 on rank 2) (set chunkBytes / COLIBRI_CHUNK_BYTES "
                             "alike on every rank); these differ too: COLIBRI_PIPELINE_DEPTH"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_EQ(errors[r], errors[0]) << "every rank says the same";
  }
}

// A config struct (the C and Java callers' way) with another transport on one rank: refused on
// both, at once, with a 20 s timeout.
TEST(Agree, TransportOfTheConfigStructOnOneRankOnlyIsRefusedAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const auto errors = clbtest::runThreadRanks(
      2,
      [](int r, clbConfig_t* c) {
        *c = base();
        c->transport = r == 1 ? clbTransportSocket : clbTransportAuto;
      },
      [](int, clbComm_t) {});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  for (int r = 0; r < 2; r++)
    EXPECT_NE(errors[r].find("COLIBRI_TRANSPORT differs across ranks: rank 0 resolved shm, rank 1 resolved socket (set "
                             "transport / COLIBRI_TRANSPORT alike on every rank)"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
}

}  // namespace
