/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The side-by-side table from JMH's JSON. */
class CompareTest {

  private static String result(String benchmark, String params, double score, String unit) {
    return "{ \"jmhVersion\" : \"1.37\", \"benchmark\" : \"io.colibri.bench.jmh." + benchmark + "\","
        + " \"mode\" : \"avgt\", \"threads\" : 1, \"jvmArgs\" : [ \"-Dx=\\\"y\\\"\" ],"
        + (params == null ? "" : " \"params\" : { " + params + " },")
        + " \"primaryMetric\" : { \"score\" : " + score + ", \"scoreError\" : \"NaN\","
        + " \"scoreConfidence\" : [ 1.0, 2.0 ], \"scoreUnit\" : \"" + unit + "\","
        + " \"rawData\" : [ [ 1.0e-3, 2 ] ] }, \"secondaryMetrics\" : { } }";
  }

  @Test
  void pairsColibriWithNcclAndComputesBusBandwidth() {
    String p = "\"bytes\" : \"1048576\", \"collective\" : \"allReduce\", \"dtype\" : \"float32\","
        + " \"gpus\" : \"0\", \"mode\" : \"eager\"";
    String json = "[ " + result("ColibriCollectives.perCall", p + ", \"ranksPerGpu\" : \"1\"", 20.0,
        "us/op") + ", " + result("NcclCollectives.perCall", p, 10.0, "us/op") + ", "
        + result("CallOverhead.colibriHost", null, 250.0, "ns/op") + " ]";
    List<Compare.Result> results = Compare.parse(json);
    assertEquals(3, results.size());
    assertEquals("1048576", results.get(0).params().get("bytes"));
    assertTrue(Double.isNaN(results.get(0).error()));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Compare.print(results, 2, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String out = bytes.toString(StandardCharsets.UTF_8);
    // 1 MiB allReduce on 2 ranks: busbw = 1048576 B / 20 us * 2(n-1)/n = 52.43 GB/s for Colibri
    assertTrue(out.contains("allReduce     float32  eager     2      1048576        20.00     52.43"
        + "        10.00    104.86    2.00"), out);
    assertTrue(out.contains("CallOverhead.colibriHost"), out);
  }
}
