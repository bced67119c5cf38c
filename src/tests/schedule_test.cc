// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// The arithmetic of ring schedules: segments tile the buffer exactly, slices tile segments
// exactly and never exceed a chunk, and the ring visits every segment once per phase.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algo/algorithms.h"

using namespace clb;

TEST(Segments, TileTheBufferInOrderWithoutGaps) {
  for (size_t count : {0ul, 1ul, 7ul, 8ul, 1000003ul}) {
    for (int n = 1; n <= 16; n++) {
      size_t next = 0, total = 0, maxLen = 0, minLen = SIZE_MAX;
      for (int i = 0; i < n; i++) {
        EXPECT_EQ(segStart(count, n, i), next) << "count " << count << " n " << n << " seg " << i;
        next += segElems(count, n, i);
        total += segElems(count, n, i);
        maxLen = std::max(maxLen, segElems(count, n, i));
        minLen = std::min(minLen, segElems(count, n, i));
      }
      EXPECT_EQ(total, count);
      EXPECT_LE(maxLen - minLen, 1u) << "segments differ by at most one element";
    }
  }
}

TEST(Slices, NeverExceedAChunkAndAreAtLeastOne) {
  EXPECT_EQ(sliceCount(0, 4, 4096), 1u);
  EXPECT_EQ(sliceCount(1024, 4, 4096), 1u);
  EXPECT_EQ(sliceCount(1025, 4, 4096), 2u);
  EXPECT_EQ(sliceCount(10, 8, 4), 10u) << "an element larger than the chunk still moves, one per slice";
  for (size_t seg : {1ul, 999ul, 250001ul})
    for (size_t chunk : {4096ul, 65536ul, 262144ul}) {
      size_t J = sliceCount(seg, 2, chunk);
      size_t per = (seg + J - 1) / J;
      EXPECT_LE(per * 2, chunk + 2) << "seg " << seg << " chunk " << chunk;
    }
}

TEST(RingOrder, EachRankReducesEverySegmentOnceAndOwnsItsOwn) {
  // Reduce-scatter: at step s rank r receives segment (r-2-s) and adds its own contribution; the
  // last step ends on segment r. Follow one segment round the ring: it must visit every rank once.
  for (int n = 2; n <= 16; n++) {
    for (int seg = 0; seg < n; seg++) {
      std::set<int> contributors;
      // The segment starts at the rank that sends it at step 0: r-1 == seg  =>  r = seg+1.
      int holder = mod(seg + 1, n);
      contributors.insert(holder);
      for (int s = 0; s < n - 1; s++) {
        int receiver = mod(holder + 1, n);
        EXPECT_EQ(mod(receiver - 2 - s, n), seg) << "n " << n << " step " << s;
        contributors.insert(receiver);
        holder = receiver;
      }
      EXPECT_EQ(holder, seg) << "segment ends fully reduced at its own rank";
      EXPECT_EQ((int)contributors.size(), n);
    }
  }
}

TEST(RingOrder, AllGatherDeliversEverySegmentToEveryRank) {
  for (int n = 2; n <= 16; n++)
    for (int r = 0; r < n; r++) {
      std::set<int> got{r};
      for (int s = 0; s < n - 1; s++) got.insert(mod(r - 1 - s, n));
      EXPECT_EQ((int)got.size(), n);
    }
}
