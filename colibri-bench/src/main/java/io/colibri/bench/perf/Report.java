/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import com.fasterxml.jackson.dataformat.csv.CsvSchema;
import io.colibri.bench.common.Mappers;
import java.io.IOException;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.BiFunction;

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

    Row(
        Collective collective,
        long bytes,
        long count,
        String type,
        String opOrRoot,
        double timeUs,
        double algbw,
        double busbw,
        long wrong,
        String algorithm) {
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
    out.println(
        "# Colibri perf" + (version == null ? "" : " " + version) + ": " + config.describe());
    if (transportInfo != null && !transportInfo.isBlank()) {
      out.println("# Rank 0 runs on:");
      for (String line : transportInfo.strip().split("\n")) {
        out.println("#   " + line);
      }
    }
    out.println(
        "# time: average per operation over "
            + config.iters
            + " iterations, of the"
            + " slowest rank (each rank times from a barrier to the end of its last iteration)");
    out.println(
        "# algbw = size / time; busbw = algbw x 2(n-1)/n allReduce, (n-1)/n allGather"
            + " and reduceScatter, 1 broadcast; size of allGather/reduceScatter = all ranks' data");
    out.flush();
  }

  void beginTable(Collective c) {
    tableRows = 0;
    tableBusbw = 0;
    tableWrong = 0;
    out.println("#");
    out.println("# " + c.displayName());
    out.printf(
        Locale.ROOT,
        HEAD_FORMAT,
        "size",
        "count",
        "type",
        c == Collective.BROADCAST ? "root" : "redop",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "algorithm");
    out.println(
        String.format(
                Locale.ROOT,
                HEAD_FORMAT,
                "(B)",
                "(elements)",
                "",
                "",
                "(us)",
                "(GB/s)",
                "(GB/s)",
                "",
                "")
            .stripTrailing());
    out.flush();
  }

  void row(Row r) {
    rows.add(r);
    tableRows++;
    tableBusbw += r.busbw;
    tableWrong += Math.max(0, r.wrong);
    out.printf(
        Locale.ROOT,
        ROW_FORMAT,
        r.bytes,
        r.count,
        r.type,
        r.opOrRoot,
        r.timeUs,
        r.algbw,
        r.busbw,
        r.wrong < 0 ? "n/a" : Long.toString(r.wrong),
        r.algorithm);
    out.flush();
  }

  void endTable(Collective c) {
    if (tableRows == 0) {
      out.println("# (no size of the sweep holds at least one element per rank)");
    }
    out.printf(
        Locale.ROOT,
        "# %s: avg busbw %.3f GB/s, %s%n",
        c.displayName(),
        tableRows == 0 ? 0.0 : tableBusbw / tableRows,
        config.check
            ? "wrong elements " + tableWrong + (tableWrong == 0 ? " (OK)" : " (FAILED)")
            : "data check off");
    out.flush();
  }

  void footer(long totalWrong, double seconds) {
    out.println("#");
    out.printf(
        Locale.ROOT,
        "# Out of bounds values : %s%n",
        !config.check ? "not checked" : totalWrong + (totalWrong == 0 ? " OK" : " FAILED"));
    out.printf(Locale.ROOT, "# Total time           : %.1f s%n", seconds);
    out.flush();
  }

  List<Row> rows() {
    return rows;
  }

  /**
   * One row of the result files, as the perf tool writes it to {@code --csv} and {@code --json}
   * (the columns, their order and their names are the file format). The CSV rounds time to 3
   * decimals and bandwidths to 6, the JSON all three to 6 significant digits. {@code op} is null
   * for broadcast, {@code root} null for the others, {@code wrong} null when the data check is
   * off; a null is an empty CSV field.
   */
  @JsonPropertyOrder({
    "collective",
    "ranks",
    "size_bytes",
    "count",
    "type",
    "op",
    "root",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "algorithm"
  })
  record FileRow(
      String collective,
      int ranks,
      long sizeBytes,
      long count,
      String type,
      String op,
      Integer root,
      BigDecimal timeUs,
      BigDecimal algbwGbps,
      BigDecimal busbwGbps,
      Long wrong,
      String algorithm) {

    static FileRow csv(Row r, int ranks) {
      return of(
          r,
          ranks,
          Mappers.decimals(r.timeUs, 3),
          Mappers.decimals(r.algbw, 6),
          Mappers.decimals(r.busbw, 6));
    }

    static FileRow json(Row r, int ranks) {
      return of(
          r,
          ranks,
          Mappers.significant(r.timeUs, 6),
          Mappers.significant(r.algbw, 6),
          Mappers.significant(r.busbw, 6));
    }

    private static FileRow of(
        Row r, int ranks, BigDecimal time, BigDecimal algbw, BigDecimal busbw) {
      boolean bcast = r.collective == Collective.BROADCAST;
      return new FileRow(
          r.collective.displayName(),
          ranks,
          r.bytes,
          r.count,
          r.type,
          bcast ? null : r.opOrRoot,
          bcast ? Integer.valueOf(r.opOrRoot) : null,
          time,
          algbw,
          busbw,
          r.wrong < 0 ? null : r.wrong,
          r.algorithm);
    }
  }

  /** The {@code --json} file: the settings of the run, then its rows. */
  @JsonPropertyOrder({
    "tool",
    "version",
    "ranks",
    "mode",
    "transport",
    "algorithm",
    "type",
    "op",
    "root",
    "warmup",
    "iters",
    "check",
    "time",
    "wrong",
    "results"
  })
  record RunFile(
      String tool,
      String version,
      int ranks,
      String mode,
      String transport,
      String algorithm,
      String type,
      String op,
      int root,
      int warmup,
      int iters,
      boolean check,
      String time,
      Long wrong,
      List<FileRow> results) {}

  private List<FileRow> fileRows(BiFunction<Row, Integer, FileRow> encoding) {
    List<FileRow> out = new ArrayList<>();
    for (Row r : rows) {
      out.add(encoding.apply(r, config.ranks));
    }
    return out;
  }

  void writeCsv(Path path) throws IOException {
    CsvSchema schema = Mappers.CSV.schemaFor(FileRow.class).withHeader();
    write(path, Mappers.CSV.writer(schema).writeValueAsString(fileRows(FileRow::csv)));
  }

  void writeJson(Path path, String version, long totalWrong) throws IOException {
    write(
        path,
        Mappers.json(
            new RunFile(
                "colibri-perf",
                version,
                config.ranks,
                config.threads ? "threads" : "processes",
                config.transport.configName(),
                config.algorithm.configName(),
                Perf.typeName(config.type),
                Perf.opName(config.op),
                config.root,
                config.warmup,
                config.iters,
                config.check,
                "average per op, max over ranks",
                config.check ? totalWrong : null,
                fileRows(FileRow::json))));
  }

  private static void write(Path path, String text) throws IOException {
    Path parent = path.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    Files.writeString(path, text, StandardCharsets.UTF_8);
  }
}
