/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

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
  record Result(String benchmark, Map<String, String> params, double score, double error,
      String unit) {
    String simpleName() {
      String[] parts = benchmark.split("\\.");
      return parts.length >= 2 ? parts[parts.length - 2] + "." + parts[parts.length - 1] : benchmark;
    }
  }

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
      String lib = r.benchmark().contains("NcclCollectives") ? "nccl"
          : r.benchmark().contains("ColibriCollectives") ? "colibri" : null;
      if (lib == null) {
        continue;
      }
      Map<String, String> p = r.params();
      long bytes = Sizes.parseBytes(p.getOrDefault("bytes", "0"));
      String key = String.format(Locale.ROOT, "%-13s|%-8s|%-5s|%s|%s|%015d",
          p.get("collective"), p.get("dtype"), p.get("mode"), p.getOrDefault("gpus", "0"),
          p.getOrDefault("ranksPerGpu", "1"), bytes);
      rows.computeIfAbsent(key, k -> new LinkedHashMap<>()).put(lib, r);
    }
    if (!rows.isEmpty()) {
      out.println("# Colibri vs NCCL: us per collective (stream-synchronized wall time / calls),"
          + " busbw in GB/s; ratio = Colibri time / NCCL time (< 1: Colibri faster)");
      out.printf(Locale.ROOT, "# %-13s %-8s %-5s %5s %12s %12s %9s %12s %9s %7s%n", "collective",
          "dtype", "mode", "ranks", "bytes", "colibri_us", "busbw", "nccl_us", "busbw", "ratio");
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
        double factor = ranks <= 1 ? 1 : switch (coll) {
          case ALL_REDUCE -> 2.0 * (ranks - 1) / ranks;
          case ALL_GATHER, REDUCE_SCATTER -> (ranks - 1.0) / ranks;
          case BROADCAST -> 1.0;
        };
        out.printf(Locale.ROOT, "  %-13s %-8s %-5s %5d %12d %12s %9s %12s %9s %7s%n", k[0].trim(),
            k[1].trim(), k[2].trim(), ranks, size, us(c), busbw(c, size, factor), us(n),
            busbw(n, size, factor), c != null && n != null && n.score() > 0
                ? String.format(Locale.ROOT, "%.2f", c.score() / n.score()) : "-");
      }
    }
    if (!overhead.isEmpty()) {
      out.println("# call overhead (1 rank, 8 B allReduce; device variants: enqueue only)");
      for (Result r : overhead) {
        out.printf(Locale.ROOT, "  %-34s %10.1f +- %.1f %s%n", r.simpleName(), r.score(),
            r.error(), r.unit());
      }
    }
  }

  private static String us(Result r) {
    return r == null ? "-" : String.format(Locale.ROOT, "%.2f", toMicros(r));
  }

  private static double toMicros(Result r) {
    switch (r.unit()) {
      case "ns/op": return r.score() / 1e3;
      case "ms/op": return r.score() * 1e3;
      case "s/op": return r.score() * 1e6;
      default: return r.score();
    }
  }

  private static String busbw(Result r, long size, double factor) {
    if (r == null) {
      return "-";
    }
    double seconds = toMicros(r) / 1e6;
    return String.format(Locale.ROOT, "%.2f", size / seconds / 1e9 * factor);
  }

  // ---- a small JSON reader, enough for JMH's result files ----

  static List<Result> parse(String json) {
    Object root = new JsonReader(json).value();
    List<Result> results = new ArrayList<>();
    if (!(root instanceof List<?> list)) {
      throw new IllegalArgumentException("not a JMH result file: the top level is not an array");
    }
    for (Object o : list) {
      Map<?, ?> m = (Map<?, ?>) o;
      Map<String, String> params = new TreeMap<>();
      if (m.get("params") instanceof Map<?, ?> pm) {
        pm.forEach((k, v) -> params.put(String.valueOf(k), String.valueOf(v)));
      }
      Map<?, ?> metric = (Map<?, ?>) m.get("primaryMetric");
      results.add(new Result(String.valueOf(m.get("benchmark")), params,
          number(metric.get("score")), number(metric.get("scoreError")),
          String.valueOf(metric.get("scoreUnit"))));
    }
    return results;
  }

  private static double number(Object o) {
    if (o instanceof Number n) {
      return n.doubleValue();
    }
    try {
      return Double.parseDouble(String.valueOf(o));  // JMH writes "NaN" as a string
    } catch (NumberFormatException e) {
      return Double.NaN;
    }
  }

  private static final class JsonReader {
    private final String s;
    private int i;

    JsonReader(String s) {
      this.s = s;
    }

    Object value() {
      skip();
      char c = s.charAt(i);
      switch (c) {
        case '{': return object();
        case '[': return array();
        case '"': return string();
        default: break;
      }
      int start = i;
      while (i < s.length() && ",]} \t\r\n".indexOf(s.charAt(i)) < 0) {
        i++;
      }
      String word = s.substring(start, i);
      switch (word) {
        case "true": return Boolean.TRUE;
        case "false": return Boolean.FALSE;
        case "null": return null;
        default: return Double.parseDouble(word);
      }
    }

    private Map<String, Object> object() {
      Map<String, Object> m = new LinkedHashMap<>();
      i++;
      skip();
      if (s.charAt(i) == '}') {
        i++;
        return m;
      }
      while (true) {
        skip();
        String k = string();
        skip();
        expect(':');
        m.put(k, value());
        skip();
        if (s.charAt(i) == ',') {
          i++;
        } else {
          expect('}');
          return m;
        }
      }
    }

    private List<Object> array() {
      List<Object> l = new ArrayList<>();
      i++;
      skip();
      if (s.charAt(i) == ']') {
        i++;
        return l;
      }
      while (true) {
        l.add(value());
        skip();
        if (s.charAt(i) == ',') {
          i++;
        } else {
          expect(']');
          return l;
        }
      }
    }

    private String string() {
      expect('"');
      StringBuilder b = new StringBuilder();
      while (s.charAt(i) != '"') {
        char c = s.charAt(i++);
        if (c == '\\') {
          char e = s.charAt(i++);
          switch (e) {
            case 'n': b.append('\n'); break;
            case 't': b.append('\t'); break;
            case 'r': b.append('\r'); break;
            case 'b': b.append('\b'); break;
            case 'f': b.append('\f'); break;
            case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
            default: b.append(e); break;
          }
        } else {
          b.append(c);
        }
      }
      i++;
      return b.toString();
    }

    private void expect(char c) {
      if (s.charAt(i) != c) {
        throw new IllegalArgumentException("JSON: expected '" + c + "' at " + i + ", found '"
            + s.charAt(i) + "'");
      }
      i++;
    }

    private void skip() {
      while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
        i++;
      }
    }
  }
}
