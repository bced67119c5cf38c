/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Locale;

/**
 * How much the native core logs: the most verbose level it emits (to logger {@code io.colibri}
 * under Java, see {@link Logging}; else to stderr). {@link #code()} is the value of
 * {@code clbLogLevel_t}.
 */
public enum LogLevel {
  /** Nothing. */
  OFF(0),
  /** Errors only. */
  ERROR(1),
  /** Errors and warnings (the default). */
  WARN(2),
  /** Errors, warnings and informational lines. */
  INFO(3),
  /** Everything, debug lines included. */
  DEBUG(4);

  private final int code;

  LogLevel(int code) {
    this.code = code;
  }

  /** {@return the {@code clbLogLevel_t} value} */
  public int code() {
    return code;
  }

  /**
   * {@return the lower-case name used by {@code COLIBRI_LOG_LEVEL}
   * ("off", "error", "warn", "info", "debug")}
   */
  public String configName() {
    return name().toLowerCase(Locale.ROOT);
  }
}
