/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link Communicator#grow} and {@link Communicator#join}: 2 ranks (threads, shm and socket) grow
 * to 4 with two new ranks; every rank keeps or takes its number and the grown communicator's
 * all-reduce is checked element by element; a size that is not larger is refused on both existing
 * ranks at once, and a new rank's wrong rank before it connects.
 */
class GrowTest {

  private static void checkSum(Communicator c, int n) {
    int count = 257;
    ByteBuffer in = ByteBuffer.allocateDirect(count * 8).order(ByteOrder.nativeOrder());
    ByteBuffer out = ByteBuffer.allocateDirect(count * 8).order(ByteOrder.nativeOrder());
    for (int i = 0; i < count; i++) {
      in.putLong(i * 8, (c.rank() + 1) * 1000L + i);
    }
    c.allReduce(in, out, count, DataType.INT64, ReduceOp.SUM);
    for (int i = 0; i < count; i++) {
      long want = 0;
      for (int p = 0; p < n; p++) {
        want += (p + 1) * 1000L + i;
      }
      assertEquals(want, out.getLong(i * 8), "rank " + c.rank() + ", element " + i);
    }
  }

  private static void newRanksJoin(Transport transport) throws Exception {
    Options options =
        Options.builder().transport(transport).timeout(Duration.ofSeconds(20)).build();
    CompletableFuture<UniqueId> id = new CompletableFuture<>();
    ExecutorService newcomers = Executors.newFixedThreadPool(2);
    try (RankGroup g = RankGroup.start(2, options, Duration.ofSeconds(60))) {
      Future<?>[] joined = new Future<?>[2];
      for (int k = 0; k < 2; k++) {
        int rank = 2 + k;
        joined[k] =
            newcomers.submit(
                () -> {
                  UniqueId given = id.get(30, TimeUnit.SECONDS);
                  ColibriException wrong =
                      assertThrows(
                          ColibriException.class, () -> Communicator.join(given, 1, 4, options));
                  assertEquals(ErrorCode.INVALID_ARGUMENT, wrong.code());
                  try (Communicator c = Communicator.join(given, rank, 4, options)) {
                    assertEquals(rank, c.rank());
                    assertEquals(4, c.size());
                    checkSum(c, 4);
                  }
                  return null;
                });
      }
      g.run(
          "grow",
          r -> {
            UniqueId mine = null;
            if (r.rank == 0) {
              mine = r.comm.growId();
            }
            // A size that is not larger, on rank 1 only: both refused at once.
            UniqueId passed = mine;
            ColibriException e =
                assertThrows(
                    ColibriException.class, () -> r.comm.grow(r.rank == 1 ? 2 : 4, passed));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            if (r.rank == 0) {
              assertTrue(e.getMessage().contains("refused on rank 1"), e.getMessage());
              id.complete(mine);
            }
            try (Communicator grown = r.comm.grow(4, mine)) {
              assertEquals(r.rank, grown.rank());
              assertEquals(4, grown.size());
              assertEquals(options, grown.options());
              checkSum(grown, 4);
            }
            checkSum(r.comm, 2); // the parent is unchanged
            return null;
          });
      id.complete(null); // if rank 0 failed first: the new ranks end at once
      for (Future<?> f : joined) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      newcomers.shutdownNow();
    }
  }

  @Test
  void newRanksJoinOverShm() throws Exception {
    newRanksJoin(Transport.SHM);
  }

  @Test
  void newRanksJoinOverSocket() throws Exception {
    newRanksJoin(Transport.SOCKET);
  }
}
