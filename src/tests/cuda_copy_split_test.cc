// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// How the copies path cuts a call into parts (splitCopyCall, src/device/hostcopy.cc): an
// allReduce over three or more ranks as a reduceScatter into each rank's slice of the output, an
// allGather of the slices and an allReduce of the rest. Checked against the byte ranges a rank's
// output must receive; no GPU needed.
#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "core/comm.h"
#include "device/paths.h"

namespace {

using clb::CollArgs;
using clb::cuda::splitCopyCall;

CollArgs allReduce(size_t count, clbDataType_t type, const void* send, void* recv) {
  CollArgs a{};
  a.desc.coll = clb::kAllReduce;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.type = type;
  a.op = clbSum;
  return a;
}

// Which output elements each part writes on every rank (a reduceScatter its slice, an allGather
// every rank's slice, an allReduce its elements), and where a part reads: a rank's own slice is
// written twice (reduced, then gathered onto itself), every other element once.
void expectSplitCovers(size_t count, clbDataType_t type, int n, bool inPlace) {
  SCOPED_TRACE("count " + std::to_string(count) + ", " + std::to_string(n) + " ranks" + (inPlace ? ", in place" : ""));
  const size_t esz = clbTypeSize(type), bytes = count * esz;
  std::vector<char> in(bytes), out(bytes);
  char* send = in.data();
  char* recv = inPlace ? send : out.data();
  const size_t granule = 256 / esz;
  for (int r = 0; r < n; r++) {
    CollArgs parts[3];
    const int k = splitCopyCall(allReduce(count, type, send, recv), n, r, granule, parts);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, 3);
    std::vector<int> written(count, 0);
    auto mark = [&](const void* at, size_t elems) {
      const size_t from = static_cast<const char*>(at) - recv;
      ASSERT_EQ(from % esz, 0u);
      ASSERT_LE(from / esz + elems, count);
      for (size_t e = 0; e < elems; e++) written[from / esz + e]++;
    };
    for (int p = 0; p < k; p++) {
      const CollArgs& a = parts[p];
      EXPECT_EQ(a.type, type);
      EXPECT_EQ(a.op, clbSum);
      switch (a.desc.coll) {
        case clb::kReduceScatter:  // reads every rank's slice of the input, writes its own
          EXPECT_EQ(a.send, send);
          EXPECT_EQ(a.recv, recv + (size_t)r * a.count * esz);
          EXPECT_EQ(a.count % granule, 0u);
          mark(a.recv, a.count);
          break;
        case clb::kAllGather:  // sends the slice it reduced, fills every rank's
          EXPECT_EQ(a.send, recv + (size_t)r * a.count * esz);
          EXPECT_EQ(a.recv, recv);
          mark(a.recv, (size_t)n * a.count);
          break;
        case clb::kAllReduce: {  // input and output at the same element
          const size_t at = static_cast<const char*>(a.send) - send;
          EXPECT_EQ(static_cast<char*>(a.recv) - recv, (ptrdiff_t)at);
          mark(a.recv, a.count);
          break;
        }
        default: ADD_FAILURE() << "part " << p << " is collective " << a.desc.coll;
      }
    }
    const size_t split = k == 1 ? 0 : parts[0].count * n;  // elements the reduceScatter and allGather cover
    if (k > 1) {
      EXPECT_EQ(parts[0].desc.coll, clb::kReduceScatter);
      EXPECT_EQ(parts[1].desc.coll, clb::kAllGather);
      EXPECT_EQ(parts[1].count, parts[0].count);
      EXPECT_LT(count - split, (size_t)n * granule) << "the rest is less than a granule per rank";
      EXPECT_EQ(k == 3, split < count);
    }
    for (size_t e = 0; e < count; e++) {
      const bool own = e >= (size_t)r * (split / n) && e < (size_t)(r + 1) * (split / n);
      const int want = e < split && own ? 2 : 1;
      if (written[e] != want) {
        ADD_FAILURE() << "rank " << r << ": output element " << e << " written " << written[e] << " times, want "
                      << want;
        break;
      }
    }
  }
}

