/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.colibri.DataType;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Side-by-side table of JMH JSON results ({@code -rf json}): Colibri and NCCL per collective,
 * size, type, mode and GPU count, with bus bandwidth and the ratio, then the call-overhead scores.
 * <pre>java -cp colibri-jmh.jar io.colibri.bench.jmh.Compare [--gpus N] jmh-*.json</pre>
 * {@code --gpus} is the number of visible GPUs, for results run with {@code gpus=0} (by default the
 * GPUs CUDA sees here, 1 where CUDA cannot be loaded).
 */
public final class Compare {
  private Compare() {}

  /** One JMH result: benchmark name, parameters, score and error, unit. */
  record Result(
      String benchmark, Map<String, String> params, double score, double error, String unit) {
    String simpleName() {
      String[] parts = benchmark.split("\\.");
      return parts.length >= 2
          ? parts[parts.length - 2] + "." + parts[parts.length - 1]
          : benchmark;
    }
  }

  /**
   * Prints the table of the given result files to standard output.
   *
   * @param args {@code [--gpus N]} and the paths of JMH JSON result files
   * @throws IOException if a result file cannot be read
   */
  public static void main(String[] args) throws IOException {
    int gpus = 0;
    List<Result> all = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--gpus") && i + 1 < args.length) {
        gpus = Integer.parseInt(args[++i]);
      } else {
        all.addAll(parse(Files.readString(Path.of(args[i]), StandardCharsets.UTF_8)));
      }
    }
    if (gpus <= 0) {
      try {
        gpus = Math.max(1, Cuda.deviceCount());
      } catch (RuntimeException | LinkageError e) {
        gpus = 1;
      }
    }
    print(all, gpus, System.out);
  }

  static void print(List<Result> all, int visibleGpus, PrintStream out) {
    // key: collective, dtype, mode, gpus, ranksPerGpu, bytes -> library -> result
    Map<String, Map<String, Result>> rows = new TreeMap<>();
    List<Result> overhead = new ArrayList<>();
    for (Result r : all) {
      if (r.benchmark().contains("CallOverhead")) {
        overhead.add(r);
        continue;
      }
      String lib =
          r.benchmark().contains("NcclCollectives")
              ? "nccl"
              : r.benchmark().contains("ColibriCollectives") ? "colibri" : null;
      if (lib == null) {
        continue;
      }
      Map<String, String> p = r.params();
      long bytes = Sizes.parseBytes(p.getOrDefault("bytes", "0"));
      String key =
          String.format(
              Locale.ROOT,
              "%-13s|%-8s|%-5s|%s|%s|%015d",
              p.get("collective"),
              p.get("dtype"),
              p.get("mode"),
              p.getOrDefault("gpus", "0"),
              p.getOrDefault("ranksPerGpu", "1"),
              bytes);
      rows.computeIfAbsent(key, k -> new LinkedHashMap<>()).put(lib, r);
    }
    if (!rows.isEmpty()) {
      out.println(
          "# Colibri vs NCCL: us per collective (stream-synchronized wall time / calls),"
              + " busbw in GB/s; ratio = Colibri time / NCCL time (< 1: Colibri faster)");
      out.printf(
          Locale.ROOT,
          "# %-13s %-8s %-5s %5s %12s %12s %9s %12s %9s %7s%n",
          "collective",
          "dtype",
          "mode",
          "ranks",
          "bytes",
          "colibri_us",
          "busbw",
          "nccl_us",
          "busbw",
          "ratio");
      for (Map.Entry<String, Map<String, Result>> e : rows.entrySet()) {
        String[] k = e.getKey().split("\\|");
        Result c = e.getValue().get("colibri");
        Result n = e.getValue().get("nccl");
        Result any = c != null ? c : n;
        Map<String, String> p = any.params();
        int gpus = Integer.parseInt(k[3]) == 0 ? visibleGpus : Integer.parseInt(k[3]);
        int ranks = gpus * Integer.parseInt(k[4]);
        Coll coll = Coll.parse(p.get("collective"));
        DataType type = Sizes.parseType(p.get("dtype"));
        long count = Sizes.countPerRank(coll, Sizes.parseBytes(p.get("bytes")), type, ranks);
        long size = count * type.size() * (coll.sizeCountsAllRanks() ? ranks : 1);
        double factor =
            ranks <= 1
                ? 1
                : switch (coll) {
                  case ALL_REDUCE -> 2.0 * (ranks - 1) / ranks;
                  case ALL_GATHER, REDUCE_SCATTER -> (ranks - 1.0) / ranks;
                  case BROADCAST -> 1.0;
                };
        out.printf(
            Locale.ROOT,
            "  %-13s %-8s %-5s %5d %12d %12s %9s %12s %9s %7s%n",
            k[0].trim(),
            k[1].trim(),
            k[2].trim(),
            ranks,
            size,
            us(c),
            busbw(c, size, factor),
            us(n),
            busbw(n, size, factor),
            c != null && n != null && n.score() > 0
                ? String.format(Locale.ROOT, "%.2f", c.score() / n.score())
                : "-");
      }
    }
    if (!overhead.isEmpty()) {
      out.println("# call overhead (1 rank, 8 B allReduce; device variants: enqueue only)");
      for (Result r : overhead) {
        out.printf(
            Locale.ROOT,
            "  %-34s %10.1f +- %.1f %s%n",
            r.simpleName(),
            r.score(),
            r.error(),
            r.unit());
      }
    }
  }

  private static String us(Result r) {
    return r == null ? "-" : String.format(Locale.ROOT, "%.2f", toMicros(r));
  }

  private static double toMicros(Result r) {
    switch (r.unit()) {
      case "ns/op":
        return r.score() / 1e3;
      case "ms/op":
        return r.score() * 1e3;
      case "s/op":
        return r.score() * 1e6;
      default:
        return r.score();
    }
  }

  private static String busbw(Result r, long size, double factor) {
    if (r == null) {
      return "-";
    }
    double seconds = toMicros(r) / 1e6;
    return String.format(Locale.ROOT, "%.2f", size / seconds / 1e9 * factor);
  }

  // ---- JMH's result files ----

  static List<Result> parse(String json) {
    JsonNode root;
    try {
      root = new ObjectMapper().readTree(json);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "not a JMH result file: not valid JSON (" + e.getOriginalMessage() + ")", e);
    }
    if (root == null || !root.isArray()) {
      throw new IllegalArgumentException("not a JMH result file: the top level is not an array");
    }
    List<Result> results = new ArrayList<>();
    for (JsonNode m : root) {
      Map<String, String> params = new TreeMap<>();
      for (Map.Entry<String, JsonNode> p : m.path("params").properties()) {
        params.put(p.getKey(), p.getValue().asText());
      }
      JsonNode metric = m.path("primaryMetric");
      results.add(
          new Result(
              m.path("benchmark").asText(),
              params,
              number(metric.path("score")),
              number(metric.path("scoreError")),
              metric.path("scoreUnit").asText()));
    }
    return results;
  }

  /** A number, or NaN: JMH writes "NaN" as a string. */
  private static double number(JsonNode n) {
    if (n.isNumber()) {
      return n.doubleValue();
    }
    try {
      return Double.parseDouble(n.asText());
    } catch (NumberFormatException e) {
      return Double.NaN;
    }
  }
}
