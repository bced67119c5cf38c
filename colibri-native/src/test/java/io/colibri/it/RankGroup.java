/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.UniqueId;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * N threads acting as the N ranks of one communicator. Each rank has its own thread (every call on
 * a rank's communicator runs on that thread) and its own reusable buffers. {@link #run} runs a
 * function on every rank at once and waits with a deadline: a rank that does not return in time
 * makes the call abort every communicator and fail with a thread dump, instead of hanging the build.
 */
final class RankGroup implements AutoCloseable {

  /** What a function run on a rank gets. */
  static final class Rank {
    final int rank;
    final int size;
    Communicator comm;
    final GuardedBuffer send = new GuardedBuffer();
    final GuardedBuffer recv = new GuardedBuffer();
    final GuardedBuffer input = new GuardedBuffer();
    final GuardedBuffer first = new GuardedBuffer();
    final Map<String, Object> state = new HashMap<>();

    Rank(int rank, int size) {
      this.rank = rank;
      this.size = size;
    }
  }

  @FunctionalInterface
  interface RankFunction<T> {
    T apply(Rank r) throws Exception;
  }

  final int size;
  final Options options;
  final Duration callTimeout;
  private final Rank[] ranks;
  private final ExecutorService[] threads;
  private boolean broken;

  private RankGroup(int size, Options options, Duration callTimeout) {
    this.size = size;
    this.options = options;
    this.callTimeout = callTimeout;
    this.ranks = new Rank[size];
    this.threads = new ExecutorService[size];
    for (int r = 0; r < size; r++) {
      ranks[r] = new Rank(r, size);
      final int rank = r;
      threads[r] =
          Executors.newSingleThreadExecutor(
              task -> {
                Thread t = new Thread(task, "rank-" + rank + "-of-" + size);
                t.setDaemon(true);
                return t;
              });
    }
  }

  /** Creates the id here and every rank's communicator on its thread, all at once. */
  static RankGroup start(int size, Options options, Duration callTimeout) {
    RankGroup g = new RankGroup(size, options, callTimeout);
    UniqueId id = UniqueId.create();
    try {
      g.run(
          "init",
          r -> {
            r.comm = Communicator.init(id, r.rank, size, options);
            return null;
          });
    } catch (RuntimeException | Error e) {
      g.close();
      throw e;
    }
    return g;
  }

  Communicator comm(int rank) {
    return ranks[rank].comm;
  }

  Rank rank(int rank) {
    return ranks[rank];
  }

  /** True after a collective failed or hung: the communicators cannot be used any more. */
  boolean isBroken() {
    return broken;
  }

  /**
   * Runs {@code fn} on every rank and returns the results by rank. If any rank throws, fails with
   * an AssertionError that shows every rank's exception; if any rank is still running after the
   * call timeout, aborts every communicator and fails with the stacks of the stuck ranks.
   */
  <T> List<T> run(String what, RankFunction<T> fn) {
    List<Future<T>> futures = submit(fn);
    return collect(what, futures);
  }

  /** Like {@link #run} but only on the given ranks (the others do nothing). */
  <T> List<T> runOn(String what, int[] which, RankFunction<T> fn) {
    List<Future<T>> futures = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      futures.add(null);
    }
    for (int r : which) {
      Rank rank = ranks[r];
      futures.set(r, threads[r].submit(() -> fn.apply(rank)));
    }
    return collect(what, futures);
  }

  private <T> List<Future<T>> submit(RankFunction<T> fn) {
    List<Future<T>> futures = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      Rank rank = ranks[r];
      futures.add(threads[r].submit(() -> fn.apply(rank)));
    }
    return futures;
  }

  private <T> List<T> collect(String what, List<Future<T>> futures) {
    long deadline = System.nanoTime() + callTimeout.toNanos();
    List<T> results = new ArrayList<>();
    StringBuilder failures = new StringBuilder();
    List<Throwable> causes = new ArrayList<>();
    List<Integer> stuck = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      Future<T> f = futures.get(r);
      if (f == null) {
        results.add(null);
        continue;
      }
      try {
        results.add(f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
      } catch (TimeoutException e) {
        stuck.add(r);
        results.add(null);
      } catch (ExecutionException e) {
        Throwable c = e.getCause();
        causes.add(c);
        failures.append("\n  rank ").append(r).append(": ").append(c);
        if (c instanceof ColibriException
            && ((ColibriException) c).code() != ErrorCode.INVALID_ARGUMENT) {
          broken = true;
        }
        results.add(null);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(what + ": interrupted", e);
      }
    }
    if (!stuck.isEmpty()) {
      broken = true;
      StringBuilder sb =
          new StringBuilder(
              what
                  + ": rank(s) "
                  + stuck
                  + " of "
                  + size
                  + " did not return within "
                  + callTimeout.toMillis()
                  + " ms (hang?); stacks:");
      for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
        for (int r : stuck) {
          if (e.getKey().getName().equals("rank-" + r + "-of-" + size)) {
            sb.append("\n  ").append(e.getKey().getName());
            for (StackTraceElement s : e.getValue()) {
              sb.append("\n    at ").append(s);
            }
          }
        }
      }
      for (Rank rank : ranks) {
        if (rank.comm != null) {
          try {
            rank.comm.abort();
          } catch (RuntimeException ignored) {
            // best effort: we are already failing
          }
        }
      }
      for (int r : stuck) {
        try {
          futures.get(r).get(30, TimeUnit.SECONDS);
          sb.append("\n  rank ").append(r).append(" returned after the abort");
        } catch (Exception e) {
          sb.append("\n  rank ").append(r).append(" after the abort: ").append(e);
        }
      }
      if (failures.length() > 0) {
        sb.append("\n other ranks failed:").append(failures);
      }
      AssertionError err = new AssertionError(sb.toString());
      causes.forEach(err::addSuppressed);
      throw err;
    }
    if (failures.length() > 0) {
      AssertionError err =
          new AssertionError(
              what + " failed on " + causes.size() + " of " + size + " rank(s):" + failures,
              causes.get(0));
      for (int i = 1; i < causes.size(); i++) {
        err.addSuppressed(causes.get(i));
      }
      throw err;
    }
    return results;
  }

  /** Closes every communicator, each on its own thread and all at once, then stops the threads. */
  @Override
  public void close() {
    List<Future<?>> futures = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      Rank rank = ranks[r];
      futures.add(
          threads[r].submit(
              () -> {
                if (rank.comm != null) {
                  rank.comm.close();
                }
                return null;
              }));
    }
    StringBuilder problems = new StringBuilder();
    for (int r = 0; r < size; r++) {
      try {
        futures.get(r).get(callTimeout.toMillis() + 15_000, TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        problems.append("\n  rank ").append(r).append(": ").append(e);
      }
    }
    for (ExecutorService t : threads) {
      t.shutdownNow();
    }
    if (problems.length() > 0 && !broken) {
      throw new AssertionError("close of a group of " + size + " ranks failed:" + problems);
    }
  }
}
