/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Native logging in fresh JVMs ({@link LogProcess}): the JVM sink is the default,
 * {@code COLIBRI_LOG_SINK=stderr} keeps the native stderr lines off the logger, and lines emitted
 * while the JVM exits, from Java and native threads, with a communicator left open, crash nothing
 * (under -Xcheck:jni, which also reports misuse of JNI in the callback).
 */
class NativeLogProcessTest {

  private static Procs.Child start(String name, List<String> jvmArgs, String mode, String... env)
      throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(Procs.javaBinary());
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add("-Xmx128m");
    cmd.add("-XX:+UseSerialGC");
    cmd.add("-XX:TieredStopAtLevel=1");
    cmd.addAll(jvmArgs);
    cmd.add(LogProcess.class.getName());
    cmd.add(mode);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().remove("COLIBRI_LOG_SINK");
    pb.environment().remove("COLIBRI_LOG_LEVEL");
    for (int i = 0; i + 1 < env.length; i += 2) {
      pb.environment().put(env[i], env[i + 1]);
    }
    return new Procs.Child(name, pb.start());
  }

  @Test
  @Timeout(120)
  void theJvmSinkIsTheDefault() throws Exception {
    Procs.Child c = start("jvm sink", List.of(), "init");
    assertEquals(0, c.waitFor(90_000), c.describe());
    assertTrue(c.printed("INIT OK 0"), c.describe());
    assertTrue(c.printed("JUL INFO rank 0/1 ready: transport "), c.describe());
    assertFalse(c.err.stream().anyMatch(l -> l.contains("colibri INFO")), c.describe());
  }

  @Test
  @Timeout(120)
  void theStderrSinkKeepsTheNativeLinesOffTheLogger() throws Exception {
    Procs.Child c =
        start(
            "stderr sink",
            List.of("-Dcolibri.logSink=stderr"),
            "init",
            "COLIBRI_LOG_LEVEL",
            "info");
    assertEquals(0, c.waitFor(90_000), c.describe());
    assertTrue(
        c.err.stream()
            .anyMatch(
                l ->
                    l.matches(
                        "\\d\\d:\\d\\d:\\d\\d\\.\\d{3} colibri INFO \\[pid \\d+\\] rank 0/1 ready:"
                            + " .*")),
        c.describe());
    assertFalse(
        c.out.stream().anyMatch(l -> l.startsWith("JUL") && l.contains("ready")), c.describe());
  }

  @Test
  @Timeout(240)
  void linesWhileTheJvmExitsWithACommunicatorOpenCrashNothing() throws Exception {
    for (String mode : new String[] {"exit", "return", "exit"}) {
      Procs.Child c = start(mode, List.of("-Xcheck:jni"), mode);
      assertEquals(0, c.waitFor(90_000), c.describe());
      assertTrue(c.printed("LEAVING"), c.describe());
      assertTrue(c.printed("JUL FINE "), "no DEBUG line: " + c.describe());
      assertTrue(
          c.out.stream().anyMatch(l -> l.startsWith("JUL INFO ") && l.contains(" stops: ")),
          "no line of a root's own thread: " + c.describe());
      for (List<String> lines : List.of(c.out, c.err)) {
        assertFalse(
            lines.stream()
                .anyMatch(
                    l ->
                        l.contains("SIGSEGV")
                            || l.contains("hs_err")
                            || l.contains("fatal error")
                            || l.contains("Exception")
                            || l.contains("Could not")
                            || l.contains("WARNING in native method")),
            c.describe());
      }
    }
  }
}
