/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.MemoryStats;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * memoryStats(): small after init (control structures only), grows on the first large
 * collective, reused by the same collective again, back to the init level after trim(), and the
 * peak is at least the largest amount in use.
 */
class MemoryStatsTest {
  static final long INIT_LIMIT = 64 * 1024;

  @ParameterizedTest(name = "{0} with {1}")
  @CsvSource({"SHM, RING", "SHM, DIRECT", "SOCKET, RING"})
  @Timeout(120)
  void hostBytesGrowAreReusedAndShrinkAfterTrim(Transport transport, Algorithm algorithm) {
    Options o =
        Options.builder()
            .transport(transport)
            .algorithm(algorithm)
            .timeout(Duration.ofSeconds(30))
            .build();
    int count = algorithm == Algorithm.DIRECT ? 16 * 1024 : 1024 * 1024; // 64 KiB or 4 MiB
    try (RankGroup g = RankGroup.start(2, o, Duration.ofSeconds(60))) {
      // The ranks only take snapshots (so that a bad value on one rank cannot leave the other
      // waiting in a collective); the assertions run here afterwards.
      List<MemoryStats[]> snaps =
          g.run(
              "memory stats",
              r -> {
                ByteBuffer send =
                    ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
                ByteBuffer recv =
                    ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
                MemoryStats init = r.comm.memoryStats();
                r.comm.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
                MemoryStats first = r.comm.memoryStats();
                r.comm.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
                MemoryStats again = r.comm.memoryStats();
                r.comm.trim();
                MemoryStats trimmed = r.comm.memoryStats();
                r.comm.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
                MemoryStats after = r.comm.memoryStats();
                return new MemoryStats[] {init, first, again, trimmed, after};
              });
      for (int rank = 0; rank < 2; rank++) {
        MemoryStats[] m = snaps.get(rank);
        String log =
            "rank "
                + rank
                + " ("
                + transport
                + ", "
                + algorithm
                + ", allReduce of "
                + count * 4L
                + " bytes): after init "
                + m[0]
                + "; after the first allReduce "
                + m[1]
                + "; after the same again "
                + m[2]
                + "; after trim "
                + m[3]
                + "; after another allReduce "
                + m[4];
        assertTrue(
            m[0].hostBytes() <= INIT_LIMIT,
            "only control structures (<= 64 KiB)" + " expected after init: " + log);
        assertEquals(0, m[0].deviceBytes(), "host path holds no device memory: " + log);
        assertTrue(
            m[1].hostBytes() > m[0].hostBytes(),
            "staging should grow for the first" + " large collective: " + log);
        assertEquals(
            m[1].hostBytes(),
            m[2].hostBytes(),
            "staging should be reused by the same" + " collective: " + log);
        assertEquals(
            m[0].hostBytes(),
            m[3].hostBytes(),
            "trim() should give back all staging" + " (back to the init level): " + log);
        assertTrue(m[4].hostBytes() > m[0].hostBytes(), "usable after trim: " + log);
        long maxInUse = 0;
        for (MemoryStats x : m) {
          maxInUse = Math.max(maxInUse, x.hostBytes());
        }
        for (MemoryStats x : m) {
          assertTrue(x.hostPeakBytes() >= x.hostBytes(), "peak below current use: " + log);
        }
        assertTrue(
            m[4].hostPeakBytes() >= maxInUse,
            "peak "
                + m[4].hostPeakBytes()
                + " below the largest use seen "
                + maxInUse
                + ": "
                + log);
      }
      List<String> report = List.of(java.util.Arrays.toString(snaps.get(0)));
      System.out.println(transport + "/" + algorithm + " rank 0: " + report.get(0));
    }
  }
}
