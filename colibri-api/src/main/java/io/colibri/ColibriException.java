/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Objects;

/**
 * A Colibri call failed. {@link #code()} says in which category; the message says what failed and
 * what to do about it.
 */
public class ColibriException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final ErrorCode code;

  public ColibriException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  public ColibriException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  /** The category of the failure. */
  public ErrorCode code() {
    return code;
  }

  @Override
  public String toString() {
    return getClass().getName() + " [" + code + "]: " + getMessage();
  }
}
