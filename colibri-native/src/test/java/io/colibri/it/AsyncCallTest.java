/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static io.colibri.it.FaultTest.assertCode;
import static io.colibri.it.FaultTest.catching;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.it.Spec.Coll;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The asynchronous host calls (issue 14) on real communicators: many calls from one thread run in
 * order and match the reference element by element; a bad argument, a peer's failure and abort()
 * complete the futures with the right code and message and stop the sequence; close() runs the
 * queued calls first; a synchronous call while asynchronous ones are pending is refused; a future
 * cannot be cancelled.
 */
class AsyncCallTest {
  private static final long TIMEOUT_MS = 20_000;
  private static final DataType[] TYPES = DataType.values();
  private static final ReduceOp[] OPS = ReduceOp.values();
  private static final Coll[] COLLS = Coll.values();

  private static ByteBuffer direct(long bytes) {
    return ByteBuffer.allocateDirect(Math.toIntExact(bytes)).order(ByteOrder.nativeOrder());
  }

  /** The ColibriException a future completed with. */
  private static ColibriException failure(
      CompletableFuture<Void> f, ErrorCode code, String... fragments) throws Exception {
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS));
    assertCode(code, e.getCause(), "the future");
    for (String frag : fragments) {
      assertTrue(
          e.getCause().getMessage().contains(frag),
          "\"" + frag + "\" not in: " + e.getCause().getMessage());
    }
    return (ColibriException) e.getCause();
  }

  private static void refused(Throwable t, ErrorCode code, String... fragments) {
    assertCode(code, t, "the call");
    for (String frag : fragments) {
      assertTrue(t.getMessage().contains(frag), "\"" + frag + "\" not in: " + t.getMessage());
    }
  }

  /** Two ranks as threads, calls waiting at most TIMEOUT_MS for a peer. */
  private static RankGroup pair(Transport transport) {
    return RankGroup.start(
        2, FaultTest.options(transport, Algorithm.AUTO, TIMEOUT_MS), Duration.ofSeconds(30));
  }

  /** Call i of the ordering test: its spec and both ranks' buffers. */
  private record Call(Spec spec, long seed, ByteBuffer[] in, ByteBuffer[] out) {}

  private static List<Call> calls(int n, int nranks, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    List<Call> calls = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Coll coll = COLLS[rnd.nextInt(COLLS.length)];
      DataType t = TYPES[rnd.nextInt(TYPES.length)];
      // Mostly small (direct path on shm), some past directMaxBytes (ring), a few empty.
      long count =
          rnd.nextInt(8) == 0
              ? 20_000 + rnd.nextInt(20_000)
              : rnd.nextInt(10) == 0 ? 0 : 1 + rnd.nextInt(3000);
      Spec s = new Spec(coll, t, OPS[rnd.nextInt(OPS.length)], count, nranks, rnd.nextInt(nranks));
      ByteBuffer[] in = new ByteBuffer[nranks];
      ByteBuffer[] out = new ByteBuffer[nranks];
      long callSeed = rnd.nextLong();
      for (int r = 0; r < nranks; r++) {
        in[r] = direct(s.sendElems() * t.size());
        Elements.fillRandom(
            in[r], t, s.op(), s.sendElems(), new SplittableRandom(Seeds.forRank(callSeed, r)));
        out[r] = direct(s.recvElems() * t.size());
      }
      calls.add(new Call(s, callSeed, in, out));
    }
    return calls;
  }

  private static CompletableFuture<Void> submit(Communicator comm, Call c, int rank) {
    Spec s = c.spec();
    ByteBuffer in = c.in()[rank];
    ByteBuffer out = c.out()[rank];
    CompletableFuture<Void> f;
    switch (s.coll()) {
      case ALL_REDUCE:
        f = comm.allReduceAsync(in, out, s.count(), s.type(), s.op());
        break;
      case ALL_GATHER:
        f = comm.allGatherAsync(in, out, s.count(), s.type());
        break;
      case REDUCE_SCATTER:
        f = comm.reduceScatterAsync(in, out, s.count(), s.type(), s.op());
        break;
      default:
        f = comm.broadcastAsync(in, out, s.count(), s.type(), s.root());
        break;
    }
    // The region was taken at submission: moving the buffers now changes nothing (if it did,
    // every later call would find 0 bytes remaining and be refused).
    in.position(in.limit());
    out.limit(0);
    return f;
  }

  @ParameterizedTest(name = "over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(120)
  void manyCallsFromOneThreadRunInOrderAndMatchTheReference(Transport transport) {
    int nranks = 2;
    long seed = Seeds.forCase("AsyncCallTest.order." + transport);
    List<Call> calls = calls(60, nranks, seed);
    try (RankGroup g =
        RankGroup.start(
            nranks,
            FaultTest.options(transport, Algorithm.AUTO, TIMEOUT_MS),
            Duration.ofSeconds(90))) {
      g.run(
          "60 asynchronous calls, then join",
          r -> {
            List<CompletableFuture<Void>> futures = new ArrayList<>();
            for (Call c : calls) {
              futures.add(submit(r.comm, c, r.rank));
            }
            for (CompletableFuture<Void> f : futures) {
              f.get(60, TimeUnit.SECONDS);
            }
            return null;
          });
    }
    List<String> problems = new ArrayList<>();
    for (int i = 0; i < calls.size() && problems.size() < CollectiveRunner.MAX_PROBLEMS; i++) {
      Call c = calls.get(i);
      List<ByteBuffer> inputs = new ArrayList<>();
      for (int r = 0; r < nranks; r++) {
        inputs.add(c.in()[r].clear());
      }
      Expected e = Expected.compute(c.spec(), inputs);
      for (int r = 0; r < nranks; r++) {
        for (String p : e.check(r, c.out()[r].clear(), CollectiveRunner.MAX_PROBLEMS)) {
          problems.add("call " + i + " " + c.spec() + ": " + p);
        }
      }
    }
    assertTrue(
        problems.isEmpty(),
        "seed 0x" + Long.toHexString(seed) + ": " + String.join("\n  ", problems));
  }

  @Test
  @Timeout(60)
  void aBadArgumentFailsItsFutureAndStopsTheSequence() throws Exception {
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      ByteBuffer in = direct(64);
      ByteBuffer out = direct(64);
      for (int i = 0; i < 16; i++) {
        in.putInt(4 * i, 1000 + i);
      }
      CompletableFuture<Void> good = comm.allReduceAsync(in, out, 16, DataType.INT32, ReduceOp.SUM);
      CompletableFuture<Void> bad =
          comm.allReduceAsync(ByteBuffer.allocate(64), out, 16, DataType.INT32, ReduceOp.SUM);
      CompletableFuture<Void> after = comm.broadcastAsync(in, out, 16, DataType.INT32, 0);

      good.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
      for (int i = 0; i < 16; i++) {
        assertEquals(1000 + i, out.getInt(4 * i), "element " + i + " of the good call");
      }
      ColibriException b =
          failure(
              bad,
              ErrorCode.INVALID_ARGUMENT,
              "allReduce: send buffer is a heap buffer",
              "ByteBuffer.allocateDirect");
      String because =
          "allReduce (async #2) failed before it (INVALID_ARGUMENT: allReduce: send"
              + " buffer is a heap buffer";
      ColibriException a =
          failure(
              after,
              ErrorCode.INVALID_ARGUMENT,
              "broadcast (async #3) on rank 0 of 1 was not run: " + because,
              "close it");
      assertSame(b, a.getCause());
      // Later calls, asynchronous or not, are refused the same way.
      failure(
          comm.allGatherAsync(in, out, 16, DataType.INT32),
          ErrorCode.INVALID_ARGUMENT,
          "allGather (async #4) on rank 0 of 1 was not run: " + because);
      refused(
          catching(() -> comm.allGather(in, out, 16, DataType.INT32)),
          ErrorCode.INVALID_ARGUMENT,
          "allGather on rank 0 of 1 was not run: " + because);
      // Queries still answer; the native communicator is healthy (nothing was sent).
      assertEquals(Optional.empty(), comm.asyncError());
      comm.memoryStats();
    }
  }

  @ParameterizedTest(name = "over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(60)
  void aPeerThatAbortsFailsTheRunningCallAndTheQueuedOnesWithItsCode(Transport transport)
      throws Exception {
    try (RankGroup g = pair(transport)) {
      Communicator c0 = g.comm(0);
      ByteBuffer b = direct(1 << 20);
      List<CompletableFuture<Void>> f = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        f.add(c0.allReduceAsync(b, b, 1 << 18, DataType.FLOAT32, ReduceOp.SUM));
      }
      Thread.sleep(200);
      assertFalse(f.get(0).isDone(), "rank 0's first call cannot end while rank 1 is away");
      long t0 = System.nanoTime();
      g.comm(1).abort();
      ExecutionException e =
          assertThrows(
              ExecutionException.class, () -> f.get(0).get(TIMEOUT_MS, TimeUnit.MILLISECONDS));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(e.getCause() instanceof ColibriException, String.valueOf(e.getCause()));
      ColibriException first = (ColibriException) e.getCause();
      assertTrue(
          first.code() == ErrorCode.ABORTED || first.code() == ErrorCode.REMOTE_ERROR,
          first.toString());
      assertTrue(ms < TIMEOUT_MS / 2, "rank 0 learned of the peer's abort after " + ms + " ms");
      for (int i = 1; i < 3; i++) {
        ColibriException q =
            failure(
                f.get(i),
                first.code(),
                "allReduce (async #"
                    + (i + 1)
                    + ") on rank 0 of 2 was not run: allReduce (async #1) failed before it ("
                    + first.code());
        assertSame(first, q.getCause());
      }
    }
  }

  @Test
  @Timeout(60)
  void abortCompletesThePendingFuturesAtOnce() throws Exception {
    try (RankGroup g = pair(Transport.SHM)) {
      Communicator c0 = g.comm(0);
      ByteBuffer b = direct(4096);
      List<CompletableFuture<Void>> f = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        f.add(c0.allReduceAsync(b, b, 1024, DataType.FLOAT32, ReduceOp.SUM));
      }
      Thread.sleep(200); // rank 1 makes no call: the first waits for it
      long t0 = System.nanoTime();
      c0.abort();
      CompletableFuture.allOf(f.toArray(new CompletableFuture<?>[0]))
          .handle((v, t) -> null)
          .get(TIMEOUT_MS / 4, TimeUnit.MILLISECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms < 2000, "the futures completed " + ms + " ms after abort()");
      failure(f.get(0), ErrorCode.ABORTED, "abort");
      for (int i = 1; i < 4; i++) {
        failure(
            f.get(i),
            ErrorCode.ABORTED,
            "allReduce (async #"
                + (i + 1)
                + ") on rank 0 of 2"
                + " was not run: abort() was called on this communicator before it started");
      }
      failure(
          c0.broadcastAsync(b, b, 1, DataType.INT8, 0),
          ErrorCode.ABORTED,
          "broadcast (async #5) on rank 0 of 2 was not run: abort() was called");
      refused(
          catching(() -> c0.allReduce(b, b, 1, DataType.FLOAT32, ReduceOp.SUM)),
          ErrorCode.ABORTED,
          "abort");
    }
  }

  /**
   * A queued call's callback that closes the communicator (a "close on failure" handler) runs
   * when abort() fails that call: by then the running call is aborted natively, and the closing
   * thread holds no call of its own, so close() neither waits out the timeout nor leaks.
   */
  @Test
  @Timeout(60)
  void abortWhoseQueuedCallbackClosesTheCommunicatorReturnsAtOnce() throws Exception {
    try (RankGroup g = pair(Transport.SHM)) {
      Communicator c0 = g.comm(0);
      ByteBuffer b = direct(4096);
      CompletableFuture<Void> running =
          c0.allReduceAsync(b, b, 1024, DataType.FLOAT32, ReduceOp.SUM);
      CompletableFuture<Void> queued =
          c0.allReduceAsync(b, b, 1024, DataType.FLOAT32, ReduceOp.SUM);
      AtomicReference<Throwable> closeFailed = new AtomicReference<>();
      CompletableFuture<Void> closed =
          queued.handle(
              (v, t) -> {
                try {
                  c0.close();
                } catch (Throwable e) {
                  closeFailed.set(e);
                }
                return null;
              });
      Thread.sleep(200); // rank 1 makes no call: the first waits for it
      long t0 = System.nanoTime();
      c0.abort();
      closed.get(TIMEOUT_MS / 4, TimeUnit.MILLISECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms < 2000, "abort() and the callback's close() took " + ms + " ms");
      assertNull(closeFailed.get(), () -> "close() in the callback threw " + closeFailed.get());
      failure(running, ErrorCode.ABORTED, "abort");
      failure(queued, ErrorCode.ABORTED, "was not run: abort() was called");
      refused(
          catching(() -> c0.allReduce(b, b, 1, DataType.FLOAT32, ReduceOp.SUM)),
          ErrorCode.INVALID_USAGE,
          "closed");
    }
  }

  @Test
  @Timeout(60)
  void closeRunsTheQueuedCallsFirstAndRefusesLaterOnes() throws Exception {
    int n = 12;
    int count = 5000;
    try (RankGroup g = pair(Transport.SHM)) {
      List<List<ByteBuffer>> outs =
          g.run(
              "submit, then close at once",
              r -> {
                List<CompletableFuture<Void>> futures = new ArrayList<>();
                List<ByteBuffer> out = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                  ByteBuffer in = direct(4L * count);
                  for (int e = 0; e < count; e++) {
                    in.putInt(4 * e, input(r.rank, i, e));
                  }
                  out.add(direct(4L * count));
                  futures.add(
                      r.comm.allReduceAsync(in, out.get(i), count, DataType.INT32, ReduceOp.SUM));
                }
                r.comm.close(); // waits for the twelve calls, then frees the communicator
                for (CompletableFuture<Void> f : futures) {
                  assertTrue(f.isDone() && !f.isCompletedExceptionally(), "after close(): " + f);
                }
                ByteBuffer b = direct(4);
                failure(
                    r.comm.allReduceAsync(b, b, 1, DataType.INT32, ReduceOp.SUM),
                    ErrorCode.INVALID_USAGE,
                    "allReduce (async #"
                        + (n + 1)
                        + ") on rank "
                        + r.rank
                        + " of 2: communicator is closed");
                return out;
              });
      for (int r = 0; r < 2; r++) {
        for (int i = 0; i < n; i++) {
          for (int e = 0; e < count; e++) {
            assertEquals(
                input(0, i, e) + input(1, i, e),
                outs.get(r).get(i).getInt(4 * e),
                "rank " + r + ", call " + i + ", element " + e);
          }
        }
      }
    }
  }

  /** Distinct per rank, call and element, so that a call paired with another shows. */
  private static int input(int rank, int call, int element) {
    return rank * 1_000_000 + call * 10_000 + element;
  }

  @Test
  @Timeout(60)
  void aSynchronousCallWhileAsynchronousOnesArePendingIsRefusedAndCancelIsToo() throws Exception {
    try (RankGroup g = pair(Transport.SHM)) {
      Communicator c0 = g.comm(0);
      ByteBuffer b0 = direct(64);
      b0.putInt(0, 5);
      CompletableFuture<Void> pending = c0.allReduceAsync(b0, b0, 1, DataType.INT32, ReduceOp.SUM);
      Thread.sleep(100); // rank 1 makes no call yet: the call stays pending
      ByteBuffer other = direct(64);
      refused(
          catching(() -> c0.allReduce(other, other, 1, DataType.INT32, ReduceOp.SUM)),
          ErrorCode.INVALID_USAGE,
          "allReduce on rank 0 of 2 was refused: 1 asynchronous call is"
              + " queued or running on this communicator (the oldest: allReduce (async #1)",
          "wait for their futures (join())");
      refused(catching(c0::trim), ErrorCode.INVALID_USAGE, "trim on rank 0 of 2 was refused");
      refused(
          catching(() -> c0.allReduce(0L, 0L, 0, DataType.INT8, ReduceOp.SUM, 0L)),
          ErrorCode.INVALID_USAGE,
          "allReduce on rank 0 of 2 was refused");
      // Queries answer meanwhile.
      assertEquals(Optional.empty(), c0.asyncError());
      c0.memoryStats();
      c0.lastAlgorithm();
      assertTrue(c0.transportInfo().length() > 0);
      // No taking it back: rank 1 will make the call.
      assertFalse(pending.cancel(true));
      assertFalse(pending.complete(null));
      assertFalse(pending.isDone());

      List<Integer> got =
          g.run(
              "rank 1 joins; then a synchronous call on both",
              r -> {
                ByteBuffer b = r.rank == 0 ? b0 : direct(64);
                if (r.rank == 1) {
                  b.putInt(0, 7);
                  r.comm.allReduce(b, b, 1, DataType.INT32, ReduceOp.SUM);
                } else {
                  pending.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                }
                int first = b.getInt(0);
                // Joined: the next synchronous call is this rank's turn again.
                b.putInt(0, first + r.rank);
                r.comm.allReduce(b, b, 1, DataType.INT32, ReduceOp.SUM);
                return first * 1000 + b.getInt(0);
              });
      // 5 + 7 = 12 on both; then 12 + 13 = 25.
      assertEquals(List.of(12_025, 12_025), got);
    }
  }

  @Test
  @Timeout(60)
  void closeFromAnotherThreadWaitsForTheQueuedCallsOfThePeersToo() throws Exception {
    try (RankGroup g = pair(Transport.SHM)) {
      Communicator c0 = g.comm(0);
      ByteBuffer b0 = direct(4);
      b0.putInt(0, 3);
      CompletableFuture<Void> f = c0.allReduceAsync(b0, b0, 1, DataType.INT32, ReduceOp.SUM);
      CountDownLatch closing = new CountDownLatch(1);
      CompletableFuture<Void> closed =
          CompletableFuture.runAsync(
              () -> {
                closing.countDown();
                c0.close();
              });
      assertTrue(closing.await(10, TimeUnit.SECONDS));
      Thread.sleep(200);
      assertFalse(closed.isDone(), "close() returned before the queued call ran");
      g.runOn(
          "rank 1's call",
          new int[] {1},
          r -> {
            ByteBuffer b = direct(4);
            b.putInt(0, 4);
            r.comm.allReduce(b, b, 1, DataType.INT32, ReduceOp.SUM);
            return null;
          });
      closed.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
      f.get(0, TimeUnit.MILLISECONDS);
      assertEquals(7, b0.getInt(0));
    }
  }
}
