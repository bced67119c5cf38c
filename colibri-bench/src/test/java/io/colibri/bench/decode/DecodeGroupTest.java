/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.bench.MainRun;
import io.colibri.bench.TestPki;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The decoder as a group of rank threads on Colibri's host path: TP=2, 4 and 8 generate what
 * TP=1 generates, over every transport (shm, socket, socket with TLS, the verbs stand-in); a wrong
 * sum is caught by the check; the command's output and errors.
 */
class DecodeGroupTest {

  private static final ModelShape S = DecodeCommand.SMALL;

  private static Options options(Transport t) {
    return Options.builder().transport(t).timeout(Duration.ofSeconds(60)).build();
  }

  /**
   * The transports a decoder runs over, as the native suite's list: shm, socket, socket with TLS on
   * every connection (COLIBRI_TLS=all, which a process reads from its environment: its ranks run in
   * a JVM of their own), and verbs through the verbs plugin over the verbs emulator (surefire puts
   * both on the paths, see this module's pom).
   */
  enum Net {
    SHM(Transport.SHM),
    SOCKET(Transport.SOCKET),
    SOCKET_TLS(Transport.SOCKET),
    VERBS(Transport.VERBS);

    final Transport transport;

    Net(Transport transport) {
      this.transport = transport;
    }
  }

  private static final long SEED = 5;
  private static final int PROMPT = 4;
  private static final int NEW = 6;

  @ParameterizedTest
  @EnumSource(Net.class)
  void everyTpSizeGeneratesWhatOneRankGenerates(Net net, @TempDir Path dir) {
    LocalGroup.Result one =
        LocalGroup.run(S, 1, options(Transport.SHM), SEED, PROMPT, NEW, true, Function.identity());
    // The tokens are not all the same one (a model that always says one token checks nothing).
    java.util.Set<Integer> distinct = new java.util.HashSet<>();
    for (int[] step : one.rank0().tokens()) {
      for (int x : step) {
        distinct.add(x);
      }
    }
    assertTrue(distinct.size() > 3, "distinct tokens: " + distinct);
    if (net == Net.SOCKET_TLS) {
      overTls(one, dir);
      return;
    }
    for (int tp : new int[] {2, 4, 8}) {
      LocalGroup.Result r =
          LocalGroup.run(
              S, tp, options(net.transport), SEED, PROMPT, NEW, true, Function.identity());
      assertEquals(tp, r.ranks().size());
      assertArrayEquals(one.rank0().tokens(), r.rank0().tokens(), "TP=" + tp + " over " + net);
      double diff = LocalGroup.compare(one.rank0(), r.rank0());
      assertTrue(diff < 1e-4, "TP=" + tp + " over " + net + ": logits differ by " + diff);
    }
  }

  /**
   * TP=2, 4 and 8 over sockets with TLS on every connection, as a user runs it: the decode command
   * in a JVM whose environment sets COLIBRI_TLS=all and the certificates, checking itself against
   * TP=1 (--check, tolerance 1e-4) and printing the tokens {@code one} generated here without TLS.
   * The same run trusting a CA that signed no rank's certificate must fail: TLS is in use.
   */
  private static void overTls(LocalGroup.Result one, Path dir) {
    TestPki pki = TestPki.make(dir);
    String expected =
        "tokens (sequence 0): "
            + java.util.Arrays.toString(DecodeCommand.column(one.rank0().tokens(), 0));
    for (int tp : new int[] {2, 4, 8}) {
      MainRun r = decodeOverTls(pki.env("all", pki.ca()), tp);
      assertEquals(0, r.rc, "TP=" + tp + " over socket with TLS: " + r.both());
      assertTrue(
          r.out.contains("ok: TP=" + tp + " equals TP=1 (tokens identical, logits within"), r.out);
      assertEquals(expected, tokensLine(r.out), "TP=" + tp + " over socket with TLS");
    }
    MainRun rogue = decodeOverTls(pki.env("all", pki.rogueCa()), 2);
    assertEquals(DecodeCommand.EXIT_FAILED, rogue.rc, rogue.both());
    assertTrue(rogue.err.contains("colibri decode: "), rogue.both());
    assertTrue(rogue.err.toLowerCase(java.util.Locale.ROOT).contains("certificate"), rogue.both());
  }

