/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Reduction of all-reduce and reduce-scatter. {@link #code()} is the value of {@code clbRedOp_t}.
 * {@link #AVG} is the sum divided by the number of ranks.
 */
public enum ReduceOp {
  /** Element-wise sum. */
  SUM(0),
  /** Element-wise product. */
  PROD(1),
  /** Element-wise minimum. */
  MIN(2),
  /** Element-wise maximum. */
  MAX(3),
  /** Element-wise sum divided by the number of ranks. */
  AVG(4);

  private final int code;

  ReduceOp(int code) {
    this.code = code;
  }

  /** {@return the {@code clbRedOp_t} value} */
  public int code() {
    return code;
  }
}
