// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Who owns a shared-memory segment, and when one job may remove another's (transport/shm/shm.h): the
// clean-up at init never removes a segment that a live process still holds, whatever its pid
// looks like from here (another PID namespace, a container sharing /dev/shm), and still removes
// what a process that is gone left behind. Ranks of one communicator in different PID namespaces
// run collectives together, and one that is killed there is seen gone here.
//
// The tests with PID namespaces need unshare(CLONE_NEWPID) (root, or a user namespace): where
// neither is permitted they are skipped, saying so. ShmOwnership.LiveSegmentWhosePidLooksDead...
// needs no privilege: it gives its own job's ranks a pid that no process has here, as ranks in
// another PID namespace have.
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "colibri/colibri.h"
#include "core/comm.h"
#include "tests/test_ranks.h"
#include "transport/shm/shm.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string sessionHex(clbComm_t comm) {
  char b[24];
  snprintf(b, sizeof b, "%016llx", (unsigned long long)comm->boot.sessionNonce());
  return b;
}

// The names in /dev/shm that contain both `a` and `b`.
std::vector<std::string> segmentsWith(const std::string& a, const std::string& b) {
  std::vector<std::string> v;
  if (DIR* d = opendir("/dev/shm")) {
    while (struct dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.find(a) != std::string::npos && n.find(b) != std::string::npos) v.push_back(n);
    }
    closedir(d);
  }
  return v;
}

