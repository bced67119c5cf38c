/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Transport;
import io.colibri.UniqueId;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Ranks as separate JVMs ({@link RankProcess}): the id goes to the children as base64 on the
 * command line; each child checks its results element by element and the ranks compare checksums;
 * the test asserts every exit code and shows the children's output when one fails.
 */
class MultiProcessTest {

  static void assertAllExitZero(List<Procs.Child> children, long millis) throws Exception {
    long deadline = System.currentTimeMillis() + millis;
    List<Integer> codes = new ArrayList<>();
    for (Procs.Child c : children) {
      codes.add(c.waitFor(Math.max(1, deadline - System.currentTimeMillis())));
    }
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < children.size(); i++) {
      if (codes.get(i) != 0) {
        sb.append("\n ")
            .append(children.get(i).name)
            .append(" exited with ")
            .append(
                codes.get(i) == -1
                    ? "nothing: it did not finish in time and was killed"
                    : codes.get(i))
            .append(": ")
            .append(children.get(i).describe());
      }
    }
    assertTrue(sb.length() == 0, "rank processes failed:" + sb);
  }

  @ParameterizedTest(name = "{0} processes over {1}")
  @CsvSource({"2, SHM", "2, SOCKET", "4, SHM", "4, SOCKET"})
  @Timeout(180)
  void processesAsRanksGetCorrectResults(int n, Transport transport) throws Exception {
    UniqueId id = UniqueId.create();
    List<Procs.Child> children = new ArrayList<>();
    try {
      for (int r = 0; r < n; r++) {
        children.add(
            Procs.start(
                "rank " + r,
                null,
                "check",
                id.toString(),
                String.valueOf(r),
                String.valueOf(n),
                transport.name(),
                "60000"));
      }
      assertAllExitZero(children, 150_000);
      for (Procs.Child c : children) {
        assertTrue(c.printed("rank "), "child printed no summary: " + c.describe());
        assertTrue(
            c.line("rank ").contains(transport.configName()),
            "child should run over " + transport + ": " + c.describe());
      }
    } finally {
      children.forEach(c -> c.process.destroyForcibly());
    }
  }

  /** torchrun style: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE in each child's environment. */
  @Test
  @Timeout(120)
  void fromEnvironmentJoinsLikeTorchrun() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    int n = 2;
    List<Procs.Child> children = new ArrayList<>();
    try {
      for (int r = 0; r < n; r++) {
        children.add(
            Procs.start(
                "rank " + r,
                Map.of(
                    "MASTER_ADDR",
                    "127.0.0.1",
                    "MASTER_PORT",
                    String.valueOf(port),
                    "RANK",
                    String.valueOf(r),
                    "WORLD_SIZE",
                    String.valueOf(n)),
                "env",
                "-",
                "-",
                "-",
                "AUTO",
                "30000"));
      }
      assertAllExitZero(children, 100_000);
      assertEquals(n, children.stream().filter(c -> c.printed("rank ")).count());
    } finally {
      children.forEach(c -> c.process.destroyForcibly());
    }
  }
}
