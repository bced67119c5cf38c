/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.bench.common.Commands;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * A tensor-parallel group of rank processes, as a server that runs one process per rank (or per
 * GPU) makes them: this JVM makes the group's {@link UniqueId} and starts one JVM per rank (the
 * same Java and class path), each running {@link LocalGroup#hostRank} or {@link DeviceGroup#rank}
 * and writing its run into a file this JVM reads back. The first rank that fails is reported at
 * once, naming it and the last line it wrote to stderr, and the others are stopped.
 */
final class ProcessGroup {

  /**
   * What the parent passes a rank process: the decode's parameters ({@code gpu} null on the CPU),
   * and {@code plantedFailure}: the rank whose process fails at its start (tests; -1: none).
   */
  record Spec(
      ModelShape shape,
      int tp,
      Transport transport,
      Duration timeout,
      GpuRun gpu,
      long seed,
      int prompt,
      int newTokens,
      boolean keep,
      int plantedFailure) {}

  private static final int MAGIC = 0x434c4244; // "CLBD"

  /** A rank process's exit: its own failure, or one a peer caused (REMOTE_ERROR). */
  static final int EXIT_OWN = 3;

  static final int EXIT_PEER = 4;

  private ProcessGroup() {}

  /**
   * Runs the group: one JVM per rank.
   *
   * @param spec the decode's parameters
   * @return the group's result (every rank's run, in rank order)
   * @throws IllegalStateException when a rank process failed, did not end within the timeout and
   *     a minute, or the ranks' tokens differ
   */
  static LocalGroup.Result run(Spec spec) {
    spec.shape().check(spec.tp());
    Path dir;
    try {
      dir = Files.createTempDirectory("colibri-decode-");
    } catch (IOException e) {
      throw new IllegalStateException(
          "a folder for the rank processes' results: " + e.getMessage(), e);
    }
    GpuRun.Library library = spec.gpu() == null ? GpuRun.Library.COLIBRI : spec.gpu().library();
    String id =
        switch (library) {
          case COLIBRI -> UniqueId.create().toString();
          case NCCL -> NcclDeviceCollectives.toHex(NcclDeviceCollectives.uniqueId());
          case NONE -> "-";
        };
    List<Process> procs = new ArrayList<>();
    try {
      for (int r = 0; r < spec.tp(); r++) {
        procs.add(start(spec, id, r, dir));
      }
      waitFor(procs, dir, spec.timeout().plusSeconds(60));
      List<LocalGroup.RankRun> runs = new ArrayList<>();
      for (int r = 0; r < spec.tp(); r++) {
        runs.add(read(dir.resolve("rank" + r + ".run")));
      }
      if (library != GpuRun.Library.NONE) { // without collectives each rank computes its own tokens
        LocalGroup.requireSameTokens(runs);
      }
      return new LocalGroup.Result(spec.tp(), runs);
    } catch (IOException e) {
      throw new IllegalStateException("a rank process's result: " + e.getMessage(), e);
    } finally {
      procs.forEach(Process::destroyForcibly);
      deleteAll(dir);
    }
  }

  private static Process start(Spec s, String id, int rank, Path dir) throws IOException {
    List<String> cmd = Commands.javaCommand(ProcessGroup.class);
    ModelShape m = s.shape();
    Map<String, String> a = new HashMap<>();
    a.put("id", id);
    a.put("rank", Integer.toString(rank));
    a.put(
        "shape",
        m.hidden()
            + ","
            + m.heads()
            + ","
            + m.kvHeads()
            + ","
            + m.intermediate()
            + ","
            + m.layers()
            + ","
            + m.vocab()
            + ","
            + m.batch()
            + ","
            + m.context());
    a.put("tp", Integer.toString(s.tp()));
    a.put("transport", s.transport().name());
    a.put("timeout", Long.toString(s.timeout().toMillis()));
    GpuRun g = s.gpu();
    if (g != null) {
      a.put("library", g.library().label());
      a.put("dtype", g.precision().label());
      a.put("graph", Boolean.toString(g.graph()));
      a.put("spread", Boolean.toString(g.spread()));
      a.put("gpus", Integer.toString(g.gpus()));
      a.put("chunk", Integer.toString(g.chunk()));
    }
    a.put("seed", Long.toString(s.seed()));
    a.put("prompt", Integer.toString(s.prompt()));
    a.put("new", Integer.toString(s.newTokens()));
    a.put("keep", Boolean.toString(s.keep()));
    a.put("fail", Integer.toString(s.plantedFailure()));
    a.put("out", dir.resolve("rank" + rank + ".run").toString());
    a.forEach((k, v) -> cmd.add(k + "=" + v));
    return new ProcessBuilder(cmd)
        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .redirectError(dir.resolve("rank" + rank + ".err").toFile())
        .start();
  }

  /**
   * Until every process ended; the first that failed (or the deadline) throws, naming the rank. A
   * failure a peer caused (exit {@link #EXIT_PEER}) waits up to {@link LocalGroup#GRACE_NANOS} for
   * the rank that caused it, which is reported instead.
   */
  private static void waitFor(List<Process> procs, Path dir, Duration limit) {
    long deadline = System.nanoTime() + limit.toNanos();
    boolean[] ended = new boolean[procs.size()];
    int left = procs.size();
    int failed = -1;
    long graceEnd = 0;
    while (left > 0 || failed >= 0) {
      for (int r = 0; r < procs.size(); r++) {
        if (ended[r] || procs.get(r).isAlive()) {
          continue;
        }
        ended[r] = true;
        left--;
        int code = procs.get(r).exitValue();
        if (code != 0
            && (failed < 0 || procs.get(failed).exitValue() == EXIT_PEER && code != EXIT_PEER)) {
          if (failed < 0) {
            graceEnd = System.nanoTime() + LocalGroup.GRACE_NANOS;
          }
          failed = r;
        }
      }
      if (failed >= 0
          && (procs.get(failed).exitValue() != EXIT_PEER
              || left == 0
              || System.nanoTime() > graceEnd)) {
        throw new IllegalStateException(
            "rank "
                + failed
                + " of "
                + procs.size()
                + " failed (its process exited with "
                + procs.get(failed).exitValue()
                + "): "
                + lastLine(dir.resolve("rank" + failed + ".err")));
      }
      if (left > 0 && System.nanoTime() > deadline) {
        int r = 0;
        while (ended[r]) {
          r++;
        }
        throw new IllegalStateException(
            "rank "
                + r
                + " of "
                + procs.size()
                + " did not end within "
                + limit.toSeconds()
                + " s: "
                + lastLine(dir.resolve("rank" + r + ".err")));
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while the rank processes ran", e);
      }
    }
  }

  private static String lastLine(Path f) {
    try {
      List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
      for (int i = lines.size() - 1; i >= 0; i--) {
        if (!lines.get(i).isBlank()) {
          return lines.get(i).strip();
        }
      }
      return "(it wrote nothing to stderr)";
    } catch (IOException e) {
      return "(its stderr could not be read: " + e.getMessage() + ")";
    }
  }

  private static void deleteAll(Path dir) {
    try (var files = Files.list(dir)) {
      for (Path f : (Iterable<Path>) files::iterator) {
        Files.deleteIfExists(f);
      }
      Files.deleteIfExists(dir);
    } catch (IOException e) {
      // a temporary folder left behind
    }
  }

  static void write(Path f, LocalGroup.RankRun run) throws IOException {
    try (DataOutputStream o =
        new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(f)))) {
      Generation g = run.generation();
      o.writeInt(MAGIC);
      o.writeInt(g.tokens().length);
      o.writeInt(g.tokens().length == 0 ? 0 : g.tokens()[0].length);
      for (int[] step : g.tokens()) {
        for (int t : step) {
          o.writeInt(t);
        }
      }
      o.writeInt(g.logits().size());
      for (float[] l : g.logits()) {
        o.writeInt(l.length);
        for (float v : l) {
          o.writeFloat(v);
        }
      }
      o.writeInt(g.stepNanos().length);
      for (long v : g.stepNanos()) {
        o.writeLong(v);
      }
      o.writeLong(g.firstTokenNanos());
      o.writeInt(g.promptLogits() == null ? -1 : g.promptLogits().length);
      if (g.promptLogits() != null) {
        for (float v : g.promptLogits()) {
          o.writeFloat(v);
        }
      }
      o.writeLong(run.initNanos());
      LocalGroup.Memory m = run.memory();
      o.writeBoolean(m != null);
      if (m != null) {
        for (long v :
            new long[] {
              m.beforeInit(),
              m.afterInit(),
              m.afterModel(),
              m.afterGeneration(),
              m.libraryOwn(),
              m.kvBytesPerToken()
            }) {
          o.writeLong(v);
        }
      }
    }
  }

  static LocalGroup.RankRun read(Path f) throws IOException {
    try (DataInputStream in =
        new DataInputStream(new BufferedInputStream(Files.newInputStream(f)))) {
      if (in.readInt() != MAGIC) {
        throw new IOException(f + " is not a rank's run");
      }
      int[][] tokens = new int[in.readInt()][in.readInt()];
      for (int[] step : tokens) {
        for (int i = 0; i < step.length; i++) {
          step[i] = in.readInt();
        }
      }
      List<float[]> logits = new ArrayList<>();
      for (int n = in.readInt(); n > 0; n--) {
        float[] l = new float[in.readInt()];
        for (int i = 0; i < l.length; i++) {
          l[i] = in.readFloat();
        }
        logits.add(l);
      }
      long[] steps = new long[in.readInt()];
      for (int i = 0; i < steps.length; i++) {
        steps[i] = in.readLong();
      }
      long first = in.readLong();
      int promptCount = in.readInt();
      float[] promptLogits = promptCount < 0 ? null : new float[promptCount];
      for (int i = 0; i < promptCount; i++) {
        promptLogits[i] = in.readFloat();
      }
      long init = in.readLong();
      LocalGroup.Memory m =
          in.readBoolean()
              ? new LocalGroup.Memory(
                  in.readLong(),
                  in.readLong(),
                  in.readLong(),
                  in.readLong(),
                  in.readLong(),
                  in.readLong())
              : null;
      return new LocalGroup.RankRun(
          new Generation(tokens, logits, steps, first, promptLogits), init, m);
    }
  }

  /**
   * A rank process: {@code key=value} arguments as {@link #start} writes them; runs its rank and
   * writes its run to {@code out}. Exits 0, or 3 with the error on stderr.
   *
   * @param args the rank's parameters
   */
  public static void main(String[] args) {
    Map<String, String> a = new HashMap<>();
    for (String arg : args) {
      int eq = arg.indexOf('=');
      a.put(arg.substring(0, eq), arg.substring(eq + 1));
    }
    try {
      int[] v = Arrays.stream(a.get("shape").split(",")).mapToInt(Integer::parseInt).toArray();
      ModelShape shape = new ModelShape(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
      int tp = Integer.parseInt(a.get("tp"));
      int rank = Integer.parseInt(a.get("rank"));
      if (rank == Integer.parseInt(a.get("fail"))) {
        throw new IllegalStateException("the planted failure of rank " + rank);
      }
      Options options =
          Options.builder()
              .transport(Transport.valueOf(a.get("transport")))
              .timeout(Duration.ofMillis(Long.parseLong(a.get("timeout"))))
              .build();
      long seed = Long.parseLong(a.get("seed"));
      int prompt = Integer.parseInt(a.get("prompt"));
      int newTokens = Integer.parseInt(a.get("new"));
      boolean keep = Boolean.parseBoolean(a.get("keep"));
      LocalGroup.RankRun run;
      if (a.containsKey("library")) {
        GpuRun g =
            new GpuRun(
                GpuRun.Library.parse(a.get("library")),
                Precision.parse(a.get("dtype")),
                Boolean.parseBoolean(a.get("graph")),
                Boolean.parseBoolean(a.get("spread")),
                Integer.parseInt(a.get("gpus")),
                Integer.parseInt(a.get("chunk")));
        run =
            DeviceGroup.rank(
                shape,
                tp,
                rank,
                g.library() == GpuRun.Library.COLIBRI ? UniqueId.parse(a.get("id")) : null,
                g.library() == GpuRun.Library.NCCL
                    ? NcclDeviceCollectives.fromHex(a.get("id"))
                    : null,
                options,
                g,
                seed,
                prompt,
                newTokens,
                keep);
      } else {
        run =
            LocalGroup.hostRank(
                shape,
                tp,
                rank,
                UniqueId.parse(a.get("id")),
                options,
                seed,
                prompt,
                newTokens,
                keep,
                Function.identity());
      }
      write(Path.of(a.get("out")), run);
    } catch (Exception | LinkageError e) {
      System.err.println("colibri decode, rank " + a.get("rank") + ": " + e);
      System.exit(LocalGroup.causedByPeer(e) ? EXIT_PEER : EXIT_OWN);
    }
    System.exit(0);
  }
}
