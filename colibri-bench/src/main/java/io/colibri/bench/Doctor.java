/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import java.io.PrintStream;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Locale;

/**
 * {@code colibri-bench.jar doctor}: checks, in order, what users otherwise check by hand before
 * running Colibri on GPUs and RDMA (library, NVIDIA driver, GPUs and their kernel image, peer
 * access, RDMA devices and ports, GPUDirect RDMA, GPU-NIC PCIe affinity, memlock limit, versions)
 * and prints one line per check: PASS, WARN, FAIL or SKIP, what was found and, for WARN and FAIL,
 * the fix. Exit code 1 if any check FAILs, 0 otherwise (2 for a usage error). See
 * docs/troubleshooting.md.
 *
 * <p>Everything read from /proc, /sys and /dev is read below a root folder ({@code --root},
 * default {@code /}), so tests build a fake tree; what only the driver knows comes through a
 * {@link DoctorProbe}.
 */
final class Doctor {

  static final int EXIT_OK = 0;
  static final int EXIT_FAIL = 1;
  static final int EXIT_USAGE = 2;

  /** Outcome of one check. */
  enum Status {
    PASS, WARN, FAIL, SKIP
  }

  /**
   * One line of the report.
   *
   * @param check what was checked ("driver", "gpu 0", "rdma mlx5_0", ...)
   * @param status the verdict
   * @param found what was found
   * @param fix what to do (WARN and FAIL), or null
   */
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

  private Doctor() {}

  static String usage() {
    return String.join("\n",
        "usage: java -jar colibri-bench.jar doctor [--json] [--no-gpu] [--root DIR]",
        "",
        "Checks this machine for Colibri, in order: the Colibri library, the NVIDIA driver, the",
        "GPUs (compute capability, PCI bus id, kernel image), peer access between GPUs, RDMA devices",
        "and ports, libibverbs, GPUDirect RDMA, GPU-NIC PCIe affinity, the memlock limit, and the",
        "versions. One line per check: PASS, WARN, FAIL or SKIP, what was found, and the fix.",
        "Exit code 1 if any check FAILs.",
        "",
        "  --json      one JSON array of {check, status, found, fix} instead of the text",
        "  --no-gpu    host collectives only: the GPU checks are SKIPped instead of FAILing",
        "  --root DIR  read /proc, /sys and /dev below DIR (default /; for tests)",
        "  -h, --help  this text",
        "",
        "See docs/troubleshooting.md, section 'colibri doctor'.");
  }

  /** Runs the doctor on this machine; returns the exit code. Does not call System.exit. */
  static int run(String[] args, PrintStream out, PrintStream err) {
    return run(args, out, err, DoctorProbe.system());
  }

  /** Runs the doctor with {@code probe} for what only the driver knows (tests pass a fake). */
  static int run(String[] args, PrintStream out, PrintStream err, DoctorProbe probe) {
    boolean json = false;
    boolean noGpu = false;
    Path root = Paths.get("/");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--json":
          json = true;
          break;
        case "--no-gpu":
          noGpu = true;
          break;
        case "--root":
          if (i + 1 >= args.length) {
            err.println("colibri doctor: --root needs a folder\n" + usage());
            return EXIT_USAGE;
          }
          root = Paths.get(args[++i]);
          break;
        case "-h":
        case "--help":
          out.println(usage());
          return EXIT_OK;
        default:
          err.println("colibri doctor: unknown argument '" + args[i] + "'\n" + usage());
          return EXIT_USAGE;
      }
    }
    List<Result> results = new DoctorChecks(root, probe, noGpu).run();
    out.print(json ? toJson(results) : toText(results));
    out.flush();
    return exitCode(results);
  }

  /** 1 if any check FAILed, else 0. */
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
    sb.append(String.format(Locale.ROOT, "colibri doctor: %d PASS, %d WARN, %d FAIL, %d SKIP%s%n",
        counts[0], counts[1], counts[2], counts[3],
        counts[2] > 0 ? " (exit code 1)" : ""));
    return sb.toString();
  }

  /** A JSON array of {check, status, found, fix}, one object per line. */
  static String toJson(List<Result> results) {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < results.size(); i++) {
      Result r = results.get(i);
      sb.append(i == 0 ? "\n  " : ",\n  ");
      sb.append("{\"check\": ").append(quote(r.check()))
          .append(", \"status\": ").append(quote(r.status().name()))
          .append(", \"found\": ").append(quote(r.found()))
          .append(", \"fix\": ").append(r.fix() == null ? "null" : quote(r.fix())).append('}');
    }
    sb.append(results.isEmpty() ? "]\n" : "\n]\n");
    return sb.toString();
  }

  /** {@code s} as a JSON string literal. */
  static String quote(String s) {
    StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          sb.append("\\\"");
          break;
        case '\\':
          sb.append("\\\\");
          break;
        case '\n':
          sb.append("\\n");
          break;
        case '\r':
          sb.append("\\r");
          break;
        case '\t':
          sb.append("\\t");
          break;
        default:
          if (c < 0x20) {
            sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
      }
    }
    return sb.append('"').toString();
  }
}
