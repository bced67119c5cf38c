/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Objects;

/**
 * A Colibri call failed, or refused what it was given. {@link #code()} says in which category; the
 * message says what failed and what to do about it.
 *
 * <p><b>The one exception type of the library.</b> Everything Colibri refuses or fails with is a
 * {@code ColibriException}, so one {@code catch} handles all of it:
 *
 * <ul>
 *   <li>{@link ErrorCode#INVALID_ARGUMENT}: a value Colibri does not accept, wherever it comes
 *       from: a collective's buffer, count, type, op or root; a rank or nranks; an
 *       {@link Options} value from the builder, a system property or an environment variable
 *       ({@code COLIBRI_TIMEOUT_MS=abc}); the bytes or text of a {@link UniqueId}; a launcher
 *       variable ({@link LaunchEnvironment}); a code that {@link DataType#fromCode},
 *       {@link Algorithm#fromCode} or {@link ErrorCode#fromCode} does not know; null where a value
 *       is needed. The message names the argument (or knob, and where its value came from), the
 *       value and what is valid;
 *   <li>{@link ErrorCode#INVALID_USAGE}: a call in the wrong state (after close, or while another
 *       thread is in a call on the same communicator);
 *   <li>the other codes: the call itself failed (a peer, a timeout, an abort, the system, memory).
 * </ul>
 *
 * <p>No {@code IllegalArgumentException}, {@code IllegalStateException} or
 * {@code NullPointerException} comes out of Colibri's API for something it refuses. Not covered:
 * errors of the JVM itself ({@code OutOfMemoryError} and the like), and the constructors of this
 * class, which throw {@code NullPointerException} for a null code (a bug in the code that makes
 * the exception, not a refusal of Colibri).
 */
public class ColibriException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Category of the failure. */
  private final ErrorCode code;

  /**
   * An exception of {@code code} with a message.
   *
   * @param code category of the failure; not null
   * @param message what failed and what to do about it
   */
  public ColibriException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  /**
   * An exception of {@code code} with a message and the failure that caused it.
   *
   * @param code category of the failure; not null
   * @param message what failed and what to do about it
   * @param cause the underlying failure, or null
   */
  public ColibriException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  /** {@return the category of the failure} */
  public ErrorCode code() {
    return code;
  }

  @Override
  public String toString() {
    return getClass().getName() + " [" + code + "]: " + getMessage();
  }
}