TEST(CopySplit, AllReduceOverThreeOrMoreRanksIsAReduceScatterThenAnAllGatherThenTheRest) {
  for (int n : {3, 4, 5, 8})
    for (size_t count : {(size_t)n * 64, (size_t)n * 64 + 1, (size_t)100003, (size_t)300007})
      for (bool inPlace : {false, true}) expectSplitCovers(count, clbFloat32, n, inPlace);
  expectSplitCovers(400003, clbBfloat16, 3, false);
  expectSplitCovers(200001, clbInt64, 8, true);
  expectSplitCovers(7 * 32 * 5, clbFloat64, 7, false);  // divides evenly: no rest
}

TEST(CopySplit, TwoRanksOtherCollectivesAndCallsBelowAGranulePerRankStayWhole) {
  float in[4096], out[4096];
  CollArgs parts[3];
  EXPECT_EQ(splitCopyCall(allReduce(4096, clbFloat32, in, out), 2, 1, 64, parts), 1);
  EXPECT_EQ(parts[0].desc.coll, clb::kAllReduce);
  EXPECT_EQ(parts[0].count, 4096u);
  EXPECT_EQ(splitCopyCall(allReduce(4 * 64 - 1, clbFloat32, in, out), 4, 0, 64, parts), 1);
  EXPECT_EQ(parts[0].count, 4u * 64 - 1);
  EXPECT_EQ(parts[0].recv, out);
  for (uint32_t c : {clb::kAllGather, clb::kReduceScatter, clb::kBroadcast}) {
    CollArgs a = allReduce(4096, clbFloat32, in, out);
    a.desc.coll = c;
    EXPECT_EQ(splitCopyCall(a, 4, 2, 64, parts), 1) << "collective " << c;
    EXPECT_EQ(parts[0].desc.coll, c);
  }
}

// How large a round is (copyRoundBytes): what a half holds, unless that leaves a call fewer than
// 8 rounds; never below 4 MiB (or what the half holds); a multiple of 256 bytes.
TEST(CopyRounds, AtLeastEightRoundsUntilTheyReachFourMiBNeverMoreThanAHalfHolds) {
  using clb::cuda::copyRoundBytes;
  const size_t MiB = 1u << 20;
  struct Case {
    size_t fits, walked, round;
  };
  for (const Case& c : std::initializer_list<Case>{
           {8 * MiB, 256 * MiB, 8 * MiB},       // 32 rounds of a whole half
           {8 * MiB, 64 * MiB, 8 * MiB},        // 8 rounds
           {8 * MiB, 40 * MiB, 5 * MiB},        // 8 rounds of 5 MiB
           {8 * MiB, 40 * MiB + 100, 5 * MiB},  // ... the last one 100 bytes longer, 256-aligned
           {8 * MiB, 16 * MiB, 4 * MiB},        // 4 rounds: none smaller than 4 MiB
           {8 * MiB, 4 * MiB, 4 * MiB},         // one round
           {8 * MiB, 1000, 4 * MiB},            // one round (a round may hold more than the call)
           {2 * MiB, 1 * MiB, 2 * MiB},         // a small staging: one round
           {2 * MiB, 64 * MiB, 2 * MiB},        // a half of 2 MiB bounds every round
           {8 * MiB / 3, 64 * MiB, 2796032},    // a reduceScatter's slice of a half, 256-aligned
           {300, 64 * MiB, 256},
           {4 * MiB, 512 * MiB, 4 * MiB},  // the staged path's largest half
       }) {
    const size_t got = copyRoundBytes(c.fits, c.walked);
    EXPECT_EQ(got, c.round) << "a half holds " << c.fits << " bytes, the part walks " << c.walked;
    EXPECT_EQ(got % 256, 0u);
  }
}

}  // namespace
