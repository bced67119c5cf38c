/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * The rules of {@link CallQueue} with plain tasks standing in for a communicator's calls: order,
 * the one thread, a failure that stops the queue, the turn check of synchronous calls, abort,
 * close, and futures that cannot be taken back. The native communicator's use of it is tested in
 * colibri-native (io.colibri.it.AsyncCallTest).
 */
@Timeout(60)
class CallQueueTest {
  private final CallQueue queue = new CallQueue("colibri-comm-7", "rank 7 of 8");
  private final CountDownLatch release = new CountDownLatch(1);

  @AfterEach
  void closeQueue() {
    release.countDown();
    queue.close();
  }

  /** A task that waits until the test releases it (a collective waiting for its peers). */
  private Runnable blocked(CountDownLatch started) {
    return () -> {
      started.countDown();
      try {
        assertTrue(release.await(30, TimeUnit.SECONDS), "never released");
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    };
  }

  private static ColibriException failure(CompletableFuture<Void> f) {
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof ColibriException, String.valueOf(e.getCause()));
    return (ColibriException) e.getCause();
  }

  private static ColibriException failure(
      CompletableFuture<Void> f, ErrorCode code, String... fragments) {
    return check(failure(f), code, fragments);
  }

  private static ColibriException refused(Executable call, ErrorCode code, String... fragments) {
    return check(assertThrows(ColibriException.class, call), code, fragments);
  }

  private static ColibriException check(ColibriException e, ErrorCode code, String... fragments) {
    assertEquals(code, e.code(), e::toString);
    for (String f : fragments) {
      assertTrue(e.getMessage().contains(f), () -> "\"" + f + "\" not in: " + e.getMessage());
    }
    return e;
  }

