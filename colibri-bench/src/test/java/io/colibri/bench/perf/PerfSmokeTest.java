/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.colibri.bench.MainRun;
import io.colibri.bench.common.Mappers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Runs the perf tool in this JVM on tiny sweeps (seconds) and reads its tables back. */
class PerfSmokeTest {

  private static MainRun perf(String... args) {
    return MainRun.of(args);
  }

  /** The data rows of the table of {@code collective}: the lines after "# name" up to its summary. */
  private static List<String[]> table(String out, String collective) {
    List<String[]> rows = new ArrayList<>();
    boolean in = false;
    for (String line : out.split("\n")) {
      if (line.equals("# " + collective)) {
        in = true;
      } else if (in && line.startsWith("# " + collective + ":")) {
        break;
      } else if (in && !line.startsWith("#") && !line.isBlank()) {
        rows.add(line.trim().split("\\s+"));
      }
    }
    return rows;
  }

  @Test
  @Timeout(120)
  void threadsTwoRanksTinySweepEveryOperationCorrect(@TempDir Path dir) throws Exception {
    Path csv = dir.resolve("perf.csv");
    Path json = dir.resolve("out/perf.json");
    MainRun r =
        perf(
            "--threads",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "4K",
            "-w",
            "1",
            "-n",
            "2",
            "--csv",
            csv.toString(),
            "--json",
            json.toString());
    assertEquals(0, r.rc, () -> "exit code; stdout:\n" + r.out + "\nstderr:\n" + r.err);

    String[] names = {
      "allReduce", "allGather", "reduceScatter", "broadcast", "sendRecv", "allToAll", "allToAllv"
    };
    int total = 0;
    for (String name : names) {
      List<String[]> rows = table(r.out, name);
      // 8 B .. 4 KiB: 10 sizes; allGather/reduceScatter/allToAll need 2 float32 (8 B) at least:
      // same 10.
      assertEquals(10, rows.size(), () -> name + " rows in:\n" + r.out);
      long prevSize = 0;
      for (String[] row : rows) {
        assertEquals(
            9, row.length, () -> "columns of a " + name + " row: " + String.join(" ", row));
        long size = Long.parseLong(row[0]);
        long count = Long.parseLong(row[1]);
        assertTrue(size > prevSize, "sizes grow");
        prevSize = size;
        assertEquals(size, count * 4, "float32: size = 4 x count");
        assertEquals("float32", row[2]);
        boolean reduces = name.equals("allReduce") || name.equals("reduceScatter");
        assertEquals(name.equals("broadcast") ? "0" : (reduces ? "sum" : "-"), row[3]);
        assertTrue(Double.parseDouble(row[4]) > 0, "time > 0");
        double algbw = Double.parseDouble(row[5]);
        double busbw = Double.parseDouble(row[6]);
        // allToAllv with 2 ranks: each sends 2/3 of its half to the other, so 1/3 of the buffer.
        double factor =
            name.equals("allReduce") || name.equals("broadcast") || name.equals("sendRecv")
                ? 1.0
                : name.equals("allToAllv") ? 1.0 / 3 : 0.5;
        assertEquals(algbw * factor, busbw, Math.max(0.002, algbw * 0.01), "busbw of " + name);
        assertEquals("0", row[7], () -> "#wrong of " + name + " " + String.join(" ", row));
        // Point-to-point calls run no collective algorithm: none.
        boolean p2p = name.equals("sendRecv") || name.startsWith("allToAll");
        assertTrue(
            p2p ? row[8].equals("none") : Set.of("ring", "direct").contains(row[8]),
            name + ": algorithm " + row[8]);
      }
      total += rows.size();
      assertTrue(r.out.contains("# " + name + ": avg busbw"), "summary of " + name);
    }
    assertTrue(r.out.contains("# Out of bounds values : 0 OK"), r.out);

    List<String> csvLines = Files.readAllLines(csv);
    assertEquals(total + 1, csvLines.size(), "CSV: header and one line per row");
    assertTrue(csvLines.get(0).startsWith("collective,ranks,size_bytes,count"));
    assertTrue(csvLines.get(1).startsWith("allReduce,2,8,2,float32,sum,,"), csvLines.get(1));
    JsonNode js = Mappers.JSON.readTree(json.toFile());
    assertEquals(0, js.get("wrong").asInt(), js.toString());
    assertEquals(total, js.get("results").size(), js.toString());
    assertTrue(
        StreamSupport.stream(js.get("results").spliterator(), false)
            .anyMatch(
                row ->
                    row.get("collective").asText().equals("reduceScatter")
                        && row.get("size_bytes").asLong() == 4096),
        js.toString());
  }

  @Test
  @Timeout(120)
  void processesTwoRanksIntegerTypeAndMax() {
    MainRun r =
        perf(
            "--ranks",
            "2",
            "-b",
            "1K",
            "-e",
            "64K",
            "-f",
            "4",
            "-w",
            "1",
            "-n",
            "2",
            "-t",
            "int8",
            "-o",
            "max",
            "--collectives",
            "allreduce,broadcast",
            "--root",
            "1",
            "--transport",
            "socket");
    assertEquals(0, r.rc, () -> "exit code; stdout:\n" + r.out + "\nstderr:\n" + r.err);
    assertEquals(4, table(r.out, "allReduce").size(), r.out);
    assertEquals(4, table(r.out, "broadcast").size(), r.out);
    assertFalse(r.out.contains("# allGather"), r.out);
    for (String[] row : table(r.out, "broadcast")) {
      assertEquals("1", row[3], "root column");
      assertEquals("0", row[7], "#wrong");
    }
    assertTrue(r.out.contains("one JVM process each"), r.out);
  }

  @Test
  @Timeout(120)
  void threadsThreeRanksEveryTypeAndOpIsCorrect() {
    String[] types = {
      "int8",
      "uint8",
      "int32",
      "uint32",
      "int64",
      "uint64",
      "float16",
      "bfloat16",
      "float32",
      "float64"
    };
    for (String type : types) {
      for (String op : new String[] {"sum", "prod", "min", "max", "avg"}) {
        MainRun r =
            perf(
                "--threads",
                "--ranks",
                "3",
                "-b",
                "24",
                "-e",
                "96K",
                "-f",
                "64",
                "-w",
                "0",
                "-n",
                "1",
                "-t",
                type,
                "-o",
                op,
                "--collectives",
                "allreduce,reducescatter");
        assertEquals(
            0, r.rc, () -> type + " " + op + ": stdout:\n" + r.out + "\nstderr:\n" + r.err);
      }
    }
  }

  /** No command name: perf, with perf's options and its own help and errors. */
  @Test
  void helpAndBadArguments() {
    MainRun help = perf("perf", "--help");
    assertEquals(0, help.rc);
    assertTrue(help.out.contains("--min-bytes"), help.out);
    MainRun bad = perf("--frobnicate");
    assertEquals(2, bad.rc);
    assertTrue(bad.err.contains("colibri perf: Unknown option: '--frobnicate'"), bad.err);
    assertTrue(bad.err.contains("perf --help"), bad.err);
    assertEquals(2, perf("--type", "complex").rc);
    assertEquals(2, perf("-b", "1M", "-e", "1K").rc);
    assertEquals(2, perf("--ranks", "2", "--root", "2").rc);
    assertEquals(2, perf("--collectives", "alltoallw").rc);
    assertEquals(2, perf("-n").rc);
    assertEquals(2, perf("perf", "-n").rc);
  }
}
