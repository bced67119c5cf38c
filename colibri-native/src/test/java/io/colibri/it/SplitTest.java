/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Communicator#split}: 4 ranks (threads) into 2 x 2 groups both ways, the new ranks and
 * sizes as NCCL defines them, all-reduces on both children checked element by element against
 * sums computed here; {@link Communicator#NO_COLOR}; a bad color refused on every rank.
 */
class SplitTest {

  private static final Options OPTIONS =
      Options.builder().transport(Transport.SHM).timeout(Duration.ofSeconds(20)).build();

  /** Sum over the ranks p of `members` of (p + 1) * 1000 + i, element i of count, as longs. */
  private static void checkSum(
      Communicator child, int parentRank, List<Integer> members, String what) {
    int count = 513;
    ByteBuffer in = ByteBuffer.allocateDirect(count * 8).order(ByteOrder.nativeOrder());
    ByteBuffer out = ByteBuffer.allocateDirect(count * 8).order(ByteOrder.nativeOrder());
    for (int i = 0; i < count; i++) {
      in.putLong(i * 8, (parentRank + 1) * 1000L + i);
    }
    child.allReduce(in, out, count, DataType.INT64, ReduceOp.SUM);
    for (int i = 0; i < count; i++) {
      long want = 0;
      for (int p : members) {
        want += (p + 1) * 1000L + i;
      }
      assertEquals(
          want, out.getLong(i * 8), what + ", parent rank " + parentRank + ", element " + i);
    }
  }

  @Test
  void fourRanksSplitIntoRowsAndColumns() {
    try (RankGroup g = RankGroup.start(4, OPTIONS, Duration.ofSeconds(60))) {
      g.run(
          "split",
          r -> {
            // Rows: color rank / 2, keys reversed (rank 1 then 0; 3 then 2).
            // Columns: color rank % 2.
            try (Communicator row = r.comm.split(r.rank / 2, -r.rank);
                Communicator col = r.comm.split(r.rank % 2, r.rank)) {
              assertEquals(1 - r.rank % 2, row.rank(), "row rank of " + r.rank);
              assertEquals(2, row.size());
              assertEquals(r.rank / 2, col.rank(), "column rank of " + r.rank);
              assertEquals(2, col.size());
              assertEquals(OPTIONS, row.options(), "the parent's options");
              int base = r.rank / 2 * 2;
              for (int round = 0; round < 2; round++) {
                checkSum(row, r.rank, List.of(base, base + 1), "row");
                checkSum(col, r.rank, List.of(r.rank % 2, r.rank % 2 + 2), "column");
              }
            }
            return null;
          });
    }
  }

  @Test
  void noColorGivesNullAndOthersGroupWithOptionsOfTheirOwn() {
    Options socket =
        Options.builder().transport(Transport.SOCKET).timeout(Duration.ofSeconds(20)).build();
    try (RankGroup g = RankGroup.start(3, OPTIONS, Duration.ofSeconds(60))) {
      g.run(
          "split",
          r -> {
            Communicator c = r.comm.split(r.rank == 1 ? Communicator.NO_COLOR : 5, 0, socket);
            if (r.rank == 1) {
              assertNull(c);
              return null;
            }
            assertNotNull(c);
            try (c) {
              assertEquals(2, c.size());
              assertEquals(r.rank == 0 ? 0 : 1, c.rank());
              assertEquals(Transport.SOCKET, c.options().transport());
              assertTrue(c.transportInfo().contains("socket"), c.transportInfo());
              checkSum(c, r.rank, List.of(0, 2), "color 5");
            }
            return null;
          });
    }
  }

  @Test
  void badColorIsRefusedOnEveryRankNamingIt() {
    try (RankGroup g = RankGroup.start(2, OPTIONS, Duration.ofSeconds(60))) {
      g.run(
          "split",
          r -> {
            ColibriException e =
                assertThrows(ColibriException.class, () -> r.comm.split(r.rank == 0 ? -7 : 0, 0));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("color=-7"), e.getMessage());
            // The parent is still usable.
            checkSum(r.comm, r.rank, List.of(0, 1), "the parent after the refusal");
            // Null options: the parent's
            // (not a refusal on one rank, which would strand the others).
            try (Communicator same = r.comm.split(0, r.rank, null)) {
              assertEquals(OPTIONS, same.options());
              checkSum(same, r.rank, List.of(0, 1), "split with null options");
            }
            return null;
          });
    }
  }
}
