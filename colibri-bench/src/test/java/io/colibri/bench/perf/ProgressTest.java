/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.bench.MainRun;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Progress of a sweep: on stderr with --progress, never in the tables on stdout. */
class ProgressTest {

  private static String[] run(String... args) {
    MainRun r = MainRun.of(args);
    return new String[] {Integer.toString(r.rc), r.out, r.err};
  }

  @Test
  void options() throws Exception {
    assertNull(PerfConfig.parse(new String[0]).progress, "default: decided by the terminal");
    assertEquals(Boolean.TRUE, PerfConfig.parse(new String[] {"--progress"}).progress);
    assertEquals(Boolean.FALSE, PerfConfig.parse(new String[] {"--no-progress"}).progress);
  }

  @Test
  void stepsCountTheSizesThatRun() throws Exception {
    // 3 ranks, float32: allGather and reduceScatter need 12 B at least, so 8 B is skipped.
    PerfConfig c = PerfConfig.parse(new String[] {"--ranks", "3", "-b", "8", "-e", "64"});
    assertEquals(List.of(8L, 16L, 32L, 64L), Perf.runSizes(Collective.ALL_REDUCE, c));
    assertEquals(List.of(16L, 32L, 64L), Perf.runSizes(Collective.ALL_GATHER, c));
    // sendRecv runs every size, allToAll and allToAllv (3 ranks x 4 B) from 16 B.
    assertEquals(List.of(16L, 32L, 64L), Perf.runSizes(Collective.ALL_TO_ALLV, c));
    assertEquals(4 + 3 + 3 + 4 + 4 + 3 + 3, Perf.steps(c));
  }

  @Test
  @Timeout(120)
  void progressFlagPrintsALinePerSizeOnStderrOnly() {
    String[] r =
        run(
            "--threads",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "64",
            "-w",
            "0",
            "-n",
            "1",
            "--collectives",
            "allreduce,broadcast",
            "--progress");
    assertEquals("0", r[0], () -> "stdout:\n" + r[1] + "\nstderr:\n" + r[2]);
    List<String> lines = new ArrayList<>();
    for (String line : r[2].split("\n")) {
      if (!line.isBlank()) {
        lines.add(line);
      }
    }
    assertEquals(8, lines.size(), r[2]);
    assertTrue(lines.get(0).startsWith("colibri perf: [1/8] allReduce 8 B ("), lines.get(0));
    assertTrue(lines.get(3).startsWith("colibri perf: [4/8] allReduce 64 B ("), lines.get(3));
    assertTrue(lines.get(7).startsWith("colibri perf: [8/8] broadcast 64 B ("), lines.get(7));
    assertFalse(r[2].contains("\r") || r[2].contains("\033"), "no terminal codes in a pipe");
    assertFalse(r[1].contains("[1/8]") || r[1].contains("colibri perf:"), r[1]);
    assertTrue(r[1].contains("# allReduce") && r[1].contains("# broadcast"), r[1]);
  }

  @Test
  @Timeout(120)
  void noProgressByDefaultWhenNotOnATerminal() {
    String[] r =
        run(
            "--threads",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "16",
            "-w",
            "0",
            "-n",
            "1",
            "--collectives",
            "allreduce");
    assertEquals("0", r[0], () -> "stdout:\n" + r[1] + "\nstderr:\n" + r[2]);
    assertEquals("", r[2]);
  }

  @Test
  void onATerminalTheLineIsRewrittenAndErasedBeforeOtherOutput() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    Progress p = new Progress(e, true, 24);
    p.start(Collective.ALL_GATHER, 1 << 20);
    String shown = err.toString(StandardCharsets.UTF_8);
    assertTrue(shown.startsWith("\r[1/24] allGather 1 MiB ("), shown);
    assertTrue(shown.endsWith("\033[K"), "erases the rest of a longer previous line");
    assertFalse(shown.contains("\n"), "stays on one line");
    p.clear();
    assertTrue(err.toString(StandardCharsets.UTF_8).endsWith("\r\033[K"));
    int before = err.size();
    p.clear();
    assertEquals(before, err.size(), "nothing to erase twice");
    Progress.OFF.start(Collective.ALL_REDUCE, 8);
    Progress.OFF.clear();
  }
}
