/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.MappingIterator;
import com.fasterxml.jackson.dataformat.csv.CsvParser;
import com.fasterxml.jackson.dataformat.csv.CsvSchema;
import io.colibri.bench.common.Mappers;
import io.colibri.bench.perf.ResultFile.InputException;
import io.colibri.bench.perf.ResultFile.Measurement;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The chart command's reader: both CSV layouts, the perf tool's JSON, and bad files. */
class ResultFileTest {

  @TempDir Path dir;

  private Path file(String name, String text) throws Exception {
    Path p = dir.resolve(name);
    Files.writeString(p, text, StandardCharsets.UTF_8);
    return p;
  }

  private InputException fails(Path p) {
    return assertThrows(InputException.class, () -> ResultFile.read(p));
  }

  /** What the perf tool writes, through Report itself: the reader follows the writer. */
  @Test
  void readsThePerfToolsOwnCsvAndJson() throws Exception {
    PerfConfig config = PerfConfig.parse("--ranks", "2");
    Report report =
        new Report(
            new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8), config);
    report.row(
        new Report.Row(
            Collective.ALL_REDUCE, 1024, 256, "float32", "sum", 4.5, 0.2276, 0.2276, 0, "direct"));
    report.row(
        new Report.Row(
            Collective.BROADCAST, 2048, 512, "float32", "0", 12.25, 0.1672, 0.1672, -1, "ring"));
    Path csv = dir.resolve("perf.csv");
    Path json = dir.resolve("perf.json");
    report.writeCsv(csv);
    report.writeJson(json, "0.1.0", 0);
    for (Path p : List.of(csv, json)) {
      List<Measurement> rows = ResultFile.read(p);
      assertEquals(2, rows.size(), p.toString());
      Measurement a = rows.get(0);
      assertEquals("allReduce", a.collective);
      assertEquals(2, a.ranks);
      assertEquals("float32", a.type);
      assertEquals(1024, a.sizeBytes);
      assertEquals(4.5, a.timeUs, 1e-9);
      assertEquals(0.2276, a.busbw, 1e-9);
      assertEquals(-1, a.memoryBytes);
      Measurement b = rows.get(1);
      assertEquals("broadcast", b.collective);
      assertEquals(2048, b.sizeBytes);
      assertEquals(12.25, b.timeUs, 1e-9);
    }
  }

  /** mpi_coll_bench's layout (fewer columns), comments and CRLF line ends. */
  @Test
  void readsMpiCollBenchCsv() throws Exception {
    Path p =
        file(
            "mpi.csv",
            "collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps\r\n"
                + "allReduce,4,1024,13.409,0.076367,0.114550\r\n"
                + "# a comment line\r\n"
                + "\r\n"
                + "reduceScatter,4,16777216,11831.775,1.417980,1.063485\r\n");
    List<Measurement> rows = ResultFile.read(p);
    assertEquals(2, rows.size());
    assertEquals("allReduce", rows.get(0).collective);
    assertEquals(4, rows.get(0).ranks);
    assertNull(rows.get(0).type);
    assertEquals(13.409, rows.get(0).timeUs, 1e-9);
    assertEquals(0.114550, rows.get(0).busbw, 1e-9);
    assertEquals("reduceScatter", rows.get(1).collective);
    assertEquals(16777216, rows.get(1).sizeBytes);
  }

  /**
   * Every field of every row comes back as written: the CSV through Jackson's CSV reader, the
   * JSON through databind, each into the record the writer wrote, and close to the measured values.
   */
  @Test
  void csvAndJsonRoundTripElementByElement() throws Exception {
    PerfConfig config =
        PerfConfig.parse(
            "--ranks",
            "3",
            "--threads",
            "-t",
            "bf16",
            "-o",
            "max",
            "--root",
            "2",
            "-w",
            "1",
            "-n",
            "7",
            "--transport",
            "shm",
            "--algorithm",
            "ring");
    Report report =
        new Report(
            new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8), config);
    List<Report.Row> rows =
        List.of(
            new Report.Row(
                Collective.ALL_REDUCE,
                1536,
                768,
                "bfloat16",
                "max",
                4.297123456,
                0.35744189,
                0.47658919,
                0,
                "direct"),
            new Report.Row(
                Collective.ALL_GATHER,
                3072,
                1536,
                "bfloat16",
                "-",
                12345.678912,
                1.0e-7,
                6.6e-8,
                5,
                "ring"),
            new Report.Row(
                Collective.REDUCE_SCATTER,
                6144,
                3072,
                "bfloat16",
                "max",
                250.5,
                0.0245,
                0.0163,
                0,
                "ring"),
            new Report.Row(
                Collective.BROADCAST,
                2048,
                1024,
                "bfloat16",
                "2",
                12.25,
                0.1672,
                0.1672,
                -1,
                "ring"));
    rows.forEach(report::row);
    Path csv = dir.resolve("run.csv");
    Path json = dir.resolve("run.json");
    report.writeCsv(csv);
    report.writeJson(json, "0.1.0", 5);

    CsvSchema header = Mappers.CSV.schemaFor(Report.FileRow.class).withHeader();
    List<Report.FileRow> fromCsv;
    try (MappingIterator<Report.FileRow> it =
        Mappers.CSV
            .readerFor(Report.FileRow.class)
            .with(header)
            .without(CsvParser.Feature.WRAP_AS_ARRAY)
            .with(CsvParser.Feature.EMPTY_STRING_AS_NULL)
            .readValues(csv.toFile())) {
      fromCsv = it.readAll();
    }
    Report.RunFile run = Mappers.JSON.readValue(json.toFile(), Report.RunFile.class);
    assertEquals(rows.size(), fromCsv.size());
    assertEquals(rows.size(), run.results().size());
    for (int i = 0; i < rows.size(); i++) {
      Report.Row r = rows.get(i);
      assertEquals(Report.FileRow.csv(r, 3), fromCsv.get(i), "CSV row " + i);
      assertEquals(Report.FileRow.json(r, 3), run.results().get(i), "JSON row " + i);
      for (Report.FileRow f : List.of(fromCsv.get(i), run.results().get(i))) {
        boolean bcast = r.collective == Collective.BROADCAST;
        assertEquals(r.collective.displayName(), f.collective());
        assertEquals(3, f.ranks());
        assertEquals(r.bytes, f.sizeBytes());
        assertEquals(r.count, f.count());
        assertEquals("bfloat16", f.type());
        assertEquals(bcast ? null : r.opOrRoot, f.op());
        assertEquals(bcast ? Integer.valueOf(2) : null, f.root());
        // CSV: 3 and 6 decimals; JSON: 6 significant digits.
        assertEquals(r.timeUs, f.timeUs().doubleValue(), Math.max(5e-4, r.timeUs * 5e-6));
        assertEquals(r.algbw, f.algbwGbps().doubleValue(), Math.max(5e-7, r.algbw * 5e-6));
        assertEquals(r.busbw, f.busbwGbps().doubleValue(), Math.max(5e-7, r.busbw * 5e-6));
        assertEquals(r.wrong < 0 ? null : r.wrong, f.wrong());
        assertEquals(r.algorithm, f.algorithm());
      }
    }
    assertEquals(
        new Report.RunFile(
            "colibri-perf",
            "0.1.0",
            3,
            "threads",
            "shm",
            "ring",
            "bfloat16",
            "max",
            2,
            1,
            7,
            true,
            "average per op, max over ranks",
            5L,
            run.results()),
        run);
    // The text keeps the layout of the files in results/: fixed decimals, no exponent.
    List<String> lines = Files.readAllLines(csv);
    assertEquals(
        "collective,ranks,size_bytes,count,type,op,root,time_us,algbw_gbps,busbw_gbps,"
            + "wrong,algorithm",
        lines.get(0));
    assertEquals(
        "allReduce,3,1536,768,bfloat16,max,,4.297,0.357442,0.476589,0,direct", lines.get(1));
    assertEquals(
        "allGather,3,3072,1536,bfloat16,-,,12345.679,0.000000,0.000000,5,ring", lines.get(2));
    assertEquals("broadcast,3,2048,1024,bfloat16,,2,12.250,0.167200,0.167200,,ring", lines.get(4));
    String text = Files.readString(json);
    assertTrue(text.contains("\"time_us\": 12345.7,"), text);
    assertTrue(text.contains("\"algbw_gbps\": 0.00000010,"), text);
  }

  /**
   * The committed results: every CSV in the chart command's layouts reads as it is; the others
   * (latency and TLS tables, JMH's and the doctor's JSON) are refused with what to pass.
   */
  @Test
  void readsTheCommittedResultsFiles() throws Exception {
    Path results = Path.of("..", "results");
    if (!Files.isDirectory(results)) {
      return; // module built outside the repository
    }
    List<Path> files;
    try (var walk = Files.walk(results)) {
      files =
          walk.filter(f -> f.toString().endsWith(".csv") || f.toString().endsWith(".json"))
              .sorted()
              .collect(Collectors.toList());
    }
    int read = 0;
    for (Path p : files) {
      String header =
          Files.readAllLines(p).stream()
              .filter(l -> !l.isBlank() && !l.strip().startsWith("#"))
              .findFirst()
              .orElse("");
      if (p.toString().endsWith(".csv") && header.startsWith("collective,")) {
        List<Measurement> rows = ResultFile.read(p); // throws on anything it cannot read
        assertTrue(rows.size() > 10, p.toString());
        assertTrue(
            rows.stream()
                .allMatch(
                    m ->
                        m.ranks > 0
                            && m.timeUs > 0
                            && m.sizeBytes > 0
                            && m.busbw >= 0
                            && Collective.byName(m.collective) != null),
            p.toString());
        read++;
      } else {
        String m = fails(p).getMessage();
        assertTrue(
            m.startsWith(p.toString())
                && m.contains("pass a CSV or JSON file written by" + " the perf tool"),
            m);
      }
    }
    assertTrue(read >= 12, "the host and GPU comparisons: " + read + " files of " + files);
  }

  @Test
  void columnsInAnyOrderWithMemoryAndCollectiveNamesNormalised() throws Exception {
    Path p =
        file(
            "x.csv",
            "busbw_gbps,time_us,size_bytes,collective,memory_bytes\n"
                + "1.5,10,4096,all_reduce,131360\n"
                + "2.5,20,8192,allgather,\n");
    List<Measurement> rows = ResultFile.read(p);
    assertEquals("allReduce", rows.get(0).collective);
    assertEquals(0, rows.get(0).ranks);
    assertEquals(131360, rows.get(0).memoryBytes);
    assertEquals("allGather", rows.get(1).collective);
    assertEquals(-1, rows.get(1).memoryBytes);
    assertEquals(2.5, rows.get(1).busbw, 0);
  }

  @Test
  void missingFileSaysSoAndWhatToPass() {
    String m = fails(dir.resolve("nope.csv")).getMessage();
    assertTrue(m.contains("nope.csv") && m.contains("no such file"), m);
    assertTrue(m.contains("--csv FILE") && m.contains("bench-vs-mpi.sh"), m);
  }

  @Test
  void emptyFileSaysSoAndWhatToDo() throws Exception {
    for (String text : new String[] {"", "\n\n  \n"}) {
      String m = fails(file("empty.csv", text)).getMessage();
      assertTrue(m.contains("empty.csv") && m.contains("is empty"), m);
      assertTrue(m.contains("header line") && m.contains("Rerun"), m);
    }
    String m = fails(file("header.csv", "collective,size_bytes,time_us,busbw_gbps\n")).getMessage();
    assertTrue(m.contains("header.csv") && m.contains("no measurements"), m);
  }

  @Test
  void unknownColumnIsNamedWithTheKnownOnes() throws Exception {
    String m =
        fails(
                file(
                    "u.csv",
                    "collective,size_bytes,time_us,busbw_gbps,latency_ms\n"
                        + "allReduce,8,1,1,1\n"))
            .getMessage();
    assertTrue(m.contains("u.csv line 1") && m.contains("unknown column 'latency_ms'"), m);
    assertTrue(m.contains("busbw_gbps") && m.contains("rename or remove"), m);
    // A file without its header: the first data line is read as one.
    m = fails(file("h.csv", "allReduce,2,1024,1.0,2.0\n")).getMessage();
    assertTrue(m.contains("unknown column 'allReduce'") && m.contains("no header line"), m);
    // The same rule for JSON rows.
    m =
        fails(
                file(
                    "u.json",
                    "{\"ranks\": 2, \"results\": [{\"collective\": \"allReduce\", \"size_bytes\":"
                        + " 8, \"time_us\": 1, \"busbw_gbps\": 1, \"jitter\": 0}]}"))
            .getMessage();
    assertTrue(m.contains("u.json results[0]") && m.contains("unknown field 'jitter'"), m);
  }

  @Test
  void missingColumnsBadNumbersAndShortLines() throws Exception {
    String m = fails(file("m.csv", "collective,size_bytes\nallReduce,8\n")).getMessage();
    assertTrue(m.contains("no columns time_us, busbw_gbps"), m);
    m =
        fails(file("n.csv", "collective,size_bytes,time_us,busbw_gbps\nallReduce,8,fast,1\n"))
            .getMessage();
    assertTrue(m.contains("n.csv line 2") && m.contains("time_us is 'fast', not a number"), m);
    m =
        fails(file("s.csv", "collective,size_bytes,time_us,busbw_gbps\nallReduce,8,1\n"))
            .getMessage();
    assertTrue(m.contains("s.csv line 2") && m.contains("3 fields but the header has 4"), m);
    m =
        fails(file("z.csv", "collective,size_bytes,time_us,busbw_gbps\nallReduce,0,1,1\n"))
            .getMessage();
    assertTrue(m.contains("size_bytes is 0"), m);
    m = fails(file("d.csv", "collective,size_bytes,size_bytes,time_us,busbw_gbps\n")).getMessage();
    assertTrue(m.contains("'size_bytes' appears twice"), m);
    m = fails(file("j.json", "{\"results\": [ {\"collective\": \"allReduce\" ]}")).getMessage();
    assertTrue(m.contains("j.json: not valid JSON"), m);
    m = fails(file("k.json", "{\"rows\": []}")).getMessage();
    assertTrue(m.contains("no \"results\" array"), m);
  }
}
