/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.util.EnumSet;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.TypeConversionException;

class PerfConfigTest {

  @Test
  void defaults() throws Exception {
    PerfConfig c = PerfConfig.parse(new String[0]);
    assertEquals(4, c.ranks);
    assertFalse(c.threads);
    assertTrue(c.check);
    assertEquals(DataType.FLOAT32, c.type);
    assertEquals(ReduceOp.SUM, c.op);
    assertEquals(EnumSet.allOf(Collective.class), c.collectives);
    List<Long> sizes = c.sizes();
    assertEquals(8L, sizes.get(0));
    assertEquals(64L << 20, sizes.get(sizes.size() - 1));
  }

  @Test
  void optionsBothSpellings() throws Exception {
    PerfConfig c =
        PerfConfig.parse(
            new String[] {
              "--ranks=3",
              "--threads",
              "-b",
              "1K",
              "--max-bytes=1M",
              "-f",
              "4",
              "-c",
              "0",
              "-t",
              "bf16",
              "-o",
              "avg",
              "--transport",
              "shm",
              "--algorithm=ring",
              "--collectives",
              "allgather,reduce_scatter"
            });
    assertEquals(3, c.ranks);
    assertTrue(c.threads);
    assertEquals(1024, c.minBytes);
    assertEquals(1 << 20, c.maxBytes);
    assertFalse(c.check);
    assertEquals(DataType.BFLOAT16, c.type);
    assertEquals(ReduceOp.AVG, c.op);
    assertEquals(Transport.SHM, c.transport);
    assertEquals(Algorithm.RING, c.algorithm);
    assertEquals(EnumSet.of(Collective.ALL_GATHER, Collective.REDUCE_SCATTER), c.collectives);
    assertEquals(List.of(1024L, 4096L, 16384L, 65536L, 262144L, 1048576L), c.sizes());
    // What the children get: everything but the internal options, as given.
    assertEquals("--ranks=3", c.original.get(0));
    assertEquals(18, c.original.size());
  }

  @Test
  void checkFlagForms() throws Exception {
    assertTrue(PerfConfig.parse(new String[] {"-c"}).check);
    assertTrue(PerfConfig.parse(new String[] {"-c", "1"}).check);
    assertFalse(PerfConfig.parse(new String[] {"--check=0"}).check);
    assertFalse(PerfConfig.parse(new String[] {"--no-check"}).check);
    PerfConfig c = PerfConfig.parse(new String[] {"-c", "-n", "3"});
    assertTrue(c.check);
    assertEquals(3, c.iters);
  }

  @Test
  void linearSteps() throws Exception {
    PerfConfig c = PerfConfig.parse(new String[] {"-b", "100", "-e", "400", "-i", "100"});
    assertEquals(List.of(100L, 200L, 300L, 400L), c.sizes());
  }

  @Test
  void sizes() {
    assertEquals(8, PerfConfig.size("8"));
    assertEquals(64 << 10, PerfConfig.size("64K"));
    assertEquals(3L << 20, PerfConfig.size("3MiB"));
    assertEquals(1L << 30, PerfConfig.size("1g"));
    assertThrows(TypeConversionException.class, () -> PerfConfig.size("2G"));
    assertThrows(TypeConversionException.class, () -> PerfConfig.size("lots"));
  }

  /** As before picocli: a repeated option's last value counts; -N and --processes exist. */
  @Test
  void lastValueCountsAndTheOtherSpellings() {
    PerfConfig c =
        PerfConfig.parse(
            "-n",
            "5",
            "--iters",
            "7",
            "-N",
            "2",
            "--threads",
            "--processes",
            "--type=fp16",
            "-d",
            "double",
            "--progress",
            "--no-progress");
    assertEquals(7, c.iters);
    assertEquals(2, c.ranks);
    assertFalse(c.threads);
    assertEquals(DataType.FLOAT64, c.type);
    assertEquals(Boolean.FALSE, c.progress);
    assertEquals(0, c.timeoutMs, "no --timeout: the Options default");
    assertEquals(250, PerfConfig.parse("--timeout", "250").timeoutMs);
    assertEquals(List.of("-n", "5"), PerfConfig.parse("-n", "5").original);
  }

  @Test
  void badValuesSayWhatToPass() {
    assertMessage("--ranks is 0: pass 1..1024", "--ranks", "0");
    assertMessage("--step-factor is 1: pass 2..1048576", "-f", "1");
    assertMessage("--check takes 0 or 1, got 'maybe'", "--check=maybe");
    assertMessage("unknown type 'complex': pass float32, float16", "-t", "complex");
    assertMessage("unknown op 'xor': pass sum, prod, min, max, avg", "-o", "xor");
    assertMessage("unknown transport 'ucx': pass auto, shm, socket, verbs", "--transport", "ucx");
    assertMessage("unknown algorithm 'tree': pass auto, ring, direct", "--algorithm", "tree");
    assertMessage("needs a size such as 8, 64K, 1M or 1G, got 'big'", "-e", "big");
    assertMessage("--min-bytes is 0: pass 1 or more", "-b", "0");
    assertMessage("--child-rank and --child-id are internal to the launcher", "--child-rank", "1");
  }

  private static void assertMessage(String expected, String... args) {
    ParameterException e = assertThrows(ParameterException.class, () -> PerfConfig.parse(args));
    assertTrue(e.getMessage().contains(expected), e.getMessage());
  }
}
