/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Category of a {@link ColibriException}; mirrors {@code clbResult_t} in {@code colibri.h}
 * ({@code clbSuccess} has no counterpart: it is not an error).
 */
public enum ErrorCode {
  /** The caller passed something wrong; the message names it. */
  INVALID_ARGUMENT(1),
  /** A call in the wrong state: after close, or after an error. */
  INVALID_USAGE(2),
  /** An operating system call failed; the message carries errno and the call. */
  SYSTEM_ERROR(3),
  /** A Colibri bug: please report the message. */
  INTERNAL_ERROR(4),
  /** A peer failed, died, or disagreed (counts, collective). */
  REMOTE_ERROR(5),
  /** A peer did not answer within the configured timeout. */
  TIMEOUT(6),
  /** {@link Communicator#abort()} was called on this communicator or on a peer. */
  ABORTED(7),
  /** Wrong secret or protocol version at bootstrap. */
  AUTH_ERROR(8),
  /** The build or the machine lacks what was asked (GPU, RDMA, native library). */
  UNSUPPORTED(9),
  /** An allocation failed or would exceed the configured cap. */
  OUT_OF_MEMORY(10);

  private static final ErrorCode[] VALUES = values();

  private final int code;

  ErrorCode(int code) {
    this.code = code;
  }

  /** {@return the {@code clbResult_t} value} */
  public int code() {
    return code;
  }

  /**
   * The error whose {@code clbResult_t} value is {@code code}. A code this version does not know
   * (a newer native library) maps to {@link #INTERNAL_ERROR}, so that a failure is never lost.
   *
   * @param code a nonzero {@code clbResult_t} value
   * @return the error with that code, or {@link #INTERNAL_ERROR} for an unknown code
   * @throws ColibriException INVALID_ARGUMENT for 0 ({@code clbSuccess}), which is not an error
   */
  public static ErrorCode fromCode(int code) {
    if (code == 0) {
      throw new ColibriException(
          INVALID_ARGUMENT,
          "clbResult_t 0 is clbSuccess, not an error:" + " map only the codes of failed calls");
    }
    for (ErrorCode e : VALUES) {
      if (e.code == code) {
        return e;
      }
    }
    return INTERNAL_ERROR;
  }
}
