/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static io.colibri.it.FaultTest.assertCode;
import static io.colibri.it.FaultTest.catching;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Issue 14: a 64 MiB allReduce on one thread while a second thread called a 16-element allReduce
 * on the same communicator killed the JVM (SIGSEGV in memcpy). Now the second call is refused at
 * once with INVALID_USAGE naming the call in progress, which completes with the right result, and
 * the communicator works afterwards.
 */
class ConcurrentCallTest {
  private static final int COUNT = 16 << 20; // 64 MiB of FLOAT32

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  /** Exact in float32: small integers. */
  private static float input(int rank, int i) {
    return (rank + 1) * 1000f + i % 997;
  }

  @ParameterizedTest(name = "over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(120)
  void secondThreadIsRefusedNamingTheCallInProgress(Transport transport) throws Exception {
    try (RankGroup g =
        RankGroup.start(
            2, FaultTest.options(transport, Algorithm.AUTO, 20_000), Duration.ofSeconds(60))) {
      CountDownLatch entering = new CountDownLatch(1);
      CountDownLatch probed = new CountDownLatch(1);
      // Rank 0's thread enters allReduce #1, which cannot finish before rank 1 joins it; rank 1
      // joins once the second thread (this one) has tried its call.
      CompletableFuture<List<Long>> big =
          CompletableFuture.supplyAsync(
              () ->
                  g.run(
                      "allReduce of 64 MiB",
                      r -> {
                        ByteBuffer in = direct(COUNT * 4);
                        ByteBuffer out = direct(COUNT * 4);
                        FloatBuffer f = in.asFloatBuffer();
                        for (int i = 0; i < COUNT; i++) {
                          f.put(i, input(r.rank, i));
                        }
                        if (r.rank == 0) {
                          entering.countDown();
                        } else {
                          probed.await(20, TimeUnit.SECONDS);
                        }
                        r.comm.allReduce(in, out, COUNT, DataType.FLOAT32, ReduceOp.SUM);
                        FloatBuffer o = out.asFloatBuffer();
                        long wrong = 0;
                        for (int i = 0; i < COUNT; i++) {
                          if (o.get(i) != input(0, i) + input(1, i)) {
                            wrong++;
                          }
                        }
                        return wrong;
                      }));
      Throwable second;
      Optional<ColibriException> health;
      try {
        assertTrue(entering.await(30, TimeUnit.SECONDS), "rank 0 did not start its allReduce");
        Thread.sleep(300);
        ByteBuffer small = direct(64);
        second =
            catching(() -> g.comm(0).allReduce(small, small, 16, DataType.FLOAT32, ReduceOp.SUM));
        health = g.comm(0).asyncError(); // answers while the call runs
      } finally {
        probed.countDown();
      }
      List<Long> wrong = big.get(60, TimeUnit.SECONDS);

      assertCode(ErrorCode.INVALID_USAGE, second, "the second thread's allReduce");
      String m = second.getMessage();
      assertTrue(m.contains("allReduce was called while another thread is in allReduce #1"), m);
      assertTrue(m.contains("one call at a time"), m);
      assertEquals(Optional.empty(), health, "asyncError() during the call");
      assertEquals(List.of(0L, 0L), wrong, "wrong elements of the call in progress, by rank");
      // The refusal did not mark the communicator failed: it goes on.
      g.comm(0).checkHealthy();
      List<Float> after =
          g.run(
              "allReduce afterwards",
              r -> {
                ByteBuffer b = direct(4);
                b.putFloat(0, r.rank + 1);
                r.comm.allReduce(b, b, 1, DataType.FLOAT32, ReduceOp.SUM);
                return b.getFloat(0);
              });
      assertEquals(List.of(3.0f, 3.0f), after);
    }
  }
}
