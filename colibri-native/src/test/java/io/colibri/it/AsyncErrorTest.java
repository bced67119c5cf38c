/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static io.colibri.it.FaultTest.assertCode;
import static io.colibri.it.FaultTest.catching;
import static io.colibri.it.FaultTest.options;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link Communicator#asyncError()} and {@link Communicator#checkHealthy()}: empty while healthy;
 * an abort here or on a peer, or a peer process that died, shows without this rank making a call;
 * callable while another thread is inside a collective, and around close.
 */
class AsyncErrorTest {
  static final long TIMEOUT_MS = 5000;

  /** How long a peer's failure may take to show in asyncError(). */
  static final long SHOWS_WITHIN_MS = 5000;

  // ---- healthy ----

  @Test
  @Timeout(60)
  void healthyOneRankReportsNothing() {
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      assertEquals(Optional.empty(), comm.asyncError());
      comm.checkHealthy();
      ByteBuffer b = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
      comm.allReduce(b, b, 16, DataType.FLOAT32, ReduceOp.SUM);
      assertEquals(Optional.empty(), comm.asyncError(), "after a collective");
      comm.checkHealthy();
    }
  }

  @ParameterizedTest(name = "2 ranks over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"AUTO", "SHM", "SOCKET"})
  @Timeout(60)
  void healthyTwoRanksReportNothing(Transport transport) {
    try (RankGroup g =
        RankGroup.start(
            2, options(transport, Algorithm.AUTO, TIMEOUT_MS), Duration.ofSeconds(30))) {
      for (int r = 0; r < 2; r++) {
        assertEquals(Optional.empty(), g.comm(r).asyncError(), "rank " + r + " before a call");
        g.comm(r).checkHealthy();
      }
      g.run(
          "allReduce",
          r -> {
            ByteBuffer b = r.recv.reset(4096).data();
            r.comm.allReduce(b, b, 1024, DataType.FLOAT32, ReduceOp.SUM);
            return null;
          });
      // From this thread, not the ranks' own: any thread may ask.
      for (int r = 0; r < 2; r++) {
        assertEquals(Optional.empty(), g.comm(r).asyncError(), "rank " + r + " after a call");
        g.comm(r).checkHealthy();
      }
    }
  }

  // ---- abort on this rank ----

  @Test
  @Timeout(60)
  void abortShowsAsAbortedAndCheckHealthyThrowsIt() {
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      comm.abort();
      ColibriException e =
          comm.asyncError()
              .orElseThrow(() -> new AssertionError("asyncError() is empty after abort()"));
      assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
      assertTrue(
          e.getMessage().contains("rank 0 of 1") && e.getMessage().contains("abort"),
          "message should name the rank and say it was aborted: " + e.getMessage());
      ColibriException thrown = assertThrows(ColibriException.class, comm::checkHealthy);
      assertEquals(ErrorCode.ABORTED, thrown.code(), thrown.toString());
      assertEquals(e.getMessage(), thrown.getMessage());
      // It stays: asking again gives the same answer.
      assertEquals(ErrorCode.ABORTED, comm.asyncError().map(ColibriException::code).orElse(null));
    }
  }

  // ---- a peer aborts: shows on this rank without a call ----

  @ParameterizedTest(name = "rank 1 of 2 aborts, over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"AUTO", "SOCKET"})
  @Timeout(60)
  void peerAbortShowsWithoutACall(Transport transport) throws Exception {
    try (RankGroup g =
        RankGroup.start(
            2, options(transport, Algorithm.AUTO, TIMEOUT_MS), Duration.ofSeconds(30))) {
      assertEquals(Optional.empty(), g.comm(0).asyncError(), "rank 0 before rank 1 aborted");
      g.runOn(
          "abort on rank 1",
          new int[] {1},
          r -> {
            r.comm.abort();
            return null;
          });
      ColibriException e = pollUntilPresent(g.comm(0));
      assertEquals(ErrorCode.ABORTED, e.code(), e.toString());
      assertTrue(e.getMessage().contains("rank 1"), "message should name rank 1: " + e);
      assertCode(
          ErrorCode.ABORTED,
          catching(() -> g.comm(0).checkHealthy()),
          "checkHealthy() on rank 0 after rank 1 aborted");
    }
  }

  // ---- a peer process dies ----

  @Test
  @Timeout(90)
  void killedPeerProcessIsRemoteErrorWithoutACall() throws Exception {
    UniqueId id = UniqueId.create();
    Procs.Child child =
        Procs.start(
            "rank 1", null, "idle", id.toString(), "1", "2", "SHM", String.valueOf(TIMEOUT_MS));
    try (Communicator c0 =
        Communicator.init(
            id,
            0,
            2,
            RankProcess.options(Transport.SHM, TIMEOUT_MS))) { // rank 1's: they must agree
      long deadline = System.currentTimeMillis() + 30_000;
      while (!child.printed("READY")) {
        if (System.currentTimeMillis() > deadline || !child.process.isAlive()) {
          fail("rank 1 did not start:\n" + child.describe());
        }
        Thread.sleep(20);
      }
      assertEquals(Optional.empty(), c0.asyncError(), "rank 0 while rank 1 is alive");
      child.process.destroyForcibly();
      child.process.waitFor(10, TimeUnit.SECONDS);
      ColibriException e = pollUntilPresent(c0);
      assertEquals(ErrorCode.REMOTE_ERROR, e.code(), e.toString());
      assertTrue(e.getMessage().contains("rank 1"), "message should name the dead rank: " + e);
    } finally {
      child.process.destroyForcibly();
    }
  }

  // ---- from another thread while a collective runs ----

  @Test
  @Timeout(60)
  void answersAtOnceWhileAnotherThreadIsBlockedInACollective() throws Exception {
    try (RankGroup g =
        RankGroup.start(
            2, options(Transport.AUTO, Algorithm.AUTO, 30_000), Duration.ofSeconds(45))) {
      Communicator c0 = g.comm(0);
      ByteBuffer b0 = ByteBuffer.allocateDirect(4096).order(ByteOrder.nativeOrder());
      // Rank 1 never joins: rank 0's allReduce blocks until the abort.
      CompletableFuture<Throwable> blocked =
          CompletableFuture.supplyAsync(
              () -> catching(() -> c0.allReduce(b0, b0, 1024, DataType.FLOAT32, ReduceOp.SUM)));
      Thread.sleep(300);
      assertTrue(
          !blocked.isDone(),
          "allReduce should block while rank 1 is away, it returned: " + blocked.getNow(null));
      long t0 = System.nanoTime();
      for (int i = 0; i < 100; i++) {
        assertEquals(Optional.empty(), c0.asyncError(), "poll " + i + " during the collective");
      }
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(
          ms < 1000,
          "100 asyncError() calls during a blocked collective took "
              + ms
              + " ms: they should not wait for it");
      assertTrue(
          !blocked.isDone(),
          "asyncError() should not disturb the running collective: " + blocked.getNow(null));
      c0.abort();
      assertCode(
          ErrorCode.ABORTED,
          blocked.get(10, TimeUnit.SECONDS),
          "the blocked allReduce after abort()");
      assertEquals(ErrorCode.ABORTED, c0.asyncError().map(ColibriException::code).orElse(null));
    }
  }

  // ---- close ----

  @Test
  @Timeout(60)
  void afterCloseIsInvalidUsageLikeTheOtherQueries() {
    Communicator comm = Communicator.init(UniqueId.create(), 0, 1);
    comm.close();
    Throwable t = catching(comm::asyncError);
    assertCode(ErrorCode.INVALID_USAGE, t, "asyncError() after close()");
    assertTrue(t.getMessage().startsWith("asyncError: communicator is closed"), t.getMessage());
    assertCode(
        ErrorCode.INVALID_USAGE, catching(comm::checkHealthy), "checkHealthy() after close()");
    assertCode(
        ErrorCode.INVALID_USAGE,
        catching(comm::memoryStats),
        "memoryStats() after close(), for comparison");
  }

  /**
   * A health check polling on another thread while a rank closes: nothing is freed under the
   * poll, the poll sees either a healthy communicator or INVALID_USAGE, and the close stays a
   * clean close (the peer sees no abort).
   */
  @Test
  @Timeout(120)
  void pollingDuringCloseIsSafeAndDoesNotAbortThePeer() throws Exception {
    for (int round = 0; round < 5; round++) {
      RankGroup g =
          RankGroup.start(
              2, options(Transport.AUTO, Algorithm.AUTO, TIMEOUT_MS), Duration.ofSeconds(30));
      try {
        Communicator c0 = g.comm(0);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> pollFailure = new AtomicReference<>();
        AtomicLong polls = new AtomicLong();
        Thread poller =
            new Thread(
                () -> {
                  while (!stop.get()) {
                    try {
                      Optional<ColibriException> e = c0.asyncError();
                      if (e.isPresent()) {
                        pollFailure.compareAndSet(null, e.get());
                        return;
                      }
                      polls.incrementAndGet();
                    } catch (ColibriException e) {
                      if (e.code() != ErrorCode.INVALID_USAGE) {
                        pollFailure.compareAndSet(null, e);
                      }
                      return; // closed
                    } catch (Throwable e) {
                      pollFailure.compareAndSet(null, e);
                      return;
                    }
                  }
                },
                "poller");
        poller.start();
        while (polls.get() == 0 && poller.isAlive()) {
          Thread.onSpinWait();
        }
        g.runOn(
            "close of rank 0 while polled",
            new int[] {0},
            r -> {
              r.comm.close();
              return null;
            });
        poller.join(10_000);
        stop.set(true);
        assertNull(pollFailure.get(), "round " + round + ": asyncError() around close()");
        assertEquals(
            Optional.empty(),
            g.comm(1).asyncError(),
            "round "
                + round
                + ": rank 1 after rank 0 closed cleanly while polled (an abort would show here)");
      } finally {
        g.close();
      }
    }
  }

  // ---- helpers ----

  /** Polls asyncError() from this thread until it is present; fails after SHOWS_WITHIN_MS. */
  private static ColibriException pollUntilPresent(Communicator comm) throws InterruptedException {
    long t0 = System.nanoTime();
    while (true) {
      Optional<ColibriException> e = comm.asyncError();
      if (e.isPresent()) {
        return e.get();
      }
      if (System.nanoTime() - t0 > TimeUnit.MILLISECONDS.toNanos(SHOWS_WITHIN_MS)) {
        fail(
            comm
                + ": asyncError() still empty "
                + SHOWS_WITHIN_MS
                + " ms after the peer's"
                + " failure");
      }
      Thread.sleep(5);
    }
  }
}
