/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import io.colibri.bench.common.Commands;
import io.colibri.bench.common.Version;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.logging.Logger;
import picocli.CommandLine.ParameterException;

/**
 * The perf tool: runs the collectives over a sweep of message sizes on N local ranks and prints
 * nccl-tests-style tables. See {@code docs/perf-tool.md} and {@code --help}.
 *
 * <p>By default the ranks are JVM processes: this process creates the {@link UniqueId}, becomes
 * rank 0 and starts ranks 1..N-1 with the same java binary and class path, passing the id as
 * text. With {@code --threads} the ranks are threads of this JVM instead. Only rank 0 prints.
 *
 * <p>Its options are {@link PerfConfig}'s: the {@code perf} command of colibri-bench.jar, which
 * also runs when the first argument names no command. The other ranks run {@link #main}.
 */
public final class Perf {

  /** Exit codes. */
  static final int EXIT_OK = 0;

  static final int EXIT_WRONG = 1;
  static final int EXIT_USAGE = Commands.EXIT_USAGE;
  static final int EXIT_FAILED = Commands.EXIT_FAILED;

  private Perf() {}

  /** Colibri's INFO lines would come between the tables: see {@link Commands#quietColibriLogger}. */
  private static final Logger COLIBRI_LOGGER = Commands.quietColibriLogger();

  /**
   * Runs the perf command alone, with standard output and error, then exits with its exit code:
   * what rank 0 starts the other ranks with (its perf options, then {@code --child-rank} and
   * {@code --child-id}). The tool itself, perf among its commands, is {@code
   * io.colibri.bench.Main} ({@code java -jar colibri-bench.jar}).
   *
   * @param args the perf options (see {@code java -jar colibri-bench.jar perf --help})
   */
  public static void main(String[] args) {
    int rc;
    try {
      rc = execute(PerfConfig.parse(args), System.out, System.err);
    } catch (ParameterException e) {
      System.err.println("colibri perf: " + e.getMessage());
      rc = EXIT_USAGE;
    }
    System.out.flush();
    System.err.flush();
    System.exit(rc);
  }

  /** Runs the sweep of {@code config}: as a child rank, or as rank 0 and the launcher. */
  static int execute(PerfConfig config, PrintStream out, PrintStream err) {
    try {
      if (config.isChild()) {
        return runChild(config, err);
      }
      return config.threads ? runThreads(config, out, err) : runProcesses(config, out, err);
    } catch (RuntimeException | Error e) {
      err.println("colibri perf: failed: " + e);
      if (!(e instanceof ColibriException)) {
        e.printStackTrace(err);
      }
      return EXIT_FAILED;
    }
  }

  // ---- launching ----

  private static int runChild(PerfConfig config, PrintStream err) {
    UniqueId id;
    try {
      id = UniqueId.parse(config.childId);
    } catch (ColibriException e) {
      err.println("colibri perf: rank " + config.childRank + ": bad --child-id: " + e.getMessage());
      return EXIT_USAGE;
    }
    try {
      runRank(config, id, config.childRank, null, new AtomicReference<>(), Progress.OFF);
      return EXIT_OK;
    } catch (RuntimeException e) {
      err.println("colibri perf: rank " + config.childRank + " failed: " + e.getMessage());
      return EXIT_FAILED;
    }
  }

