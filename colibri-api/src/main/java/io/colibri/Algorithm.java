/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Locale;

/**
 * Algorithm of a collective. {@link #code()} is the value of {@code clbAlgorithm_t}.
 *
 * <p>{@link #AUTO} lets Colibri pick by message size and topology; {@link #NONE} is only reported
 * by {@link Communicator#lastAlgorithm()} when nothing had to move (one rank, or count 0).
 */
public enum Algorithm {
  /** Pick by size: direct for small messages inside a host, ring otherwise. */
  AUTO(0),
  /** Ring reduce-scatter then all-gather, chunked and pipelined. */
  RING(1),
  /** Every rank reads its peers' inputs from shared memory in a fixed order. */
  DIRECT(2),
  /** Nothing moved. Reported only; cannot be forced. */
  NONE(3);

  private static final Algorithm[] BY_CODE = values();

  private final int code;

  Algorithm(int code) {
    this.code = code;
  }

  /** {@return the {@code clbAlgorithm_t} value} */
  public int code() {
    return code;
  }

  /**
   * {@return the lower-case name used by {@code COLIBRI_ALGORITHM}
   * ("auto", "ring", "direct", "none")}
   */
  public String configName() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * The algorithm whose {@code clbAlgorithm_t} value is {@code code}.
   *
   * @param code a {@code clbAlgorithm_t} value, 0..3
   * @return the algorithm with that code
   * @throws
   * ColibriException INVALID_ARGUMENT if no algorithm has that code
   */
  public static Algorithm fromCode(int code) {
    if (code < 0 || code >= BY_CODE.length) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "unknown clbAlgorithm_t " + code + ": valid codes are 0.." + (BY_CODE.length - 1));
    }
    return BY_CODE[code];
  }
}
