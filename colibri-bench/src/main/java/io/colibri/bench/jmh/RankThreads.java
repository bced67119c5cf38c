/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs one task per rank, every rank on its own thread at the same time, and waits: for what
 * Colibri ranks must do together from their own threads (init, the first call of a size, which
 * meets the peers on the host, and close).
 */
final class RankThreads {
  private RankThreads() {}

  @FunctionalInterface
  interface RankTask {
    void run(int rank) throws Exception;
  }

  static void run(String what, int nranks, long timeoutSeconds, RankTask task) {
    ExecutorService pool =
        Executors.newFixedThreadPool(
            nranks,
            r -> {
              Thread t = new Thread(r, "colibri-" + what + "-rank");
              t.setDaemon(true);
              return t;
            });
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int r = 0; r < nranks; r++) {
        final int rank = r;
        futures.add(
            pool.submit(
                () -> {
                  task.run(rank);
                  return null;
                }));
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
      RuntimeException failure = null;
      for (int r = 0; r < nranks; r++) {
        try {
          futures.get(r).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          RuntimeException f =
              new IllegalStateException(
                  what + " failed on rank " + r + " of " + nranks + ": " + cause, cause);
          if (failure == null) {
            failure = f;
          } else {
            failure.addSuppressed(f);
          }
        } catch (TimeoutException e) {
          RuntimeException f =
              new IllegalStateException(
                  what
                      + " on rank "
                      + r
                      + " of "
                      + nranks
                      + " did not finish within "
                      + timeoutSeconds
                      + " s");
          if (failure == null) {
            failure = f;
          } else {
            failure.addSuppressed(f);
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(what + ": interrupted", e);
        }
      }
      if (failure != null) {
        throw failure;
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