  private static int runThreads(PerfConfig config, PrintStream out, PrintStream err) {
    UniqueId id = UniqueId.create();
    int n = config.ranks;
    List<AtomicReference<Communicator>> comms = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      comms.add(new AtomicReference<>());
    }
    AtomicReferenceArray<Throwable> failures = new AtomicReferenceArray<>(n);
    List<Thread> threads = new ArrayList<>();
    long[] wrong = new long[1];
    Progress progress = Progress.choose(config, out, err, steps(config));
    for (int r = n - 1; r >= 0; r--) {
      final int rank = r;
      Thread t =
          new Thread(
              () -> {
                try {
                  long w =
                      runRank(
                          config,
                          id,
                          rank,
                          rank == 0 ? out : null,
                          comms.get(rank),
                          rank == 0 ? progress : Progress.OFF);
                  if (rank == 0) {
                    wrong[0] = w;
                  }
                } catch (Throwable e) {
                  failures.set(rank, e);
                  // The others would wait for this rank until the timeout: make them stop now.
                  for (int p = 0; p < n; p++) {
                    Communicator c = comms.get(p).get();
                    if (p != rank && c != null) {
                      try {
                        c.abort();
                      } catch (RuntimeException ignored) {
                        // closed meanwhile
                      }
                    }
                  }
                }
              },
              "colibri-perf-rank-" + rank);
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) {
      joinUninterruptibly(t);
    }
    Throwable first = null;
    for (int r = 0; r < n && first == null; r++) {
      Throwable f = failures.get(r);
      // Prefer the rank that failed for a reason of its own over those aborted because of it.
      if (f != null
          && !(f instanceof ColibriException
              && ((ColibriException) f).code() == io.colibri.ErrorCode.ABORTED)) {
        first = f;
        err.println("colibri perf: rank " + r + " failed: " + describe(f));
      }
    }
    for (int r = 0; r < n && first == null; r++) {
      if (failures.get(r) != null) {
        first = failures.get(r);
        err.println("colibri perf: rank " + r + " failed: " + describe(first));
      }
    }
    if (first != null) {
      if (!(first instanceof ColibriException)) {
        first.printStackTrace(err);
      }
      return EXIT_FAILED;
    }
    return wrong[0] == 0 ? EXIT_OK : EXIT_WRONG;
  }

  private static int runProcesses(PerfConfig config, PrintStream out, PrintStream err) {
    UniqueId id = UniqueId.create();
    int n = config.ranks;
    List<Process> children = new ArrayList<>();
    AtomicReference<Communicator> rank0 = new AtomicReference<>();
    AtomicReference<String> childFailure = new AtomicReference<>();
    Thread cleanup = new Thread(() -> children.forEach(Process::destroyForcibly));
    Runtime.getRuntime().addShutdownHook(cleanup);
    try {
      for (int r = 1; r < n; r++) {
        List<String> cmd = childCommand(config, id, r);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectOutput(ProcessBuilder.Redirect.DISCARD); // only rank 0 prints
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process p;
        try {
          p = pb.start();
        } catch (IOException e) {
          err.println("colibri perf: could not start rank " + r + " (" + cmd.get(0) + "): " + e);
          children.forEach(Process::destroyForcibly);
          return EXIT_FAILED;
        }
        children.add(p);
        final int rank = r;
        p.onExit()
            .thenAccept(
                ph -> {
                  int code = ph.exitValue();
                  if (code != 0
                      && childFailure.compareAndSet(
                          null,
                          "rank "
                              + rank
                              + " (pid "
                              + ph.pid()
                              + ") exited with code "
                              + code
                              + (code > 128 ? " (killed by signal " + (code - 128) + ")" : "")
                              + " before rank 0 finished")) {
                    Communicator c = rank0.get();
                    if (c != null) {
                      try {
                        c.abort(); // rank 0 would otherwise wait for it until the timeout
                      } catch (RuntimeException ignored) {
                        // closed meanwhile
                      }
                    }
                  }
                });
      }
      long wrong;
      try {
        wrong =
            runRank(config, id, 0, out, rank0, Progress.choose(config, out, err, steps(config)));
      } catch (RuntimeException e) {
        // A child's failure is the cause; rank 0's own error is then just "aborted".
        sleepQuietly(200);
        String cause = childFailure.get();
        err.println("colibri perf: rank 0 failed: " + e.getMessage());
        if (cause != null) {
          err.println("colibri perf: " + cause);
        }
        return EXIT_FAILED;
      }
      int rc = EXIT_OK;
      for (int r = 1; r < n; r++) {
        Process p = children.get(r - 1);
        try {
          if (!p.waitFor(60, TimeUnit.SECONDS)) {
            err.println("colibri perf: rank " + r + " did not exit 60 s after the run; killing it");
            p.destroyForcibly();
            rc = EXIT_FAILED;
          } else if (p.exitValue() != 0) {
            err.println("colibri perf: rank " + r + " exited with code " + p.exitValue());
            rc = EXIT_FAILED;
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return EXIT_FAILED;
        }
      }
      if (rc != EXIT_OK) {
        return rc;
      }
      return wrong == 0 ? EXIT_OK : EXIT_WRONG;
    } finally {
      children.forEach(
          p -> {
            if (p.isAlive()) {
              p.destroyForcibly();
            }
          });
      try {
        Runtime.getRuntime().removeShutdownHook(cleanup);
      } catch (IllegalStateException ignored) {
        // shutting down
      }
    }
  }

  /** java binary, JVM options of this process that matter, class path, main class, arguments. */
  static List<String> childCommand(PerfConfig config, UniqueId id, int rank) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    boolean gcChosen = false;
    for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      // Memory settings, system properties (colibri.*, JavaCPP's) and GC choice carry over;
      // debugger and agent options would collide (one port, one agent) and do not.
      if (a.startsWith("-D")
          || a.startsWith("-Xmx")
          || a.startsWith("-Xms")
          || a.startsWith("-Xss")
          || a.startsWith("-XX:")) {
        cmd.add(a);
        gcChosen |= a.startsWith("-XX:+Use") && a.endsWith("GC");
      }
    }
    if (!gcChosen) {
      cmd.add("-XX:+UseSerialGC"); // N JVMs on few cores: no parallel GC threads fighting
    }
    cmd.add("-cp");
    cmd.add(absoluteClassPath());
    cmd.add(Perf.class.getName());
    cmd.addAll(config.original);
    cmd.add("--child-rank");
    cmd.add(Integer.toString(rank));
    cmd.add("--child-id");
    cmd.add(id.toString());
    return cmd;
  }

  private static String absoluteClassPath() {
    String cp = System.getProperty("java.class.path", "");
    List<String> parts = new ArrayList<>();
    for (String p : cp.split(File.pathSeparator)) {
      if (!p.isEmpty()) {
        parts.add(Path.of(p).toAbsolutePath().toString());
      }
    }
    return String.join(File.pathSeparator, parts);
  }

  // ---- one rank ----

  /**
   * The sizes of the sweep that {@code c} runs: those that hold at least one element per rank,
   * without a size that rounds to the previous one's bytes. The same on every rank.
   */
  static List<Long> runSizes(Collective c, PerfConfig config) {
    List<Long> run = new ArrayList<>();
    long lastBytes = -1;
    for (long size : config.sizes()) {
      long count = c.perRankCount(size, config.ranks, config.type);
      long bytes = c.totalCount(count, config.ranks) * config.type.size();
      if (count == 0 || bytes == lastBytes) {
        continue;
      }
      lastBytes = bytes;
      run.add(size);
    }
    return run;
  }

  /** Sizes over all collectives of the run: the total of the progress display. */
  static int steps(PerfConfig config) {
    int steps = 0;
    for (Collective c : config.collectives) {
      steps += runSizes(c, config).size();
    }
    return steps;
  }

  /**
   * Runs the whole sweep as {@code rank}. {@code out} is non-null on rank 0 only. The communicator
   * is published through {@code commRef} (so another thread can abort it). {@code progress}
   * shows on stderr which size runs (rank 0; {@link Progress#OFF} elsewhere). Returns the number
   * of wrong elements summed over all ranks and sizes.
   */
  static long runRank(
      PerfConfig config,
      UniqueId id,
      int rank,
      PrintStream out,
      AtomicReference<Communicator> commRef,
      Progress progress) {
    Options.Builder ob = Options.builder().transport(config.transport).algorithm(config.algorithm);
    if (config.timeoutMs > 0) {
      ob.timeout(Duration.ofMillis(config.timeoutMs));
    }
    Options options = ob.build();
    int n = config.ranks;
    long started = System.nanoTime();
    try (Communicator comm = Communicator.init(id, rank, n, options)) {
      commRef.set(comm);
      return sweep(config, comm, rank, out, progress, started);
    } finally {
      progress.clear(); // no half line left before an error message or the shell prompt
    }
  }

  private static long sweep(
      PerfConfig config,
      Communicator comm,
      int rank,
      PrintStream out,
      Progress progress,
      long started) {
    int n = config.ranks;
    Report report = out == null ? null : new Report(out, config);
    if (report != null) {
      report.header(Version.library(), safeTransportInfo(comm));
    }
    int ts = config.type.size();
    long capacity = Math.max(8, (config.maxBytes + 7) / 8 * 8);
    ByteBuffer send = ByteBuffer.allocateDirect((int) capacity).order(ByteOrder.nativeOrder());
    ByteBuffer recv = ByteBuffer.allocateDirect((int) capacity).order(ByteOrder.nativeOrder());
    ByteBuffer one = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
    long totalWrong = 0;
    for (Collective c : Collective.values()) {
      if (!config.collectives.contains(c)) {
        continue;
      }
      if (report != null) {
        report.beginTable(c);
      }
      for (long size : runSizes(c, config)) {
        long count = c.perRankCount(size, n, config.type);
        long totalCount = c.totalCount(count, n);
        long bytes = totalCount * ts;
        progress.start(c, bytes);
        c.fillInput(send, rank, n, count, config.type);
        for (int i = 0; i < config.warmup; i++) {
          c.run(comm, send, recv, count, config);
        }
        barrier(comm, one);
        long t0 = System.nanoTime();
        for (int i = 0; i < config.iters; i++) {
          c.run(comm, send, recv, count, config);
        }
        long elapsed = System.nanoTime() - t0;
        Algorithm algorithm = comm.lastAlgorithm(); // before the reductions below change it
        double maxNs = reduceMax(comm, one, elapsed);
        long wrong = -1;
        if (config.check) {
          DataCheck.poison(recv, c.recvCount(count, n) * ts);
          c.run(comm, send, recv, count, config);
          long mine = c.countWrong(recv, rank, n, count, config);
          wrong = reduceSum(comm, one, mine);
          totalWrong += wrong;
        }
        progress.clear();
        if (report != null) {
          double timeUs = maxNs / config.iters / 1e3;
          double algbw = bytes / (timeUs * 1e3); // bytes per ns = GB/s
          report.row(
              new Report.Row(
                  c,
                  bytes,
                  totalCount,
                  typeName(config.type),
                  Collective.opColumn(c, config.op, config.root),
                  timeUs,
                  algbw,
                  algbw * c.busFactor(n),
                  wrong,
                  algorithm.configName()));
        }
      }
      if (report != null) {
        report.endTable(c);
      }
    }
    if (report != null) {
      report.footer(totalWrong, (System.nanoTime() - started) / 1e9);
      writeFiles(config, report, totalWrong, out);
    }
    return totalWrong;
  }

  private static void writeFiles(
      PerfConfig config, Report report, long totalWrong, PrintStream out) {
    try {
      if (config.csv != null) {
        report.writeCsv(config.csv);
        out.println("# CSV written to " + config.csv);
      }
      if (config.json != null) {
        report.writeJson(config.json, Version.library(), totalWrong);
        out.println("# JSON written to " + config.json);
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("could not write the results: " + e.getMessage(), e);
    }
  }

  /** Every rank enters, then every rank leaves: a one-element allReduce. */
  private static void barrier(Communicator comm, ByteBuffer one) {
    one.putLong(0, 0);
    comm.allReduce(one, one, 1, DataType.INT64, ReduceOp.SUM);
  }

  private static double reduceMax(Communicator comm, ByteBuffer one, long value) {
    one.putLong(0, value);
    comm.allReduce(one, one, 1, DataType.INT64, ReduceOp.MAX);
    return one.getLong(0);
  }

  private static long reduceSum(Communicator comm, ByteBuffer one, long value) {
    one.putLong(0, value);
    comm.allReduce(one, one, 1, DataType.INT64, ReduceOp.SUM);
    return one.getLong(0);
  }

  private static String safeTransportInfo(Communicator comm) {
    try {
      return comm.transportInfo();
    } catch (RuntimeException e) {
      return null;
    }
  }

  static String typeName(DataType type) {
    return type.name().toLowerCase(Locale.ROOT);
  }

  static String opName(ReduceOp op) {
    return op.name().toLowerCase(Locale.ROOT);
  }

  private static String describe(Throwable t) {
    return t instanceof ColibriException ? t.getMessage() : t.toString();
  }

  private static void joinUninterruptibly(Thread t) {
    boolean interrupted = false;
    while (true) {
      try {
        t.join();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
