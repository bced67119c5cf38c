/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import io.colibri.LogLevel;
import io.colibri.Option;
import io.colibri.Options;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Routes the native core's log lines to {@code System.getLogger("io.colibri")}, unless
 * {@code colibri.logSink} / {@code COLIBRI_LOG_SINK} is {@code stderr}.
 *
 * <p>With the JVM sink, the native threshold is warn, as on stderr, unless something asks for
 * more: {@code colibri.logLevel} / {@code COLIBRI_LOG_LEVEL} (process-wide), a level given to
 * JUL's logger io.colibri itself, or a communicator's {@code Options.logLevel} set on its builder
 * (which raises it). It never goes past what the logger takes, so a line the logger would drop is
 * not even formatted in native code; a request beyond that is said once in a warning. The logger's level
 * is read when the library loads, at every communicator init and by {@link #refresh()}.
 */
final class NativeLog {
  static final String LOGGER_NAME = "io.colibri";
  static final String SINK_PROPERTY = "colibri.logSink";
  static final String SINK_VARIABLE = "COLIBRI_LOG_SINK";

  /** Where native lines go. */
  enum Sink {
    /** {@code System.getLogger("io.colibri")}. */
    JVM,
    /** The native core's own stderr lines, as for programs without Java. */
    STDERR
  }

  private static final System.Logger LOG = System.getLogger(LOGGER_NAME);
  private static final AtomicBoolean HANDLER_FAILED = new AtomicBoolean();

  /** Null until {@link #install()}. */
  private static volatile Sink sink;

  /** Held for good: the native core keeps calling its address. */
  private static Callback callback;

  /** The most verbose logLevel a builder set for a communicator (0 when none did). */
  private static int requestedByBuilder;

  /** The last "the logger takes less" warning, so that it is said once. */
  private static String lastAdvice;

  private NativeLog() {}

  /**
   * Installs the sink once the library is loaded (called by {@link NativeLibrary}, once).
   *
   * @throws ColibriException INVALID_ARGUMENT if the sink's property or variable is not valid
   */
  static synchronized void install() {
    if (sink != null) {
      return;
    }
    Sink chosen = configuredSink(System.getProperty(SINK_PROPERTY), System.getenv(SINK_VARIABLE));
    if (chosen == Sink.JVM) {
      try {
        // Lines of the JVM's last moments (other hooks, native destructors) go to stderr rather
        // than into a JVM that is going away.
        Runtime.getRuntime().addShutdownHook(new Thread(NativeLog::uninstall, "colibri-log"));
      } catch (IllegalStateException shuttingDown) {
        chosen = Sink.STDERR;
      }
    }
    if (chosen == Sink.JVM) {
      callback = new Callback();
      sink = Sink.JVM;
      refresh();
      check(ColibriLib.clbSetLogCallback(callback, null), "clbSetLogCallback");
    } else {
      sink = Sink.STDERR;
    }
  }

  /** The sink named by {@code property}, else {@code variable}, else JVM. */
  static Sink configuredSink(String property, String variable) {
    String source = "system property " + SINK_PROPERTY;
    String text = property;
    if (text == null || text.isEmpty()) {
      source = "environment " + SINK_VARIABLE;
      text = variable;
    }
    if (text == null || text.isEmpty()) {
      return Sink.JVM;
    }
    for (Sink s : Sink.values()) {
      if (s.name().equalsIgnoreCase(text)) {
        return s;
      }
    }
    throw new ColibriException(
        ErrorCode.INVALID_ARGUMENT,
        "invalid logSink from "
            + source
            + ": \""
            + text
            + "\" is not a log sink; valid values are jvm (the logger io.colibri),"
            + " stderr. Fix it, or unset it to use the default jvm.");
  }

  static Sink sink() {
    return sink;
  }

  /**
   * Reads the logger's level again and sets the native threshold from it (JVM sink); returns the
   * threshold in effect. With the stderr sink, changes nothing.
   */
  static synchronized LogLevel refresh() {
    if (sink != Sink.JVM) {
      return nativeLevel();
    }
    int takes = loggerLevel();
    String[] source = new String[1];
    int processWide = processWideLevel(source);
    int ownLevel = julOwnLevel();
    // Warnings and errors unless something asks for more: logLevel (process-wide), the level
    // given to JUL's logger io.colibri itself, or a communicator's builder.
    int base = processWide >= 0 ? processWide : ownLevel >= 0 ? ownLevel : LogLevel.WARN.code();
    int wanted = Math.max(base, requestedByBuilder);
    if (wanted > takes) {
      String from =
          requestedByBuilder > Math.max(processWide, 0)
              ? "the Options of a communicator"
              : source[0];
      advise(
          "logLevel "
              + name(wanted)
              + " (from "
              + from
              + ") asks for more than logger "
              + LOGGER_NAME
              + " takes ("
              + javaLevel(takes)
              + " and above): lines beyond that are"
              + " not emitted. Lower the logger's level (java.util.logging: "
              + LOGGER_NAME
              + ".level = "
              + julName(wanted)
              + "; Logback, Log4j: "
              + LOGGER_NAME
              + " at "
              + javaLevel(wanted)
              + "), or send the lines to stderr with "
              + SINK_VARIABLE
              + "=stderr");
    }
    int threshold = Math.min(wanted, takes);
    check(ColibriLib.clbSetLogLevel(threshold), "clbSetLogLevel");
    return LogLevel.values()[threshold];
  }

  /**
   * The {@code clbConfig_t.logLevel} for a communicator with {@code options}. With the JVM sink
   * the threshold is set here (a builder's level taken into account) and the core is given OFF,
   * which raises nothing; with stderr, the options' level, which the core raises its threshold to.
   */
  static int levelForInit(Options options) {
    if (sink != Sink.JVM) {
      return options.logLevel().code();
    }
    synchronized (NativeLog.class) {
      if ("builder".equals(options.source(Option.LOG_LEVEL))) {
        requestedByBuilder = Math.max(requestedByBuilder, options.logLevel().code());
      }
      refresh();
    }
    return LogLevel.OFF.code();
  }

  /** The most verbose native level the logger takes: DEBUG 4, INFO 3, WARNING 2, ERROR 1, or 0. */
  static int loggerLevel() {
    for (int level = LogLevel.DEBUG.code(); level > 0; level--) {
      if (LOG.isLoggable(javaLevel(level))) {
        return level;
      }
    }
    return LogLevel.OFF.code();
  }

  /**
   * The level set on JUL's logger io.colibri itself (not inherited), as a native level, where
   * System.Logger is JUL (no bridge to another framework); -1 otherwise. Another framework's
   * level for io.colibri cannot be told from an inherited one, so there logLevel asks for more
   * than warnings.
   */
  static int julOwnLevel() {
    try {
      if (!System.LoggerFinder.getLoggerFinder()
          .getClass()
          .getName()
          .equals("sun.util.logging.internal.LoggingProviderImpl")) {
        return -1;
      }
      java.util.logging.Level l = java.util.logging.Logger.getLogger(LOGGER_NAME).getLevel();
      if (l == null) {
        return -1;
      }
      int v = l.intValue();
      if (v == java.util.logging.Level.OFF.intValue()) {
        return LogLevel.OFF.code();
      }
      return v >= java.util.logging.Level.SEVERE.intValue()
          ? LogLevel.ERROR.code()
          : v >= java.util.logging.Level.WARNING.intValue()
              ? LogLevel.WARN.code()
              : v >= java.util.logging.Level.CONFIG.intValue()
                  ? LogLevel.INFO.code()
                  : LogLevel.DEBUG.code();
    } catch (LinkageError e) { // a runtime without java.logging
      return -1;
    }
  }

  /** A native level as a {@link System.Logger.Level}: error, warn, info, debug. */
  static Level javaLevel(int nativeLevel) {
    switch (nativeLevel) {
      case 1:
        return Level.ERROR;
      case 2:
        return Level.WARNING;
      case 3:
        return Level.INFO;
      case 0:
        return Level.OFF;
      default:
        return Level.DEBUG;
    }
  }

  /** The native threshold now. */
  static LogLevel nativeLevel() {
    int[] level = new int[1];
    check(ColibriLib.clbGetLogLevel(level), "clbGetLogLevel");
    return LogLevel.values()[level[0]];
  }

  /**
   * {@code colibri.logLevel}, else {@code COLIBRI_LOG_LEVEL}, as a native level; -1 if neither
   * is set. A value that is not a level counts as unset here: communicator init refuses it.
   */
  private static int processWideLevel(String[] source) {
    String[][] candidates = {
      {
        System.getProperty(Option.LOG_LEVEL.systemProperty()),
        "system property " + Option.LOG_LEVEL.systemProperty()
      },
      {
        System.getenv(Option.LOG_LEVEL.environmentVariable()),
        "environment " + Option.LOG_LEVEL.environmentVariable()
      }
    };
    for (String[] c : candidates) {
      if (c[0] != null && !c[0].isEmpty()) {
        for (LogLevel l : LogLevel.values()) {
          if (l.configName().equalsIgnoreCase(c[0])) {
            source[0] = c[1];
            return l.code();
          }
        }
        return -1;
      }
    }
    return -1;
  }

  private static void advise(String advice) {
    if (!advice.equals(lastAdvice)) {
      lastAdvice = advice;
      LOG.log(Level.WARNING, advice);
    }
  }

  private static String name(int nativeLevel) {
    return LogLevel.values()[nativeLevel].configName();
  }

  private static String julName(int nativeLevel) {
    return nativeLevel >= LogLevel.DEBUG.code()
        ? "FINE"
        : nativeLevel == 3 ? "INFO" : nativeLevel == 2 ? "WARNING" : "SEVERE";
  }

  private static void uninstall() {
    ColibriLib.clbSetLogCallback(null, null);
  }

  private static void check(int rc, String call) {
    if (rc != 0) {
      throw NativeLibrary.error(rc, call);
    }
  }

  /** The callback: one line to the logger. Runs on any thread; throws nothing into native code. */
  private static final class Callback extends ColibriLib.LogCallback {
    @Override
    public void call(int level, BytePointer message, Pointer user) {
      String text = null;
      try {
        text = message == null ? "" : message.getString(StandardCharsets.UTF_8);
        LOG.log(javaLevel(level), text);
      } catch (Throwable t) {
        handlerFailed(level, text, t);
      }
    }
  }

  /** A handler of the logger threw: the line goes to stderr, and the first time, why. */
  private static void handlerFailed(int level, String text, Throwable t) {
    try {
      if (HANDLER_FAILED.compareAndSet(false, true)) {
        System.err.println(
            "colibri: logger "
                + LOGGER_NAME
                + " threw "
                + t
                + " for a native log"
                + " line; such lines go to stderr");
      }
      System.err.println(
          "colibri "
              + javaLevel(level).getName().toUpperCase(Locale.ROOT)
              + " "
              + (text == null ? "(the line could not be read)" : text));
    } catch (Throwable ignored) {
      // nothing is left to tell it to; the line is lost, the native thread goes on
    }
  }
}
