/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MappingIterator;
import io.colibri.bench.common.Mappers;
import java.io.IOException;
import java.nio.charset.MalformedInputException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Reads benchmark results, for the chart command ({@code io.colibri.bench.chart}): the CSV and
 * JSON files of the perf tool ({@code --csv}, {@code --json}, which {@code Report} writes: the
 * format is this package's, both ways) and the CSV that {@code mpi_coll_bench}
 * prints ({@code scripts/bench-vs-mpi.sh}). Columns are found by name, so both CSV layouts and
 * any order work; an unknown column is an error (it is most likely a file of another tool).
 */
public final class ResultFile {

  /** Columns (CSV) and fields (JSON rows) that must be there. */
  static final List<String> REQUIRED = List.of("collective", "size_bytes", "time_us", "busbw_gbps");

  /** Every column the chart command knows; memory_bytes (memory held per rank) is optional. */
  static final Set<String> KNOWN =
      Set.copyOf(
          List.of(
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
              "algorithm",
              "memory_bytes"));

  private static final String WHAT_TO_PASS =
      "pass a CSV or JSON file written by the perf tool"
          + " (--csv FILE, --json FILE) or the CSV of mpi_coll_bench (scripts/bench-vs-mpi.sh)";

  /** One measured size of one collective. */
  public static final class Measurement {
    /** The collective as the file names it: allReduce, allGather, ... */
    public final String collective;

    /** Number of ranks; 0 when the file does not say. */
    public final int ranks;

    /** Element type, or null when the file does not say (mpi_coll_bench: float32). */
    public final String type;

    /** The size in bytes (allGather, reduceScatter: all ranks' data, as in nccl-tests). */
    public final long sizeBytes;

    /** Time per call in microseconds. */
    public final double timeUs;

    /** Bus bandwidth in GB/s. */
    public final double busbw;

    /** Memory held per rank in bytes, or -1 when the file has none for this row. */
    public final long memoryBytes;

    Measurement(
        String collective,
        int ranks,
        String type,
        long sizeBytes,
        double timeUs,
        double busbw,
        long memoryBytes) {
      this.collective = collective;
      this.ranks = ranks;
      this.type = type;
      this.sizeBytes = sizeBytes;
      this.timeUs = timeUs;
      this.busbw = busbw;
      this.memoryBytes = memoryBytes;
    }
  }

  /** A file that cannot be charted; the message names the file and says what to do. */
  public static final class InputException extends Exception {
    private static final long serialVersionUID = 1L;

    /**
     * The problem with a file.
     *
     * @param message names the file, says what is wrong and what to do
     */
    public InputException(String message) {
      super(message);
    }
  }

  private ResultFile() {}

  /**
   * Reads a CSV or JSON file (JSON when the name ends in .json or the text starts with '{').
   *
   * @param path the file
   * @return its measurements, in file order; never empty
   * @throws InputException if the file cannot be read, is not a result file, or holds no rows
   */
  public static List<Measurement> read(Path path) throws InputException {
    String text;
    try {
      if (Files.isDirectory(path)) {
        throw new InputException(path + ": is a directory; " + WHAT_TO_PASS);
      }
      text = Files.readString(path, StandardCharsets.UTF_8);
    } catch (NoSuchFileException e) {
      throw new InputException(path + ": no such file; check the path, or " + WHAT_TO_PASS);
    } catch (MalformedInputException e) {
      throw new InputException(path + ": not a text file (not UTF-8); " + WHAT_TO_PASS);
    } catch (IOException e) {
      throw new InputException(path + ": cannot be read (" + e + ")");
    }
    if (!text.isEmpty() && text.charAt(0) == '\uFEFF') {
      text = text.substring(1);
    }
    if (text.isBlank()) {
      throw new InputException(
          path
              + ": the file is empty; expected a header line such as '"
              + String.join(",", REQUIRED)
              + ",...' and one line per size. Rerun the benchmark"
              + " (perf tool: --csv FILE), or "
              + WHAT_TO_PASS);
    }
    boolean json =
        path.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".json")
            || text.strip().startsWith("{");
    List<Measurement> rows =
        json ? parseJson(path.toString(), text) : parseCsv(path.toString(), text);
    if (rows.isEmpty()) {
      throw new InputException(
          path
              + ": holds no measurements (only a header); the run that"
              + " wrote it produced no rows. Rerun it over a sweep that has at least one size");
    }
    return rows;
  }

  // ---- CSV ----

  /** A line of a CSV file: its number (from 1) and its fields. */
  private record CsvLine(int number, String[] fields) {}

  static List<Measurement> parseCsv(String name, String text) throws InputException {
    List<CsvLine> lines = csvLines(name, text);
    if (lines.isEmpty()) {
      throw new InputException(
          name
              + ": no header line (only blank or # lines); expected '"
              + String.join(",", REQUIRED)
              + ",...'; "
              + WHAT_TO_PASS);
    }
    CsvLine headerLine = lines.get(0);
    String[] header = headerLine.fields();
    Map<String, Integer> col = new HashMap<>();
    for (int i = 0; i < header.length; i++) {
      String h = header[i].toLowerCase(Locale.ROOT);
      if (!KNOWN.contains(h)) {
        throw new InputException(
            name
                + " line "
                + headerLine.number()
                + ": unknown column '"
                + header[i]
                + "'"
                + (looksLikeData(h) ? " (the file has no header line?)" : "")
                + ". The chart command reads the columns "
                + knownList()
                + "; "
                + WHAT_TO_PASS
                + ", or rename or remove that column");
      }
      if (col.put(h, i) != null) {
        throw new InputException(
            name
                + " line "
                + headerLine.number()
                + ": column '"
                + h
                + "' appears twice; remove one");
      }
    }
    requireColumns(name + " line " + headerLine.number(), col.keySet(), "column");
    List<Measurement> rows = new ArrayList<>();
    for (CsvLine line : lines.subList(1, lines.size())) {
      String where = name + " line " + line.number();
      String[] f = line.fields();
      if (f.length != header.length) {
        throw new InputException(
            where
                + ": "
                + f.length
                + " fields but the header has "
                + header.length
                + "; fix or delete that line (a run cut short?)");
      }
      Map<String, String> values = new HashMap<>();
      for (Map.Entry<String, Integer> e : col.entrySet()) {
        values.put(e.getKey(), f[e.getValue()]);
      }
      rows.add(measurement(where, values, 0));
    }
    return rows;
  }

  /** The lines of a CSV text that hold fields (not blank, not '#'), with their numbers. */
  private static List<CsvLine> csvLines(String name, String text) throws InputException {
    List<CsvLine> lines = new ArrayList<>();
    try (MappingIterator<String[]> it = Mappers.CSV.readerFor(String[].class).readValues(text)) {
      while (it.hasNextValue()) {
        int number = it.getParser().currentLocation().getLineNr(); // at the row's start
        lines.add(new CsvLine(number, it.nextValue()));
      }
    } catch (JsonProcessingException e) {
      throw new InputException(
          name + ": not a CSV file (" + Mappers.describe(e) + "); " + WHAT_TO_PASS);
    } catch (IOException e) {
      throw new InputException(name + ": cannot be read (" + e + ")");
    }
    return lines;
  }

  private static boolean looksLikeData(String h) {
    return !h.isEmpty() && (Character.isDigit(h.charAt(0)) || Collective.byName(h) != null);
  }

  private static String knownList() {
    List<String> order =
        List.of(
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
            "algorithm",
            "memory_bytes");
    return String.join(", ", order) + " (required: " + String.join(", ", REQUIRED) + ")";
  }

  private static void requireColumns(String where, Set<String> have, String what)
      throws InputException {
    Set<String> missing = new LinkedHashSet<>(REQUIRED);
    missing.removeAll(have);
    if (!missing.isEmpty()) {
      throw new InputException(
          where
              + ": no "
              + what
              + (missing.size() > 1 ? "s " : " ")
              + String.join(", ", missing)
              + "; the chart command needs "
              + String.join(", ", REQUIRED)
              + ". "
              + Character.toUpperCase(WHAT_TO_PASS.charAt(0))
              + WHAT_TO_PASS.substring(1));
    }
  }

  /** One row from its values by column name (empty string or null: no value). */
  private static Measurement measurement(String where, Map<String, String> v, int fileRanks)
      throws InputException {
    String collective = v.get("collective");
    if (collective == null || collective.isEmpty()) {
      throw new InputException(
          where
              + ": collective is empty; each row names one (allReduce,"
              + " allGather, reduceScatter, broadcast)");
    }
    Collective known = Collective.byName(collective);
    if (known != null) {
      collective = known.displayName();
    }
    long size = wholeNumber(where, "size_bytes", v.get("size_bytes"));
    if (size < 1) {
      throw new InputException(where + ": size_bytes is " + size + "; sizes are 1 or more");
    }
    double time = number(where, "time_us", v.get("time_us"));
    double busbw = number(where, "busbw_gbps", v.get("busbw_gbps"));
    int ranks = fileRanks;
    String r = v.get("ranks");
    if (r != null && !r.isEmpty()) {
      long n = wholeNumber(where, "ranks", r);
      if (n < 1 || n > Integer.MAX_VALUE) {
        throw new InputException(where + ": ranks is " + n + "; it must be 1 or more");
      }
      ranks = (int) n;
    }
    String type = v.get("type");
    long memory = -1;
    String m = v.get("memory_bytes");
    if (m != null && !m.isEmpty()) {
      memory = wholeNumber(where, "memory_bytes", m);
    }
    return new Measurement(
        collective, ranks, type == null || type.isEmpty() ? null : type, size, time, busbw, memory);
  }

  private static long wholeNumber(String where, String column, String text) throws InputException {
    if (text == null || text.isEmpty()) {
      throw new InputException(where + ": " + column + " is empty; it needs a whole number");
    }
    try {
      return Long.parseLong(text);
    } catch (NumberFormatException e) {
      try {
        double d = Double.parseDouble(text); // 1024.0, as some tools write it
        if (d == Math.rint(d) && Math.abs(d) < 9e18) {
          return (long) d;
        }
      } catch (NumberFormatException ignored) {
        // reported below
      }
      throw new InputException(where + ": " + column + " is '" + text + "', not a whole number");
    }
  }

  private static double number(String where, String column, String text) throws InputException {
    if (text == null || text.isEmpty()) {
      throw new InputException(where + ": " + column + " is empty; it needs a number");
    }
    double d;
    try {
      d = Double.parseDouble(text);
    } catch (NumberFormatException e) {
      throw new InputException(where + ": " + column + " is '" + text + "', not a number");
    }
    if (!Double.isFinite(d) || d < 0) {
      throw new InputException(
          where + ": " + column + " is " + text + "; it must be a finite number, 0 or more");
    }
    return d;
  }

  // ---- JSON (the perf tool's --json) ----

  static List<Measurement> parseJson(String name, String text) throws InputException {
    JsonNode top;
    try {
      top = Mappers.JSON.readTree(text);
    } catch (JsonProcessingException e) {
      throw new InputException(
          name + ": not valid JSON (" + Mappers.describe(e) + "); " + WHAT_TO_PASS);
    }
    if (top == null || !top.isObject()) {
      throw new InputException(
          name + ": the JSON is not an object with a \"results\" array;" + " " + WHAT_TO_PASS);
    }
    JsonNode results = top.get("results");
    if (results == null || !results.isArray()) {
      throw new InputException(name + ": the JSON has no \"results\" array; " + WHAT_TO_PASS);
    }
    int ranks = top.path("ranks").isNumber() ? top.get("ranks").intValue() : 0;
    List<Measurement> rows = new ArrayList<>();
    int index = 0;
    for (JsonNode o : results) {
      String where = name + " results[" + index++ + "]";
      if (!o.isObject()) {
        throw new InputException(
            where
                + ": not an object; each result is {\"collective\": ..."
                + ", \"size_bytes\": ..., ...}");
      }
      Map<String, String> values = new HashMap<>();
      for (Map.Entry<String, JsonNode> e : o.properties()) {
        String key = e.getKey();
        if (!KNOWN.contains(key)) {
          throw new InputException(
              where
                  + ": unknown field '"
                  + key
                  + "'. The chart command"
                  + " reads the fields "
                  + knownList()
                  + "; "
                  + WHAT_TO_PASS
                  + ", or rename or remove that field");
        }
        JsonNode val = e.getValue();
        values.put(key, val.isNull() ? "" : val.isValueNode() ? val.asText() : val.toString());
      }
      requireColumns(where, values.keySet(), "field");
      rows.add(measurement(where, values, ranks));
    }
    return rows;
  }
}