  @Test
  void callsRunInSubmissionOrderOnOneDaemonThreadOfTheGivenName() throws Exception {
    int n = 500;
    List<Integer> order = Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = Collections.synchronizedList(new ArrayList<>());
    List<CompletableFuture<Void>> futures = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      int call = i;
      futures.add(
          queue.submit(
              "call",
              () -> {
                order.add(call);
                threads.add(Thread.currentThread());
              }));
    }
    CompletableFuture.allOf(futures.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
    List<Integer> expected = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      expected.add(i);
    }
    assertEquals(expected, order);
    Thread worker = threads.get(0);
    assertTrue(threads.stream().allMatch(t -> t == worker), "more than one thread ran the calls");
    assertEquals("colibri-comm-7", worker.getName());
    assertTrue(worker.isDaemon(), "the queue's thread must not keep the JVM alive");
    assertEquals(0, queue.pending());
    queue.close();
    worker.join(5000);
    assertFalse(worker.isAlive(), "close() must end the thread");
  }

  @Test
  void noThreadUntilTheFirstCall() {
    long before = countThreads("colibri-comm-idle");
    CallQueue idle = new CallQueue("colibri-comm-idle", "rank 0 of 1");
    assertEquals(before, countThreads("colibri-comm-idle"));
    idle.close();
  }

  private static long countThreads(String name) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals(name))
        .count();
  }

  @Test
  void aFailureFailsTheQueuedCallsAndEveryLaterCallWithItsCode() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    AtomicInteger ran = new AtomicInteger();
    CompletableFuture<Void> first = queue.submit("allReduce", blocked(started));
    ColibriException bad =
        new ColibriException(ErrorCode.INVALID_ARGUMENT, "allReduce: send buffer is a heap buffer");
    CompletableFuture<Void> second =
        queue.submit(
            "allReduce",
            () -> {
              throw bad;
            });
    CompletableFuture<Void> third = queue.submit("allGather", ran::incrementAndGet);
    CompletableFuture<Void> fourth = queue.submit("broadcast", ran::incrementAndGet);
    assertTrue(started.await(10, TimeUnit.SECONDS));
    assertEquals(4, queue.pending());
    release.countDown();

    first.get(10, TimeUnit.SECONDS);
    assertSame(bad, failure(second));
    String because = "failed before it (INVALID_ARGUMENT: allReduce: send buffer is a heap buffer)";
    ColibriException e3 =
        failure(
            third,
            ErrorCode.INVALID_ARGUMENT,
            "allGather (async #3) on rank 7 of 8 was not run: allReduce (async #2) " + because,
            "close it");
    assertSame(bad, e3.getCause());
    failure(fourth, ErrorCode.INVALID_ARGUMENT, "broadcast (async #4) on rank 7 of 8 was not run");
    assertEquals(0, ran.get(), "a call behind the failed one ran");
    assertEquals(0, queue.pending());

    // Later calls, asynchronous or synchronous, are refused the same way.
    ColibriException later =
        failure(
            queue.submit("reduceScatter", ran::incrementAndGet),
            ErrorCode.INVALID_ARGUMENT,
            "reduceScatter (async #5) on rank 7 of 8 was not run:"
                + " allReduce (async #2) "
                + because);
    assertSame(bad, later.getCause());
    refused(
        () -> queue.checkTurn("allReduce"),
        ErrorCode.INVALID_ARGUMENT,
        "allReduce on rank 7 of 8 was not run: allReduce (async #2) " + because);
    assertEquals(0, ran.get());
  }

  @Test
  void aThrowableThatIsNotAColibriExceptionStopsTheQueueAsAnInternalError() throws Exception {
    IllegalStateException bug = new IllegalStateException("bug");
    CompletableFuture<Void> f =
        queue.submit(
            "trim",
            () -> {
              throw bug;
            });
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    // The call's own future holds a ColibriException too, the throwable as its cause.
    ColibriException own = assertInstanceOf(ColibriException.class, e.getCause());
    assertEquals(ErrorCode.INTERNAL_ERROR, own.code());
    assertTrue(
        own.getMessage()
            .contains("trim (async #1) on rank 7 of 8 threw java.lang.IllegalStateException: bug"),
        own::getMessage);
    assertSame(bug, own.getCause());
    ColibriException next =
        failure(
            queue.submit("allReduce", () -> {}),
            ErrorCode.INTERNAL_ERROR,
            "trim (async #1) on rank 7 of 8 threw java.lang.IllegalStateException: bug",
            "please report");
    assertSame(bug, next.getCause().getCause());
  }

  @Test
  void synchronousCallsAreRefusedWhileCallsArePendingButNotTheQueuedOnesThemselves()
      throws Exception {
    queue.checkTurn("allReduce"); // nothing pending
    CountDownLatch started = new CountDownLatch(1);
    AtomicReference<Throwable> inside = new AtomicReference<>();
    CompletableFuture<Void> first =
        queue.submit(
            "allGather",
            () -> {
              try {
                queue.checkTurn("allGather"); // the queue's own call: its turn
              } catch (Throwable t) {
                inside.set(t);
              }
              blocked(started).run();
            });
    CompletableFuture<Void> second = queue.submit("broadcast", () -> {});
    assertTrue(started.await(10, TimeUnit.SECONDS));
    refused(
        () -> queue.checkTurn("allReduce"),
        ErrorCode.INVALID_USAGE,
        "allReduce on rank 7 of 8 was refused: 2 asynchronous calls are queued or running on"
            + " this communicator (the oldest: allGather (async #1), running)",
        "wait for their futures (join())",
        "make this call asynchronous too");

    // A stage attached to the first future runs on the queue's thread, but it is not one of the
    // queue's calls: the second call is still queued then, so its synchronous call is refused.
    CompletableFuture<Throwable> fromCallback =
        first.handle(
            (v, t) -> {
              try {
                queue.checkTurn("trim");
                return null;
              } catch (Throwable x) {
                return x;
              }
            });
    release.countDown();
    first.get(10, TimeUnit.SECONDS);
    second.get(10, TimeUnit.SECONDS);
    assertNull(inside.get(), "the queue refused its own call");
    Throwable cb = fromCallback.get(10, TimeUnit.SECONDS);
    assertTrue(cb instanceof ColibriException, String.valueOf(cb));
    check(
        (ColibriException) cb,
        ErrorCode.INVALID_USAGE,
        "trim on rank 7 of 8 was refused: 1" + " asynchronous call is queued or running",
        "broadcast (async #2), queued");
    queue.checkTurn("allReduce"); // all done: its turn again
  }

  @Test
  void abortFailsTheQueuedCallsAtOnceAndEveryLaterOne() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    AtomicInteger ran = new AtomicInteger();
    CompletableFuture<Void> running =
        queue.submit(
            "allReduce",
            () -> {
              blocked(started).run();
              // What the native call returns once the communicator is aborted.
              throw new ColibriException(ErrorCode.ABORTED, "allReduce aborted");
            });
    List<CompletableFuture<Void>> queued = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      queued.add(queue.submit("allGather", ran::incrementAndGet));
    }
    assertTrue(started.await(10, TimeUnit.SECONDS));
    queue.abort();
    // Before the running call returns: the queued ones are failed already.
    for (int i = 0; i < 3; i++) {
      CompletableFuture<Void> f = queued.get(i);
      assertTrue(f.isCompletedExceptionally(), "queued call " + i + " still pending after abort");
      failure(
          f,
          ErrorCode.ABORTED,
          "allGather (async #"
              + (i + 2)
              + ") on rank 7 of 8 was not"
              + " run: abort() was called on this communicator before it started");
    }
    assertFalse(running.isDone());
    assertEquals(1, queue.pending());
    refused(
        () -> queue.checkTurn("allReduce"),
        ErrorCode.INVALID_USAGE,
        "1 asynchronous call is queued or running",
        "allReduce (async #1), running");
    release.countDown();
    failure(running, ErrorCode.ABORTED, "allReduce aborted");
    // A synchronous call is left to the aborted communicator, which refuses it with ABORTED.
    queue.checkTurn("allReduce");
    failure(
        queue.submit("broadcast", ran::incrementAndGet),
        ErrorCode.ABORTED,
        "broadcast (async #5) on rank 7 of 8 was not run: abort() was called");
    assertEquals(0, ran.get());
    queue.abort(); // idempotent
  }

  @Test
  void closeWaitsForTheQueuedCallsThenRefusesNewOnes() throws Exception {
    List<Integer> order = Collections.synchronizedList(new ArrayList<>());
    AtomicReference<Thread> worker = new AtomicReference<>();
    List<CompletableFuture<Void>> futures = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      int call = i;
      futures.add(
          queue.submit(
              "allReduce",
              () -> {
                worker.set(Thread.currentThread());
                sleep(20);
                order.add(call);
              }));
    }
    queue.close();
    assertEquals(List.of(0, 1, 2, 3, 4), order, "close() returned before the queued calls ran");
    for (CompletableFuture<Void> f : futures) {
      assertTrue(f.isDone() && !f.isCompletedExceptionally(), f.toString());
    }
    assertFalse(worker.get().isAlive(), "close() returned before the thread ended");
    failure(
        queue.submit("allReduce", () -> order.add(99)),
        ErrorCode.INVALID_USAGE,
        "allReduce (async #6) on rank 7 of 8: communicator is closed",
        "create a new one with Communicator.init");
    queue.close(); // idempotent
    assertEquals(5, order.size());
  }

  @Test
  void closeFromACallbackOnTheQueuesThreadRunsTheQueuedCallsItself() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    List<String> order = Collections.synchronizedList(new ArrayList<>());
    CompletableFuture<Void> first = queue.submit("allReduce", blocked(started));
    CompletableFuture<Void> closed = first.thenRun(queue::close);
    CompletableFuture<Void> second = queue.submit("allGather", () -> order.add("second"));
    CompletableFuture<Void> third = queue.submit("broadcast", () -> order.add("third"));
    assertTrue(started.await(10, TimeUnit.SECONDS));
    release.countDown();
    closed.get(10, TimeUnit.SECONDS);
    second.get(10, TimeUnit.SECONDS);
    third.get(10, TimeUnit.SECONDS);
    assertEquals(List.of("second", "third"), order);
    failure(queue.submit("allReduce", () -> {}), ErrorCode.INVALID_USAGE, "communicator is closed");
  }

  @Test
  void aFutureCannotBeCancelledOrCompletedFromOutside() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    AtomicInteger ran = new AtomicInteger();
    CompletableFuture<Void> running = queue.submit("allReduce", blocked(started));
    CompletableFuture<Void> queued = queue.submit("allGather", ran::incrementAndGet);
    assertTrue(started.await(10, TimeUnit.SECONDS));
    for (CompletableFuture<Void> f : List.of(running, queued)) {
      assertFalse(f.cancel(true));
      assertFalse(f.cancel(false));
      assertFalse(f.complete(null));
      assertFalse(f.completeExceptionally(new RuntimeException("from outside")));
      assertFalse(f.isDone() || f.isCancelled(), f.toString());
      refused(
          () -> f.obtrudeValue(null),
          ErrorCode.INVALID_USAGE,
          "obtrudeValue is refused on the future of a Colibri call",
          "abort()");
      refused(
          () -> f.obtrudeException(new RuntimeException()),
          ErrorCode.INVALID_USAGE,
          "obtrudeException is refused");
      refused(
          () -> f.completeAsync(() -> null), ErrorCode.INVALID_USAGE, "completeAsync is refused");
      refused(
          () -> f.orTimeout(1, TimeUnit.MILLISECONDS),
          ErrorCode.INVALID_USAGE,
          "orTimeout is refused",
          "copy().orTimeout(...)");
      refused(
          () -> f.completeOnTimeout(null, 1, TimeUnit.MILLISECONDS),
          ErrorCode.INVALID_USAGE,
          "completeOnTimeout is refused");
    }
    // Stages made from the futures are the caller's: ordinary futures.
    CompletableFuture<Void> copy = queued.copy();
    assertTrue(copy.cancel(true));
    assertEquals(2, queue.pending());
    release.countDown();
    running.get(10, TimeUnit.SECONDS);
    queued.get(10, TimeUnit.SECONDS);
    assertEquals(1, ran.get(), "the queued call must run all the same");
    assertTrue(copy.isCancelled());
  }

  /**
   * A communicator that becomes unreachable is freed by a Cleaner; the idle thread of its queue
   * must not keep the last call (which holds the communicator and the buffers) reachable.
   */
  @Test
  void anIdleQueueDoesNotHoldTheLastCallItRan() throws Exception {
    WeakReference<Object> used = runOneCallHolding();
    for (int i = 0; i < 100 && used.get() != null; i++) {
      System.gc();
      sleep(20);
    }
    assertTrue(used.get() == null, "the idle queue still holds what its last call used");
  }

  private WeakReference<Object> runOneCallHolding() throws Exception {
    Object buffer = new byte[1 << 16];
    queue.submit("allReduce", () -> buffer.hashCode()).get(10, TimeUnit.SECONDS);
    return new WeakReference<>(buffer);
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }
}
