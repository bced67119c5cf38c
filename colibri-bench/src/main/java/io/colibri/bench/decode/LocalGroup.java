/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.UniqueId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletionService;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A tensor-parallel group of rank threads in this JVM, each with its own Colibri communicator
 * (one {@link UniqueId}, as a server that runs its ranks as threads makes them), each running a
 * decoder: the CPU one on host memory ({@link #run}) or any other ({@link #runRanks}). Checks
 * that every rank generated the same tokens.
 */
public final class LocalGroup {

  /**
   * GPU memory in use (the whole GPU's, cudaMemGetInfo; where ranks share a GPU it holds theirs
   * too) at the points of a rank's run, and what the library counts as its own.
   *
   * @param beforeInit with the CUDA context, before the library's init
   * @param afterInit after the library's init
   * @param afterModel after the model's weights, KV cache and buffers
   * @param afterGeneration after the prompt and the generation (the library's and cuBLAS's lazy
   *     allocations included)
   * @param libraryOwn the library's own count of its device memory, or -1 where it gives none
   * @param kvBytesPerToken the rank's KV cache per token (keys and values of every layer)
   */
  public record Memory(
      long beforeInit,
      long afterInit,
      long afterModel,
      long afterGeneration,
      long libraryOwn,
      long kvBytesPerToken) {}

  /**
   * One rank's run.
   *
   * @param generation what it generated
   * @param initNanos its communicator's init
   * @param memory its GPU memory figures, or null on the CPU
   */
  public record RankRun(Generation generation, long initNanos, Memory memory) {}

  /**
   * What a group's run gave.
   *
   * @param tp the group's size
   * @param ranks each rank's run
   */
  public record Result(int tp, List<RankRun> ranks) {
    /** @return rank 0's generation (every rank's tokens are the same) */
    public Generation rank0() {
      return ranks.get(0).generation();
    }

    /** @return the slowest rank's init */
    public long initNanos() {
      return ranks.stream().mapToLong(RankRun::initNanos).max().orElse(0);
    }
  }

  private LocalGroup() {}

  /** What one rank thread does: it makes its communicator, runs and closes it. */
  @FunctionalInterface
  public interface RankBody {
    /**
     * Runs this rank's part.
     *
     * @param rank the rank
     * @return its run
     * @throws Exception whatever the rank's work throws: the group reports it as the rank's failure
     */
    RankRun run(int rank) throws Exception;
  }

  /**
   * Runs {@code tp} rank threads on the CPU: each inits its communicator, draws its shard, runs
   * the prompt and the generation, and closes the communicator.
   *
   * @param shape the model's shape (split over tp)
   * @param tp the group's size
   * @param options the communicators' options (transport, timeout)
   * @param seed the model's and the prompt's seed
   * @param prompt prompt tokens per sequence
   * @param newTokens tokens generated per sequence
   * @param keepLogits whether to keep every step's logits
   * @param wrap wraps each rank's collectives (tests put a fault in; identity otherwise)
   * @return the group's result
   * @throws IllegalStateException when a rank failed (its error as the cause) or the ranks'
   *     tokens differ
   */
  public static Result run(
      ModelShape shape,
      int tp,
      Options options,
      long seed,
      int prompt,
      int newTokens,
      boolean keepLogits,
      Function<TpCollectives, TpCollectives> wrap) {
    shape.check(tp);
    UniqueId id = UniqueId.create();
    return runRanks(
        tp,
        rank -> hostRank(shape, tp, rank, id, options, seed, prompt, newTokens, keepLogits, wrap));
  }

  /**
   * One rank of {@link #run} (a thread here, or a process of {@link ProcessGroup}): inits its
   * communicator, draws its shard, runs the prompt and the generation, and closes the
   * communicator.
   *
   * @param shape the model's shape (split over tp)
   * @param tp the group's size
   * @param rank this rank
   * @param id the group's id, the same on every rank
   * @param options the communicator's options
   * @param seed the model's and the prompt's seed
   * @param prompt prompt tokens per sequence
   * @param newTokens tokens generated per sequence
   * @param keepLogits whether to keep every step's logits
   * @param wrap wraps the rank's collectives
   * @return the rank's run
   */
  static RankRun hostRank(
      ModelShape shape,
      int tp,
      int rank,
      UniqueId id,
      Options options,
      long seed,
      int prompt,
      int newTokens,
      boolean keepLogits,
      Function<TpCollectives, TpCollectives> wrap) {
    int maxCount = Math.max(shape.batch() * shape.hidden(), shape.batch() * shape.vocab() / tp);
    long t0 = System.nanoTime();
    try (Communicator comm = Communicator.init(id, rank, tp, options);
        TpCollectives c = wrap.apply(new ColibriHostCollectives(comm, maxCount))) {
      long init = System.nanoTime() - t0;
      HostDecoder dec = new HostDecoder(new Shard(shape, tp, rank), new SeededWeights(seed), c);
      return new RankRun(Generation.run(dec, seed, prompt, newTokens, keepLogits), init, null);
    }
  }

  /**
   * Runs {@code tp} rank threads, each doing {@code body}; then checks that every rank generated
   * the same tokens.
   *
   * @param tp the group's size
   * @param body what each rank does
   * @return the group's result
   * @throws IllegalStateException when a rank failed (its error as the cause) or the ranks'
   *     tokens differ
   */
  public static Result runRanks(int tp, RankBody body) {
    return runRanks(tp, body, true);
  }

  /**
   * Runs {@code tp} rank threads, each doing {@code body}.
   *
   * @param tp the group's size
   * @param body what each rank does
   * @param sameTokens whether every rank must have generated the same tokens (not so without
   *     collectives: {@code decode --library none})
   * @return the group's result
   * @throws IllegalStateException when a rank failed (its error as the cause) or, with
   *     {@code sameTokens}, the ranks' tokens differ
   */
  public static Result runRanks(int tp, RankBody body, boolean sameTokens) {
    ExecutorService pool =
        Executors.newFixedThreadPool(
            tp,
            r -> {
              Thread t = new Thread(r, "decode-rank");
              t.setDaemon(true);
              return t;
            });
    try {
      // Results in the order the ranks end: the first failure is reported at once (its peers,
      // which may wait for it, are interrupted when the pool shuts down), not after them. A peer
      // that learns of it may end first (a rank closes its communicator on the way out of its
      // failure): within a short grace, a rank's own failure wins over one a peer caused.
      CompletionService<RankRun> done = new ExecutorCompletionService<>(pool);
      List<Future<RankRun>> futures = new ArrayList<>();
      for (int r = 0; r < tp; r++) {
        final int rank = r;
        futures.add(done.submit(() -> body.run(rank)));
      }
      try {
        for (int i = 0; i < tp; i++) {
          Future<RankRun> f = done.take();
          Throwable failed = failure(f);
          if (failed == null) {
            continue;
          }
          int rank = futures.indexOf(f);
          long graceEnd = System.nanoTime() + GRACE_NANOS;
          for (int j = i + 1; j < tp && causedByPeer(failed); j++) {
            Future<RankRun> g =
                done.poll(Math.max(0, graceEnd - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (g == null) {
              break;
            }
            Throwable other = failure(g);
            if (other != null && !causedByPeer(other)) {
              failed = other;
              rank = futures.indexOf(g);
            }
          }
          throw new IllegalStateException(
              "rank " + rank + " of " + tp + " failed: " + failed.getMessage(), failed);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while the " + tp + " ranks ran", e);
      }
      List<RankRun> runs = new ArrayList<>();
      for (Future<RankRun> f : futures) {
        try {
          runs.add(f.get()); // every one has ended
        } catch (ExecutionException | InterruptedException e) {
          throw new IllegalStateException("a rank's result: " + e, e);
        }
      }
      if (sameTokens) {
        requireSameTokens(runs);
      }
      return new Result(tp, runs);
    } finally {
      pool.shutdownNow();
    }
  }

  /** How long a failure a peer caused waits for the failure of the rank that caused it. */
  static final long GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  private static Throwable failure(Future<RankRun> f) throws InterruptedException {
    try {
      f.get();
      return null;
    } catch (ExecutionException e) {
      return e.getCause();
    }
  }

  /**
   * Whether a rank's failure came from a peer's (Colibri's REMOTE_ERROR anywhere in its causes: a
   * peer failed, aborted or closed its communicator while this rank waited for it).
   *
   * @param t a rank's failure
   * @return true when a peer caused it
   */
  static boolean causedByPeer(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof ColibriException e && e.code() == ErrorCode.REMOTE_ERROR) {
        return true;
      }
    }
    return false;
  }

  /**
   * @param runs every rank's run
   * @throws IllegalStateException naming the first rank whose tokens are not rank 0's
   */
  static void requireSameTokens(List<RankRun> runs) {
    for (int r = 1; r < runs.size(); r++) {
      if (!Arrays.deepEquals(
          runs.get(r).generation().tokens(), runs.get(0).generation().tokens())) {
        throw new IllegalStateException("rank " + r + " generated other tokens than rank 0");
      }
    }
  }

  /**
   * The check of TP=N against TP=1: whether the tokens are identical, and the largest difference
   * of any logit of the prompt's last position and of any generated step.
   *
   * @param reference TP=1's generation (its logits kept)
   * @param other TP=N's generation (its logits kept)
   * @return the largest logit difference, or positive infinity when the tokens differ
   */
  public static double compare(Generation reference, Generation other) {
    if (!Arrays.deepEquals(reference.tokens(), other.tokens())) {
      return Double.POSITIVE_INFINITY;
    }
    double max = 0;
    if (reference.promptLogits() != null && other.promptLogits() != null) {
      max = largestDifference(reference.promptLogits(), other.promptLogits());
    }
    for (int n = 0; n < reference.logits().size(); n++) {
      max = Math.max(max, largestDifference(reference.logits().get(n), other.logits().get(n)));
    }
    return max;
  }

  /**
   * @param a some values
   * @param b as many values
   * @return the largest |a[i] - b[i]| (NaN where either is NaN)
   */
  static double largestDifference(float[] a, float[] b) {
    if (a.length != b.length) {
      throw new IllegalArgumentException(a.length + " logits against " + b.length);
    }
    double max = 0;
    for (int i = 0; i < a.length; i++) {
      double d = Math.abs(a[i] - b[i]);
      if (Double.isNaN(d)) {
        return Double.NaN;
      }
      max = Math.max(max, d);
    }
    return max;
  }
}
