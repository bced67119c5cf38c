/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import io.colibri.LogLevel;
import io.colibri.Logging;
import io.colibri.Option;
import io.colibri.Options;
import io.colibri.UniqueId;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Native log lines reach {@code System.getLogger("io.colibri")}, here backed by
 * java.util.logging: with their level, from native threads too, and only at the levels the logger
 * takes (the native threshold follows it); a handler that throws harms nothing. (In JVMs of their
 * own: {@link io.colibri.it.NativeLogProcessTest}.)
 */
class NativeLogTest {
  /** Held: JUL keeps loggers only weakly. */
  private static final Logger JUL = Logger.getLogger(NativeLog.LOGGER_NAME);

  private final List<LogRecord> records = new CopyOnWriteArrayList<>();
  private final Handler collect =
      new Handler() {
        @Override
        public void publish(LogRecord r) {
          records.add(r);
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };
  private Level savedLevel;
  private boolean savedUseParent;

  @BeforeEach
  void addHandler() {
    NativeLibrary.ensureLoaded();
    assumeTrue(
        NativeLog.sink() == NativeLog.Sink.JVM, "this JVM runs with COLIBRI_LOG_SINK=stderr");
    savedLevel = JUL.getLevel();
    savedUseParent = JUL.getUseParentHandlers();
    JUL.setUseParentHandlers(false);
    JUL.addHandler(collect);
  }

  @AfterEach
  void restore() {
    JUL.removeHandler(collect);
    JUL.setLevel(savedLevel);
    JUL.setUseParentHandlers(savedUseParent);
    Logging.refreshLevel();
  }

  private List<LogRecord> matching(Predicate<LogRecord> p) {
    List<LogRecord> out = new ArrayList<>();
    for (LogRecord r : records) {
      if (p.test(r)) {
        out.add(r);
      }
    }
    return out;
  }

  private static void initAndClose(Options options) {
    try (UniqueId id = UniqueId.create();
        Communicator comm = Communicator.init(id, 0, 1, options)) {
      assertEquals(1, comm.size());
    }
  }

  private static boolean isReady(LogRecord r) {
    return r.getMessage().startsWith("rank 0/1 ready: transport ");
  }

  @Test
  void anInfoLineOfInitReachesAJulHandlerAsInfo() {
    JUL.setLevel(Level.INFO);
    assertEquals(LogLevel.INFO, Logging.refreshLevel());
    assertEquals(LogLevel.INFO, NativeLog.nativeLevel());
    initAndClose(Options.defaults());
    List<LogRecord> ready = matching(NativeLogTest::isReady);
    assertEquals(1, ready.size(), "records: " + messages());
    assertEquals(Level.INFO, ready.get(0).getLevel());
    assertEquals("io.colibri", ready.get(0).getLoggerName());
    assertFalse(ready.get(0).getMessage().contains("colibri INFO"), "the bare message, no prefix");
  }

  /**
   * A plain JVM (JUL at its default INFO, nothing set on io.colibri, no logLevel): warnings and
   * errors only, as docs/configuration.md says, so an init logs nothing.
   */
  @Test
  void byDefaultOnlyWarningsAndErrorsAreLogged() {
    assumeTrue(
        System.getProperty(Option.LOG_LEVEL.systemProperty()) == null
            && System.getenv(Option.LOG_LEVEL.environmentVariable()) == null,
        "a logLevel is set for this JVM");
    JUL.setLevel(null); // inherited from the root logger: INFO
    assertTrue(JUL.isLoggable(Level.INFO), "the root logger takes INFO");
    assertEquals(LogLevel.WARN, Logging.refreshLevel());
    initAndClose(Options.defaults());
    assertTrue(matching(NativeLogTest::isReady).isEmpty(), "records: " + messages());
  }

  @Test
  void aDebugLineArrivesAsFineWhenTheLoggerTakesIt() {
    JUL.setLevel(Level.FINE);
    assertEquals(LogLevel.DEBUG, Logging.refreshLevel());
    int[] out = new int[1];
    assertNotEquals(0, ColibriLib.clbTransportFromName("no-such-transport", out));
    List<LogRecord> debug = matching(r -> r.getMessage().contains("no-such-transport"));
    assertEquals(1, debug.size(), "records: " + messages());
    assertEquals(Level.FINE, debug.get(0).getLevel());
  }

  @Test
  @Timeout(30)
  void aLineOfANativeThreadArrives() throws InterruptedException {
    JUL.setLevel(Level.INFO);
    Logging.refreshLevel();
    UniqueId.create().close(); // its root's own thread logs that it stops
    List<LogRecord> stops;
    while ((stops = matching(r -> r.getMessage().contains("stops: its unique id was released")))
        .isEmpty()) {
      Thread.sleep(10);
    }
    assertEquals(Level.INFO, stops.get(0).getLevel());
    assertNotEquals(
        Thread.currentThread().getId(),
        stops.get(0).getLongThreadID(),
        "logged on the root's thread, not this one");
  }

  @Test
  void aLevelTheLoggerDropsIsNotEmittedByTheCore() {
    JUL.setLevel(Level.WARNING);
    assertEquals(LogLevel.WARN, Logging.refreshLevel());
    assertEquals(LogLevel.WARN, NativeLog.nativeLevel(), "the threshold is pushed to native code");
    initAndClose(Options.defaults());
    assertTrue(matching(NativeLogTest::isReady).isEmpty(), "records: " + messages());
    JUL.setLevel(Level.OFF);
    assertEquals(LogLevel.OFF, Logging.refreshLevel());
    assertEquals(LogLevel.OFF, NativeLog.nativeLevel());
    JUL.setLevel(Level.SEVERE);
    assertEquals(LogLevel.ERROR, Logging.refreshLevel());
    assertEquals(LogLevel.ERROR, NativeLog.nativeLevel());
  }

  @Test
  void initReadsTheLoggersLevelAgain() {
    JUL.setLevel(Level.WARNING);
    Logging.refreshLevel();
    JUL.setLevel(Level.INFO); // no refresh: the next init reads it
    initAndClose(Options.defaults());
    assertEquals(1, matching(NativeLogTest::isReady).size(), "records: " + messages());
    assertEquals(LogLevel.INFO, NativeLog.nativeLevel());
  }

  @Test
  void aBuilderLevelBeyondTheLoggerIsCappedAndSaidOnce() {
    JUL.setLevel(Level.INFO);
    initAndClose(Options.builder().logLevel(LogLevel.DEBUG).build());
    assertEquals(LogLevel.INFO, NativeLog.nativeLevel(), "never past what the logger takes");
    initAndClose(Options.builder().logLevel(LogLevel.DEBUG).build());
    List<LogRecord> advice = matching(r -> r.getMessage().contains("asks for more than logger"));
    assertTrue(advice.size() <= 1, "said once: " + messages());
    JUL.setLevel(Level.FINE);
    assertEquals(LogLevel.DEBUG, Logging.refreshLevel());
  }

  @Test
  void aHandlerThatThrowsHarmsNothingAndTheLineGoesToStderr() {
    JUL.setLevel(Level.INFO);
    Handler throwing =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            throw new IllegalStateException("a broken handler");
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    JUL.addHandler(throwing);
    PrintStream err = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    try {
      System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
      initAndClose(Options.defaults());
      initAndClose(Options.defaults());
    } finally {
      System.setErr(err);
      JUL.removeHandler(throwing);
    }
    String text = captured.toString(StandardCharsets.UTF_8);
    assertTrue(text.contains("colibri INFO rank 0/1 ready"), text);
  }

  @Test
  void anInvalidSinkIsRefusedByName() {
    assertEquals(NativeLog.Sink.JVM, NativeLog.configuredSink(null, null));
    assertEquals(NativeLog.Sink.JVM, NativeLog.configuredSink("", ""));
    assertEquals(NativeLog.Sink.STDERR, NativeLog.configuredSink(null, "stderr"));
    assertEquals(NativeLog.Sink.JVM, NativeLog.configuredSink("JVM", "stderr"), "property first");
    ColibriException e =
        assertThrows(ColibriException.class, () -> NativeLog.configuredSink(null, "file"));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(
        e.getMessage()
            .contains(
                "invalid logSink from environment COLIBRI_LOG_SINK: \"file\""
                    + " is not a log sink; valid values are jvm"),
        e.getMessage());
  }

  private String messages() {
    List<String> m = new ArrayList<>();
    for (LogRecord r : records) {
      m.add(r.getLevel() + " " + r.getMessage());
    }
    return m.toString();
  }
}
