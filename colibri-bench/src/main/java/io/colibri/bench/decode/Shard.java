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

  /**
   * This rank's rows of a matrix: the input rows of O and down are split, the rest whole.
   *
   * @param m the matrix
   * @return the rows this rank holds
   */
  public Range rows(SeededWeights.Matrix m) {
    return switch (m) {
      case O -> qColumns();
      case DOWN -> mlpColumns();
      case EMBED -> new Range(0, shape.vocab());
      default -> new Range(0, shape.hidden());
    };
  }

  /**
   * This rank's columns of a matrix: the outputs of Q, K, V, gate, up and the head are split,
   * those of O, down and the embedding whole.
   *
   * @param m the matrix
   * @return the columns this rank holds
   */
  public Range columns(SeededWeights.Matrix m) {
    return switch (m) {
      case Q -> qColumns();
      case K, V -> kvColumns();
      case GATE, UP -> mlpColumns();
      case HEAD -> vocabColumns();
      case O, DOWN, EMBED -> new Range(0, shape.hidden());
    };
  }

  /**
   * Checks that a group's collectives (or communicator) are this shard's rank of this shard's
   * group.
   *
   * @param size the group's size as the collectives see it
   * @param groupRank their rank
   * @throws IllegalArgumentException when they differ
   */
  public void checkGroup(int size, int groupRank) {
    if (size != tp || groupRank != rank) {
      throw new IllegalArgumentException(
          "the communicator is rank "
              + groupRank
              + " of "
              + size
              + ", the shard rank "
              + rank
              + " of "
              + tp);
    }
  }

  /**
   * Puts the all-gathered logits, rank-major ([rank][batch][this rank's part of the vocabulary]),
   * in vocabulary order per sequence ([batch][vocabulary]).
   *
   * @param gathered every rank's part, rank-major
   * @param logits batch × vocabulary
   */
  public void vocabularyOrder(float[] gathered, float[] logits) {
    int b = shape.batch();
    int vw = vocabColumns().size();
    for (int r = 0; r < tp; r++) {
      for (int i = 0; i < b; i++) {
        System.arraycopy(gathered, (r * b + i) * vw, logits, i * shape.vocab() + r * vw, vw);
      }
    }
  }
}
