/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Where the native core's log lines go. Under Java they go to
 * {@code System.getLogger("io.colibri")}, so JUL, SLF4J, Logback or Log4j route and format them
 * like the server's own; the native levels map to {@link System.Logger.Level}: error to ERROR,
 * warn to WARNING, info to INFO, debug to DEBUG. {@code -Dcolibri.logSink=stderr} or
 * {@code COLIBRI_LOG_SINK=stderr} keeps the native core's own lines on stderr instead.
 *
 * <p>The native core formats only the lines the logger takes: its threshold is the most verbose
 * level that the logger's {@code isLoggable} accepts, read when the library loads and at every
 * {@link Communicator#init}. After changing the logger's level at run time (a JUL
 * {@code setLevel} or {@code LogManager.updateConfiguration}, a Logback reconfiguration, a JMX
 * call), call {@link #refreshLevel()} for it to apply to the lines of communicators already open.
 * {@code colibri.logLevel} / {@code COLIBRI_LOG_LEVEL} replace the logger's level and a
 * builder's {@code Options.logLevel} raises it, never past what the logger takes.
 *
 * <p>Lines come from any thread, Colibri's own included (they are attached to the JVM as daemon
 * threads the first time they log); a handler must not call Colibri. A handler that throws loses
 * nothing: the line goes to stderr. Lines emitted while the JVM shuts down go to stderr.
 * docs/configuration.md ("Logging") says more.
 */
public final class Logging {
  /** The name of the logger native lines go to. */
  public static final String LOGGER_NAME = "io.colibri";

  private Logging() {}

  /**
   * Reads the level of logger {@value #LOGGER_NAME} again and sets the native core's threshold
   * from it. Cheap (a few {@code isLoggable} calls); call it after changing that level at run time.
   *
   * @return the native threshold now in effect (with {@code COLIBRI_LOG_SINK=stderr}: unchanged)
   * @throws ColibriException UNSUPPORTED if the native library cannot be loaded, INVALID_ARGUMENT
   *     if {@code colibri.logSink} / {@code COLIBRI_LOG_SINK} is neither jvm nor stderr
   */
  public static LogLevel refreshLevel() {
    return ProviderLookup.provider().refreshLogLevel();
  }
}
