/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** What rank 0 prints: the tables as rows complete, and the CSV and JSON files at the end. */
final class Report {

  /** One measured size of one collective. */
  static final class Row {
    final Collective collective;
    final long bytes;
    final long count;
    final String type;
    final String opOrRoot;
    final double timeUs;
    final double algbw;
    final double busbw;
    /** Wrong elements summed over ranks; -1 when the check is off. */
    final long wrong;
    final String algorithm;

    Row(Collective collective, long bytes, long count, String type, String opOrRoot, double timeUs,
        double algbw, double busbw, long wrong, String algorithm) {
      this.collective = collective;
      this.bytes = bytes;
      this.count = count;
      this.type = type;
      this.opOrRoot = opOrRoot;
      this.timeUs = timeUs;
      this.algbw = algbw;
      this.busbw = busbw;
      this.wrong = wrong;
      this.algorithm = algorithm;
    }
  }

  private static final String ROW_FORMAT = "%14d %12d %9s %6s %11.2f %8.3f %8.3f %7s  %s%n";
  private static final String HEAD_FORMAT = "#%13s %12s %9s %6s %11s %8s %8s %7s  %s%n";

  private final PrintStream out;
  private final PerfConfig config;
  private final List<Row> rows = new ArrayList<>();
  private int tableRows;
  private double tableBusbw;
  private long tableWrong;

  Report(PrintStream out, PerfConfig config) {
    this.out = out;
    this.config = config;
  }

  void header(String version, String transportInfo) {
    out.println("# Colibri perf" + (version == null ? "" : " " + version) + ": "
        + config.describe());
    if (transportInfo != null && !transportInfo.isBlank()) {
      out.println("# Rank 0 runs on:");
      for (String line : transportInfo.strip().split("\n")) {
        out.println("#   " + line);
      }
    }
    out.println("# time: average per operation over " + config.iters + " iterations, of the"
        + " slowest rank (each rank times from a barrier to the end of its last iteration)");
    out.println("# algbw = size / time; busbw = algbw x 2(n-1)/n allReduce, (n-1)/n allGather"
        + " and reduceScatter, 1 broadcast; size of allGather/reduceScatter = all ranks' data");
    out.flush();
  }

  void beginTable(Collective c) {
    tableRows = 0;
    tableBusbw = 0;
    tableWrong = 0;
    out.println("#");
    out.println("# " + c.displayName());
    out.printf(Locale.ROOT, HEAD_FORMAT, "size", "count", "type",
        c == Collective.BROADCAST ? "root" : "redop", "time", "algbw", "busbw", "#wrong",
        "algorithm");
    out.println(String.format(Locale.ROOT, HEAD_FORMAT, "(B)", "(elements)", "", "", "(us)",
        "(GB/s)", "(GB/s)", "", "").stripTrailing());
    out.flush();
  }

  void row(Row r) {
    rows.add(r);
    tableRows++;
    tableBusbw += r.busbw;
    tableWrong += Math.max(0, r.wrong);
    out.printf(Locale.ROOT, ROW_FORMAT, r.bytes, r.count, r.type, r.opOrRoot, r.timeUs, r.algbw,
        r.busbw, r.wrong < 0 ? "n/a" : Long.toString(r.wrong), r.algorithm);
    out.flush();
  }

  void endTable(Collective c) {
    if (tableRows == 0) {
      out.println("# (no size of the sweep holds at least one element per rank)");
    }
    out.printf(Locale.ROOT, "# %s: avg busbw %.3f GB/s, %s%n", c.displayName(),
        tableRows == 0 ? 0.0 : tableBusbw / tableRows,
        config.check ? "wrong elements " + tableWrong + (tableWrong == 0 ? " (OK)" : " (FAILED)")
            : "data check off");
    out.flush();
  }

  void footer(long totalWrong, double seconds) {
    out.println("#");
    out.printf(Locale.ROOT, "# Out of bounds values : %s%n", !config.check ? "not checked"
        : totalWrong + (totalWrong == 0 ? " OK" : " FAILED"));
    out.printf(Locale.ROOT, "# Total time           : %.1f s%n", seconds);
    out.flush();
  }

