/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.UniqueId;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Ranks in JVMs of their own that disagree on what every rank must share: each rank's init fails
 * with a message that names the difference, within 2 s of the last rank's start although the
 * timeout is 20 s (a rank that cannot be trusted to hold the secret is the exception: it fails at
 * once, and the root's rank names it at its own, short, timeout).
 */
class AgreementTest {

  /** One rank process's init: its outcome line and when init started and ended. */
  record Init(Procs.Child child, String failed, long startMs, long endMs) {}

  static List<Init> run(List<Procs.Child> children) throws Exception {
    List<Init> out = new ArrayList<>();
    try {
      for (Procs.Child c : children) {
        int code = c.waitFor(60_000);
        assertEquals(3, code, "init should fail:\n" + c.describe());
        String start = c.line("INIT START ");
        String end = c.line("INIT END ");
        assertNotNull(start, c.describe());
        assertNotNull(end, c.describe());
        out.add(
            new Init(
                c,
                c.line("FAILED "),
                Long.parseLong(start.substring(11)),
                Long.parseLong(end.substring(9))));
      }
    } finally {
      children.forEach(c -> c.process.destroyForcibly());
    }
    return out;
  }

  static long lastStart(List<Init> inits) {
    return inits.stream().mapToLong(Init::startMs).max().orElseThrow();
  }

  static void assertFailsAtOnce(Init i, long lastStart) {
    long ms = i.endMs() - lastStart;
    assertTrue(
        ms < 2000,
        i.child().name
            + " should fail within 2 s of the last rank's start, "
            + "not at its 20 s timeout; took "
            + ms
            + " ms: "
            + i.failed());
  }

  static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  /** A torchrun-style rank: MASTER_ADDR ... WORLD_SIZE, and what else it is given. */
  static Procs.Child envRank(
      int rank, String addr, int port, int worldSize, long timeoutMs, Map<String, String> more)
      throws Exception {
    Map<String, String> env =
        new HashMap<>(
            Map.of(
                "MASTER_ADDR",
                addr,
                "MASTER_PORT",
                String.valueOf(port),
                "RANK",
                String.valueOf(rank),
                "WORLD_SIZE",
                String.valueOf(worldSize),
                "COLIBRI_TRANSPORT",
                ""));
    env.putAll(more);
    return Procs.start(
        "rank " + rank, env, "envinit", "-", "-", "-", "-", String.valueOf(timeoutMs));
  }

  /** One rank says WORLD_SIZE=3, the other 2: the root refuses it and tells both at once. */
  @Test
  @Timeout(120)
  void oneRankWithAnotherWorldSize() throws Exception {
    int port = freePort();
    List<Init> inits =
        run(
            List.of(
                envRank(0, "127.0.0.1", port, 2, 20_000, Map.of()),
                envRank(1, "127.0.0.1", port, 3, 20_000, Map.of())));
    for (Init i : inits) {
      assertNotNull(i.failed(), i.child().describe());
      assertTrue(
          i.failed().startsWith("FAILED INVALID_ARGUMENT")
              && i.failed().contains("nranks=3")
              && i.failed().contains("nranks=2")
              && i.failed().contains("every rank must pass the same nranks"),
          i.child().describe());
      assertFailsAtOnce(i, lastStart(inits));
    }
  }

  /** The user's case: COLIBRI_TRANSPORT=socket on rank 1 only; rank 0 resolves auto to shm. */
  @Test
  @Timeout(120)
  void transportSocketOnOneRankOnly() throws Exception {
    try (UniqueId id = UniqueId.create()) {
      List<Procs.Child> children = new ArrayList<>();
      for (int r = 0; r < 2; r++) {
        children.add(
            Procs.start(
                "rank " + r,
                Map.of("COLIBRI_TRANSPORT", r == 1 ? "socket" : ""),
                "init",
                id.toString(),
                String.valueOf(r),
                "2",
                "-",
                "20000"));
      }
      List<Init> inits = run(children);
      for (Init i : inits) {
        assertNotNull(i.failed(), i.child().describe());
        assertTrue(
            i.failed().startsWith("FAILED INVALID_USAGE")
                && i.failed()
                    .contains(
                        "COLIBRI_TRANSPORT differs across ranks: rank 0 resolved shm, "
                            + "rank 1 resolved socket")
                && i.failed().contains("alike on every rank"),
            i.child().describe());
        assertFailsAtOnce(i, lastStart(inits));
      }
    }
  }

  /**
   * Rank 1 holds another secret (another COLIBRI_BOOTSTRAP_SECRET, so another UniqueId), and the
   * launcher gave MASTER_ADDR=0.0.0.0. Rank 1 fails at once and names the root by an address
   * someone can reach; the root does not fail rank 0 for a connection that proved nothing (anyone
   * could send one), so rank 0 learns of it at its timeout (3 s here).
   */
  @Test
  @Timeout(120)
  void uniqueIdWithAWrongSecretOnOneRank() throws Exception {
    int port = freePort();
    List<Init> inits =
        run(
            List.of(
                envRank(
                    0, "0.0.0.0", port, 2, 3_000, Map.of("COLIBRI_BOOTSTRAP_SECRET", "right one")),
                envRank(
                    1,
                    "0.0.0.0",
                    port,
                    2,
                    20_000,
                    Map.of("COLIBRI_BOOTSTRAP_SECRET", "wrong one"))));
    Init root = inits.get(0);
    Init wrong = inits.get(1);
    assertNotNull(wrong.failed(), wrong.child().describe());
    assertTrue(
        wrong.failed().startsWith("FAILED AUTH_ERROR")
            && wrong.failed().contains("wrong secret")
            && wrong.failed().contains("the bootstrap root at 127.0.0.1:" + port),
        wrong.child().describe());
    assertFalse(
        wrong.failed().contains("0.0.0.0"),
        "the root is named by an address that can be reached: " + wrong.failed());
    assertFailsAtOnce(wrong, lastStart(inits));
    assertNotNull(root.failed(), root.child().describe());
    assertTrue(
        root.failed().startsWith("FAILED TIMEOUT")
            && root.failed()
                .contains(
                    "Meanwhile the root refused 1 connection(s) that hold another "
                        + "secret than the communicator's (the last from 127.0.0.1:")
            && root.failed().contains("is a rank running with another secret or address?")
            && root.failed().contains("with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE"),
        root.child().describe());
    assertFalse(root.failed().contains("0.0.0.0"), root.failed());
    long rootMs = root.endMs() - root.startMs();
    assertTrue(rootMs >= 2_900 && rootMs < 10_000, "rank 0 is told at its 3 s timeout: " + rootMs);
  }
}
