/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Group;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Point-to-point through the Java API, ranks as threads: a ring exchange in a {@link Group}
 * posted in opposite orders, all-to-all against the blocks computed here, all-to-allv with empty
 * pairs, reduce / gather / scatter at a root, and the refusals (peer out of range, counts of the
 * wrong length, a group closed on another thread). Every element is checked.
 */
class PointToPointTest {

  private static ByteBuffer longs(int n) {
    return ByteBuffer.allocateDirect(n * 8).order(ByteOrder.nativeOrder());
  }

  private static long value(int from, int to, int i) {
    return from * 1_000_000L + to * 1_000L + i;
  }

  private static Options options(Transport t) {
    return Options.builder().transport(t).timeout(Duration.ofSeconds(20)).build();
  }

  @ParameterizedTest
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  void ringExchangeInAGroupAndAllToAll(Transport transport) {
    int n = 3;
    int count = 70001;
    try (RankGroup g = RankGroup.start(n, options(transport), Duration.ofSeconds(60))) {
      g.run(
          "ring and all-to-all",
          r -> {
            int next = (r.rank + 1) % n;
            int prev = (r.rank + n - 1) % n;
            ByteBuffer out = longs(count);
            ByteBuffer in = longs(count);
            for (int i = 0; i < count; i++) {
              out.putLong(i * 8, value(r.rank, next, i));
            }
            try (Group grp = Communicator.group()) {
              if (r.rank % 2 == 0) {
                r.comm.send(out, count, DataType.INT64, next);
                r.comm.recv(in, count, DataType.INT64, prev);
              } else {
                r.comm.recv(in, count, DataType.INT64, prev);
                r.comm.send(out, count, DataType.INT64, next);
              }
            }
            for (int i = 0; i < count; i++) {
              assertEquals(value(prev, r.rank, i), in.getLong(i * 8), "ring element " + i);
            }
            int c = 1001;
            ByteBuffer send = longs(c * n);
            ByteBuffer recv = longs(c * n);
            for (int p = 0; p < n; p++) {
              for (int i = 0; i < c; i++) {
                send.putLong((p * c + i) * 8, value(r.rank, p, i));
              }
            }
            r.comm.allToAll(send, recv, c, DataType.INT64);
            for (int p = 0; p < n; p++) {
              for (int i = 0; i < c; i++) {
                assertEquals(value(p, r.rank, i), recv.getLong((p * c + i) * 8), "from " + p);
              }
            }
            // In place: one buffer for both, its input copied aside first.
            r.comm.allToAll(send, send, c, DataType.INT64);
            for (int p = 0; p < n; p++) {
              for (int i = 0; i < c; i++) {
                assertEquals(
                    value(p, r.rank, i), send.getLong((p * c + i) * 8), "in place, from " + p);
              }
            }
            return null;
          });
    }
  }

  @Test
  void allToAllvWithEmptyPairsAndTheRootedCalls() {
    int n = 4;
    try (RankGroup g = RankGroup.start(n, options(Transport.SHM), Duration.ofSeconds(60))) {
      g.run(
          "allToAllv, reduce, gather, scatter",
          r -> {
            long[] sc = new long[n];
            long[] sd = new long[n];
            long[] rc = new long[n];
            long[] rd = new long[n];
            long so = 0;
            long ro = 0;
            for (int p = 0; p < n; p++) {
              sc[p] = (r.rank + p) % 3 == 0 ? 0 : r.rank + 2 * p + 1;
              rc[p] = (p + r.rank) % 3 == 0 ? 0 : p + 2 * r.rank + 1;
              sd[p] = so;
              rd[p] = ro;
              so += sc[p];
              ro += rc[p];
            }
            ByteBuffer send = longs((int) so);
            ByteBuffer recv = longs((int) ro);
            for (int p = 0; p < n; p++) {
              for (int i = 0; i < sc[p]; i++) {
                send.putLong((int) (sd[p] + i) * 8, value(r.rank, p, i));
              }
            }
            r.comm.allToAllv(send, sc, sd, recv, rc, rd, DataType.INT64);
            for (int p = 0; p < n; p++) {
              for (int i = 0; i < rc[p]; i++) {
                assertEquals(value(p, r.rank, i), recv.getLong((int) (rd[p] + i) * 8), "from " + p);
              }
            }
            int c = 513;
            int root = 2;
            ByteBuffer mine = longs(c);
            for (int i = 0; i < c; i++) {
              mine.putLong(i * 8, value(r.rank, root, i));
            }
            ByteBuffer sum = r.rank == root ? longs(c) : null;
            r.comm.reduce(mine, sum, c, DataType.INT64, ReduceOp.SUM, root);
            ByteBuffer all = r.rank == root ? longs(c * n) : null;
            r.comm.gather(mine, all, c, DataType.INT64, root);
            ByteBuffer got = longs(c);
            r.comm.scatter(all, got, c, DataType.INT64, root);
            if (r.rank == root) {
              for (int i = 0; i < c; i++) {
                long want = 0;
                for (int p = 0; p < n; p++) {
                  want += value(p, root, i);
                  assertEquals(value(p, root, i), all.getLong((p * c + i) * 8), "gather from " + p);
                }
                assertEquals(want, sum.getLong(i * 8), "reduce element " + i);
              }
            }
            for (int i = 0; i < c; i++) {
              // scatter sent back block r of what the root gathered: rank r's own block
              assertEquals(value(r.rank, root, i), got.getLong(i * 8), "scatter element " + i);
            }
            return null;
          });
    }
  }

