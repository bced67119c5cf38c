/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static io.colibri.it.FaultTest.assertCode;
import static io.colibri.it.FaultTest.catching;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 14: {@code ByteBuffer.allocateDirect} is BIG_ENDIAN, and a float allReduce over such
 * buffers on 2 ranks gave 1.5f + 1.5f = 8.507319E37 with no error. Now every rank refuses it
 * before anything is sent (so no rank waits for another), and the same call in native order
 * gives 3.0f.
 */
class ByteOrderTest {

  @Test
  @Timeout(60)
  void bigEndianFloatAllReduceIsRefusedOnEveryRankAndNativeOrderAddsUp() {
    try (RankGroup g =
        RankGroup.start(
            2, FaultTest.options(Transport.AUTO, Algorithm.AUTO, 10_000), Duration.ofSeconds(30))) {
      List<Throwable> refused =
          g.run(
              "allReduce on big-endian buffers",
              r -> {
                ByteBuffer send = ByteBuffer.allocateDirect(4).order(ByteOrder.BIG_ENDIAN);
                ByteBuffer recv = ByteBuffer.allocateDirect(4).order(ByteOrder.BIG_ENDIAN);
                send.putFloat(0, 1.5f);
                Throwable t =
                    catching(() -> r.comm.allReduce(send, recv, 1, DataType.FLOAT32, ReduceOp.SUM));
                if (t == null) {
                  return new AssertionError(
                      "rank "
                          + r.rank
                          + ": a big-endian allReduce returned "
                          + recv.getFloat(0)
                          + " instead of being refused");
                }
                return t;
              });
      for (int r = 0; r < 2; r++) {
        Throwable t = refused.get(r);
        assertCode(ErrorCode.INVALID_ARGUMENT, t, "rank " + r);
        if (ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN) {
          assertTrue(
              t.getMessage().contains("send buffer is in BIG_ENDIAN byte order"), t.getMessage());
        }
        assertTrue(t.getMessage().contains(".order(ByteOrder.nativeOrder())"), t.getMessage());
      }
      // Nothing was sent, and the refusal failed the communicator on every rank: the next call
      // says why.
      List<Throwable> after =
          g.run(
              "allReduce after the refusal",
              r -> {
                ByteBuffer b = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());
                return catching(() -> r.comm.allReduce(b, b, 1, DataType.FLOAT32, ReduceOp.SUM));
              });
      for (int r = 0; r < 2; r++) {
        assertCode(ErrorCode.INVALID_USAGE, after.get(r), "rank " + r + " after the refusal");
        assertTrue(after.get(r).getMessage().contains("byte order"), after.get(r).getMessage());
      }
    }
    // In native order the sum is right.
    try (RankGroup g =
        RankGroup.start(
            2, FaultTest.options(Transport.AUTO, Algorithm.AUTO, 10_000), Duration.ofSeconds(30))) {
      List<Float> sums =
          g.run(
              "allReduce in native order",
              r -> {
                ByteBuffer b = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());
                b.putFloat(0, 1.5f);
                r.comm.allReduce(b, b, 1, DataType.FLOAT32, ReduceOp.SUM);
                return b.getFloat(0);
              });
      assertEquals(List.of(3.0f, 3.0f), sums);
      // broadcast reads send on the root only: another rank's send may be in any order.
      List<Throwable> bcast =
          g.run(
              "broadcast with a big-endian send off the root",
              r -> {
                ByteBuffer send =
                    ByteBuffer.allocateDirect(4)
                        .order(r.rank == 0 ? ByteOrder.nativeOrder() : ByteOrder.BIG_ENDIAN);
                ByteBuffer recv = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());
                send.putFloat(0, 2.5f);
                Throwable t = catching(() -> r.comm.broadcast(send, recv, 1, DataType.FLOAT32, 0));
                return t != null
                    ? t
                    : recv.getFloat(0) == 2.5f
                        ? null
                        : new AssertionError("rank " + r.rank + " got " + recv.getFloat(0));
              });
      assertNull(bcast.get(0));
      assertNull(bcast.get(1));
    }
  }
}
