/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

/**
 * The model's weights, drawn from a seed with nothing to download: each element is a function of
 * (seed, matrix, layer, row, column) alone (a counter-based generator), so a rank draws its shard
 * without the rest, and every tensor-parallel size holds the same model. Elements are uniform
 * with mean 0 and standard deviation {@code scale} (1 / sqrt(fan-in) for the layers' matrices),
 * which keeps the activations of a random model in range. Norm weights are 1.
 */
public final class SeededWeights {

  /** The matrices, each stored row-major as [rows = inputs][columns = outputs]. */
  public enum Matrix {
    /** hidden × (heads × head size), column-parallel. */
    Q,
    /** hidden × (KV heads × head size), column-parallel. */
    K,
    /** hidden × (KV heads × head size), column-parallel. */
    V,
    /** (heads × head size) × hidden, row-parallel. */
    O,
    /** hidden × intermediate, column-parallel. */
    GATE,
    /** hidden × intermediate, column-parallel. */
    UP,
    /** intermediate × hidden, row-parallel. */
    DOWN,
    /** vocab × hidden, whole on every rank (a row per token). */
    EMBED,
    /** hidden × vocab, column-parallel (the vocabulary head). */
    HEAD
  }

  private static final double SQRT3 = Math.sqrt(3.0);

  private final long seed;

  /** @param seed the model's seed: the same seed, the same model */
  public SeededWeights(long seed) {
    this.seed = seed;
  }

  /**
   * The standard deviation of a matrix's elements: 1 / sqrt(its rows) for the layers' matrices
   * and the head, 1 for the embedding.
   *
   * @param m the matrix
   * @param shape the model's shape
   * @return the scale
   */
  public static double scale(Matrix m, ModelShape shape) {
    return switch (m) {
      case EMBED -> 1.0;
      case O -> 1.0 / Math.sqrt(shape.qWidth());
      case DOWN -> 1.0 / Math.sqrt(shape.intermediate());
      default -> 1.0 / Math.sqrt(shape.hidden());
    };
  }

  /**
   * The columns of a whole matrix of {@code shape}.
   *
   * @param m the matrix
   * @param shape the model's shape
   * @return its columns (outputs; the embedding's: hidden)
   */
  public static int columns(Matrix m, ModelShape shape) {
    return switch (m) {
      case Q -> shape.qWidth();
      case K, V -> shape.kvWidth();
      case O, DOWN, EMBED -> shape.hidden();
      case GATE, UP -> shape.intermediate();
      case HEAD -> shape.vocab();
    };
  }

  /**
   * One element of a whole matrix.
   *
   * @param m the matrix
   * @param layer its layer (0 for the embedding and the head)
   * @param row its row in the whole matrix
   * @param column its column in the whole matrix
   * @param columns the whole matrix's columns ({@link #columns})
   * @param scale the standard deviation ({@link #scale})
   * @return the element
   */
  public float value(Matrix m, int layer, long row, long column, long columns, double scale) {
    long stream = mix(seed ^ mix(((long) m.ordinal() << 32) | (layer & 0xffffffffL)));
    long bits = mix(stream + (row * columns + column) * 0x9E3779B97F4A7C15L);
    double u = (bits >>> 11) * 0x1.0p-53; // [0, 1)
    return (float) ((2.0 * u - 1.0) * SQRT3 * scale);
  }

  /**
   * Fills {@code dst} (row-major, {@code rows.size() × cols.size()}) with the block of rows
   * {@code rows} and columns {@code cols} of a whole matrix.
   *
   * @param dst where the block goes, from index 0
   * @param m the matrix
   * @param layer its layer
   * @param shape the model's shape
   * @param rows the block's rows in the whole matrix
   * @param cols the block's columns in the whole matrix
   */
  public void fill(
      float[] dst, Matrix m, int layer, ModelShape shape, Shard.Range rows, Shard.Range cols) {
    long columns = columns(m, shape);
    double scale = scale(m, shape);
    int w = cols.size();
    for (int r = rows.start(); r < rows.end(); r++) {
      int base = (r - rows.start()) * w;
      for (int c = cols.start(); c < cols.end(); c++) {
        dst[base + c - cols.start()] = value(m, layer, r, c, columns, scale);
      }
    }
  }

  /** SplitMix64's finalizer: a bijection of 64-bit words that mixes every bit into every bit. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