  @Test
  void refusalsNameTheArgument() {
    try (RankGroup g = RankGroup.start(2, options(Transport.SHM), Duration.ofSeconds(60))) {
      g.run(
          "refusals",
          r -> {
            ByteBuffer b = longs(4);
            ColibriException e =
                assertThrows(ColibriException.class, () -> r.comm.send(b, 1, DataType.INT64, 2));
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("peer 2 is out of range"), e.getMessage());
            e =
                assertThrows(
                    ColibriException.class,
                    () ->
                        r.comm.allToAllv(
                            b,
                            new long[] {1},
                            new long[] {0, 1},
                            b,
                            new long[] {1, 1},
                            new long[] {0, 1},
                            DataType.INT64));
            assertTrue(e.getMessage().contains("sendCounts is of length 1"), e.getMessage());
            e =
                assertThrows(
                    ColibriException.class, () -> r.comm.recv(b, 9, DataType.INT64, 1 - r.rank));
            assertTrue(e.getMessage().contains("72 bytes are needed"), e.getMessage());
            return null;
          });
    }
  }

  /** One thread drives every rank's communicator in one group (NCCL style, one per GPU). */
  @Test
  void oneThreadDrivesEveryRankInOneGroup() {
    int n = 3;
    int count = 40001;
    try (RankGroup g = RankGroup.start(n, options(Transport.SHM), Duration.ofSeconds(60))) {
      ByteBuffer[] out = new ByteBuffer[n];
      ByteBuffer[] in = new ByteBuffer[n];
      for (int r = 0; r < n; r++) {
        out[r] = longs(count);
        in[r] = longs(count);
        for (int i = 0; i < count; i++) {
          out[r].putLong(i * 8, value(r, (r + 1) % n, i));
        }
      }
      try (Group grp = Communicator.group()) {
        for (int r = 0; r < n; r++) {
          // receive first on every rank: outside a group, one thread would wait here forever
          g.comm(r).recv(in[r], count, DataType.INT64, (r + n - 1) % n);
          g.comm(r).send(out[r], count, DataType.INT64, (r + 1) % n);
        }
      }
      for (int r = 0; r < n; r++) {
        int prev = (r + n - 1) % n;
        for (int i = 0; i < count; i++) {
          assertEquals(value(prev, r, i), in[r].getLong(i * 8), "rank " + r + " element " + i);
        }
      }
    }
  }

  @Test
  void aGroupClosesOnlyOnItsThread() throws Exception {
    Group grp = Communicator.group();
    Thread t =
        new Thread(
            () -> {
              ColibriException e = assertThrows(ColibriException.class, grp::close);
              assertEquals(ErrorCode.INVALID_USAGE, e.code());
              assertTrue(e.getMessage().contains("belongs to thread"), e.getMessage());
            });
    t.start();
    t.join();
    grp.close(); // empty: nothing runs
    grp.close(); // idempotent
  }

  /**
   * A thread blocked in a call does not answer {@link Thread#interrupt()} (Communicator's
   * <i>Interrupts</i>, docs/semantics.md): a receive whose send never comes goes on waiting when
   * its thread is interrupted, fails with ABORTED once another thread calls abort(), and the
   * thread's interrupt status is still set afterwards.
   */
  @Test
  void anInterruptedReceiveWaitsForAbortAndKeepsTheInterruptStatus() throws Exception {
    try (RankGroup g = RankGroup.start(2, options(Transport.SHM), Duration.ofSeconds(60))) {
      Communicator c0 = g.comm(0);
      ByteBuffer in = longs(1);
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicBoolean interruptedAfter = new AtomicBoolean();
      Thread t =
          new Thread(
              () -> {
                try {
                  c0.recv(in, 1, DataType.INT64, 1); // rank 1 sends nothing
                } catch (Throwable e) {
                  thrown.set(e);
                }
                interruptedAfter.set(Thread.currentThread().isInterrupted());
              },
              "interrupted-receiver");
      t.start();
      Thread.sleep(300);
      t.interrupt();
      t.join(1000);
      assertTrue(t.isAlive(), "the interrupt ended the receive");
      c0.abort();
      t.join(10_000);
      assertFalse(t.isAlive(), "abort() did not end the receive");
      assertTrue(thrown.get() instanceof ColibriException, "the receive threw " + thrown.get());
      assertEquals(ErrorCode.ABORTED, ((ColibriException) thrown.get()).code());
      assertTrue(interruptedAfter.get(), "the receive cleared the thread's interrupt status");
    }
  }
}
