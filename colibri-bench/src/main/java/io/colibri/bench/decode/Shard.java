/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

/**
 * What one rank of a tensor-parallel group holds of each matrix (Megatron-style): Q, K, V,
 * gate and up are split by their output columns (whole heads, equal parts of the MLP), O and
 * down by their input rows (the same ranges, so each rank's partial output needs one sum, the
 * all-reduce), the vocabulary head by its columns (gathered after it). The embedding and the
 * norm weights are whole on every rank.
 *
 * @param shape the model's shape (split over {@code tp} without a remainder)
 * @param tp the group's size
 * @param rank this rank, 0 to tp - 1
 */
public record Shard(ModelShape shape, int tp, int rank) {

  /** A range [start, end) of rows or columns. */
  public record Range(int start, int end) {
    /** @return end - start */
    public int size() {
      return end - start;
    }
  }

  /**
   * Checks the shard.
   *
   * @param shape the model's shape
   * @param tp the group's size
   * @param rank this rank
   * @throws IllegalArgumentException when the shape does not split over {@code tp}, or the rank
   *     is not in the group
   */
  public Shard {
    shape.check(tp);
    if (rank < 0 || rank >= tp) {
      throw new IllegalArgumentException("rank " + rank + " is not in a group of " + tp);
    }
  }

  private Range part(int total) {
    int per = total / tp;
    return new Range(rank * per, (rank + 1) * per);
  }

  /** @return this rank's query heads (as head indices) */
  public Range heads() {
    return part(shape.heads());
  }

  /** @return this rank's KV heads (as head indices) */
  public Range kvHeads() {
    return part(shape.kvHeads());
  }

  /** @return this rank's columns of Q, and rows of O */
  public Range qColumns() {
    Range h = heads();
    return new Range(h.start() * shape.headDim(), h.end() * shape.headDim());
  }

  /** @return this rank's columns of K and of V */
  public Range kvColumns() {
    Range h = kvHeads();
    return new Range(h.start() * shape.headDim(), h.end() * shape.headDim());
  }

  /** @return this rank's columns of gate and up, and rows of down */
  public Range mlpColumns() {
    return part(shape.intermediate());
  }

  /** @return this rank's columns of the vocabulary head: its part of the logits */
  public Range vocabColumns() {
    return part(shape.vocab());
  }
}
