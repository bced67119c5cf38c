// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Point-to-point on the GPU (device.h, PeerDevice) for the pairs of ranks that use one GPU: the
// operations of a batch with such peers run as one kernel launch on the caller's stream
// (kernels/p2p.cu), which returns at once and can be captured in a CUDA graph. Each rank owns a
// box per such peer in its GPU memory (the peer's chunks land there, and the peer's credits for
// this rank's chunks), made at the pair's first device call. A peer in this process finds it
// through a table of the process, so nothing crosses the host channel; a peer in another process
// of this host maps it through CUDA IPC, the handles exchanged over the pair's host channel at
// that first call (joinProcesses). Pairs across GPUs or hosts go through host memory
// (p2p_staged.cc); both ranks of a pair decide alike.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "device/device_context.h"
#include "base/dtype.h"
#include "device/device.h"
#include "device/gpu_runtime.h"
#include "device/kernels.h"
#include "device/peer_meet.h"
#include "device/stop.h"
#include "transport/transport.h"

namespace clb::cuda {
namespace {

// The boxes of this process: (session, owner rank, peer) -> the owner's box for that peer, and its GPU.
struct BoxEntry {
  CUdeviceptr box = 0;
  int ordinal = -1;
};
std::mutex gBoxesMutex;

static_assert(sizeof(ClbP2pArgs) <= 32764, "clb_dev_p2p's parameters exceed what a launch takes");

// Messages larger than this move in place (measured on the H200, 2 ranks in a graph: 16 KiB in
// lines 5.8 us, 64 KiB in place with one block 5.8 us, 32 KiB in lines 8.9 us). An in-place send
// or a local copy takes a block per kInPlaceBytesPerBlock, at most kInPlaceMaxBlocks.
constexpr unsigned long long kInPlaceMinBytes = 16 << 10;
constexpr unsigned long long kInPlaceBytesPerBlock = 64 << 10;
constexpr unsigned long long kInPlaceMaxBlocks = 64;
// A message in lines takes a block (lane) per kLaneBytes, at most kMaxLanes: one block keeps only
// so many lines in flight (measured on the H200 between two processes: 8.2 GB/s at 64 MiB with one).
constexpr unsigned long long kLaneBytes = 16 << 10;
constexpr unsigned long long kMaxLanes = 8;
std::map<std::tuple<uint64_t, int, int>, BoxEntry> gBoxes;
// (session, rank) -> its GPU, once the rank made a device point-to-point call (everyRankHere).
std::map<std::pair<uint64_t, int>, int> gRankGpus;
// GPU -> the ranks (of every communicator) of this process set up for point-to-point on it: they
// share its block slots.
std::map<int, int> gRanksOnGpu;

}  // namespace

struct PeerDevice::Pair {
  enum State { kNew, kGpu, kHost } state = kNew;
  bool process = false;    // the peer is in another process: its box is a CUDA IPC mapping
  CUdeviceptr mine = 0;    // this rank's box for the peer
  CUdeviceptr theirs = 0;  // the peer's box for this rank
  // The numbers this rank's launches send to the peer and receive from it, all told (as the
  // box's counts will be once they completed; tellPeersOfEnd; under endMutex_).
  uint64_t sent = 0, received = 0;
};

PeerDevice::PeerDevice(DeviceCommContext* c) : c_(c), rt_(gpuRuntime(c)), nonce_(c->boot.sessionNonce()) {
  pairs_.assign(c->nranks, Pair{});
  for (int p = 0; p < c->nranks; p++)
    if (onThisHost(p) && !inThisProcess(p)) othersOnHost_++;
}

bool PeerDevice::onThisHost(int p) const { return c_->boot.peers()[p].hostHash == c_->boot.peers()[c_->rank].hostHash; }

// (A pid alone is not enough: another host, or another PID namespace of this one, may reuse it.)
bool PeerDevice::inThisProcess(int p) const { return c_->boot.inThisProcess(p); }

void PeerDevice::watch() {
  if (watching_ || !state_) return;
  watched_.rank = c_->rank;
  watched_.nranks = c_->nranks;
  watched_.timeoutMs = c_->cfg.timeoutMs;
  watched_.tick = [this] {
    stopIfAbandoned();
    tellPeersOfEnd(false);
  };
  watchdogAdd(&watched_);
  watching_ = true;
}

void PeerDevice::drain() {
  if (!d_) return;
  CtxScope scope(d_, ctx_);
  d_->cuCtxSynchronize();
}

void PeerDevice::lastRound() {
  stopIfAbandoned();
  tellPeersOfEnd(true);
}

void PeerDevice::unwatch() {
  if (watching_) watchdogRemove(&watched_);
  watching_ = false;
}

PeerDevice::~PeerDevice() {
  unwatch();
  if (!d_) return;
  {
    CtxScope scope(d_, ctx_);
    // This rank's kernels first (told to end if the communicator was aborted or a peer died since
    // the watchdog's last round); then the peers' in other processes may still credit this rank's
    // boxes (their last receives): a bounded wait until every chunk sent was credited.
    stopIfAbandoned();
    tellPeersOfEnd(true);
    d_->cuCtxSynchronize();
    if (stopStream_) d_->cuStreamDestroy(stopStream_);
    // A peer's kernel waiting for this rank reads its box on the slow path of the wait (at least
    // every millisecond or so) and, once it saw the end, leaves the box alone: the boxes stay that
    // long after the end was told.
    if (toldAtMs_)
      if (const int64_t left = toldAtMs_ + kEndGraceMs - nowMs(); left > 0) usleep((useconds_t)left * 1000);
    graceForEveryDeviceCall(c_);  // (when it said every call ends: stop.h)
    if (!c_->failed && !c_->aborted && !stopped_) {
      const int64_t deadline = nowMs() + std::min<int64_t>(c_->cfg.timeoutMs, 5000);
      for (const Pair& pr : pairs_) {
        if (!pr.process || pr.state != Pair::kGpu) continue;
        for (;;) {
          unsigned long long sent = 0, credit[CLB_P2P_SLOTS] = {};
          if (d_->cuMemcpyDtoH(&sent, pr.mine + offsetof(ClbP2pBox, sent), sizeof sent) != CUDA_SUCCESS ||
              d_->cuMemcpyDtoH(credit, pr.mine + offsetof(ClbP2pBox, credit), sizeof credit) != CUDA_SUCCESS)
            break;
          if (*std::max_element(credit, credit + CLB_P2P_SLOTS) >= sent || nowMs() > deadline) break;
          usleep(200);
        }
      }
    }
    for (const Pair& pr : pairs_)
      if (pr.process && pr.theirs) d_->cuIpcCloseMemHandle(pr.theirs);
    for (auto [a, bytes] : arenas_) rt_.free(a, bytes);
    if (hostError_) d_->cuMemFreeHost(hostError_);
  }
  if (lastLaunch_) d_->cuEventDestroy(lastLaunch_);
  std::lock_guard<std::mutex> g(gBoxesMutex);
  for (int p = 0; p < (int)pairs_.size(); p++) gBoxes.erase({nonce_, c_->rank, p});
  if (state_) {
    gRankGpus.erase({nonce_, c_->rank});
    gRanksOnGpu[ordinal_]--;
  }
}

// An acquire load: the kernel writes the rank waited for ([1]) before the code, with a system fence
// between (p2p.cu), so endedPeer reads it after this.
unsigned int PeerDevice::launchError() const { return hostError_ ? __atomic_load_n(hostError_, __ATOMIC_ACQUIRE) : 0; }

int PeerDevice::endedPeer() const {
  if (launchError() != CLB_P2P_ERROR_PEER_ENDED) return -1;  // (its acquire orders the read below)
  const unsigned int p = reinterpret_cast<volatile unsigned int*>(hostError_)[1];
  return p < (unsigned)c_->nranks ? (int)p : -1;
}

// The blocks one launch may take: its share of the GPU's slots (a margin of 4 for other work),
// with every rank of this process set up on the GPU (of any communicator), and every rank of the
// communicator in another process of this host, launching at once.
int PeerDevice::blockBudget() const {
  std::lock_guard<std::mutex> g(gBoxesMutex);
  auto it = gRanksOnGpu.find(ordinal_);
  // Ranks of this communicator in other processes of the host may be on this GPU too (under MPS
  // their kernels share its slots): counted as if they all were.
  const int ranks = (it == gRanksOnGpu.end() ? 1 : std::max(1, it->second)) + othersOnHost_;
  return std::max(1, (slots_ - 4) / ranks);
}

// Whether every rank of the communicator is a thread of this process on this GPU: a reduce, which
// every rank makes, waits for each to say which GPU it is on (its first device call).
clbResult_t PeerDevice::everyRankHere(bool* here) {
  *here = false;
  for (int p = 0; p < c_->nranks; p++)
    if (!inThisProcess(p)) return clbSuccess;
  for (int p = 0; p < c_->nranks; p++) {
    int gpu = -1;
    CLB_CHECK(awaitTable(p, "a rank to make its first device point-to-point call (a reduce)", [&] {
      auto it = gRankGpus.find({nonce_, p});
      if (it != gRankGpus.end()) gpu = it->second;
      return it != gRankGpus.end();
    }));
    if (gpu != ordinal_) return clbSuccess;
  }
  *here = true;
  return clbSuccess;
}

// Waits until `found` (called under the table's lock) holds: what rank `peer` publishes in this
// process's tables at its first device call.
clbResult_t PeerDevice::awaitTable(int peer, const char* what, const std::function<bool()>& found) const {
  const int64_t start = nowMs();
  for (;;) {
    {
      std::lock_guard<std::mutex> g(gBoxesMutex);
      if (found()) return clbSuccess;
    }
    CLB_CHECK(c_->checkWait(start, what, peer));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

clbResult_t PeerDevice::setUpRank(CUcontext ctx, CUstream stream) {
  if (state_) return clbSuccess;
  CLB_CHECK(refuseInCapture(stream, "its kernels and bookkeeping"));
  CLB_CHECK(driver(&d_));
  ctx_ = ctx;
  CtxScope scope(d_, ctx_);
  CUdevice dev = 0;
  CLB_CU(d_, cuCtxGetDevice, &dev);
  ordinal_ = (int)dev;
  const Kernels* kernels = nullptr;
  CLB_CHECK(rt_.kernels(ctx_, &kernels));  // the image in this context (the buffers')
  CLB_CHECK(kernels->function("clb_dev_p2p", &fn_[0][0]));
  CLB_CHECK(kernels->function("clb_dev_p2p_bulk", &fn_[0][1]));
  CLB_CHECK(kernels->function("clb_dev_p2p_small", &fn_[1][0]));
  CLB_CHECK(kernels->function("clb_dev_p2p_small_bulk", &fn_[1][1]));
  // One empty launch of each kernel, waited for, before this rank publishes any box: with lazy
  // loading (CUDA's default) a function is loaded at its first launch, which may wait for the
  // work running in the context; done here, no kernel waits for this rank yet.
  {
    CUstream s = nullptr;
    CLB_CU(d_, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
    ClbP2pArgs none{};
    ClbP2pArgsSmall noneSmall{};
    void* params[] = {&none};
    void* paramsSmall[] = {&noneSmall};
    CUresult rc = CUDA_SUCCESS;
    for (int small = 0; small < 2; small++)
      for (int bulk = 0; bulk < 2 && rc == CUDA_SUCCESS; bulk++)
        rc = d_->cuLaunchKernel(fn_[small][bulk], 1, 1, 1, 32, 1, 1, 0, s, small ? paramsSmall : params, nullptr);
    if (rc == CUDA_SUCCESS) rc = d_->cuStreamSynchronize(s);
    d_->cuStreamDestroy(s);
    if (rc != CUDA_SUCCESS) return cuError(rc, "the warm-up launches of clb_dev_p2p");
  }
  // The GPU's block slots, which the ranks set up on it share (blockBudget()).
  int perSm = 1;
  CLB_CU(d_, cuOccupancyMaxActiveBlocksPerMultiprocessor, &perSm, fn_[0][1], 256, 0);
  slots_ = kernels->smCount() * std::max(1, perSm);
  CLB_CU(d_, cuEventCreate, &lastLaunch_, CU_EVENT_DISABLE_TIMING);
  CLB_CHECK(carve(sizeof(ClbP2pState), &state_));
  {
    std::lock_guard<std::mutex> g(gBoxesMutex);
    gRankGpus[{nonce_, c_->rank}] = ordinal_;
    gRanksOnGpu[ordinal_]++;
  }
  CLB_CU(d_, cuMemHostAlloc, (void**)&hostError_, 2 * sizeof(unsigned int), CU_MEMHOSTALLOC_DEVICEMAP);
  hostError_[0] = 0;
  hostError_[1] = ~0u;  // no rank (endedPeer)
  CLB_CU(d_, cuMemHostGetDevicePointer, &hostErrorDev_, hostError_, 0);
  watch();
  return clbSuccess;
}

// The stream of stopIfAbandoned's and tellPeersOfEnd's writes (made at the first).
CUresult PeerDevice::stopStream(CUstream* s) {
  CUresult rc = stopStream_ ? CUDA_SUCCESS : d_->cuStreamCreate(&stopStream_, CU_STREAM_NON_BLOCKING);
  *s = stopStream_;
  return rc;
}

// This rank's point-to-point kernels end at once, those waiting now and every later one: its
// state's error word, written on the stop stream (`s`, for writes that must follow it).
CUresult PeerDevice::stopKernels(CUstream* s) {
  CUresult rc = stopStream(s);
  if (rc == CUDA_SUCCESS) rc = d_->cuStreamWriteValue32(*s, state_ + offsetof(ClbP2pState, error), 1, 0);
  stopped_ = true;
  return rc;
}

// Between processes an abort or a death reaches the peers' hosts at once, but not their
// point-to-point kernels, whose calls have returned: they would wait for a message or a credit
// until the timeout. So when mustStopDevice says so (stop.h: the collectives' kernels end alike),
// this rank's state's error word is set (a stream memory operation on a stream of its own: no SM
// needed, nothing waits for it), which every wait reads on its slow path: the kernels waiting now
// and every later one end at once, with undefined output. The error is not the kernels' own
// (hostError stays 0): the next call and clbCommGetAsyncError report the abort, the death or the
// failure from the notice. A peer that failed on its own and told how far it goes is no reason: it
// completes the operations it launched before (tellPeersOfEnd).
void PeerDevice::stopIfAbandoned() {
  if (stopped_ || !state_) return;
  clbResult_t code = clbSuccess;
  std::string why;
  if (!mustStopDevice(c_, &code, &why)) return;
  CtxScope scope(d_, ctx_);
  CUstream s = nullptr;
  CUresult rc = stopKernels(&s);
  if (rc != CUDA_SUCCESS)
    CLB_WARN("rank %d: %s; but stopping its point-to-point kernels failed (CUDA error %d): they end at the timeout",
             c_->rank, why.c_str(), (int)rc);
  else
    CLB_INFO("rank %d: %s (its point-to-point kernels)", c_->rank, why.c_str());
}

// A rank whose communicator failed (a refusal of its own, an error, a peer's failure: not an
// abort, which stopIfAbandoned handles) launches nothing after it, but the operations its peers
// launched before may wait for a message or a credit of this rank's that never comes, until the
// timeout. So it writes into each of its own boxes the numbers its launches with that peer send
// and receive, all told, then the box's `ended` word (stream memory operations on a stream of its
// own, in order, each after a fence: no SM needed, nothing waits for them). A peer's wait for a
// number past them gives up at once (CLB_P2P_ERROR_PEER_ENDED, kernels/p2p.cu); what this rank's
// launches still send or receive moves as before. After a capture (replays move the counts on
// without the host), or once this rank said that every device call ends (stop.h), it cannot tell
// those numbers: through a transport with shared memory every device kernel of the communicator
// ends (endEveryDeviceCall), its own point-to-point kernels end first here (its error word, in the
// same stream order), and the boxes say 0 and 0, so that every wait of a peer's for this rank ends
// whatever the transport. Nothing when its kernels were stopped already: by an abort, a death or
// an "every call", which reach every peer by themselves.
void PeerDevice::tellPeersOfEnd(bool wait) {
  // Cheap and lock-free while the communicator is healthy: the watchdog's round never waits here
  // for a launch that holds the lock (a full launch queue may hold it a while); it tries again at
  // the next round.
  if (endTold_.load() || !state_ || !c_->failed.load() || c_->aborted.load()) return;
  std::unique_lock<std::mutex> g(endMutex_, std::defer_lock);
  if (wait)
    g.lock();
  else if (!g.try_lock())
    return;
  if (endTold_.load()) return;
  if (stopped_) return endTold_.store(true);
  const bool every = captured_ || c_->deviceEndsEveryAtMs.load();
  const char* why =
      captured_ ? "its point-to-point calls were captured in a CUDA graph" : "it said that every device call ends";
  if (every) {
    // Through shared memory the peers hear "every call" from its control block; where they cannot
    // (another transport), the boxes below say it. Not where this rank's failure follows from a
    // peer's (as a rank that did not capture: nothing), nor yet while another failed rank has not
    // said how far it goes (the next rounds ask again; stop.h bounds the wait).
    const EveryCall said = endEveryDeviceCall(c_, why, wait, true);
    if (said == EveryCall::kLater) return;
    if (said == EveryCall::kEcho) {
      endTold_.store(true);
      CLB_INFO(
          "rank %d: its communicator failed after a peer's and %s; its peers' point-to-point kernels that wait for "
          "it end at that peer's end, else at the timeout",
          c_->rank, why);
      return;
    }
  }
  endTold_.store(true);
  CtxScope scope(d_, ctx_);
  CUstream s = nullptr;
  CUresult rc = every ? stopKernels(&s) : stopStream(&s);
  bool any = false;
  for (const Pair& pr : pairs_) {
    if (!pr.mine) continue;  // (a box published to a peer whose meeting failed here is told too)
    any = true;
    const uint64_t sent = every ? 0 : pr.sent, received = every ? 0 : pr.received;
    if (rc == CUDA_SUCCESS) rc = d_->cuStreamWriteValue64(s, pr.mine + offsetof(ClbP2pBox, endSent), sent, 0);
    if (rc == CUDA_SUCCESS) rc = d_->cuStreamWriteValue64(s, pr.mine + offsetof(ClbP2pBox, endReceived), received, 0);
    if (rc == CUDA_SUCCESS) rc = d_->cuStreamWriteValue64(s, pr.mine + offsetof(ClbP2pBox, ended), 1, 0);
  }
  if (!any) return;
  // A peer deciding whether its own failure follows from this one's (endEveryDeviceCall) sees that
  // this rank told, also where no device collective says a call's number.
  if (!every && rc == CUDA_SUCCESS && c_->carrier) c_->carrier->announceDeviceEnd(kDeviceEndToldInBoxes);
  toldAtMs_ = nowMs();
  if (rc != CUDA_SUCCESS)
    CLB_WARN(
        "rank %d: its communicator failed, but telling its peers' point-to-point kernels so failed (CUDA error %d): "
        "those waiting for it end at the timeout",
        c_->rank, (int)rc);
  else if (every)
    CLB_INFO(
        "rank %d: its communicator failed and %s, so it cannot tell how far its point-to-point calls go: its "
        "point-to-point kernels end at once, and its peers' waiting for it",
        c_->rank, why);
  else
    CLB_INFO(
        "rank %d: its communicator failed; its peers' point-to-point kernels waiting past its last launch end at once",
        c_->rank);
}

clbResult_t PeerDevice::refuseInCapture(CUstream stream, const char* what) {
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (stream && d->cuStreamIsCapturing(stream, &capturing) == CUDA_SUCCESS &&
      capturing != CU_STREAM_CAPTURE_STATUS_NONE)
    return setError(clbInvalidUsage,
                    "rank %d: the first point-to-point call on device memory with a peer sets up %s, which cannot "
                    "happen inside a CUDA graph capture: make one such call with that peer before capturing",
                    c_->rank, what);
  return clbSuccess;
}

// Zeroed device memory for the state or a box, counted.
clbResult_t PeerDevice::carve(size_t bytes, CUdeviceptr* out) {
  CtxScope scope(d_, ctx_);
  CUdeviceptr a = 0;
  CLB_CHECK(rt_.alloc(bytes, "point-to-point's state and boxes", &a));
  arenas_.emplace_back(a, bytes);
  CLB_CHECK(zeroNow(d_, a, bytes));
  *out = a;
  return clbSuccess;
}

// Gives back what carve made (a box whose pair went through host memory after all).
void PeerDevice::uncarve(CUdeviceptr a, size_t bytes) {
  auto it = std::find(arenas_.begin(), arenas_.end(), std::make_pair(a, bytes));
  if (it == arenas_.end()) return;
  arenas_.erase(it);
  CtxScope scope(d_, ctx_);
  rt_.free(a, bytes);
}

// tellPeersOfEnd reads the boxes from the watchdog's thread: a box comes and goes under its lock.
void PeerDevice::setMine(Pair& pr, CUdeviceptr box) {
  std::lock_guard<std::mutex> g(endMutex_);
  pr.mine = box;
}

// A pair's first device call, in two steps over all the batch's new peers: every box of this rank
// is made and published first (publish), then the peers' are awaited (meet), so that ranks
// whose batches name their peers in different orders never wait for each other in a circle.
clbResult_t PeerDevice::publish(int p, CUstream stream) {
  Pair& pr = pairs_[p];
  if (pr.state != Pair::kNew || pr.mine) return clbSuccess;
  CLB_CHECK(refuseInCapture(stream, "the pair's device channel"));
  CUdeviceptr box = 0;
  CLB_CHECK(carve(sizeof(ClbP2pBox), &box));
  setMine(pr, box);
  std::lock_guard<std::mutex> g(gBoxesMutex);
  gBoxes[{nonce_, c_->rank, p}] = BoxEntry{pr.mine, ordinal_};
  return clbSuccess;
}

clbResult_t PeerDevice::meet(int p) {
  Pair& pr = pairs_[p];
  if (pr.state != Pair::kNew) return clbSuccess;
  // The peer is in its own first device call with this rank (or comes to it): its box appears.
  char what[96];
  snprintf(what, sizeof what, "rank %d to set up its device channel with this rank", p);
  return awaitTable(p, what, [&] {
    auto it = gBoxes.find({nonce_, p, c_->rank});
    if (it == gBoxes.end()) return false;
    // One GPU: the peer's box is reachable as it is. Other GPUs: through host memory for now.
    pr.state = it->second.ordinal == ordinal_ ? Pair::kGpu : Pair::kHost;
    pr.theirs = it->second.box;
    return true;
  });
}

namespace {

// What two ranks in different processes of one host tell each other at their first device call
// with each other: round 1 which GPU they use, round 2 (same GPU) whether this rank's box for the
// peer is there and its CUDA IPC handle, round 3 whether this rank mapped the peer's box. Each
// round is one message each way over the pair's host channel (a kPeerSetUp batch), so that a
// batch with several new peers exchanges with all of them side by side.
struct SetUpRecord {
  uint32_t round;
  int32_t ok;
  CUuuid gpu;
  CUipcMemHandle box;
};

}  // namespace

// One round of SetUpRecords with `peers` (mine[i] to peers[i], theirs[i] from it).
static clbResult_t exchangeRecords(DeviceCommContext* c, uint32_t round, const std::vector<int>& peers,
                                   std::vector<SetUpRecord>& mine, std::vector<SetUpRecord>* theirs) {
  theirs->assign(peers.size(), SetUpRecord{});
  std::vector<PeerOp> ops;
  for (size_t i = 0; i < peers.size(); i++) {
    mine[i].round = round;
    PeerOp s, r;
    s.kind = PeerOp::kSend;
    r.kind = PeerOp::kRecv;
    s.peer = r.peer = peers[i];
    s.src = &mine[i];
    r.dst = &(*theirs)[i];
    s.count = r.count = sizeof(SetUpRecord);
    s.call = r.call = kPeerSetUp;
    ops.push_back(s);
    ops.push_back(r);
  }
  CLB_CHECK(runPeerOps(c, ops));
  for (size_t i = 0; i < peers.size(); i++)
    if ((*theirs)[i].round != round)
      return setError(clbRemoteError, "rank %d: rank %d's device channel record is round %u, expected %u", c->rank,
                      peers[i], (*theirs)[i].round, round);
  return clbSuccess;
}

// The first device calls of this rank with `peers`, ranks in other processes of this host: the
// pairs on one GPU map each other's boxes through CUDA IPC and go on the GPU; the others, or
// where a step fails on either rank (then with a warning), go through host memory. Both ranks
// of each pair decide alike from the three rounds' records.
clbResult_t PeerDevice::joinProcesses(const std::vector<int>& peers, CUcontext ctx, CUstream stream) {
  CLB_CHECK(refuseInCapture(stream, "the pair's device channel"));
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUuuid gpu{};
  {
    CtxScope scope(d, ctx);
    CUdevice dev = 0;
    CLB_CU(d, cuCtxGetDevice, &dev);
    CLB_CU(d, cuDeviceGetUuid, &gpu, dev);
  }
  std::vector<SetUpRecord> mine(peers.size()), theirs;
  for (SetUpRecord& r : mine) r.ok = 1, r.gpu = gpu;
  CLB_CHECK(exchangeRecords(c_, 1, peers, mine, &theirs));
  std::vector<int> same;
  for (size_t i = 0; i < peers.size(); i++) {
    if (!memcmp(&theirs[i].gpu, &gpu, sizeof gpu)) {
      same.push_back(peers[i]);
    } else {
      pairs_[peers[i]].state = Pair::kHost;
      CLB_INFO(
          "rank %d: rank %d is on another GPU: their point-to-point calls on device memory go through host "
          "memory",
          c_->rank, peers[i]);
    }
  }
  if (same.empty()) return clbSuccess;
  // Round 2: this rank's boxes and their handles.
  std::string why;
  clbResult_t up = setUpRank(ctx, stream);
  if (up != clbSuccess) why = lastError();
  mine.assign(same.size(), SetUpRecord{});
  for (size_t i = 0; i < same.size(); i++) {
    Pair& pr = pairs_[same[i]];
    pr.process = true;
    clbResult_t rc = up;
    CUdeviceptr box = 0;
    if (rc == clbSuccess) rc = carve(sizeof(ClbP2pBox), &box);
    if (rc == clbSuccess) setMine(pr, box);
    if (rc == clbSuccess) {
      CtxScope scope(d_, ctx_);
      if (CUresult cr = d_->cuIpcGetMemHandle(&mine[i].box, pr.mine); cr != CUDA_SUCCESS)
        rc = cuError(cr, "cuIpcGetMemHandle (this rank's point-to-point box)");
    }
    if (rc != clbSuccess && why.empty()) why = lastError();
    mine[i].ok = rc == clbSuccess;
  }
  CLB_CHECK(exchangeRecords(c_, 2, same, mine, &theirs));
  // Round 3: the peers' boxes mapped.
  for (size_t i = 0; i < same.size(); i++) {
    Pair& pr = pairs_[same[i]];
    const bool both = mine[i].ok && theirs[i].ok;
    mine[i].ok = 0;
    if (!both) continue;
    CtxScope scope(d_, ctx_);
    if (CUresult cr = d_->cuIpcOpenMemHandle(&pr.theirs, theirs[i].box, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        cr != CUDA_SUCCESS) {
      pr.theirs = 0;
      cuError(cr, "cuIpcOpenMemHandle (a peer's point-to-point box)");
      if (why.empty()) why = lastError();
    } else {
      mine[i].ok = 1;
    }
  }
  CLB_CHECK(exchangeRecords(c_, 3, same, mine, &theirs));
  for (size_t i = 0; i < same.size(); i++) {
    Pair& pr = pairs_[same[i]];
    if (mine[i].ok && theirs[i].ok) {
      pr.state = Pair::kGpu;
      continue;
    }
    // Through host memory after all: what was made for the pair goes.
    pr.state = Pair::kHost;
    if (pr.theirs) {
      CtxScope scope(d_, ctx_);
      d_->cuIpcCloseMemHandle(pr.theirs);
    }
    const CUdeviceptr box = pr.mine;
    setMine(pr, 0);  // out of tellPeersOfEnd's sight before it goes
    if (box) uncarve(box, sizeof(ClbP2pBox));
    pr.theirs = 0;
    CLB_WARN(
        "rank %d: the device channel with rank %d (another process on this GPU) could not be set up (%s): "
        "their point-to-point calls on device memory go through host memory (slower, not capturable)",
        c_->rank, same[i], why.empty() ? "a step failed on the peer; its log says which" : why.c_str());
  }
  return clbSuccess;
}

namespace {

// What a receive of a large message from a rank in another process tells its sender when the
// communicator has registrations (one kPeerPlace message per such receive, in the pair's order of
// messages, so that it matches its send however the two ranks group their calls): whether the
// receive buffer is registered, and where in the registration.
struct PlaceRecord {
  uint64_t bytes;   // the receive's size: the sender compares its send's
  uint64_t regId;   // kUnregistered: the message moves in lines
  uint64_t offset;  // the buffer's offset in that registration
  uint64_t digest;  // the receiver's live registrations (Registrations::digest)
};
constexpr uint64_t kUnregistered = ~0ull;

}  // namespace

// Which of the batch's large messages with ranks in other processes move in place: a receive whose
// buffer is registered (clbCommRegister) says so, and where, to its sender over the pair's host
// channel; the sender finds that registration's mapping of the receiver's buffer and its blocks
// write into it, as between rank threads. Nothing is exchanged without registrations: every such
// message then moves in lines. The receiver decides; a sender that cannot follow (a send of
// another size, registrations that differ) refuses its call, naming why.
clbResult_t PeerDevice::placeAcrossProcesses(const std::vector<PeerOp>& ops, const std::vector<int>& mine,
                                             CUstream capture, std::vector<Placement>* place) {
  place->assign(ops.size(), Placement{});
  if (c_->deviceCfg.p2pInPlaceOff || !c_->device || c_->device->registrations().empty()) return clbSuccess;
  Registrations& regs = c_->device->registrations();
  std::vector<int> at;  // the operations that exchange a record
  for (int i : mine) {
    const PeerOp& o = ops[i];
    if (o.count && !o.announce && (o.kind == PeerOp::kSend || o.kind == PeerOp::kRecv) && o.peer != c_->rank &&
        pairs_[o.peer].process && o.call != kReduce && o.count * clbTypeSize(o.type) > kInPlaceMinBytes)
      at.push_back(i);
  }
  if (at.empty()) return clbSuccess;
  std::vector<PlaceRecord> rec(at.size());
  std::vector<PeerOp> xops(at.size());
  for (size_t j = 0; j < at.size(); j++) {
    const PeerOp& o = ops[at[j]];
    PlaceRecord& r = rec[j];
    PeerOp& x = xops[j];
    x.peer = o.peer;
    x.count = sizeof(PlaceRecord);
    x.call = kPeerPlace;
    if (o.kind == PeerOp::kRecv) {
      r.bytes = o.count * clbTypeSize(o.type);
      r.digest = regs.digest();
      r.regId = kUnregistered;
      regs.locate(o.dst, r.bytes, &r.regId, &r.offset);
      (*place)[at[j]].inPlace = r.regId != kUnregistered;
      x.kind = PeerOp::kSend;
      x.src = &r;
    } else {
      x.kind = PeerOp::kRecv;
      x.dst = &r;
    }
  }
  CLB_CHECK(runPeerOps(c_, xops));
  for (size_t j = 0; j < at.size(); j++) {
    const PeerOp& o = ops[at[j]];
    const PlaceRecord& r = rec[j];
    if (o.kind != PeerOp::kSend) continue;
    const unsigned long long bytes = o.count * clbTypeSize(o.type);
    // The receive waits on the GPU for a send that this rank cannot make: the pair's numbers no
    // longer line up, so the communicator cannot go on (a retried send would complete that
    // receive, into the wrong buffer).
    auto fail = [&](clbResult_t code) {
      c_->markFailed(code);
      return code;
    };
    if (r.bytes != bytes)
      return fail(setError(clbInvalidUsage,
                           "rank %d sends %llu bytes to rank %d, whose receive is of %llu bytes: post "
                           "each send with a receive of the same size; the communicator cannot go on",
                           c_->rank, bytes, o.peer, (unsigned long long)r.bytes));
    if (r.regId == kUnregistered) continue;
    if (r.digest != regs.digest())
      return fail(setError(clbInvalidUsage,
                           "rank %d and rank %d hold different buffer registrations (a registration "
                           "made or dropped on one of them only): register and deregister on every rank at the same "
                           "point; the communicator cannot go on",
                           c_->rank, o.peer));
    char* base = regs.peerRange(r.regId, o.peer);
    if (!base)
      return fail(setError(clbInternalError, "rank %d: registration %llu of rank %d is not mapped here", c_->rank,
                           (unsigned long long)r.regId, o.peer));
    (*place)[at[j]] = Placement{true, base + r.offset};
    if (capture) CLB_CHECK(regs.holdForGraph(capture, r.regId));  // the graph writes through its mapping
  }
  return clbSuccess;
}

clbResult_t PeerDevice::run(std::vector<PeerOp>& ops, std::vector<PeerOp>* rest) {
  // The device operations, their context and stream.
  const PeerOp* first = nullptr;
  for (const PeerOp& o : ops)
    if (o.onDevice && o.count && !o.announce) {
      first = &o;
      break;
    }
  if (!first) {
    *rest = ops;
    return clbSuccess;
  }
  auto withPeer = [&](const PeerOp& o) {
    return o.onDevice && o.count && o.kind != PeerOp::kCopy && o.peer != c_->rank;
  };
  // The pairs' first device calls: rank threads of this process find each other's boxes in its
  // tables (publish, meet), ranks in other processes of this host exchange records over the host
  // channel (joinProcesses), others go through host memory. COLIBRI_DEVICE_P2P=off sends the
  // pairs across processes through host memory too.
  std::vector<int> newThreads, newProcesses;
  for (const PeerOp& o : ops) {
    if (!withPeer(o) || pairs_[o.peer].state != Pair::kNew) continue;
    if (inThisProcess(o.peer)) {
      if (std::find(newThreads.begin(), newThreads.end(), o.peer) == newThreads.end()) newThreads.push_back(o.peer);
    } else if (onThisHost(o.peer) && !c_->deviceCfg.p2pOff) {
      if (std::find(newProcesses.begin(), newProcesses.end(), o.peer) == newProcesses.end())
        newProcesses.push_back(o.peer);
    } else {
      pairs_[o.peer].state = Pair::kHost;
    }
  }
  const Driver* d = nullptr;
  CLB_CHECK(driver(&d));
  CUcontext ctx = nullptr;
  CLB_CU(d, cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT,
         (CUdeviceptr)(first->src ? first->src : first->dst));
  CUstream stream = static_cast<CUstream>(first->stream);
  if (!newProcesses.empty()) CLB_CHECK(joinProcesses(newProcesses, ctx, stream));
  // A batch whose peers all go through host memory goes there whole (its local copies with it):
  // nothing is set up on the GPU for it.
  bool withPeers = false, onTheGpu = false;
  for (const PeerOp& o : ops)
    if (withPeer(o)) {
      withPeers = true;
      onTheGpu = onTheGpu || pairs_[o.peer].state == Pair::kGpu ||
                 (pairs_[o.peer].state == Pair::kNew && inThisProcess(o.peer));
    }
  if (withPeers && !onTheGpu) {
    *rest = ops;
    return clbSuccess;
  }
  CLB_CHECK(setUpRank(ctx, stream));
  watch();  // again after a suspend (releaseCallMemory unwatched it)
  CtxScope scope(d_, ctx_);
  // Which peers of this process go on the GPU (both ranks of a pair decide alike, at its first
  // device call): every box of this rank is published before any peer's is awaited.
  for (int p : newThreads) CLB_CHECK(publish(p, stream));
  for (int p : newThreads) CLB_CHECK(meet(p));
  auto onGpu = [&](const PeerOp& o) {
    if (!o.onDevice) return false;
    if (o.kind == PeerOp::kCopy || o.peer == c_->rank) return true;
    return pairs_[o.peer].state == Pair::kGpu;
  };
  // A reduce goes one way as a whole (its root's chain of receives waits op by op), decided alike
  // on every rank: on the GPU only when every rank of the communicator is on this GPU in this
  // process (a non-root rank cannot see the root's other pairs).
  bool reduceOnGpu = true;
  for (const PeerOp& o : ops)
    if (o.call == kReduce && o.onDevice && o.count) {
      CLB_CHECK(everyRankHere(&reduceOnGpu));
      break;
    }
  std::vector<int> mine;                    // indices of the operations this path runs
  std::vector<int> restAt(ops.size(), -1);  // where the others are in *rest
  for (size_t i = 0; i < ops.size(); i++) {
    const PeerOp& o = ops[i];
    if (onGpu(o) && (o.call != kReduce || reduceOnGpu)) {
      mine.push_back((int)i);
    } else {
      restAt[i] = (int)rest->size();
      rest->push_back(o);
      // A reduce goes one way whole, so what it waits for went the same way.
      rest->back().after = o.after >= 0 ? restAt[o.after] : -1;
    }
  }
  if (mine.empty()) return clbSuccess;
  // The peers' batches (and theirs' peers') are in their calls before this rank launches, and
  // launched before it returns (device/peer_meet.h); a capture launches nothing, so it does not meet.
  std::vector<PeerMeet::Edge> edges;
  for (int i : mine) {
    const PeerOp& o = ops[i];
    // Ranks in other processes have contexts of their own: nothing of theirs waits for this one's threads.
    if (o.count == 0 || o.kind == PeerOp::kCopy || o.peer == c_->rank || pairs_[o.peer].process) continue;
    auto e = std::find_if(edges.begin(), edges.end(), [&](const PeerMeet::Edge& x) { return x.peer == o.peer; });
    if (e == edges.end()) {
      edges.emplace_back();
      e = edges.end() - 1;
      e->peer = o.peer;
    }
    (o.kind == PeerOp::kSend ? e->sends : e->recvs).push_back(o.count * clbTypeSize(o.type));
  }
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  if (stream) CLB_CU(d_, cuStreamIsCapturing, stream, &capturing);
  const bool captured = capturing != CU_STREAM_CAPTURE_STATUS_NONE;
  if (captured) {  // clbCommSuspend is refused while the graph exists
    c_->captured.store(true, std::memory_order_relaxed);
    CLB_CHECK(holdWhileGraphLives(d_, stream, c_->capturedCallHolds));
  }
  const bool meets = !edges.empty() && !captured && !c_->deviceCfg.meetOff;
  if (meets && !meet_) meet_ = PeerMeet::join(nonce_);
  // A refusal of this rank's own (checked before anything launches) fails its peers' matching
  // calls too, instead of leaving them to wait for it until the timeout.
  clbResult_t refused = clbSuccess;
  for (int i : mine)
    if (ops[i].stream != first->stream && ops[i].count && refused == clbSuccess)
      refused = setError(clbInvalidUsage,
                         "rank %d: the device point-to-point calls of one group on one communicator "
                         "must use one stream: pass the same stream to each",
                         c_->rank);
  if (refused == clbSuccess) refused = check(ops, mine);
  std::vector<Placement> place;
  if (refused == clbSuccess) refused = placeAcrossProcesses(ops, mine, captured ? stream : nullptr, &place);
  if (refused != clbSuccess) {
    const std::string why = lastError();
    if (meets) meet_->refuse(c_, edges, why);
    return setError(refused, "%s", why.c_str());
  }
  if (meets) CLB_CHECK(meet_->arrive(c_, edges, c_->cfg.timeoutMs / 2));
  clbResult_t rc = launch(ops, mine, place, stream, captured);
  if (meets) {
    const std::string why = lastError();
    clbResult_t left = meet_->launched(c_);
    if (rc == clbSuccess) return left;
    setError(rc, "%s", why.c_str());
  }
  return rc;
}

// What would make the launch fail, found before the meeting (the peers would launch without it).
clbResult_t PeerDevice::check(const std::vector<PeerOp>& ops, const std::vector<int>& mine) const {
  std::vector<int> selfSends, selfRecvs;
  int launched = 0;  // operations of the launch: copies, pairs to itself, operations with peers
  for (int i : mine) {
    const PeerOp& o = ops[i];
    if (o.count == 0) continue;
    if (o.kind != PeerOp::kCopy && o.peer == c_->rank)
      (o.kind == PeerOp::kSend ? selfSends : selfRecvs).push_back(i);
    else
      launched++;
  }
  launched += (int)selfSends.size();
  if (const int budget = blockBudget(); launched > budget)
    return setError(clbInvalidUsage,
                    "rank %d: %d device point-to-point operations in one group on one communicator "
                    "(local copies included; the root of a gather, scatter or reduce counts two per peer, its data "
                    "and its announcement), more than the %d blocks this rank's launch may hold on the GPU at once "
                    "(its share, with every rank of this process set up on the GPU): split the group, or put fewer "
                    "ranks on this GPU",
                    c_->rank, launched, budget);
  if (launched > CLB_P2P_MAX_OPS)
    return setError(clbInvalidUsage,
                    "rank %d: %d device point-to-point operations in one group on one communicator "
                    "(local copies included), more than the %d one launch takes: split the group",
                    c_->rank, launched, CLB_P2P_MAX_OPS);
  if (selfSends.size() != selfRecvs.size())
    return setError(clbInvalidUsage,
                    "rank %d posted %zu send(s) to itself and %zu receive(s) from itself on device "
                    "memory: put each with its receive in one group",
                    c_->rank, selfSends.size(), selfRecvs.size());
  for (size_t k = 0; k < selfSends.size(); k++) {
    const PeerOp& s = ops[selfSends[k]];
    const PeerOp& r = ops[selfRecvs[k]];
    if (s.count != r.count || s.type != r.type || r.kind != PeerOp::kRecv)
      return setError(clbInvalidArgument, "rank %d: a send to itself and its receive differ in count or type",
                      c_->rank);
  }
  return clbSuccess;
}

// The batch's operations on the GPU: copies on the stream, then one launch for those with peers.
clbResult_t PeerDevice::launch(std::vector<PeerOp>& ops, const std::vector<int>& mine,
                               const std::vector<Placement>& place, CUstream stream, bool captured) {
  ClbP2pArgs a{};
  a.state = reinterpret_cast<ClbP2pState*>(state_);
  a.hostError = reinterpret_cast<unsigned int*>(hostErrorDev_);
  a.timeoutNs = (unsigned long long)c_->cfg.timeoutMs * 1000000ull;
  std::vector<int> slot(ops.size(), -1);  // ops[i]'s operation in the launch
  // Local copies first, as operations of the launch (one graph node less than a memcpy): a
  // root's own block, and each send to itself with its receive (the k-th with the k-th; check()
  // paired them). A copy onto itself moves nothing, and what waits for it waits for nothing.
  auto addCopy = [&](void* dst, const void* src, unsigned long long bytes) {
    ClbP2pOp& k = a.ops[a.nops];
    k.kind = CLB_P2P_COPY;
    k.after = -1;
    k.src = src;
    k.dst = dst;
    k.bytes = bytes;
    k.blocks = (int)std::min<unsigned long long>(kInPlaceMaxBlocks,
                                                 (bytes + kInPlaceBytesPerBlock - 1) / kInPlaceBytesPerBlock);
    return a.nops++;
  };
  std::vector<int> selfSends, selfRecvs;
  for (int i : mine) {
    const PeerOp& o = ops[i];
    if (o.count == 0) continue;
    if (o.kind == PeerOp::kCopy) {
      if (o.src != o.dst) slot[i] = addCopy(o.dst, o.src, o.count * clbTypeSize(o.type));
    } else if (o.peer == c_->rank) {
      (o.kind == PeerOp::kSend ? selfSends : selfRecvs).push_back(i);
    }
  }
  for (size_t k = 0; k < selfSends.size(); k++) {
    const PeerOp& s = ops[selfSends[k]];
    const PeerOp& r = ops[selfRecvs[k]];
    slot[selfSends[k]] = slot[selfRecvs[k]] = addCopy(r.dst, s.src, s.count * clbTypeSize(s.type));
  }
  // The pairs' operations: one block each (an in-place send several), numbered within the launch.
  std::map<std::pair<int, int>, unsigned long long> chunksSoFar;  // (peer, send?) -> chunks
  std::map<std::pair<int, int>, int> lastOf;                      // (peer, send?) -> its last operation
  for (int i : mine) {
    const PeerOp& o = ops[i];
    if (o.count == 0 || o.kind == PeerOp::kCopy || o.peer == c_->rank) continue;
    ClbP2pOp& k = a.ops[a.nops];
    k.kind = o.kind == PeerOp::kSend ? CLB_P2P_SEND : o.kind == PeerOp::kRecv ? CLB_P2P_RECV : CLB_P2P_RECV_REDUCE;
    k.peer = o.peer;
    k.after = o.after >= 0 ? slot[o.after] : -1;
    // The first receive of a reduce's root adds into what the root's copy writes: after it (the
    // host batch runs copies first; here they are operations running alongside).
    if (k.kind == CLB_P2P_RECV_REDUCE && k.after < 0)
      for (int c = 0; c < a.nops; c++)
        if (a.ops[c].kind == CLB_P2P_COPY && a.ops[c].dst == o.dst) k.after = c;
    k.divideBy = o.divideBy;
    k.type = o.type;
    k.op = o.op;
    k.local = reinterpret_cast<ClbP2pBox*>(pairs_[o.peer].mine);
    k.remote = reinterpret_cast<ClbP2pBox*>(pairs_[o.peer].theirs);
    k.src = o.src;
    k.dst = o.dst;
    k.bytes = o.count * clbTypeSize(o.type);
    k.sig = peerOpSignature(o);
    if (o.announce) {
      // An announcement moves one line of nothing; its signature is what the receive checks.
      k.dst = reinterpret_cast<void*>(state_ + offsetof(ClbP2pState, sink));
      k.src = k.dst;
      k.bytes = sizeof(unsigned long long);
    }
    // In place: larger than kInPlaceMinBytes, not part of a reduce (whose receives add the lines up),
    // and the peer in this process (the receiver's address is the sender's to write) or, in
    // another process, the receive buffer registered (placeAcrossProcesses); a send's blocks are
    // given out below. Both ranks of the pair decide alike.
    if (o.announce) {
      k.inPlace = 0;
    } else if (pairs_[o.peer].process) {
      k.inPlace = place[i].inPlace;
      k.peerDst = place[i].peerDst;
    } else {
      k.inPlace = !c_->deviceCfg.p2pInPlaceOff && k.bytes > kInPlaceMinBytes && o.call != kReduce;
    }
    // Blocks: an in-place send one per kInPlaceBytesPerBlock; a message in lines (not a reduce's)
    // one lane per kLaneBytes, on either side (the two ranks may differ: the budget below may
    // take lanes back on one of them).
    if (k.inPlace)
      k.blocks = k.kind == CLB_P2P_SEND
                     ? (int)std::min<unsigned long long>(kInPlaceMaxBlocks,
                                                         (k.bytes + kInPlaceBytesPerBlock - 1) / kInPlaceBytesPerBlock)
                     : 1;
    else
      k.blocks = k.kind == CLB_P2P_RECV_REDUCE
                     ? 1
                     : (int)std::min<unsigned long long>(kMaxLanes, (k.bytes + kLaneBytes - 1) / kLaneBytes);
    unsigned long long& sofar = chunksSoFar[{o.peer, k.kind == CLB_P2P_SEND}];
    k.firstChunk = sofar;
    sofar += k.inPlace ? 1 : (k.bytes + CLB_P2P_CHUNK - 1) / CLB_P2P_CHUNK;
    lastOf[{o.peer, k.kind == CLB_P2P_SEND}] = a.nops;
    slot[i] = a.nops++;
  }
  for (const auto& [key, at] : lastOf) a.ops[at].advance = chunksSoFar[key];
  a.alone = 1;
  for (int i = 0; i < a.nops; i++)
    if (a.ops[i].after >= 0 || (a.ops[i].kind != CLB_P2P_COPY && a.ops[i].firstChunk > 0)) a.alone = 0;
  if (a.nops == 0) return clbSuccess;
  // Every block of every rank's launch on this GPU waits for others, so they must all fit at once:
  // this launch takes its share of the GPU's block slots (in-place sends give blocks back first).
  int want = 0;
  for (int i = 0; i < a.nops; i++) want += a.ops[i].blocks;
  const int budget = std::max(a.nops, blockBudget());
  while (want > budget) {  // a block at a time from the widest: the wide ones end up alike
    int widest = 0;
    for (int i = 1; i < a.nops; i++)
      if (a.ops[i].blocks > a.ops[widest].blocks) widest = i;
    if (a.ops[widest].blocks == 1) break;
    a.ops[widest].blocks--;
    want--;
  }
  int blocks = 0;
  for (int i = 0; i < a.nops; i++) {
    a.ops[i].firstBlock = blocks;
    blocks += a.ops[i].blocks;
  }
  // Small batches take a kernel with the smaller parameters (a launch copies them); batches with
  // a message of several lanes the bulk kernel, the others the lean one (faster for small ones).
  bool bulk = false;
  for (int i = 0; i < a.nops; i++)
    bulk = bulk || (a.ops[i].kind != CLB_P2P_COPY && !a.ops[i].inPlace && a.ops[i].blocks > 1);
  ClbP2pArgsSmall small{};
  void* params[] = {&a};
  CUfunction fn = fn_[0][bulk];
  if (a.nops <= CLB_P2P_SMALL_OPS) {
    small.state = a.state;
    small.hostError = a.hostError;
    small.timeoutNs = a.timeoutNs;
    small.nops = a.nops;
    small.alone = a.alone;
    std::copy(a.ops, a.ops + a.nops, small.ops);
    params[0] = &small;
    fn = fn_[1][bulk];
  }
  // This rank's launches run one after the other, whatever their streams: they share its state
  // and its pairs' counts (NCCL orders a communicator's calls alike). A capture neither waits nor
  // records: its replays are ordered by the application.
  if (!captured && lastStream_ && lastStream_ != stream) CLB_CU(d_, cuStreamWaitEvent, stream, lastLaunch_, 0);
  {
    // Counted with the launch (tellPeersOfEnd): once the end is told (another thread failed the
    // communicator), nothing more is launched.
    std::lock_guard<std::mutex> g(endMutex_);
    if (endTold_.load() || c_->failed.load() || c_->aborted.load())
      return setError(c_->aborted.load() ? clbAborted : clbInvalidUsage,
                      "rank %d: the communicator %s by another thread while this call was being made: nothing was "
                      "launched; destroy the communicator",
                      c_->rank, c_->aborted.load() ? "was aborted" : "failed");
    CLB_CU(d_, cuLaunchKernel, fn, (unsigned)blocks, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
    captured_ = captured_ || captured;
    for (const auto& [key, n] : chunksSoFar) (key.second ? pairs_[key.first].sent : pairs_[key.first].received) += n;
  }
  if (!captured) {
    CLB_CU(d_, cuEventRecord, lastLaunch_, stream);
    lastStream_ = stream;
  }
  return clbSuccess;
}

}  // namespace clb::cuda