  private static MainRun decodeOverTls(java.util.Map<String, String> env, int tp) {
    return MainRun.inOwnJvm(
        env,
        Duration.ofSeconds(120),
        "decode",
        "--tp",
        Integer.toString(tp),
        "--check",
        "--transport",
        "socket",
        "--timeout",
        "30",
        "--seed",
        Long.toString(SEED),
        "--prompt",
        Integer.toString(PROMPT),
        "--new",
        Integer.toString(NEW));
  }

  /** Collectives that pass every call on to {@code c}; tests override one call to put a fault in. */
  static class Forwarding implements TpCollectives {
    final TpCollectives c;

    Forwarding(TpCollectives c) {
      this.c = c;
    }

    @Override
    public int size() {
      return c.size();
    }

    @Override
    public int rank() {
      return c.rank();
    }

    @Override
    public void allReduceSum(float[] x, int count) {
      c.allReduceSum(x, count);
    }

    @Override
    public void allGather(float[] part, int count, float[] all) {
      c.allGather(part, count, all);
    }

    @Override
    public void close() {
      c.close();
    }
  }

  /** Every rank adds 0.01 to the first element of every sum: the ranks agree, the model is wrong. */
  static TpCollectives skewed(TpCollectives c) {
    return new Forwarding(c) {
      @Override
      public void allReduceSum(float[] x, int count) {
        c.allReduceSum(x, count);
        x[0] += 0.01f;
      }
    };
  }

