/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.VersionCheck;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Failures: a peer killed mid-collective, abort() and close() from another thread, wrong secret,
 * wrong protocol version, mismatched calls across ranks, and a rank that never joins. Each checks
 * the ErrorCode, that the message says what happened, and that nothing hangs.
 */
class FaultTest {
  static final long TIMEOUT_MS = 5000;

  static Options options(Transport transport, Algorithm algorithm, long timeoutMs) {
    return Options.builder()
        .transport(transport)
        .algorithm(algorithm)
        .timeout(Duration.ofMillis(timeoutMs))
        .build();
  }

  // ---- a peer process killed with SIGKILL while the others loop over collectives ----

  @ParameterizedTest(name = "kill -9 of rank 1 of 3 over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(120)
  void killedPeerMakesOthersFailWithinTimeoutAndCloseCleanly(Transport transport) throws Exception {
    int n = 3;
    UniqueId id = UniqueId.create();
    List<Procs.Child> children = new ArrayList<>();
    try {
      for (int r = 0; r < n; r++) {
        children.add(
            Procs.start(
                "rank " + r,
                null,
                "loop",
                id.toString(),
                String.valueOf(r),
                String.valueOf(n),
                transport.name(),
                String.valueOf(TIMEOUT_MS)));
      }
      long deadline = System.currentTimeMillis() + 60_000;
      while (!children.stream().allMatch(c -> c.printed("READY"))) {
        if (System.currentTimeMillis() > deadline
            || children.stream().anyMatch(c -> !c.process.isAlive())) {
          fail("the ranks did not all start looping:\n" + describeAll(children));
        }
        Thread.sleep(20);
      }
      Thread.sleep(200); // well inside the loop
      long killedAt = System.currentTimeMillis();
      children.get(1).process.destroyForcibly();
      children.get(1).process.waitFor(10, TimeUnit.SECONDS);

      for (int r : new int[] {0, 2}) {
        Procs.Child c = children.get(r);
        int code = c.waitFor(TIMEOUT_MS + 20_000);
        assertEquals(
            3,
            code,
            "rank "
                + r
                + " should report the failure, close and exit 3 (-1:"
                + " it hung):\n"
                + c.describe());
        String failed = c.line("FAILED ");
        assertNotNull(failed, c.describe());
        String[] parts = failed.split(" ", 4);
        ErrorCode ec = ErrorCode.valueOf(parts[1]);
        long detectedAfter = Long.parseLong(parts[2]) - killedAt;
        assertTrue(
            detectedAfter <= TIMEOUT_MS,
            "rank "
                + r
                + " noticed the death "
                + detectedAfter
                + " ms after the kill, more than the "
                + TIMEOUT_MS
                + " ms timeout: "
                + failed);
        if (transport == Transport.SHM) {
          // Shared memory sees the dead pid directly: a remote error naming rank 1, fast.
          assertEquals(ErrorCode.REMOTE_ERROR, ec, failed);
          assertTrue(parts[3].contains("rank 1"), "message should name the dead rank: " + failed);
          assertTrue(
              detectedAfter < 2000,
              "a dead shm peer should be seen within 2 s, took "
                  + detectedAfter
                  + " ms: "
                  + failed);
        } else {
          // Over sockets, a peer that died is a remote error (its connection closed), or a
          // timeout for a rank that only waits on a live peer that itself failed.
          assertTrue(
              ec == ErrorCode.REMOTE_ERROR || ec == ErrorCode.TIMEOUT,
              "a killed peer should surface as REMOTE_ERROR (or TIMEOUT), got " + failed);
        }
        assertTrue(c.printed("CLOSED"), "close() after the failure should return: " + c.describe());
      }
    } finally {
      children.forEach(c -> c.process.destroyForcibly());
    }
  }

  private static String describeAll(List<Procs.Child> children) {
    StringBuilder sb = new StringBuilder();
    children.forEach(c -> sb.append(' ').append(c.describe()).append('\n'));
    return sb.toString();
  }

  // ---- a call refused on one rank: its peers are told at once ----

  @ParameterizedTest(name = "a heap buffer refused on rank 1 of 3 over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(120)
  void aCallRefusedOnOneRankFailsItsPeersAtOnceNamingTheRankAndTheReason(Transport transport)
      throws Exception {
    long timeoutMs = 60_000;
    RankGroup g =
        RankGroup.start(3, options(transport, Algorithm.AUTO, timeoutMs), Duration.ofSeconds(90));
    try {
      long t0 = System.nanoTime();
      List<CompletableFuture<Throwable>> peers = new ArrayList<>();
      for (int r : new int[] {0, 2}) {
        Communicator c = g.comm(r);
        ByteBuffer b = ByteBuffer.allocateDirect(4096).order(ByteOrder.nativeOrder());
        peers.add(
            CompletableFuture.supplyAsync(
                () -> catching(() -> c.allReduce(b, b, 1024, DataType.FLOAT32, ReduceOp.SUM))));
      }
      Thread.sleep(100); // the peers are waiting by now (one that comes later finds the notice)
      Communicator c1 = g.comm(1);
      ByteBuffer heap = ByteBuffer.allocate(4096);
      Throwable own =
          catching(() -> c1.allReduce(heap, heap, 1024, DataType.FLOAT32, ReduceOp.SUM));
      assertCode(ErrorCode.INVALID_ARGUMENT, own, "rank 1's allReduce of a heap buffer");
      assertTrue(own.getMessage().contains("heap buffer"), own.getMessage());
      assertTrue(own.getMessage().contains("its peers told at once"), own.getMessage());
      for (int i = 0; i < 2; i++) {
        Throwable t = peers.get(i).get(timeoutMs, TimeUnit.MILLISECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        String who = "rank " + (i == 0 ? 0 : 2) + "'s allReduce";
        assertCode(ErrorCode.REMOTE_ERROR, t, who);
        assertTrue(t.getMessage().contains("rank 1 refused its allReduce"), t.getMessage());
        assertTrue(t.getMessage().contains("heap buffer"), t.getMessage());
        assertTrue(ms < timeoutMs / 4, who + " was told after " + ms + " ms: " + t.getMessage());
      }
      ByteBuffer d = ByteBuffer.allocateDirect(4096).order(ByteOrder.nativeOrder());
      Throwable next = catching(() -> c1.allReduce(d, d, 1024, DataType.FLOAT32, ReduceOp.SUM));
      assertCode(ErrorCode.INVALID_USAGE, next, "rank 1's next call");
      assertTrue(next.getMessage().contains("heap buffer"), next.getMessage());
    } finally {
      g.close();
    }
  }

  // ---- abort() and close() from another thread ----

  @ParameterizedTest(name = "abort from another thread, {1} elements over {0}")
  @CsvSource({"SHM, 1024", "SHM, 1000000", "SOCKET, 1024", "SOCKET, 1000000"})
  @Timeout(60)
  void abortFromAnotherThreadReleasesBlockedCollective(Transport transport, int count)
      throws Exception {
    try (RankGroup g =
        RankGroup.start(
            2, options(transport, Algorithm.AUTO, TIMEOUT_MS), Duration.ofSeconds(30))) {
      Communicator c0 = g.comm(0);
      ByteBuffer b0 = ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
      // Rank 0 enters a collective that rank 1 does not join: it blocks.
      CompletableFuture<Throwable> blocked =
          CompletableFuture.supplyAsync(
              () -> catching(() -> c0.allReduce(b0, b0, count, DataType.FLOAT32, ReduceOp.SUM)));
      Thread.sleep(300);
      assertTrue(
          !blocked.isDone(),
          "allReduce should block while rank 1 is away, it returned: " + blocked.getNow(null));
      long t0 = System.nanoTime();
      c0.abort();
      Throwable t = blocked.get(TIMEOUT_MS / 2, TimeUnit.MILLISECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertCode(ErrorCode.ABORTED, t, "the blocked allReduce after abort()");
      assertTrue(t.getMessage().contains("abort"), "message should say it was aborted: " + t);
      assertTrue(ms < 1000, "abort took " + ms + " ms to release the blocked call");

      // Later calls on the aborted communicator: ABORTED at once.
      assertCode(
          ErrorCode.ABORTED,
          catching(() -> c0.allReduce(b0, b0, count, DataType.FLOAT32, ReduceOp.SUM)),
          "a call after abort()");

      // The peer is told (colibri.h: abort "tells peers"; clbAborted: "called on this
      // communicator or on a peer"). With 1024 elements (direct path on shm) rank 0 had already
      // posted its whole input before the abort, so rank 1's first allReduce may still complete;
      // the one after it cannot (rank 0 never reads again) and must fail with ABORTED quickly,
      // not wait for the timeout. With 1,000,000 elements (ring) the first one cannot complete.
      ByteBuffer b1 = ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
      long t1 = System.nanoTime();
      List<Throwable> peer =
          g.run(
              "rank 1's allReduces after rank 0 aborted",
              r -> {
                if (r.rank != 1) {
                  return null;
                }
                Throwable first =
                    catching(() -> r.comm.allReduce(b1, b1, count, DataType.FLOAT32, ReduceOp.SUM));
                if (first != null || count > 1024) {
                  return first;
                }
                return catching(
                    () -> r.comm.allReduce(b1, b1, count, DataType.FLOAT32, ReduceOp.SUM));
              });
      long peerMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t1);
      assertCode(
          ErrorCode.ABORTED,
          peer.get(1),
          "rank 1's collective after rank 0 called"
              + " abort() (returned after "
              + peerMs
              + " ms)");
      assertTrue(
          peerMs < TIMEOUT_MS / 2,
          "rank 1 should learn of the abort quickly, took " + peerMs + " ms");
    }
  }

  @Test
  @Timeout(60)
  void closeFromAnotherThreadAbortsTheBlockedCallAndReturns() throws Exception {
    RankGroup g =
        RankGroup.start(2, options(Transport.SHM, Algorithm.AUTO, 30_000), Duration.ofSeconds(30));
    try {
      Communicator c0 = g.comm(0);
      ByteBuffer b0 = ByteBuffer.allocateDirect(4096).order(ByteOrder.nativeOrder());
      CompletableFuture<Throwable> blocked =
          CompletableFuture.supplyAsync(
              () -> catching(() -> c0.allReduce(b0, b0, 1024, DataType.FLOAT32, ReduceOp.SUM)));
      Thread.sleep(300);
      long t0 = System.nanoTime();
      c0.close();
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      Throwable t = blocked.get(5, TimeUnit.SECONDS);
      assertCode(ErrorCode.ABORTED, t, "the collective blocked while another thread closed");
      assertTrue(ms < 5000, "close() took " + ms + " ms");
      assertCode(
          ErrorCode.INVALID_USAGE,
          catching(() -> c0.allReduce(b0, b0, 1024, DataType.FLOAT32, ReduceOp.SUM)),
          "a call after close()");
      c0.close(); // idempotent
    } finally {
      g.close();
    }
  }

  // ---- bootstrap: wrong secret, wrong protocol, a rank that never joins ----

  @Test
  @Timeout(60)
  void wrongSecretIsAuthErrorNamingFingerprints() throws Exception {
    UniqueId good = UniqueId.create();
    byte[] bytes = good.toBytes();
    // IdData (src/bootstrap/bootstrap.h): magic, protocol, flags (3 x uint32), family, port (2 x
    // uint16), addr[16], then secret[16]: the secret starts at offset 32.
    bytes[32 + 5] ^= 0x5a;
    UniqueId bad = UniqueId.fromBytes(bytes);
    Options o = options(Transport.AUTO, Algorithm.AUTO, 3000);
    CompletableFuture<Throwable> rank0 =
        CompletableFuture.supplyAsync(
            () -> catching(() -> Communicator.init(good, 0, 2, o).close()));
    long t0 = System.nanoTime();
    Throwable rank1 = catching(() -> Communicator.init(bad, 1, 2, o).close());
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertCode(ErrorCode.AUTH_ERROR, rank1, "init with a UniqueId whose secret was changed");
    Matcher m =
        Pattern.compile("fingerprint ([0-9a-f]{8}).*fingerprint ([0-9a-f]{8})")
            .matcher(rank1.getMessage());
    assertTrue(m.find(), "message should name both secret fingerprints: " + rank1.getMessage());
    assertTrue(!m.group(1).equals(m.group(2)), "the two fingerprints should differ: " + rank1);
    assertTrue(rank1.getMessage().contains("secret"), rank1.getMessage());
    assertTrue(ms < 3000, "the refusal should be immediate, took " + ms + " ms");
    // Rank 0 never meets a rank 1 with the right secret: it times out instead of hanging.
    Throwable t0r = rank0.get(20, TimeUnit.SECONDS);
    assertCode(ErrorCode.TIMEOUT, t0r, "rank 0, whose peer was refused");
  }

  @Test
  @Timeout(60)
  void wrongProtocolVersionIsAuthErrorNamingBothVersions() {
    byte[] bytes = UniqueId.create().toBytes();
    int ours = bytes[4] & 0xff; // protocol: offset 4, little-endian uint32 (below 256)
    int other = ours + 1; // a protocol this library does not speak
    bytes[4] = (byte) other;
    bytes[5] = 0;
    bytes[6] = 0;
    bytes[7] = 0;
    Throwable t =
        catching(
            () ->
                Communicator.init(
                        UniqueId.fromBytes(bytes),
                        0,
                        1,
                        options(Transport.AUTO, Algorithm.AUTO, 3000))
                    .close());
    assertCode(ErrorCode.AUTH_ERROR, t, "init with a UniqueId of protocol " + other);
    assertTrue(
        t.getMessage().contains("protocol " + other) && t.getMessage().contains("protocol " + ours),
        "message should name both protocol versions ("
            + other
            + " and "
            + ours
            + "): "
            + t.getMessage());
  }

  @Test
  @Timeout(60)
  void rankThatNeverJoinsMakesInitTimeOut() {
    UniqueId id = UniqueId.create();
    long t0 = System.nanoTime();
    Throwable t =
        catching(
            () ->
                Communicator.init(id, 0, 3, options(Transport.AUTO, Algorithm.AUTO, 2000)).close());
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertCode(ErrorCode.TIMEOUT, t, "init of rank 0 of 3 when no other rank starts");
    assertTrue(
        t.getMessage().contains("2000") && t.getMessage().contains("join"),
        "message should say how long it waited and for what: " + t.getMessage());
    assertTrue(
        ms >= 1900 && ms < 10_000, "init should give up after about 2 s, took " + ms + " ms");
  }

  // ---- versions that differ across ranks ----

  /**
   * Rank 1, in its own JVM, claims Colibri 0.0.1 (COLIBRI_TEST_FAKE_VERSION). With versionCheck
   * strict (the default) both ranks fail at init with INVALID_USAGE naming both ranks and versions;
   * with warn both start and transportInfo() shows the difference.
   */
  @ParameterizedTest(name = "another Colibri version on rank 1, versionCheck {0}")
  @EnumSource(
      value = VersionCheck.class,
      names = {"STRICT", "WARN"})
  @Timeout(90)
  void otherColibriVersionOnAPeer(VersionCheck check) throws Exception {
    UniqueId id = UniqueId.create();
    Procs.Child child =
        Procs.start(
            "rank 1",
            Map.of(
                "COLIBRI_TEST_FAKE_VERSION", "0.0.1", "COLIBRI_VERSION_CHECK", check.configName()),
            "init",
            id.toString(),
            "1",
            "2",
            "AUTO",
            "20000");
    try {
      // Rank 1's options but for versionCheck (settings such as chunkBytes must agree).
      Options o =
          RankProcess.options(Transport.AUTO, 20_000).toBuilder().versionCheck(check).build();
      String[] info = new String[1];
      Throwable t =
          catching(
              () -> {
                try (Communicator c = Communicator.init(id, 0, 2, o)) {
                  info[0] = c.transportInfo();
                }
              });
      int code = child.waitFor(30_000);
      if (check == VersionCheck.STRICT) {
        assertCode(ErrorCode.INVALID_USAGE, t, "init of rank 0 with a peer on Colibri 0.0.1");
        assertTrue(
            t.getMessage().contains("rank 0 has Colibri ")
                && t.getMessage().contains("but rank 1 has 0.0.1")
                && t.getMessage().contains("run the same Colibri version on every rank"),
            "message should name both ranks, both versions and the fix: " + t.getMessage());
        assertEquals(3, code, "rank 1 should fail at init too:\n" + child.describe());
        String failed = child.line("FAILED ");
        assertTrue(
            failed != null
                && failed.startsWith("FAILED INVALID_USAGE")
                && failed.contains("but rank 1 has 0.0.1"),
            child.describe());
      } else {
        assertEquals(null, t, "versionCheck=warn should let init proceed");
        assertTrue(
            info[0].contains("colibri DIFFERS:") && info[0].contains("0.0.1 on rank 1"),
            "transportInfo should show the difference: " + info[0]);
        assertEquals(0, code, child.describe());
        assertTrue(child.printed("INIT OK versions: colibri DIFFERS:"), child.describe());
      }
    } finally {
      child.process.destroyForcibly();
    }
  }

  // ---- mismatched calls across ranks ----

  /**
   * Rank 1 makes a different call from ranks 0 and 2. At least one rank must throw, naming the
   * disagreement; no rank may hang (each returns within the timeout plus slack); and no rank's
   * output may be written past its end (guards keep their poison).
   */
  @ParameterizedTest(name = "{0}: {1} over {2} with {3}")
  @CsvSource({
    "count, 7, SHM, DIRECT",
    "count, 7, SHM, RING",
    "count, 100000, SHM, RING",
    "count, 100000, SOCKET, RING",
    "type, 1000, SHM, DIRECT",
    "type, 100000, SHM, RING",
    "op, 1000, SHM, DIRECT",
    "op, 100000, SOCKET, RING",
    "collective, 1000, SHM, DIRECT",
    "collective, 100000, SHM, RING",
    "root, 1000, SHM, DIRECT",
    "root, 100000, SOCKET, RING",
  })
  @Timeout(90)
  void mismatchedCallsFailWithoutCorruptionOrHang(
      String what, long count, Transport transport, Algorithm algorithm) {
    int n = 3;
    try (RankGroup g =
        RankGroup.start(
            n, options(transport, algorithm, TIMEOUT_MS), Duration.ofMillis(TIMEOUT_MS + 15_000))) {
      long t0 = System.nanoTime();
      List<Throwable> errors =
          g.run(
              "mismatched " + what,
              r -> {
                boolean odd = r.rank == 1;
                long myCount = what.equals("count") && odd ? count + 1 : count;
                DataType type = what.equals("type") && odd ? DataType.INT32 : DataType.FLOAT32;
                ReduceOp op = what.equals("op") && odd ? ReduceOp.MAX : ReduceOp.SUM;
                long elems = what.equals("collective") ? myCount * n : myCount;
                // A matching call first, so that the mismatch is what the next call meets.
                ByteBuffer warm = r.recv.reset(16).data();
                r.comm.allReduce(warm, warm, 1, DataType.FLOAT32, ReduceOp.SUM);
                r.send.reset(elems * 4).poison(GuardedBuffer.POISON);
                r.recv.reset(elems * 4).poison(GuardedBuffer.POISON);
                Throwable err =
                    catching(
                        () -> {
                          if (what.equals("collective")) {
                            if (odd) {
                              r.comm.allGather(
                                  r.send.slice(0, myCount * 4), r.recv.data(), myCount, type);
                            } else {
                              r.comm.reduceScatter(
                                  r.send.data(), r.recv.slice(0, myCount * 4), myCount, type, op);
                            }
                          } else if (what.equals("root")) {
                            r.comm.broadcast(
                                r.send.data(), r.recv.data(), myCount, type, odd ? 1 : 0);
                          } else {
                            r.comm.allReduce(r.send.data(), r.recv.data(), myCount, type, op);
                          }
                        });
                String guards = r.recv.checkGuards(GuardedBuffer.POISON);
                String sendGuards = r.send.checkGuards(GuardedBuffer.POISON);
                if (guards != null || sendGuards != null) {
                  throw new AssertionError(
                      "rank "
                          + r.rank
                          + ": memory corrupted by a mismatched call: "
                          + (guards != null ? "recv " + guards : "")
                          + " "
                          + (sendGuards != null ? "send " + sendGuards : "")
                          + " (the call "
                          + (err == null ? "succeeded" : "threw " + err)
                          + ")");
                }
                return err;
              });
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      StringBuilder all = new StringBuilder();
      int failed = 0;
      boolean named = false;
      for (int r = 0; r < n; r++) {
        Throwable t = errors.get(r);
        all.append("\n  rank ").append(r).append(": ").append(t == null ? "returned normally" : t);
        if (t != null) {
          failed++;
          assertTrue(t instanceof ColibriException, "rank " + r + " threw " + t);
          ErrorCode ec = ((ColibriException) t).code();
          assertTrue(
              Set.of(ErrorCode.REMOTE_ERROR, ErrorCode.TIMEOUT, ErrorCode.ABORTED).contains(ec),
              "rank " + r + ": a mismatch is a REMOTE_ERROR (or a TIMEOUT), got " + t);
          named |= ec == ErrorCode.REMOTE_ERROR && t.getMessage().contains("same");
        }
      }
      assertTrue(failed > 0, "a mismatched " + what + " went unnoticed on every rank:" + all);
      assertTrue(named, "at least one rank should say that the ranks made different calls:" + all);
      assertTrue(ms < TIMEOUT_MS + 5000, "the ranks took " + ms + " ms to give up:" + all);
    }
  }

  // ---- helpers ----

  interface Call {
    void run() throws Exception;
  }

  static Throwable catching(Call c) {
    try {
      c.run();
      return null;
    } catch (Throwable t) {
      return t;
    }
  }

  static void assertCode(ErrorCode want, Throwable t, String what) {
    assertNotNull(
        t,
        what + ": expected a ColibriException " + want + ", but the call returned" + " normally");
    if (!(t instanceof ColibriException)) {
      AssertionError e =
          new AssertionError(what + ": expected a ColibriException " + want + ", got " + t);
      e.initCause(t);
      throw e;
    }
    assertEquals(want, ((ColibriException) t).code(), what + ": " + t);
  }
}
