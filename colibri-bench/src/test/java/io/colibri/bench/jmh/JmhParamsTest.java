/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.DataType;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The benchmarks' parameter parsing and element counts, and the generated benchmark list. */
class JmhParamsTest {

  @Test
  void sizesTakeBytesAndBinarySuffixes() {
    assertEquals(8, Sizes.parseBytes("8"));
    assertEquals(65536, Sizes.parseBytes("64K"));
    assertEquals(1 << 20, Sizes.parseBytes("1M"));
    assertEquals(256L << 20, Sizes.parseBytes("256MiB"));
    assertEquals(1L << 30, Sizes.parseBytes("1g"));
    assertEquals(512, Sizes.parseBytes("512B"));
    assertThrows(IllegalArgumentException.class, () -> Sizes.parseBytes("lots"));
    assertThrows(IllegalArgumentException.class, () -> Sizes.parseBytes("0"));
  }

  @Test
  void typesAndCollectivesByName() {
    assertEquals(DataType.FLOAT32, Sizes.parseType("float32"));
    assertEquals(DataType.BFLOAT16, Sizes.parseType("bfloat16"));
    assertEquals(DataType.BFLOAT16, Sizes.parseType("BFLOAT_16"));
    assertThrows(IllegalArgumentException.class, () -> Sizes.parseType("float8"));
    assertEquals(Coll.REDUCE_SCATTER, Coll.parse("reduceScatter"));
    assertEquals(Coll.ALL_REDUCE, Coll.parse("all_reduce"));
    assertThrows(IllegalArgumentException.class, () -> Coll.parse("alltoall"));
  }

  @Test
  void countsFollowNcclTests() {
    // allReduce / broadcast: the size is each rank's message
    assertEquals(262144, Sizes.countPerRank(Coll.ALL_REDUCE, 1 << 20, DataType.FLOAT32, 2));
    assertEquals(524288, Sizes.countPerRank(Coll.BROADCAST, 1 << 20, DataType.BFLOAT16, 4));
    // allGather / reduceScatter: the size counts all ranks' data
    assertEquals(131072, Sizes.countPerRank(Coll.ALL_GATHER, 1 << 20, DataType.FLOAT32, 2));
    assertEquals(65536, Sizes.countPerRank(Coll.REDUCE_SCATTER, 1 << 20, DataType.FLOAT32, 4));
    // never less than one element per rank
    assertEquals(1, Sizes.countPerRank(Coll.ALL_GATHER, 8, DataType.FLOAT32, 4));
    assertEquals(2, Sizes.countPerRank(Coll.ALL_REDUCE, 9, DataType.FLOAT32, 1));
  }

  @Test
  void theAnnotationProcessorListedEveryBenchmark() throws Exception {
    String list;
    try (InputStream in = getClass().getResourceAsStream("/META-INF/BenchmarkList")) {
      assertNotNull(
          in,
          "META-INF/BenchmarkList is missing: is jmh-generator-annprocess on the"
              + " compiler's path?");
      list = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    for (String b :
        new String[] {
          "S 11 colibriHost ",
          "colibriHostAddress",
          "colibriDevice",
          "colibriDeviceJavaCpp",
          "colibriDeviceBinding",
          "ncclDevice",
          "cudaMemsetAsync",
          "cuMemsetD8Async",
          "cuGraphLaunch",
          "jniFloor",
          "ColibriCollectives_perCall",
          "NcclCollectives_perCall"
        }) {
      assertTrue(list.contains(b), b + " is not in META-INF/BenchmarkList:\n" + list);
    }
  }
}