  @Test
  void theCheckFailsWhenTheSumsAreWrong() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    DecodeCommand cmd =
        new DecodeCommand(
                new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8))
            .wrapCollectives(DecodeGroupTest::skewed);
    int rc = new picocli.CommandLine(cmd).execute("--tp", "2", "--check");
    String o = out.toString(StandardCharsets.UTF_8);
    assertEquals(DecodeCommand.EXIT_CHECK, rc, o + err);
    assertTrue(o.contains("FAIL: TP=2 against TP=1"), o);
  }

  @Test
  void aFailingRankIsReportedAtOnceNamingIt() {
    long t0 = System.nanoTime();
    IllegalStateException e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalStateException.class,
            () ->
                LocalGroup.run(
                    S,
                    2,
                    options(Transport.SHM),
                    5,
                    4,
                    6,
                    false,
                    c ->
                        c.rank() != 1
                            ? c
                            : new Forwarding(c) {
                              @Override
                              public void allReduceSum(float[] x, int count) {
                                throw new IllegalStateException("rank 1's planted failure");
                              }
                            }));
    double s = (System.nanoTime() - t0) / 1e9;
    assertTrue(
        e.getMessage().contains("rank 1 of 2 failed: rank 1's planted failure"), e.getMessage());
    // Rank 0 waits in its all-reduce for rank 1 (timeout 60 s): the group does not wait with it.
    assertTrue(s < 30, "reported after " + s + " s");
  }

  @ParameterizedTest
  @ValueSource(strings = {"2", "4"})
  void theCommandChecksTpAgainstOneRank(String tp) {
    MainRun r = MainRun.of("decode", "--tp", tp, "--check", "--new", "8");
    assertEquals(0, r.rc, r.both());
    assertTrue(
        r.out.contains("ok: TP=" + tp + " equals TP=1 (tokens identical, logits within"), r.out);
    assertTrue(r.out.contains("# decode: hidden 256, 16 heads, 8 KV heads"), r.out);
  }

  @Test
  void ranksAsProcessesGenerateWhatOneRankGenerates() {
    MainRun r = MainRun.of("decode", "--tp", "2", "--processes", "--check", "--new", "4");
    assertEquals(0, r.rc, r.both());
    assertTrue(r.out.contains("ranks as processes"), r.out);
    assertTrue(r.out.contains("ok: TP=2 equals TP=1 (tokens identical, logits within"), r.out);
    // The same tokens as rank threads generate.
    MainRun t = MainRun.of("decode", "--tp", "2", "--new", "4");
    assertEquals(0, t.rc, t.both());
    assertEquals(tokensLine(t.out), tokensLine(r.out));
  }

  // A peer's failure that ends first (REMOTE_ERROR: rank 1 closed its communicator on its way out
  // of its own failure) does not hide the failure that caused it; under load it once did.
  @Test
  void theFailureThatCausedAPeersIsReportedNotThePeers() {
    IllegalStateException e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalStateException.class,
            () ->
                LocalGroup.runRanks(
                    2,
                    rank -> {
                      if (rank == 0) {
                        throw new io.colibri.ColibriException(
                            io.colibri.ErrorCode.REMOTE_ERROR,
                            "rank 1 closed its communicator while rank 0 waited");
                      }
                      Thread.sleep(100);
                      throw new IllegalStateException("rank 1's own failure");
                    }));
    assertTrue(
        e.getMessage().startsWith("rank 1 of 2 failed: rank 1's own failure"), e.getMessage());
    // Alone, a failure a peer caused is still reported (after the grace).
    e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalStateException.class,
            () ->
                LocalGroup.runRanks(
                    2,
                    rank -> {
                      if (rank == 0) {
                        throw new io.colibri.ColibriException(
                            io.colibri.ErrorCode.REMOTE_ERROR, "a peer failed");
                      }
                      return null;
                    }));
    assertTrue(e.getMessage().startsWith("rank 0 of 2 failed: a peer failed"), e.getMessage());
  }

  @Test
  void aFailingRankProcessIsReportedAtOnceNamingIt() {
    long t0 = System.nanoTime();
    IllegalStateException e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalStateException.class,
            () ->
                ProcessGroup.run(
                    new ProcessGroup.Spec(
                        S, 2, Transport.SHM, Duration.ofSeconds(60), null, 5, 4, 6, false, 1)));
    double s = (System.nanoTime() - t0) / 1e9;
    assertTrue(
        e.getMessage().contains("rank 1 of 2 failed (its process exited with 3)"), e.getMessage());
    assertTrue(e.getMessage().contains("the planted failure of rank 1"), e.getMessage());
    // Rank 0 waits in its init for rank 1 (timeout 60 s): the group does not wait with it.
    assertTrue(s < 30, "reported after " + s + " s");
  }

  @Test
  void ranksMustAgreeOnTheirTokensUnlessTheyRunWithoutCollectives() {
    // Rank r generates r's tokens: as ranks without collectives do, each from its own partial sums.
    LocalGroup.RankBody own =
        rank ->
            new LocalGroup.RankRun(
                new Generation(new int[][] {{rank, rank}}, List.of(), new long[] {1}, 1, null),
                0,
                null);
    IllegalStateException e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalStateException.class, () -> LocalGroup.runRanks(3, own));
    assertEquals("rank 1 generated other tokens than rank 0", e.getMessage());
    LocalGroup.Result r = LocalGroup.runRanks(3, own, false);
    assertEquals(3, r.ranks().size());
    assertEquals(2, r.ranks().get(2).generation().tokens()[0][0]);
  }

  @Test
  void aRankRunSurvivesItsFile(@TempDir Path dir) throws IOException {
    Generation g =
        new Generation(
            new int[][] {{1, 2}, {3, 4}, {5, 6}},
            List.of(new float[] {0.5f, -1f}),
            new long[] {7, 8, 9},
            10,
            new float[] {2.5f, Float.NaN, -0f});
    LocalGroup.RankRun run =
        new LocalGroup.RankRun(g, 11, new LocalGroup.Memory(1, 2, 3, 4, -1, 4096));
    ProcessGroup.write(dir.resolve("r"), run);
    LocalGroup.RankRun back = ProcessGroup.read(dir.resolve("r"));
    assertEquals(
        java.util.Arrays.deepToString(g.tokens()),
        java.util.Arrays.deepToString(back.generation().tokens()));
    assertArrayEquals(g.logits().get(0), back.generation().logits().get(0));
    assertArrayEquals(g.stepNanos(), back.generation().stepNanos());
    assertEquals(10, back.generation().firstTokenNanos());
    assertArrayEquals(g.promptLogits(), back.generation().promptLogits());
    assertEquals(11, back.initNanos());
    assertEquals(run.memory(), back.memory());
    Generation unkept = new Generation(g.tokens(), List.of(), g.stepNanos(), 10, null);
    ProcessGroup.write(dir.resolve("h"), new LocalGroup.RankRun(unkept, 11, null));
    LocalGroup.RankRun host = ProcessGroup.read(dir.resolve("h"));
    assertEquals(null, host.memory());
    assertEquals(null, host.generation().promptLogits());
    assertEquals(0, host.generation().logits().size());
  }

  private static String tokensLine(String out) {
    for (String line : out.split("\n")) {
      if (line.startsWith("tokens (sequence 0): ")) {
        return line;
      }
    }
    return "no tokens line in: " + out;
  }

  @Test
  void csvRowsAppendUnderOneHeader(@TempDir Path dir) throws IOException {
    Path f = dir.resolve("decode.csv");
    MainRun r = MainRun.of("decode", "--tp", "2", "--check", "--new", "4", "--csv", f.toString());
    assertEquals(0, r.rc, r.both());
    r = MainRun.of("decode", "--tp", "4", "--new", "4", "--csv", f.toString());
    assertEquals(0, r.rc, r.both());
    List<String> lines = Files.readAllLines(f);
    assertEquals(4, lines.size(), String.join("\n", lines));
    assertEquals(DecodeCommand.CSV_HEADER, lines.get(0));
    int columns = DecodeCommand.CSV_HEADER.split(",", -1).length;
    String[][] rows = new String[3][];
    for (int i = 0; i < 3; i++) {
      rows[i] = lines.get(i + 1).split(",", -1);
      assertEquals(columns, rows[i].length, lines.get(i + 1));
      java.util.Map<String, String> row = new java.util.HashMap<>();
      String[] names = DecodeCommand.CSV_HEADER.split(",");
      for (int c = 0; c < names.length; c++) {
        row.put(names[c], rows[i][c]);
      }
      assertEquals("colibri", row.get("library"));
      assertEquals("cpu", row.get("device"));
      assertEquals("float32", row.get("dtype"));
      assertEquals("host", row.get("mode"));
      assertEquals("threads", row.get("ranks_as"));
      assertEquals("one", row.get("placement"));
      assertEquals("1", row.get("prefill_chunk"));
      assertEquals("256", row.get("hidden"));
      assertEquals("8", row.get("prompt"));
      assertTrue(Double.parseDouble(row.get("ms_per_step")) > 0, lines.get(i + 1));
      // tokens/s counts the batch's 4 sequences
      assertEquals(
          4000 / Double.parseDouble(row.get("ms_per_step")),
          Double.parseDouble(row.get("tokens_per_s")),
          0.1 + 1e-3 * Double.parseDouble(row.get("tokens_per_s")),
          lines.get(i + 1));
      assertTrue(Double.parseDouble(row.get("ttft_ms")) > 0, lines.get(i + 1));
      for (String gpuOnly :
          List.of("init_mib", "model_mib", "run_mib", "own_mib", "budget_gib", "kv_tokens")) {
        assertEquals("", row.get(gpuOnly), "no GPU memory figures on the CPU: " + lines.get(i + 1));
      }
    }
    int tpAt = List.of(DecodeCommand.CSV_HEADER.split(",")).indexOf("tp");
    int checkAt = List.of(DecodeCommand.CSV_HEADER.split(",")).indexOf("check");
    assertEquals("1", rows[0][tpAt]);
    assertEquals("reference", rows[0][checkAt]);
    assertEquals("2", rows[1][tpAt]);
    assertEquals("ok", rows[1][checkAt]);
    assertEquals("4", rows[2][tpAt]);
    assertEquals("", rows[2][checkAt]);
    r =
        MainRun.of(
            "decode", "--new", "4", "--csv", dir.resolve("missing").resolve("x.csv").toString());
    assertEquals(DecodeCommand.EXIT_FAILED, r.rc, r.both());
    assertTrue(r.err.contains("--csv "), r.err);
  }

  @Test
  void aShapeThatDoesNotSplitIsABadCommandLine() {
    MainRun r = MainRun.of("decode", "--tp", "3");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--kv-heads 8 is not a multiple of --tp 3"), r.err);
    r = MainRun.of("decode", "--prompt", "60", "--new", "8");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("at most the context of 64"), r.err);
    r = MainRun.of("decode", "--model", "llama9b");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--model llama9b: use small or llama8b"), r.err);
    r = MainRun.of("decode", "--transport", "ib");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--transport ib: use auto, shm, socket or verbs"), r.err);
    r = MainRun.of("decode", "--device", "tpu");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--device tpu: use cpu or gpu"), r.err);
    r = MainRun.of("decode", "--graph");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--graph needs --device gpu"), r.err);
    r = MainRun.of("decode", "--library", "nccl");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--library nccl needs --device gpu"), r.err);
    r = MainRun.of("decode", "--device", "gpu", "--library", "mpi");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--library mpi: use colibri, nccl or none"), r.err);
    r = MainRun.of("decode", "--dtype", "bfloat16");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--dtype bfloat16 needs --device gpu"), r.err);
    r = MainRun.of("decode", "--device", "gpu", "--dtype", "fp8");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--dtype fp8: use float32 or bfloat16"), r.err);
    r = MainRun.of("decode", "--device", "gpu", "--dtype", "bfloat16", "--check");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--check compares TP=N with TP=1 in float32"), r.err);
    r = MainRun.of("decode", "--device", "gpu", "--library", "none", "--check");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--check with --library none"), r.err);
    r = MainRun.of("decode", "--prefill-chunk", "2");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--prefill-chunk needs --device gpu"), r.err);
    r = MainRun.of("decode", "--device", "gpu", "--prefill-chunk", "9");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--prefill-chunk 9: use 1 to the prompt's 8 positions"), r.err);
    r = MainRun.of("decode", "--budget", "24");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--budget needs --device gpu"), r.err);
    r = MainRun.of("decode", "--device", "gpu", "--budget", "-1");
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--budget -1.0: give the GiB of a GPU, above 0"), r.err);
  }

  @Test
  void theJarHoldsEveryKernelTheGpuDecoderLaunches() throws java.io.IOException {
    try (java.io.InputStream in = DeviceDecoder.class.getResourceAsStream(DeviceDecoder.PTX)) {
      org.junit.jupiter.api.Assertions.assertNotNull(
          in, DeviceDecoder.PTX + " is not on the class path");
      String ptx = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      for (String k : DeviceDecoder.KERNELS) {
        assertTrue(
            ptx.contains(".entry " + k + "("), k + " is not an entry of " + DeviceDecoder.PTX);
      }
    }
  }

  @Test
  void theKernelArgumentSlotsPointAtTheirOwnEightBytes() {
    try (org.bytedeco.javacpp.LongPointer values =
        new org.bytedeco.javacpp.LongPointer(DeviceDecoder.MAX_ARGS)) {
      org.bytedeco.javacpp.PointerPointer<org.bytedeco.javacpp.Pointer> slots =
          DeviceDecoder.slots(values);
      for (int i = 0; i < DeviceDecoder.MAX_ARGS; i++) {
        values.put(i, 1000L + i);
        assertEquals(values.address() + 8L * i, slots.get(i).address(), "slot " + i);
        assertEquals(
            1000L + i, new org.bytedeco.javacpp.LongPointer(slots.get(i)).get(0), "slot " + i);
      }
      // The launch writes through a byte view of the same memory, every slot within it.
      java.nio.ByteBuffer bytes = values.asByteBuffer().order(java.nio.ByteOrder.nativeOrder());
      bytes.putInt(8 * 3, 77);
      bytes.putDouble(8 * (DeviceDecoder.MAX_ARGS - 1), 2.5);
      assertEquals(77, new org.bytedeco.javacpp.IntPointer(slots.get(3)).get(0));
      assertEquals(
          2.5,
          new org.bytedeco.javacpp.DoublePointer(slots.get(DeviceDecoder.MAX_ARGS - 1)).get(0));
      slots.close();
    }
  }

  @Test
  void theGpuDecoderWithoutAGpuSaysWhy() {
    boolean gpu;
    try {
      gpu = DeviceDecoder.gpuCount() > 0;
    } catch (IllegalStateException e) {
      gpu = false;
    }
    org.junit.jupiter.api.Assumptions.assumeFalse(
        gpu, "a GPU is here: DeviceDecoderGpuTest runs instead");
    MainRun r = MainRun.of("decode", "--device", "gpu", "--new", "2");
    assertEquals(3, r.rc, r.both());
    assertTrue(
        r.err.contains("colibri decode: ")
            && (r.err.contains("the CUDA runtime could not be loaded")
                || r.err.contains("no GPU is visible")),
        r.err);
  }
}
