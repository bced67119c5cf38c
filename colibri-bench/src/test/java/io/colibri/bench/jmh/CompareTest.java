/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The side-by-side table from JMH's JSON. */
class CompareTest {

  private static String result(String benchmark, String params, double score, String unit) {
    return "{ \"jmhVersion\" : \"1.37\", \"benchmark\" : \"io.colibri.bench.jmh."
        + benchmark
        + "\","
        + " \"mode\" : \"avgt\", \"threads\" : 1, \"jvmArgs\" : [ \"-Dx=\\\"y\\\"\" ],"
        + (params == null ? "" : " \"params\" : { " + params + " },")
        + " \"primaryMetric\" : { \"score\" : "
        + score
        + ", \"scoreError\" : \"NaN\","
        + " \"scoreConfidence\" : [ 1.0, 2.0 ], \"scoreUnit\" : \""
        + unit
        + "\","
        + " \"rawData\" : [ [ 1.0e-3, 2 ] ] }, \"secondaryMetrics\" : { } }";
  }

  @Test
  void pairsColibriWithNcclAndComputesBusBandwidth() {
    String p =
        "\"bytes\" : \"1048576\", \"collective\" : \"allReduce\", \"dtype\" : \"float32\","
            + " \"gpus\" : \"0\", \"mode\" : \"eager\"";
    String json =
        "[ "
            + result("ColibriCollectives.perCall", p + ", \"ranksPerGpu\" : \"1\"", 20.0, "us/op")
            + ", "
            + result("NcclCollectives.perCall", p, 10.0, "us/op")
            + ", "
            + result("CallOverhead.colibriHost", null, 250.0, "ns/op")
            + " ]";
    List<Compare.Result> results = Compare.parse(json);
    assertEquals(3, results.size());
    assertEquals("1048576", results.get(0).params().get("bytes"));
    assertTrue(Double.isNaN(results.get(0).error()));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Compare.print(results, 2, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String out = bytes.toString(StandardCharsets.UTF_8);
    // 1 MiB allReduce on 2 ranks: busbw = 1048576 B / 20 us * 2(n-1)/n = 52.43 GB/s for Colibri
    assertTrue(
        out.contains(
            "allReduce     float32  eager     2      1048576        20.00     52.43"
                + "        10.00    104.86    2.00"),
        out);
    assertTrue(out.contains("CallOverhead.colibriHost"), out);
  }

  /** The JMH results committed from the H200 runs read and pair up. */
  @Test
  void readsTheCommittedJmhResults() throws Exception {
    for (String run : List.of("2026-11-30-x2-final", "2026-11-30-x2-ll")) {
      Path file = Path.of("..", "results", "gpu", run, "jmh-custom.json");
      if (!Files.isRegularFile(file)) {
        return; // module built outside the repository
      }
      List<Compare.Result> results = Compare.parse(Files.readString(file));
      assertTrue(results.size() > 3, file + ": " + results.size());
      assertTrue(
          results.stream()
              .allMatch(
                  r ->
                      r.benchmark().startsWith("io.colibri.bench.jmh.")
                          && r.score() > 0
                          && !r.unit().isEmpty()),
          file.toString());
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      Compare.print(results, 2, new PrintStream(bytes, true, StandardCharsets.UTF_8));
      String table = bytes.toString(StandardCharsets.UTF_8);
      assertTrue(table.contains("# call overhead"), file + ":\n" + table);
      boolean paired = results.stream().anyMatch(r -> r.benchmark().contains("Collectives"));
      assertEquals(paired, table.contains("# Colibri vs NCCL"), file + ":\n" + table);
    }
  }

  @Test
  void notAJmhFileSaysSo() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> Compare.parse("{\"results\": []}"));
    assertTrue(e.getMessage().contains("the top level is not an array"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> Compare.parse("[ {\"a\": ]"));
    assertTrue(e.getMessage().contains("not valid JSON"), e.getMessage());
  }
}
