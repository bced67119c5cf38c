/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import io.colibri.bench.common.Commands;
import io.colibri.bench.common.Mappers;
import java.io.PrintStream;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code colibri-bench.jar doctor}: checks, in order, what users otherwise check by hand before
 * running Colibri (library, /dev/shm, NVIDIA driver, GPUs and their kernel image, peer access, RDMA
 * devices and ports, GPUDirect RDMA, GPU-NIC PCIe affinity, memlock limit, versions) and prints one
 * line per check: PASS, WARN, FAIL or SKIP, what was found and, for WARN and FAIL, the fix; with
 * {@code --json} one JSON object (version, host, summary, checks). A check of a device that is not
 * there SKIPs; FAIL is kept for what the host path needs (library, /dev/shm) and for a device that
 * is present but broken. Exit code 0 when no check FAILs (the host path can run here), 1 when one
 * does, 2 for a usage error. See docs/troubleshooting.md.
 *
 * <p>Everything read from /proc, /sys and /dev is read below a root folder ({@code --root},
 * default {@code /}), so tests build a fake tree; what only the driver, the kernel (statvfs) or a
 * second process can tell comes through a {@code DoctorProbe}.
 */
@Command(
    name = "doctor",
    mixinStandardHelpOptions = true,
    versionProvider = Commands.VersionProvider.class,
    header =
        "Checks this machine for Colibri (/dev/shm, driver, GPUs, RDMA, limits) and says how"
            + " to fix each problem.",
    sortOptions = false,
    description = {
      "Checks this machine for Colibri, in order: the Colibri library, /dev/shm (shared"
          + " memory between the ranks of one host), the NVIDIA driver, the GPUs (compute"
          + " capability, PCI bus id, kernel image), peer access between GPUs, RDMA devices and"
          + " ports, libibverbs, GPUDirect RDMA, GPU-NIC PCIe affinity, the memlock limit, and the"
          + " versions. One line per check: PASS, WARN, FAIL or SKIP, what was found, and the"
          + " fix.",
      "",
      "Without a GPU (no NVIDIA kernel module, no /dev/nvidia*) the GPU checks SKIP, and"
          + " without an RDMA device the RDMA checks SKIP: the host path (shared memory and TCP"
          + " between ranks) works without them; device buffers need a GPU. A device that is"
          + " present but broken FAILs (a driver whose libcuda.so.1 does not load, RDMA ports"
          + " all down, memlock too low for RDMA).",
      ""
    },
    footer = {
      "",
      "Exit code:",
      "  0  the host path can run here: no check FAILed (WARN and SKIP lines allowed)",
      "  1  a check FAILed: something the host path needs (the library, /dev/shm),",
      "     or a GPU or RDMA device that is present but broken (not judged with",
      "     --no-gpu, --no-rdma)",
      "  2  bad command line",
      "See docs/troubleshooting.md, section 'colibri doctor'."
    })
public final class Doctor implements Callable<Integer> {

  static final int EXIT_OK = 0;
  static final int EXIT_FAIL = 1;

  private static final Pattern MEM_TOTAL = Pattern.compile("MemTotal:\\s+(\\d{1,15})\\s+kB");

  /** Outcome of one check. */
  enum Status {
    PASS,
    WARN,
    FAIL,
    SKIP
  }

  /**
   * One line of the report.
   *
   * @param check what was checked ("driver", "gpu 0", "rdma mlx5_0", ...)
   * @param status the verdict
   * @param found what was found
   * @param fix what to do (WARN and FAIL), or null
   */
  @JsonPropertyOrder({"check", "status", "found", "fix"})
  record Result(String check, Status status, String found, String fix) {
    static Result pass(String check, String found) {
      return new Result(check, Status.PASS, found, null);
    }

    static Result skip(String check, String found) {
      return new Result(check, Status.SKIP, found, null);
    }

    static Result warn(String check, String found, String fix) {
      return new Result(check, Status.WARN, found, fix);
    }

    static Result fail(String check, String found, String fix) {
      return new Result(check, Status.FAIL, found, fix);
    }
  }

  /**
   * The machine the doctor ran on, for {@code --json}. Read below the root folder like the checks
   * (null where the file is not there); {@code cpus} and {@code arch} are what this JVM sees.
   *
   * @param hostname /proc/sys/kernel/hostname
   * @param os PRETTY_NAME of /etc/os-release ("Debian GNU/Linux 12 (bookworm)"), else the JVM's
   *     os.name
   * @param kernel /proc/sys/kernel/osrelease
   * @param arch the JVM's os.arch ("amd64")
   * @param cpus processors available to this JVM
   * @param memoryBytes MemTotal of /proc/meminfo
   * @param java the Java runtime ("17.0.15 (Debian, /usr/lib/jvm/...)")
   */
  @JsonPropertyOrder({"hostname", "os", "kernel", "arch", "cpus", "memory_bytes", "java"})
  record Host(
      String hostname,
      String os,
      String kernel,
      String arch,
      int cpus,
      Long memoryBytes,
      String java) {

    static Host of(DoctorFiles files, DoctorProbe probe) {
      String os = null;
      List<String> release = DoctorFiles.lines(files.path("/etc/os-release"));
      for (String line : release == null ? List.<String>of() : release) {
        if (line.startsWith("PRETTY_NAME=")) {
          os = line.substring("PRETTY_NAME=".length()).replaceAll("^\"|\"$", "");
        }
      }
      Long memory = null;
      List<String> meminfo = DoctorFiles.lines(files.path("/proc/meminfo"));
      for (String line : meminfo == null ? List.<String>of() : meminfo) {
        Matcher m = MEM_TOTAL.matcher(line);
        if (m.matches()) {
          memory = Long.parseLong(m.group(1)) * 1024;
        }
      }
      return new Host(
          files.read("/proc/sys/kernel/hostname"),
          os != null ? os : System.getProperty("os.name"),
          files.read("/proc/sys/kernel/osrelease"),
          System.getProperty("os.arch"),
          Runtime.getRuntime().availableProcessors(),
          memory,
          probe.javaVersion());
    }
  }

