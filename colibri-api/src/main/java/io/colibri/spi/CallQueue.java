/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.spi;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The asynchronous calls of one communicator, for implementations of the {@code ...Async} methods
 * of {@link Communicator}: each call runs on one daemon thread of the communicator, started at the
 * first submission, one at a time and in the order of submission. This class enforces the rules
 * that the "Asynchronous calls" section of {@link Communicator} states:
 *
 * <ul>
 *   <li>{@link #submit} never throws: every failure, a closed or stopped queue included, completes
 *       the returned future exceptionally with a {@link ColibriException};
 *   <li>the first call that fails stops the queue: the calls queued behind it, and every later
 *       call, fail at once with its code, naming it ({@link #checkTurn} refuses the synchronous
 *       ones), because this rank's sequence of calls no longer matches its peers';
 *   <li>{@link #checkTurn} refuses a synchronous call while asynchronous ones are queued or
 *       running, since a communicator takes one call at a time;
 *   <li>{@link #abort()} fails every queued call at once with {@link ErrorCode#ABORTED} (the
 *       caller aborts the running one natively);
 *   <li>{@link #close()} waits until every queued call has run, then ends the thread;
 *   <li>the futures cannot be cancelled or completed by their users: a call that every rank
 *       submitted cannot be taken back on one rank.
 * </ul>
 *
 * <p>The queue holds no reference to its communicator: the work it is given does, while it waits
 * or runs, so an idle thread does not keep an unreachable communicator alive.
 */
public final class CallQueue {
  private final String threadName;
  private final String owner;

  private final ReentrantLock lock = new ReentrantLock();
  private final Condition workOrStop = lock.newCondition();
  private final Condition idle = lock.newCondition();
  private final ArrayDeque<Task> queued = new ArrayDeque<>();
  // Guarded by lock.
  private Task running;
  private Thread worker;
  private long submitted;
  private boolean closed;
  private boolean stopping;

  /** Queued and running calls: written under lock, read without it by {@link #checkTurn}. */
  private volatile int pending;

  /** The failure that stopped the queue, or null: written under lock. */
  private volatile Failure failure;

  /** The worker while it runs a call (only the worker writes it): its own calls pass checkTurn. */
  private volatile Thread runner;

  /** What stopped the queue: the call that failed (or "abort()") and its error. */
  private record Failure(String call, ColibriException error, boolean aborted) {}

  /** One submitted call. */
  private static final class Task {
    final String label;

    /** Dropped once run: an idle worker's last task must not keep the communicator reachable. */
    Runnable work;

    final CallFuture future = new CallFuture();

    Task(String label, Runnable work) {
      this.label = label;
      this.work = work;
    }
  }

  /**
   * @param threadName name of the thread that runs the calls, e.g. {@code "colibri-comm-0"}
   * @param owner the communicator in messages, e.g. {@code "rank 0 of 2"}
   */
  public CallQueue(String threadName, String owner) {
    this.threadName = threadName;
    this.owner = owner;
  }

  /**
   * Queues {@code work} (a synchronous call of the communicator) behind the calls submitted
   * before. Never throws.
   *
   * @param call the call's name in messages, e.g. {@code "allReduce"}
   * @param work runs the call; what it throws completes the future exceptionally. It holds the
   *     call's buffers, so they stay reachable until the future completes
   * @return a future that completes when the call has returned, normally or with its error; its
   *     {@code cancel}, {@code complete} and {@code completeExceptionally} do nothing and return
   *     false, and {@code obtrude*}, {@code completeAsync}, {@code orTimeout} and
   *     {@code completeOnTimeout} are refused
   */
  public CompletableFuture<Void> submit(String call, Runnable work) {
    ColibriException refused;
    Task t;
    lock.lock();
    try {
      t = new Task(call + " (async #" + ++submitted + ")", work);
      Failure f = failure;
      if (closed) {
        refused =
            new ColibriException(
                ErrorCode.INVALID_USAGE,
                t.label
                    + " on "
                    + owner
                    + ": communicator is closed; create a new one with Communicator.init");
      } else if (f != null) {
        refused = notRun(t.label, f);
      } else {
        queued.addLast(t);
        updatePending();
        if (worker == null) {
          worker = new Thread(this::work, threadName);
          worker.setDaemon(true);
          worker.start();
        }
        workOrStop.signal();
        return t.future;
      }
    } finally {
      lock.unlock();
    }
    t.future.fail(refused);
    return t.future;
  }

  /**
   * Refuses a synchronous call that would run out of turn: while calls of this queue are queued
   * or running (INVALID_USAGE, saying how many and which is the oldest), or once a failed call
   * stopped the queue (its code, naming the failed call; after {@link #abort()} the
   * communicator refuses the call itself). Returns at once otherwise, and always for the calls
   * this queue runs. Cheap: three volatile reads when nothing is pending.
   *
   * @param call the synchronous call's name in messages, e.g. {@code "allReduce"}
   */
  public void checkTurn(String call) {
    if (runner == Thread.currentThread()) {
      return;
    }
    Failure f = failure;
    if (f != null && !f.aborted) {
      throw notRun(call, f);
    }
    // After abort() the communicator itself refuses the call, with ABORTED and its own message.
    if (pending == 0) {
      return;
    }
    String oldest;
    int n;
    lock.lock();
    try {
      n = pending;
      oldest =
          running != null
              ? running.label + ", running"
              : !queued.isEmpty() ? queued.peekFirst().label + ", queued" : null;
    } finally {
      lock.unlock();
    }
    if (n == 0 || oldest == null) {
      return; // they finished meanwhile
    }
    throw new ColibriException(
        ErrorCode.INVALID_USAGE,
        call
            + " on "
            + owner
            + " was refused: "
            + n
            + " asynchronous call"
            + (n == 1 ? " is" : "s are")
            + " queued or running on this"
            + " communicator (the oldest: "
            + oldest
            + "). A communicator takes one call at a time,"
            + " and its asynchronous calls run in order on its own thread: wait for their futures"
            + " (join()) before a synchronous call, or make this call asynchronous too");
  }

  /** {@return calls queued or running now} */
  public int pending() {
    return pending;
  }

  /**
   * Stops the queue for good: every queued call fails at once with ABORTED, and so does every
   * later one. The running call is the caller's to abort (natively); its future completes when it
   * returns. Any thread, any time; idempotent.
   */
  public void abort() {
    stop().run();
  }

  /**
   * {@link #abort()} in two steps, for a caller that aborts the running call natively in
   * between: stops the queue for good and takes the queued calls off it, and returns what fails
   * their futures. Run it once the running call is aborted and the caller holds nothing: their
   * callbacks run on that thread and may close the communicator.
   *
   * @return fails the futures of the calls taken off the queue (each once, however often it runs)
   */
  public Runnable stop() {
    List<Task> dropped;
    lock.lock();
    try {
      if (failure == null) {
        failure =
            new Failure(
                "abort()",
                new ColibriException(ErrorCode.ABORTED, "abort() was called on " + owner),
                true);
      }
      dropped = drainQueued();
    } finally {
      lock.unlock();
    }
    return () -> failAll(dropped);
  }

  /**
   * Refuses new calls, waits until the queued ones have run (each as long as it takes: a call
   * waits for a silent peer at most the communicator's timeout, and after a failure the rest fail
   * at once), then ends the thread. Called on the queue's own thread (a callback of one of its
   * futures), it runs the queued calls itself, in order. Idempotent.
   */
  public void close() {
    Thread w;
    boolean onWorker;
    lock.lock();
    try {
      closed = true;
      w = worker;
      onWorker = w == Thread.currentThread();
      if (!onWorker) {
        while (running != null || !queued.isEmpty()) {
          idle.awaitUninterruptibly();
        }
      }
    } finally {
      lock.unlock();
    }
    if (onWorker) {
      for (Task t = next(false); t != null; t = next(false)) {
        run(t);
      }
    }
    lock.lock();
    try {
      stopping = true;
      workOrStop.signalAll();
    } finally {
      lock.unlock();
    }
    if (w != null && !onWorker) {
      joinUninterruptibly(w);
    }
  }

  @Override
  public String toString() {
    return "CallQueue["
        + threadName
        + ", "
        + pending
        + " pending"
        + (failure != null ? ", stopped by " + failure.call : "")
        + (closed ? ", closed]" : "]");
  }

  // ---- the worker ----

  private void work() {
    for (Task t = next(true); t != null; t = next(true)) {
      run(t);
    }
  }

  /** The next queued call, now running; null when there is none (and, with wait, stopping). */
  private Task next(boolean wait) {
    lock.lock();
    try {
      while (wait && queued.isEmpty() && !stopping) {
        workOrStop.awaitUninterruptibly();
      }
      Task t = queued.pollFirst();
      running = t;
      return t;
    } finally {
      lock.unlock();
    }
  }

  /** Runs {@code t}; then counts it out before completing its future (see the comment). */
  private void run(Task t) {
    Throwable error = null;
    runner = Thread.currentThread();
    try {
      t.work.run();
    } catch (Throwable e) {
      error = e;
    } finally {
      runner = null;
      t.work = null;
    }
    List<Task> dropped = List.of();
    // The future completes with a ColibriException, as its javadoc says: anything else the work
    // threw is a bug of the library, wrapped as one.
    ColibriException c =
        error == null || error instanceof ColibriException
            ? (ColibriException) error
            : new ColibriException(
                ErrorCode.INTERNAL_ERROR,
                t.label
                    + " on "
                    + owner
                    + " threw "
                    + error
                    + ": please report this as a Colibri bug",
                error);
    lock.lock();
    try {
      running = null;
      if (c != null && failure == null) {
        failure = new Failure(t.label, c, false);
        dropped = drainQueued();
      }
      updatePending();
    } finally {
      lock.unlock();
    }
    // The count and the failure are settled before anyone is told: a thread that joins this
    // future and then makes a synchronous call must find the queue as this call left it.
    if (c == null) {
      t.future.succeed();
    } else {
      t.future.fail(c);
    }
    failAll(dropped);
  }

  // ---- helpers (lock held where noted) ----

  /** Lock held. Removes the queued calls; they are to be failed once the lock is released. */
  private List<Task> drainQueued() {
    List<Task> dropped = new ArrayList<>(queued);
    queued.clear();
    updatePending();
    return dropped;
  }

  /** Lock held. */
  private void updatePending() {
    pending = queued.size() + (running != null ? 1 : 0);
    if (pending == 0) {
      idle.signalAll();
    }
  }

  private void failAll(List<Task> dropped) {
    Failure f = failure;
    for (Task t : dropped) {
      t.future.fail(notRun(t.label, f));
    }
  }

  /** The error of a call that was not run because {@code f} stopped the queue. */
  private ColibriException notRun(String label, Failure f) {
    if (f.aborted) {
      return new ColibriException(
          ErrorCode.ABORTED,
          label
              + " on "
              + owner
              + " was not run:"
              + " abort() was called on this communicator before it started",
          f.error);
    }
    return new ColibriException(
        f.error.code(),
        label
            + " on "
            + owner
            + " was not run: "
            + f.call
            + " failed before it ("
            + f.error.code()
            + ": "
            + f.error.getMessage()
            + ")."
            + " After a failed call this rank's sequence of calls no longer matches its peers', so"
            + " the communicator takes no more calls: close it and create a new one",
        f.error);
  }

  private static void joinUninterruptibly(Thread t) {
    boolean interrupted = false;
    while (t.isAlive()) {
      try {
        t.join();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * The future of a queued call: only the queue completes it. A call cannot be taken back once
   * submitted (every rank submits the same calls in the same order, and its buffers are in use
   * until it returns), so cancel and the other ways to complete it from outside do nothing or are
   * refused. Dependent stages are ordinary CompletableFutures.
   */
  private static final class CallFuture extends CompletableFuture<Void> {
    void succeed() {
      super.complete(null);
    }

    void fail(Throwable error) {
      super.completeExceptionally(error);
    }

    /** Does nothing: returns false. Use {@link Communicator#abort()} to stop the calls. */
    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      return false;
    }

    /** Does nothing: returns false. */
    @Override
    public boolean complete(Void value) {
      return false;
    }

    /** Does nothing: returns false. */
    @Override
    public boolean completeExceptionally(Throwable ex) {
      return false;
    }

    @Override
    public void obtrudeValue(Void value) {
      throw refused("obtrudeValue");
    }

    @Override
    public void obtrudeException(Throwable ex) {
      throw refused("obtrudeException");
    }

    @Override
    public CompletableFuture<Void> completeAsync(
        Supplier<? extends Void> supplier, Executor executor) {
      throw refused("completeAsync");
    }

    @Override
    public CompletableFuture<Void> completeAsync(Supplier<? extends Void> supplier) {
      throw refused("completeAsync");
    }

    @Override
    public CompletableFuture<Void> orTimeout(long timeout, TimeUnit unit) {
      throw refused("orTimeout");
    }

    @Override
    public CompletableFuture<Void> completeOnTimeout(Void value, long timeout, TimeUnit unit) {
      throw refused("completeOnTimeout");
    }

    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new CompletableFuture<>();
    }

    private static ColibriException refused(String method) {
      return new ColibriException(
          ErrorCode.INVALID_USAGE,
          method
              + " is refused on the future of a Colibri call: it completes when the call returns,"
              + " as its buffers are in use until then. Wait with get(timeout, unit), use copy()."
              + method
              + "(...) for a stage of"
              + " your own, or call abort() on the communicator to stop its calls");
    }
  }
}
