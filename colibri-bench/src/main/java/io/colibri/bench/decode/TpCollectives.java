/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

/**
 * The two collectives a tensor-parallel decoder makes, on one rank: the sum of the row-parallel
 * layers' partial outputs (twice per layer) and the gathering of the vocabulary head's parts of
 * the logits (once per step). Every rank of the group calls them in the same order.
 */
public interface TpCollectives extends AutoCloseable {

  /** @return the group's size */
  int size();

  /** @return this rank */
  int rank();

  /**
   * Sums {@code x[0..count)} over the group's ranks, in place: afterwards every rank holds the
   * same sum.
   *
   * @param x the partial output, then the sum
   * @param count how many elements
   */
  void allReduceSum(float[] x, int count);

  /**
   * Gathers every rank's {@code part[0..count)} into {@code all}, rank-major: rank r's part at
   * {@code all[r * count ..]}.
   *
   * @param part this rank's part
   * @param count elements per rank
   * @param all size() × count elements, the same on every rank afterwards
   */
  void allGather(float[] part, int count, float[] all);

  /** Releases what the collectives hold (their buffers; the communicator is its owner's to close). */
  @Override
  void close();
}