  List<Row> rows() {
    return rows;
  }

  void writeCsv(Path path) throws IOException {
    StringBuilder sb = new StringBuilder(
        "collective,ranks,size_bytes,count,type,op,root,time_us,algbw_gbps,busbw_gbps,wrong,"
            + "algorithm\n");
    for (Row r : rows) {
      boolean bcast = r.collective == Collective.BROADCAST;
      sb.append(r.collective.displayName()).append(',').append(config.ranks).append(',')
          .append(r.bytes).append(',').append(r.count).append(',').append(r.type).append(',')
          .append(bcast ? "" : r.opOrRoot).append(',').append(bcast ? r.opOrRoot : "")
          .append(',').append(String.format(Locale.ROOT, "%.3f,%.6f,%.6f", r.timeUs, r.algbw,
              r.busbw))
          .append(',').append(r.wrong < 0 ? "" : Long.toString(r.wrong)).append(',')
          .append(r.algorithm).append('\n');
    }
    write(path, sb.toString());
  }

  void writeJson(Path path, String version, long totalWrong) throws IOException {
    StringBuilder sb = new StringBuilder("{\n");
    sb.append("  \"tool\": \"colibri-perf\",\n");
    sb.append("  \"version\": ").append(str(version)).append(",\n");
    sb.append("  \"ranks\": ").append(config.ranks).append(",\n");
    sb.append("  \"mode\": ").append(str(config.threads ? "threads" : "processes")).append(",\n");
    sb.append("  \"transport\": ").append(str(config.transport.configName())).append(",\n");
    sb.append("  \"algorithm\": ").append(str(config.algorithm.configName())).append(",\n");
    sb.append("  \"type\": ").append(str(Perf.typeName(config.type))).append(",\n");
    sb.append("  \"op\": ").append(str(Perf.opName(config.op))).append(",\n");
    sb.append("  \"root\": ").append(config.root).append(",\n");
    sb.append("  \"warmup\": ").append(config.warmup).append(",\n");
    sb.append("  \"iters\": ").append(config.iters).append(",\n");
    sb.append("  \"check\": ").append(config.check).append(",\n");
    sb.append("  \"time\": \"average per op, max over ranks\",\n");
    sb.append("  \"wrong\": ").append(config.check ? Long.toString(totalWrong) : "null")
        .append(",\n");
    sb.append("  \"results\": [");
    for (int i = 0; i < rows.size(); i++) {
      Row r = rows.get(i);
      boolean bcast = r.collective == Collective.BROADCAST;
      sb.append(i == 0 ? "\n" : ",\n");
      sb.append("    {\"collective\": ").append(str(r.collective.displayName()))
          .append(", \"size_bytes\": ").append(r.bytes)
          .append(", \"count\": ").append(r.count)
          .append(", \"type\": ").append(str(r.type))
          .append(", \"op\": ").append(bcast ? "null" : str(r.opOrRoot))
          .append(", \"root\": ").append(bcast ? r.opOrRoot : "null")
          .append(", \"time_us\": ").append(num(r.timeUs))
          .append(", \"algbw_gbps\": ").append(num(r.algbw))
          .append(", \"busbw_gbps\": ").append(num(r.busbw))
          .append(", \"wrong\": ").append(r.wrong < 0 ? "null" : Long.toString(r.wrong))
          .append(", \"algorithm\": ").append(str(r.algorithm)).append('}');
    }
    sb.append(rows.isEmpty() ? "]\n" : "\n  ]\n").append("}\n");
    write(path, sb.toString());
  }

  private static void write(Path path, String text) throws IOException {
    Path parent = path.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    Files.writeString(path, text, StandardCharsets.UTF_8);
  }

  private static String num(double v) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, "%.6g", v) : "null";
  }

  private static String str(String s) {
    return s == null ? "null" : Doctor.quote(s);
  }
}