bool segmentExists(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// Waits up to `ms` for a segment of communicator `session` whose name has `part`; "" if none came.
std::string waitForSegment(const std::string& session, const std::string& part, int ms) {
  for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::milliseconds(ms);) {
    auto v = segmentsWith(session, part);
    if (!v.empty()) return v[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return "";
}

bool waitForFile(const std::string& path, int ms) {
  for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::milliseconds(ms);) {
    if (access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

void writeFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  rename(tmp.c_str(), path.c_str());  // whole, or not there
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// A pid that no process has in this PID namespace (the highest free one below pid_max).
pid_t unusedPid() {
  long max = 32768;
  if (FILE* f = fopen("/proc/sys/kernel/pid_max", "r")) {
    if (fscanf(f, "%ld", &max) != 1) max = 32768;
    fclose(f);
  }
  for (pid_t p = (pid_t)max - 1; p > 300; p--)
    if (kill(p, 0) != 0 && errno == ESRCH) return p;
  return -1;
}

// Problems seen by several rank threads, as one text ("" when none).
struct Problems {
  std::mutex m;
  std::string text;
  void add(int rank, const std::string& what) {
    std::lock_guard<std::mutex> lock(m);
    text += "rank " + std::to_string(rank) + ": " + what + "; ";
  }
};

// An allReduce of 64 Ki floats (ring) and one of 100 (direct), every element checked.
void allReduceChecked(int r, int nranks, clbComm_t comm, Problems* pr) {
  for (size_t n : {(size_t)1 << 16, (size_t)100}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)(r + (i % 1000));
    if (clbAllReduce(v.data(), v.data(), n, clbFloat32, clbSum, comm, nullptr) != clbSuccess) {
      pr->add(r, std::string("allReduce: ") + clbGetLastError());
      return;
    }
    const float base = (float)(nranks * (nranks - 1) / 2);
    for (size_t i = 0; i < n; i++)
      if (v[i] != base + (float)(nranks * (i % 1000))) {
        pr->add(r,
                "allReduce of " + std::to_string(n) + ": element " + std::to_string(i) + " is " + std::to_string(v[i]));
        return;
      }
  }
}

// With `pid` > 0, this rank's table says that every rank has that pid (as if they were in a PID
// namespace where that is their pid). Segments made from here on are named from the table.
void givePid(clbComm_t comm, pid_t pid) {
  if (pid > 0)
    for (int p = 0; p < comm->nranks; p++) const_cast<clb::RankInfo&>(comm->boot.peers()[p]).pid = pid;
}

// Rank threads of the tests' jobs: over shared memory.
void shmThreads(int, clbConfig_t* cfg) {
  cfg->transport = clbTransportShm;
  cfg->timeoutMs = 10000;
}

// Another job on this host: two rank threads over shared memory (its init cleans up /dev/shm),
// an allReduce checked element by element. "" when all went well.
std::string runAnotherJob() {
  Problems pr;
  auto errors =
      clbtest::runThreadRanks(2, shmThreads, [&](int r, clbComm_t comm) { allReduceChecked(r, 2, comm, &pr); });
  for (int r = 0; r < 2; r++)
    if (!errors[r].empty()) pr.add(r, "init: " + errors[r]);
  return pr.text;
}

// A job of two rank threads over shared memory. Rank 0 sends 4096 floats to rank 1: they wait in
// the FIFO rank 0 made for that (its own segment, which rank 1 opens by name only when it
// receives). Meanwhile `meanwhile` runs (another job's init, which cleans up /dev/shm); the FIFO
// must still be there afterwards. Then rank 1 receives and both run allReduces, every element
// checked. With `pid` > 0 each rank's table gives both ranks that pid (one no process has here,
// as where the job runs in another PID namespace) before the FIFO is made. "" when all went well.
std::string jobWithAPendingMessage(pid_t pid, const std::function<std::string()>& meanwhile) {
  Problems pr;
  const size_t n = 4096;
  auto errors = clbtest::runThreadRanks(2, shmThreads, [&](int r, clbComm_t comm) {
    givePid(comm, pid);
    if (r == 0) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; i++) v[i] = 0.5f * (float)i;
      if (clbSend(v.data(), n, clbFloat32, 1, comm, nullptr) != clbSuccess)
        pr.add(r, std::string("send: ") + clbGetLastError());
    } else {
      const std::string fifo = waitForSegment(sessionHex(comm), "-r0-p1-", 5000);
      if (fifo.empty()) pr.add(r, "rank 0's FIFO to rank 1 never appeared in /dev/shm");
      const std::string why = meanwhile();
      if (!why.empty()) pr.add(r, "meanwhile: " + why);
      if (!fifo.empty() && !segmentExists(fifo))
        pr.add(r, "/dev/shm/" + fifo + " of this live job was removed by another job");
      std::vector<float> v(n, -1.0f);
      if (clbRecv(v.data(), n, clbFloat32, 0, comm, nullptr) != clbSuccess) {
        pr.add(r, std::string("recv: ") + clbGetLastError());
      } else {
        for (size_t i = 0; i < n; i++)
          if (v[i] != 0.5f * (float)i) {
            pr.add(r, "recv: element " + std::to_string(i) + " is " + std::to_string(v[i]));
            break;
          }
      }
    }
    allReduceChecked(r, 2, comm, &pr);
  });
  for (int r = 0; r < 2; r++)
    if (!errors[r].empty()) pr.add(r, "init: " + errors[r]);
  return pr.text;
}

int exitStatus(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A directory of its own under /tmp for the files a test and its child meet through; removed with
// what is in it.
struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/clb-shm-owner-XXXXXX";
    if (mkdtemp(t)) path = t;
  }
  ~TempDir() {
    if (path.empty()) return;
    if (DIR* d = opendir(path.c_str())) {
      while (struct dirent* e = readdir(d))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink((path + "/" + e->d_name).c_str());
      closedir(d);
    }
    rmdir(path.c_str());
  }
};

// Writes `text` into an existing file (one write: for /proc files); whether all of it went.
bool writeText(const char* path, const std::string& text) {
  int f = open(path, O_WRONLY | O_CLOEXEC);
  if (f < 0) return false;
  bool ok = write(f, text.data(), text.size()) == (ssize_t)text.size();
  close(f);
  return ok;
}

