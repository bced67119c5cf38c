// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// When a rank's device kernels end at once (src/device/stop.h), decided on the host alone, so that
// it runs without a GPU: rank threads over shared memory, whose control blocks carry what a failed
// rank says of its device calls (Transport::announceDeviceEnd). A failed rank that tells which call
// it will never make is no reason for its peers to stop; one that cannot tell (after a CUDA graph
// capture, say: endEveryDeviceCall) is, on every rank, naming it and its reason; what it said
// stays said, whatever number is announced after it; a rank whose failure follows from a peer's
// does not echo it, and waits to decide until that peer said how far it goes; nothing is said
// where no peer could read it; an abort is reported as one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "core/comm.h"
#include "device/stop.h"
#include "tests/test_ranks.h"
#include "transport/transport.h"

namespace {

using clb::cuda::endEveryDeviceCall;
using clb::cuda::EveryCall;
using clb::cuda::mustStopDevice;

// A host barrier of the rank threads (round r: every rank has arrived r times), given up after
// 10 s (a rank that returned early with its error is not waited for).
void meet(std::atomic<int>* count, int n, int round) {
  count->fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count->load() < n * round && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

// The ranks run `body` over shm (the transport of the device paths inside a node).
void withShmRanks(int n, const std::function<std::string(int, clbComm*)>& body) {
  auto errors = clbtest::runThreadRanks(
      n, [](int, clbConfig_t* cfg) { cfg->transport = clbTransportShm; },
      [&](int r, clbComm_t c) {
        if (std::string e = body(r, c); !e.empty()) ADD_FAILURE() << "rank " << r << ": " << e;
      });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(DeviceStop, ARankThatCannotTellItsEndStopsEveryRankNamingItsReason) {
  const int n = 3;
  std::atomic<int> count{0};
  const char* reason = "a heap buffer (the stop test's refusal)";
  withShmRanks(n, [&](int r, clbComm* c) -> std::string {
    clbResult_t code = clbSuccess;
    std::string why;
    if (mustStopDevice(c, &code, &why)) return "a healthy communicator stops: " + why;
    meet(&count, n, 1);
    // Rank 2 fails. Until it tells which device call it will never make (once its kernels finished
    // the calls before), a rank whose own failure may follow from it asks again later.
    if (r == 2 && clbCommRefuse(c, "allReduce", 1, reason) != clbInvalidArgument) return "the refusal was not refused";
    meet(&count, n, 2);
    if (r == 0 && endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kLater)
      return "rank 0 decided before rank 2, which failed first, said how far it goes";
    meet(&count, n, 3);
    if (r == 2) c->carrier->announceDeviceEnd(5);
    meet(&count, n, 4);
    // It told: its peers go on, and a rank whose failure follows from it only echoes it.
    if (c->carrier->deviceEnd(2) != 5) return "rank 2's end reads " + std::to_string(c->carrier->deviceEnd(2));
    if (r != 2 && mustStopDevice(c, &code, &why)) return "a failed rank that told its end stops the others: " + why;
    if (r == 0 && endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kEcho)
      return "rank 0 did not take its failure for an echo of rank 2's";
    if (c->carrier->deviceEnd(0) != 0) return "rank 0's end reads " + std::to_string(c->carrier->deviceEnd(0));
    meet(&count, n, 5);
    // Then it cannot tell after all: every call ends, and a number said later changes nothing.
    if (r == 2) {
      if (endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kSaid)
        return "rank 2 could not say every call";
      c->carrier->announceDeviceEnd(9);
    }
    meet(&count, n, 6);
    if (c->carrier->deviceEnd(2) != clb::kDeviceEndEvery)
      return "rank 2's end reads " + std::to_string(c->carrier->deviceEnd(2)) + " after it said every call";
    if (!mustStopDevice(c, &code, &why)) return "rank 2 said every call ends, yet this rank's kernels go on";
    if (r == 2) {
      if (why.find("rank 2's communicator failed") == std::string::npos) return "rank 2's own stop says: " + why;
    } else if (code != clbRemoteError || why.find("rank 2's communicator failed") == std::string::npos ||
               why.find("rank " + std::to_string(r) + "'s device calls") == std::string::npos ||
               why.find(reason) == std::string::npos) {
      return "the stop says " + std::to_string(code) +
             " (want a remote error naming rank 2, this rank and the "
             "reason): " +
             why;
    }
    meet(&count, n, 7);
    return "";
  });
}

// Two ranks fail and neither can tell how far it goes (both captured): each first waits for the
// other to say, but at most kEveryCallWaitMs, so that they never wait for each other for good; a
// destroy (final) does not wait.
TEST(DeviceStop, TwoFailedRanksThatCannotTellDoNotWaitForEachOther) {
  const int n = 3;
  std::atomic<int> count{0};
  withShmRanks(n, [&](int r, clbComm* c) -> std::string {
    if (r < 2 && clbCommRefuse(c, "allReduce", 1, "both refuse") != clbInvalidArgument) return "not refused";
    meet(&count, n, 1);
    if (r < 2 && endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kLater)
      return "decided at once although the other failed rank had not said how far it goes";
    meet(&count, n, 2);
    if (r == 2 && endEveryDeviceCall(c, "its own kernels failed", true) != EveryCall::kSaid)
      return "a destroy waited for a failed rank to say how far it goes";
    meet(&count, n, 3);
    if (r < 2) {
      // rank 2 said every call: an echo now; without it, the wait would end after kEveryCallWaitMs.
      if (endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kEcho)
        return "did not take rank 2's every call for what it follows from";
    }
    meet(&count, n, 4);
    return "";
  });
  count = 0;
  withShmRanks(2, [&](int r, clbComm* c) -> std::string {
    if (clbCommRefuse(c, "allReduce", 1, "both refuse") != clbInvalidArgument) return "not refused";
    meet(&count, 2, 1);
    const auto t0 = std::chrono::steady_clock::now();
    EveryCall said = EveryCall::kLater;
    while (said == EveryCall::kLater && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
      said = endEveryDeviceCall(c, "its calls were captured in a CUDA graph");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (said != EveryCall::kSaid && said != EveryCall::kEcho)
      return "rank " + std::to_string(r) + " still waits for the other after " + std::to_string(waited) + " ms";
    if (waited < clb::cuda::kEveryCallWaitMs - 50) return "decided after " + std::to_string(waited) + " ms only";
    meet(&count, 2, 2);
    clbResult_t code = clbSuccess;
    std::string why;
    if (!mustStopDevice(c, &code, &why)) return "neither said every call";
    return "";
  });
}

// A failed rank that told how far its point-to-point launches go (in its boxes) says so in its
// control block too, where no device collective names a call: a peer's point-to-point side whose
// failure follows from it echoes it instead of ending every call after the wait (its collectives
// still wait for a call's number); nobody stops; a call's number, said later by its collectives,
// replaces the mark, and the mark never replaces a number.
TEST(DeviceStop, AnEndToldInTheBoxesIsAnEndToldForTheEcho) {
  const int n = 2;
  std::atomic<int> count{0};
  withShmRanks(n, [&](int r, clbComm* c) -> std::string {
    if (r == 1) {
      if (clbCommRefuse(c, "send", 0, "a heap buffer") != clbInvalidArgument) return "not refused";
      c->carrier->announceDeviceEnd(clb::kDeviceEndToldInBoxes);
    }
    meet(&count, n, 1);
    clbResult_t code = clbSuccess;
    std::string why;
    if (mustStopDevice(c, &code, &why)) return "an end told in the boxes stops: " + why;
    if (r == 0 && endEveryDeviceCall(c, "its point-to-point calls were captured in a CUDA graph", false, true) !=
                      EveryCall::kEcho)
      return "rank 0 did not take its failure for an echo of rank 1's told end";
    // For the collectives the mark says nothing of their calls: they wait for rank 1 to say.
    if (r == 0 && endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kLater)
      return "rank 0's collectives took rank 1's point-to-point end for an end of their calls";
    meet(&count, n, 2);
    if (r == 1) {
      c->carrier->announceDeviceEnd(4);
      c->carrier->announceDeviceEnd(clb::kDeviceEndToldInBoxes);
    }
    meet(&count, n, 3);
    if (c->carrier->deviceEnd(1) != 4) return "rank 1's end reads " + std::to_string(c->carrier->deviceEnd(1));
    return "";
  });
}

// Over a transport without shared memory (whose communicators have no device collectives) nothing
// is said: no peer could read it.
TEST(DeviceStop, NothingIsSaidOverSockets) {
  auto errors = clbtest::runThreadRanks(
      2, [](int, clbConfig_t* cfg) { cfg->transport = clbTransportSocket; },
      [&](int r, clbComm_t c) {
        if (r == 1 && endEveryDeviceCall(c, "its calls were captured in a CUDA graph") != EveryCall::kNoPeerHears)
          ADD_FAILURE() << "said over sockets";
      });
  for (int r = 0; r < 2; r++) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(DeviceStop, AnAbortStopsThePeersAsAnAbort) {
  const int n = 2;
  std::atomic<int> count{0};
  withShmRanks(n, [&](int r, clbComm* c) -> std::string {
    if (r == 1 && clbCommAbort(c) != clbSuccess) return std::string("abort: ") + clbGetLastError();
    meet(&count, n, 1);
    clbResult_t code = clbSuccess;
    std::string why;
    if (!mustStopDevice(c, &code, &why) || code != clbAborted ||
        why.find(r == 1 ? "rank 1's communicator was aborted" : "rank 1 aborted its communicator") == std::string::npos)
      return "after rank 1's abort the stop says " + std::to_string(code) + ": " + why;
    meet(&count, n, 2);
    return "";
  });
}

}  // namespace