  /**
   * The counts of each status and the verdict: FAIL if a check FAILed, else WARN if one WARNed,
   * else PASS; the exit code that goes with it.
   */
  @JsonPropertyOrder({"pass", "warn", "fail", "skip", "verdict", "exit_code"})
  record Summary(int pass, int warn, int fail, int skip, Status verdict, int exitCode) {

    static Summary of(List<Result> results) {
      int[] n = new int[Status.values().length];
      for (Result r : results) {
        n[r.status().ordinal()]++;
      }
      Status verdict =
          n[Status.FAIL.ordinal()] > 0
              ? Status.FAIL
              : n[Status.WARN.ordinal()] > 0 ? Status.WARN : Status.PASS;
      return new Summary(
          n[Status.PASS.ordinal()],
          n[Status.WARN.ordinal()],
          n[Status.FAIL.ordinal()],
          n[Status.SKIP.ordinal()],
          verdict,
          Doctor.exitCode(results));
    }
  }

  /**
   * What {@code --json} prints.
   *
   * @param version the Colibri library's version ("0.1.0"), null when it does not load
   */
  @JsonPropertyOrder({"tool", "version", "host", "summary", "checks"})
  record Report(String tool, String version, Host host, Summary summary, List<Result> checks) {

    Report(String version, Host host, List<Result> checks) {
      this("colibri-doctor", version, host, Summary.of(checks), checks);
    }
  }

  @Option(
      names = "--json",
      description =
          "print one JSON object (version, host, summary, and"
              + " the checks as {check, status, found, fix}) instead of the text")
  boolean json;

  @Option(
      names = "--no-gpu",
      description =
          "SKIP the GPU checks even where a GPU is present (one you do not use; without a GPU"
              + " they SKIP anyway)")
  boolean noGpu;

  @Option(
      names = "--no-rdma",
      description =
          "SKIP the RDMA checks even where an RDMA device is present (one you do not use;"
              + " without one they SKIP anyway)")
  boolean noRdma;

  @Option(
      names = "--root",
      paramLabel = "DIR",
      description =
          "read /proc, /sys and /dev below" + " DIR (default: ${DEFAULT-VALUE}; for tests)")
  Path root = Paths.get("/");

  private final PrintStream out;
  private final DoctorProbe probe;

  /**
   * The command, printing to {@code out}, asking the native library, the driver and the JVM
   * what only they know ({@code DoctorProbe.system()}).
   *
   * @param out where the report goes
   */
  public Doctor(PrintStream out) {
    this(out, DoctorProbe.system());
  }

  /** The command, printing to {@code out}, asking {@code probe} what only the driver knows. */
  Doctor(PrintStream out, DoctorProbe probe) {
    this.out = out;
    this.probe = probe;
  }

  @Override
  public Integer call() {
    DoctorChecks checks = new DoctorChecks(root, probe, noGpu, noRdma);
    List<Result> results = checks.run();
    out.print(
        json
            ? toJson(
                new Report(checks.libraryVersion(), Host.of(new DoctorFiles(root), probe), results))
            : toText(results));
    out.flush();
    return exitCode(results);
  }

  /**
   * 1 if any check FAILed, else 0. The checks FAIL only for what the host path needs and for a
   * device that is present but broken, so 0 means the host path can run here.
   */
  static int exitCode(List<Result> results) {
    return results.stream().anyMatch(r -> r.status() == Status.FAIL) ? EXIT_FAIL : EXIT_OK;
  }

  /** One line per result ("WARN  memlock: ... Fix: ..."), then a count per status. */
  static String toText(List<Result> results) {
    StringBuilder sb = new StringBuilder();
    int[] counts = new int[Status.values().length];
    for (Result r : results) {
      counts[r.status().ordinal()]++;
      sb.append(String.format(Locale.ROOT, "%-4s  %s: %s", r.status(), r.check(), r.found()));
      if (r.fix() != null) {
        sb.append(" Fix: ").append(r.fix());
      }
      sb.append('\n');
    }
    sb.append(
        String.format(
            Locale.ROOT,
            "colibri doctor: %d PASS, %d WARN, %d FAIL, %d SKIP%s%n",
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[2] > 0 ? " (exit code 1)" : ""));
    return sb.toString();
  }

  /** The report as indented JSON. */
  static String toJson(Report report) {
    return Mappers.json(report);
  }
}
