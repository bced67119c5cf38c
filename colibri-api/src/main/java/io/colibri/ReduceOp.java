/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Reduction of all-reduce and reduce-scatter. {@link #code()} is the value of {@code clbRedOp_t}.
 * {@link #AVG} is the sum divided by the number of ranks.
 */
public enum ReduceOp {
  SUM(0),
  PROD(1),
  MIN(2),
  MAX(3),
  AVG(4);

  private final int code;

  ReduceOp(int code) {
    this.code = code;
  }

  /** The {@code clbRedOp_t} value. */
  public int code() {
    return code;
  }
}