// Starts this test binary (clbtest::SelfCommand) in a new PID namespace, below the namespace's
// init (pid 1 there), with pid `pidThere` there where that can be set (> 1); with `ownShm`, also
// in a mount namespace with a /dev/shm of its own. Returns the pid here of a process whose exit
// status is the test's, with *init the pid here of the namespace's init (SIGKILL to it ends every
// process of the namespace); -1 when those namespaces cannot be made here (*why says why: the
// caller skips).
pid_t spawnSelfInNewPidNamespace(const std::string& filter, const std::vector<std::string>& extra, pid_t pidThere,
                                 pid_t* init, std::string* why, bool ownShm = false) {
  // Everything the children need is made here: they only make system calls. LeakSanitizer (in
  // the checking builds) cannot work in another PID namespace: it reads /proc/<its pid>/task, and
  // /proc is this namespace's (it fails the process with "Can't open /proc/N/task"), so it is off
  // there; the same test runs its ranks here with it on.
  std::vector<std::string> env = extra;
  env.push_back("ASAN_OPTIONS=detect_leaks=0");
  clbtest::SelfCommand cmd(filter, env);
  const std::string deny = "deny", uidMap = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1",
                    gidMap = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1",
                    lastPid = std::to_string(pidThere - 1);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return *why = strerror(errno), -1;
  pid_t mid = fork();
  if (mid == 0) {
    int report[2] = {0, 0};  // errno, and the pid here of the namespace's init
    const int flags = CLONE_NEWPID | (ownShm ? CLONE_NEWNS : 0);
    // Without privilege, in a user namespace that maps this user to itself (so that it can make
    // files in a tmpfs mounted there).
    auto idMaps = [&] {
      return writeText("/proc/self/setgroups", deny) && writeText("/proc/self/uid_map", uidMap) &&
             writeText("/proc/self/gid_map", gidMap);
    };
    if ((unshare(flags) != 0 && (unshare(CLONE_NEWUSER | flags) != 0 || !idMaps())) ||
        (ownShm && (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m") != 0))) {
      report[0] = errno;
      (void)!write(fds[1], report, sizeof report);
      _exit(111);
    }
    pid_t in = fork();
    if (in == 0) {
      if (pidThere > 1) writeText("/proc/sys/kernel/ns_last_pid", lastPid);  // the next pid given out there
      pid_t c = fork();
      if (c == 0) {
        execve("/proc/self/exe", cmd.argv.data(), cmd.envp.data());
        _exit(127);
      }
      int st = 0;
      while (c > 0 && waitpid(c, &st, 0) < 0 && errno == EINTR) {
      }
      _exit(c < 0 ? 126 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    report[0] = in < 0 ? errno : 0;
    report[1] = in;
    (void)!write(fds[1], report, sizeof report);
    int st = 0;
    while (in > 0 && waitpid(in, &st, 0) < 0 && errno == EINTR) {
    }
    _exit(in < 0 ? 126 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  close(fds[1]);
  int report[2] = {-1, -1};
  ssize_t got = mid > 0 ? read(fds[0], report, sizeof report) : -1;
  close(fds[0]);
  if (mid < 0 || got != (ssize_t)sizeof report || report[0] != 0 || report[1] <= 0) {
    *why =
        std::string(ownShm ? "unshare(CLONE_NEWPID | CLONE_NEWNS) and a tmpfs at /dev/shm" : "unshare(CLONE_NEWPID)") +
        ", also in a user namespace: " +
        (got == (ssize_t)sizeof report && report[0] > 0 ? strerror(report[0]) : "no answer");
    if (mid > 0) exitStatus(mid);
    return -1;
  }
  *init = report[1];
  return mid;
}

// Rank `rank` of two over shared memory, from `id`.
clbResult_t initShmRank(clbComm_t* comm, const clbUniqueId& id, int rank, int64_t timeoutMs) {
  clbConfig_t cfg;
  clbConfigInit(&cfg);
  cfg.transport = clbTransportShm;
  cfg.timeoutMs = timeoutMs;
  return clbCommInitRank(comm, &id, rank, 2, &cfg);
}

// What the two ranks of the PID namespace tests do together: allReduces, then rank 0 sends 5000
// int32 that rank 1 sends back tripled; every element checked.
void exchange(int r, clbComm_t comm, Problems* pr) {
  allReduceChecked(r, 2, comm, pr);
  std::vector<int32_t> v(5000), got(5000, 0);
  for (size_t i = 0; i < v.size(); i++) v[i] = (int32_t)i - 7;
  auto expect = [&](int32_t times) {
    for (size_t i = 0; i < v.size(); i++)
      if (got[i] != times * v[i]) {
        pr->add(r, "point-to-point: element " + std::to_string(i) + " is " + std::to_string(got[i]));
        return;
      }
  };
  const int peer = 1 - r;
  if (r == 0) {
    if (clbSend(v.data(), v.size(), clbInt32, peer, comm, nullptr) != clbSuccess ||
        clbRecv(got.data(), got.size(), clbInt32, peer, comm, nullptr) != clbSuccess)
      return pr->add(r, clbGetLastError());
    expect(3);
  } else {
    if (clbRecv(got.data(), got.size(), clbInt32, peer, comm, nullptr) != clbSuccess)
      return pr->add(r, clbGetLastError());
    expect(1);
    for (auto& x : got) x *= 3;
    if (clbSend(got.data(), got.size(), clbInt32, peer, comm, nullptr) != clbSuccess) pr->add(r, clbGetLastError());
  }
}

// A child in a new PID namespace (spawnSelfInNewPidNamespace) running ShmOwnershipChild.`child`;
// killed with its whole namespace if the test ends before it waited for it.
struct OtherNamespace {
  pid_t mid = -1, init = -1;
  std::string why;  // mid < 0: why not (the test skips)
  bool reaped = false;
  OtherNamespace(const std::string& child, const std::vector<std::string>& env, pid_t pidThere = 0,
                 bool ownShm = false) {
    mid = spawnSelfInNewPidNamespace("ShmOwnershipChild." + child, env, pidThere, &init, &why, ownShm);
  }
  int status() {
    reaped = true;
    return exitStatus(mid);
  }
  ~OtherNamespace() {
    if (mid > 0 && !reaped) {
      kill(init, SIGKILL);
      exitStatus(mid);
    }
  }
};

// ---- the bodies of the child processes (skipped unless started by the tests below) ----

const char* role() {
  const char* r = getenv("CLB_SHM_OWNER_ROLE");
  return r ? r : "";
}

TEST(ShmOwnershipChild, AnotherJob) {
  if (strcmp(role(), "another-job")) GTEST_SKIP() << "runs only as a child of the ShmOwnership tests";
  EXPECT_EQ(runAnotherJob(), "");
}

// Makes a FIFO segment (rank 0's message to rank 1 that rank 1 never receives), writes its name
// into $CLB_SHM_OWNER_DIR/segment and exits at once: the segment is abandoned. With
// CLB_SHM_OWNER_PID, its ranks first take that pid in their tables.
TEST(ShmOwnershipChild, AbandonsASegment) {
  if (strcmp(role(), "abandon")) GTEST_SKIP() << "runs only as a child of the ShmOwnership tests";
  const std::string dir = getenv("CLB_SHM_OWNER_DIR");
  const char* pidText = getenv("CLB_SHM_OWNER_PID");
  const pid_t pid = pidText ? (pid_t)atoi(pidText) : 0;
  clbtest::runThreadRanks(2, shmThreads, [&](int r, clbComm_t comm) {
    givePid(comm, pid);
    if (r == 0) {
      std::vector<float> v(1024, 1.0f);
      clbSend(v.data(), v.size(), clbFloat32, 1, comm, nullptr);
      for (;;) pause();
    }
    const std::string fifo = waitForSegment(sessionHex(comm), "-r0-p1-", 5000);
    writeFile(dir + "/segment", fifo);
    _exit(fifo.empty() ? 1 : 0);
  });
}

// Rank 1 of the communicator in $CLB_SHM_OWNER_ID, in a PID namespace of its own: collectives and
// point-to-point with rank 0 over shared memory; with CLB_SHM_OWNER_WAIT it then waits to be killed.
TEST(ShmOwnershipChild, RankInAnotherPidNamespace) {
  if (strcmp(role(), "rank1")) GTEST_SKIP() << "runs only as a child of the ShmOwnership tests";
  clbComm_t comm = nullptr;
  ASSERT_EQ(initShmRank(&comm, clbtest::unhex(getenv("CLB_SHM_OWNER_ID")), 1, 10000), clbSuccess) << clbGetLastError();
  Problems pr;
  exchange(1, comm, &pr);
  EXPECT_EQ(pr.text, "");
  if (getenv("CLB_SHM_OWNER_WAIT")) {
    writeFile(std::string(getenv("CLB_SHM_OWNER_DIR")) + "/ready", "1");
    for (;;) pause();
  }
  EXPECT_EQ(clbCommDestroy(comm), clbSuccess) << clbGetLastError();
}

// Rank 1 of the communicator in $CLB_SHM_OWNER_ID, with a /dev/shm of its own: init fails, saying why.
TEST(ShmOwnershipChild, RankWithADevShmOfItsOwn) {
  if (strcmp(role(), "rank1-own-shm")) GTEST_SKIP() << "runs only as a child of the ShmOwnership tests";
  clbComm_t comm = nullptr;
  ASSERT_EQ(initShmRank(&comm, clbtest::unhex(getenv("CLB_SHM_OWNER_ID")), 1, 20000), clbInvalidUsage)
      << clbGetLastError();
  EXPECT_NE(std::string(clbGetLastError()).find("not the same /dev/shm"), std::string::npos) << clbGetLastError();
}

// jobWithAPendingMessage in a PID namespace of its own: while its message waits, it says so
// ($CLB_SHM_OWNER_DIR/ready) and waits for the parent's other job to have run (.../go).
TEST(ShmOwnershipChild, JobWithAPendingMessage) {
  if (strcmp(role(), "job")) GTEST_SKIP() << "runs only as a child of the ShmOwnership tests";
  const std::string dir = getenv("CLB_SHM_OWNER_DIR");
  EXPECT_EQ(jobWithAPendingMessage(0,
                                   [&] {
                                     writeFile(dir + "/pid", std::to_string(getpid()));
                                     writeFile(dir + "/ready", "1");
                                     return waitForFile(dir + "/go", 30000) ? "" : "no go from the parent";
                                   }),
            "");
}

// ---- the tests ----

// A live job whose segments' recorded pid is one that no process has here (as for a job in
// another PID namespace): another job's init on this host leaves its segments alone, and its
// message, then its collectives, arrive whole. Needs no privilege.
TEST(ShmOwnership, LiveSegmentWhosePidLooksDeadSurvivesAnotherJobsInit) {
  const pid_t pid = unusedPid();
  ASSERT_GT(pid, 0) << "no unused pid found";
  EXPECT_EQ(jobWithAPendingMessage(pid,
                                   [] {
                                     pid_t child = clbtest::spawnSelf("ShmOwnershipChild.AnotherJob",
                                                                      {"CLB_SHM_OWNER_ROLE=another-job"});
                                     if (child < 0) return std::string("cannot start the other job");
                                     int st = exitStatus(child);
                                     return st == 0 ? std::string() : "the other job exited " + std::to_string(st);
                                   }),
            "");
}

// Makers and cleaners at once, in this process's threads as in processes of several jobs: a
// cleaner may judge a name in the instant between its creation and its maker's lock, yet no
// segment its maker holds ever loses its name, and the cleaners remove only what nobody holds.
TEST(ShmOwnership, CleanersRacingMakersNeverRemoveAHeldSegment) {
  const uint64_t session = std::random_device()() * 0x100000001ull;
  const std::string prefix = clb::sessionSegmentPrefix(session);
  std::atomic<bool> done{false};
  std::atomic<int> lost{0}, made{0};
  std::vector<std::thread> ts;
  for (int c = 0; c < 2; c++)
    ts.emplace_back([&] {
      while (!done.load()) clb::removeUnheldSegments(prefix);
    });
  for (int m = 0; m < 2; m++)
    ts.emplace_back([&, m] {
      for (int i = 0; i < 1000; i++) {
        const std::string name = clb::segmentName(session, m, "g" + std::to_string(i));
        char* base = nullptr;
        int fd = -1;
        if (clb::mapSegment(name, 4096, true, &base, &fd) != clbSuccess) {
          lost++;
          continue;
        }
        made++;
        std::this_thread::yield();
        struct stat a {
        }, b{};
        if (fstat(fd, &a) != 0 || stat(("/dev/shm" + name).c_str(), &b) != 0 || a.st_ino != b.st_ino) lost++;
        munmap(base, 4096);
        clb::unlinkSegment(name, &fd);
      }
    });
  for (size_t t = 2; t < ts.size(); t++) ts[t].join();
  done = true;
  ts[0].join();
  ts[1].join();
  EXPECT_EQ(made.load(), 2000);
  EXPECT_EQ(lost.load(), 0) << "segments whose maker held them lost their name (or could not be made)";
  // What a maker that is gone left: removed. (Made and closed here: its lock went with the close.)
  char* base = nullptr;
  int fd = -1;
  const std::string left = clb::segmentName(session, 9, "left");
  ASSERT_EQ(clb::mapSegment(left, 4096, true, &base, &fd), clbSuccess) << clbGetLastError();
  munmap(base, 4096);
  clb::removeUnheldSegments(prefix);
  EXPECT_TRUE(segmentExists(left.substr(1))) << "held";
  close(fd);
  clb::removeUnheldSegments(prefix);
  EXPECT_FALSE(segmentExists(left.substr(1))) << "nobody holds it";
}

// A segment whose maker is gone (its lock went with it) is removed by the next init on the host,
// also when its recorded pid is that of a live process (reused, or the same number in another
// namespace): no pid decides.
void abandonedIsRemoved(bool livePid) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  std::vector<std::string> env{"CLB_SHM_OWNER_ROLE=abandon", "CLB_SHM_OWNER_DIR=" + dir.path};
  if (livePid) env.push_back("CLB_SHM_OWNER_PID=" + std::to_string(getpid()));
  pid_t child = clbtest::spawnSelf("ShmOwnershipChild.AbandonsASegment", env);
  ASSERT_GT(child, 0);
  ASSERT_EQ(exitStatus(child), 0);
  const std::string seg = readFile(dir.path + "/segment");
  ASSERT_FALSE(seg.empty());
  ASSERT_TRUE(segmentExists(seg)) << seg << ": the child's segment should be left behind";
  EXPECT_EQ(runAnotherJob(), "");
  EXPECT_FALSE(segmentExists(seg)) << "/dev/shm/" << seg << " was left by a process that is gone";
  if (segmentExists(seg)) unlink(("/dev/shm/" + seg).c_str());
}

TEST(ShmOwnership, AbandonedSegmentIsRemovedAtTheNextInit) { abandonedIsRemoved(false); }

TEST(ShmOwnership, AbandonedSegmentIsRemovedEvenWhereItsPidIsALiveProcess) { abandonedIsRemoved(true); }

// Rank 0 here, rank 1 in a PID namespace of its own (a container with --ipc=host and the host's
// network): they set up shared memory together and run collectives and point-to-point over it.
// With `killRank1`, rank 1 is then killed (all of its namespace, SIGKILL): rank 0 learns it
// without a call, within a second, and not from a pid (rank 1's means another process here, or
// none).
void acrossPidNamespaces(bool killRank1) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  std::vector<std::string> env{"CLB_SHM_OWNER_ROLE=rank1", "CLB_SHM_OWNER_DIR=" + dir.path,
                               "CLB_SHM_OWNER_ID=" + clbtest::hex(id)};
  if (killRank1) env.push_back("CLB_SHM_OWNER_WAIT=1");
  OtherNamespace rank1("RankInAnotherPidNamespace", env);
  if (rank1.mid < 0) GTEST_SKIP() << "no PID namespace can be made here: " << rank1.why;
  clbComm_t comm = nullptr;
  ASSERT_EQ(initShmRank(&comm, id, 0, 10000), clbSuccess) << clbGetLastError();
  Problems pr;
  exchange(0, comm, &pr);
  EXPECT_EQ(pr.text, "");
  if (!killRank1) {
    EXPECT_EQ(clbCommDestroy(comm), clbSuccess) << clbGetLastError();
    EXPECT_EQ(rank1.status(), 0) << "rank 1, in the other PID namespace";
    return;
  }
  ASSERT_TRUE(waitForFile(dir.path + "/ready", 10000));
  clbResult_t a = clbInternalError;
  ASSERT_EQ(clbCommGetAsyncError(comm, &a), clbSuccess);
  EXPECT_EQ(a, clbSuccess) << "rank 1 still lives: " << clbGetLastError();
  kill(rank1.init, SIGKILL);
  const auto t0 = Clock::now();
  while (a == clbSuccess && Clock::now() - t0 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(clbCommGetAsyncError(comm, &a), clbSuccess);
  }
  const std::string msg = a == clbSuccess ? "" : clbGetLastError();
  EXPECT_EQ(a, clbRemoteError) << msg;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_NE(msg.find("rank 1 (pid "), std::string::npos) << msg;
  EXPECT_NE(msg.find("exited or was killed"), std::string::npos) << msg;
  clbCommDestroy(comm);
  rank1.status();
}

TEST(ShmOwnership, RanksInDifferentPidNamespacesRunCollectives) { acrossPidNamespaces(false); }

TEST(ShmOwnership, KilledPeerInAnotherPidNamespaceIsSeenGone) { acrossPidNamespaces(true); }

// Ranks with the same host name and boot id but a /dev/shm each (containers without --ipc=host
// on the host's network) cannot use the shm transport: init fails at once on both, saying why and
// what to do, rather than one finding the other's segment "gone" or waiting for the timeout.
TEST(ShmOwnership, RanksWithoutACommonDevShmFailAtOnceSayingWhy) {
  clbUniqueId id;
  ASSERT_EQ(clbGetUniqueId(&id), clbSuccess);
  OtherNamespace rank1("RankWithADevShmOfItsOwn",
                       {"CLB_SHM_OWNER_ROLE=rank1-own-shm", "CLB_SHM_OWNER_ID=" + clbtest::hex(id)}, 0, true);
  if (rank1.mid < 0) GTEST_SKIP() << "no namespaces with a /dev/shm of their own can be made here: " << rank1.why;
  clbComm_t comm = nullptr;
  const auto t0 = Clock::now();
  EXPECT_EQ(initShmRank(&comm, id, 0, 20000), clbInvalidUsage) << clbGetLastError();
  const std::string msg = clbGetLastError();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(msg.find("rank 0 and rank 1 have the same host name and boot id but not the same /dev/shm"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--ipc=host"), std::string::npos) << msg;
  if (comm) clbCommDestroy(comm);
  EXPECT_EQ(rank1.status(), 0) << "rank 1, with its own /dev/shm";
}

// A live job in another PID namespace, with a pid there that no process has here: this job's init
// (it cleans up /dev/shm) leaves its segments alone, and the job's message and collectives arrive
// whole.
TEST(ShmOwnership, LiveJobInAnotherPidNamespaceKeepsItsSegments) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const pid_t pidThere = unusedPid();
  OtherNamespace job("JobWithAPendingMessage", {"CLB_SHM_OWNER_ROLE=job", "CLB_SHM_OWNER_DIR=" + dir.path}, pidThere);
  if (job.mid < 0) GTEST_SKIP() << "no PID namespace can be made here: " << job.why;
  const bool ready = waitForFile(dir.path + "/ready", 20000);
  EXPECT_TRUE(ready) << "the job in the other namespace did not get its message under way";
  const std::string there = readFile(dir.path + "/pid");
  if (ready && kill((pid_t)atoi(there.c_str()), 0) == 0)
    std::cout << "note: pid " << there << " (the job's there) is also a process here\n";
  EXPECT_EQ(runAnotherJob(), "");
  writeFile(dir.path + "/go", "1");
  EXPECT_EQ(job.status(), 0) << "the job in the other PID namespace failed (its output says how)";
}

}  // namespace
