/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.Communicator;
import io.colibri.Options;
import io.colibri.UniqueId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;

/**
 * A tensor-parallel group of rank threads in this JVM, each with its own Colibri communicator
 * (one {@link UniqueId}, as a server that runs its ranks as threads makes them), each running a
 * decoder: the CPU one on host memory ({@link #run}) or any other ({@link #runRanks}). Checks
 * that every rank generated the same tokens.
 */
public final class LocalGroup {

  /**
   * What a group's run gave.
   *
   * @param tp the group's size
   * @param ranks each rank's generation
   * @param initNanos the slowest rank's communicator init
   */
  public record Result(int tp, List<Generation> ranks, long initNanos) {
    /** @return rank 0's generation (every rank's tokens are the same) */
    public Generation rank0() {
      return ranks.get(0);
    }
  }

  private LocalGroup() {}

  /** What one rank thread does with its communicator: its generation. */
  @FunctionalInterface
  public interface RankBody {
    /**
     * Runs this rank's part.
     *
     * @param rank the rank
     * @param comm its communicator (closed by the group afterwards)
     * @return what it generated
     * @throws Exception whatever the rank's work throws: the group reports it as the rank's failure
     */
    Generation run(int rank, Communicator comm) throws Exception;
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
  public static Result run(ModelShape shape, int tp, Options options, long seed, int prompt,
      int newTokens, boolean keepLogits, Function<TpCollectives, TpCollectives> wrap) {
    shape.check(tp);
    int maxCount = Math.max(shape.batch() * shape.hidden(), shape.batch() * shape.vocab() / tp);
    return runRanks(tp, options, (rank, comm) -> {
      try (TpCollectives c = wrap.apply(new ColibriHostCollectives(comm, maxCount))) {
        HostDecoder dec = new HostDecoder(new Shard(shape, tp, rank), new SeededWeights(seed), c);
        return Generation.run(dec, seed, prompt, newTokens, keepLogits);
      }
    });
  }

  /**
   * Runs {@code tp} rank threads, each with a communicator of one {@link UniqueId}, each doing
   * {@code body}; then checks that every rank generated the same tokens.
   *
   * @param tp the group's size
   * @param options the communicators' options
   * @param body what each rank does
   * @return the group's result
   * @throws IllegalStateException when a rank failed (its error as the cause) or the ranks'
   *     tokens differ
   */
  public static Result runRanks(int tp, Options options, RankBody body) {
    UniqueId id = UniqueId.create();
    ExecutorService pool = Executors.newFixedThreadPool(tp, r -> {
      Thread t = new Thread(r, "decode-rank");
      t.setDaemon(true);
      return t;
    });
    try {
      List<Future<Object[]>> futures = new ArrayList<>();
      for (int r = 0; r < tp; r++) {
        final int rank = r;
        futures.add(pool.submit(() -> {
          long t0 = System.nanoTime();
          try (Communicator comm = Communicator.init(id, rank, tp, options)) {
            long init = System.nanoTime() - t0;
            return new Object[] {body.run(rank, comm), init};
          }
        }));
      }
      List<Generation> gens = new ArrayList<>();
      long init = 0;
      for (int r = 0; r < tp; r++) {
        Object[] o;
        try {
          o = futures.get(r).get();
        } catch (ExecutionException e) {
          throw new IllegalStateException("rank " + r + " of " + tp + " failed: " + e.getCause().getMessage(),
              e.getCause());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted while rank " + r + " of " + tp + " ran", e);
        }
        gens.add((Generation) o[0]);
        init = Math.max(init, (Long) o[1]);
      }
      for (int r = 1; r < tp; r++) {
        if (!Arrays.deepEquals(gens.get(r).tokens(), gens.get(0).tokens())) {
          throw new IllegalStateException("rank " + r + " generated other tokens than rank 0");
        }
      }
      return new Result(tp, gens, init);
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * The check of TP=N against TP=1: whether the tokens are identical, and the largest difference
   * of any logit of any generated step.
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
    for (int n = 0; n < reference.logits().size(); n++) {
      float[] a = reference.logits().get(n);
      float[] b = other.logits().get(n);
      for (int i = 0; i < a.length; i++) {
        max = Math.max(max, Math.abs(a[i] - b[i]));
      }
    }
    return max;
  }
}
