/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.it.CollectiveRunner.Variant;
import io.colibri.it.Spec.Coll;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Forced algorithms (RING, DIRECT), the AUTO choice observed through lastAlgorithm(), every
 * transport (SHM, SOCKET, and VERBS through the native build's verbs plugin over the verbs
 * emulator, which surefire puts on the library path as libibverbs.so.1), in-place and raw-address variants, and special float values, all with
 * threads as ranks and the same element-by-element checks as the matrix.
 */
class AlgorithmTransportTest {
  static final DataType[] TYPES = {
    DataType.INT8,
    DataType.UINT8,
    DataType.INT32,
    DataType.UINT64,
    DataType.FLOAT16,
    DataType.BFLOAT16,
    DataType.FLOAT32,
    DataType.FLOAT64
  };

  static Options options(Transport transport, Algorithm algorithm) {
    return Options.builder()
        .transport(transport)
        .algorithm(algorithm)
        .stagingCapBytes(1024 * 1024)
        .chunkBytes(16 * 1024)
        .timeout(Duration.ofSeconds(30))
        .build();
  }

  private static List<ReduceOp> opsOf(Coll c) {
    return c.reduces() ? List.of(ReduceOp.values()) : java.util.Collections.singletonList(null);
  }

  private static int rootFor(Coll c, long count, int n) {
    return c == Coll.BROADCAST ? (int) (count % n) : 0;
  }

  /** Runs every collective x type x op x size on {@code g}; returns the algorithms seen. */
  private static List<Algorithm> sweep(
      RankGroup g, Variant v, long[] sizes, DataType[] types, String context) {
    List<Algorithm> seen = new ArrayList<>();
    for (Coll c : Coll.values()) {
      for (DataType t : types) {
        for (ReduceOp op : opsOf(c)) {
          for (long size : sizes) {
            Spec s = new Spec(c, t, op, size, g.size, rootFor(c, size, g.size));
            CollectiveRunner.Outcome o =
                CollectiveRunner.run(
                    g, s, Seeds.forCase(s + " " + v + " " + context), v, !v.inPlace(), context);
            if (size > 0) {
              seen.addAll(o.algorithms());
            }
          }
        }
      }
    }
    return seen;
  }

  static Stream<Arguments> forced() {
    List<Arguments> a = new ArrayList<>();
    for (int n : new int[] {2, 3, 4}) {
      a.add(Arguments.of(Transport.SHM, Algorithm.RING, n));
      a.add(Arguments.of(Transport.SHM, Algorithm.DIRECT, n));
      a.add(Arguments.of(Transport.SOCKET, Algorithm.RING, n));
      a.add(Arguments.of(Transport.VERBS, Algorithm.RING, n));
    }
    return a.stream();
  }

  /**
   * A forced algorithm is used for every call, whatever the size: RING for 1 element, DIRECT
   * above directMaxBytes (10,000 float64 = 80 KB > 64 KiB).
   */
  @ParameterizedTest(name = "{1} over {0} on {2} ranks")
  @MethodSource("forced")
  @Timeout(240)
  void forcedAlgorithmIsUsedAndCorrect(Transport transport, Algorithm algorithm, int n) {
    try (RankGroup g = RankGroup.start(n, options(transport, algorithm), Duration.ofSeconds(60))) {
      String ctx = "transport " + transport + ", algorithm " + algorithm;
      List<Algorithm> seen = sweep(g, Variant.OUT_OF_PLACE, new long[] {1, 7, 10_000}, TYPES, ctx);
      for (Algorithm a : seen) {
        assertEquals(algorithm, a, "lastAlgorithm() with " + ctx + " forced");
      }
      String info = g.comm(0).transportInfo();
      assertTrue(
          info.contains(transport.configName()),
          "transportInfo() of a communicator"
              + " with transport "
              + transport
              + " should name it; it says:\n"
              + info);
    }
  }

  /** The ring over sockets and verbs handles messages far above the staging cap, all types and ops. */
  @ParameterizedTest(name = "{0} ring on {1} ranks, sizes 0..over the cap")
  @MethodSource("networkTransports")
  @Timeout(240)
  void networkTransportsAllTypesLargeMessages(Transport transport, int n) {
    Options o = options(transport, Algorithm.AUTO).toBuilder().stagingCapBytes(256 * 1024).build();
    try (RankGroup g = RankGroup.start(n, o, Duration.ofSeconds(60))) {
      List<Algorithm> seen =
          sweep(
              g,
              Variant.OUT_OF_PLACE,
              new long[] {0, 1, 7, 70_001},
              DataType.values(),
              "transport " + transport + ", algorithm AUTO, stagingCap 256 KiB");
      for (Algorithm a : seen) {
        assertEquals(
            Algorithm.RING, a, "AUTO over " + transport + " has no direct path: it must be RING");
      }
    }
  }

  static Stream<Integer> rankCounts() {
    return Stream.of(2, 3, 4);
  }

  static Stream<Arguments> networkTransports() {
    List<Arguments> a = new ArrayList<>();
    for (Transport t : new Transport[] {Transport.SOCKET, Transport.VERBS}) {
      for (int n : new int[] {2, 3, 4}) {
        a.add(Arguments.of(t, n));
      }
    }
    return a.stream();
  }

  static Stream<Arguments> variants() {
    List<Arguments> a = new ArrayList<>();
    for (Variant v : new Variant[] {Variant.IN_PLACE, Variant.RAW, Variant.RAW_IN_PLACE}) {
      a.add(Arguments.of(v, Transport.SHM, Algorithm.RING));
      a.add(Arguments.of(v, Transport.SHM, Algorithm.DIRECT));
      a.add(Arguments.of(v, Transport.SOCKET, Algorithm.RING));
      a.add(Arguments.of(v, Transport.VERBS, Algorithm.RING));
    }
    return a.stream();
  }

  /**
   * In place (allReduce and broadcast: same buffer; allGather: send = recv slice at rank * count;
   * reduceScatter: recv = send slice at rank * recvCount) and raw addresses, on 3 ranks.
   */
  @ParameterizedTest(name = "{0} with {2} over {1}")
  @MethodSource("variants")
  @Timeout(240)
  void inPlaceAndRawAddressVariants(Variant v, Transport transport, Algorithm algorithm) {
    try (RankGroup g = RankGroup.start(3, options(transport, algorithm), Duration.ofSeconds(60))) {
      long[] sizes =
          algorithm == Algorithm.DIRECT ? new long[] {1, 7, 10_000} : new long[] {1, 7, 100_001};
      sweep(g, v, sizes, TYPES, "transport " + transport + ", algorithm " + algorithm);
    }
  }

  /**
   * AUTO: DIRECT up to directMaxBytes (allReduce/broadcast: count * size; allGather and
   * reduceScatter: nranks * count * size), RING one element above; NONE for count 0.
   */
  @Test
  @Timeout(120)
  void autoPicksDirectUpToDirectMaxBytesAndRingAbove() {
    Options o = options(Transport.SHM, Algorithm.AUTO).toBuilder().directMaxBytes(4096).build();
    int n = 4;
    try (RankGroup g = RankGroup.start(n, o, Duration.ofSeconds(60))) {
      DataType t = DataType.FLOAT32;
      long[][] cases = {
        // coll ordinal, count at the threshold
        {Coll.ALL_REDUCE.ordinal(), 4096 / 4},
        {Coll.BROADCAST.ordinal(), 4096 / 4},
        {Coll.ALL_GATHER.ordinal(), 4096 / 4 / n},
        {Coll.REDUCE_SCATTER.ordinal(), 4096 / 4 / n},
      };
      for (long[] cs : cases) {
        Coll c = Coll.values()[(int) cs[0]];
        for (long count : new long[] {cs[1], cs[1] + 1, 0}) {
          Spec s = new Spec(c, t, ReduceOp.SUM, count, n, 1);
          CollectiveRunner.Outcome out =
              CollectiveRunner.run(
                  g,
                  s,
                  Seeds.forCase(s.toString()),
                  Variant.OUT_OF_PLACE,
                  false,
                  "AUTO, directMaxBytes 4096");
          Algorithm want =
              count == 0 ? Algorithm.NONE : count == cs[1] ? Algorithm.DIRECT : Algorithm.RING;
          for (int r = 0; r < n; r++) {
            assertEquals(
                want,
                out.algorithms().get(r),
                "lastAlgorithm() on rank "
                    + r
                    + " after "
                    + s
                    + " with directMaxBytes 4096 and algorithm AUTO");
          }
        }
      }
    }
  }

  /** directMaxBytes 0 disables the direct path under AUTO. */
  @Test
  @Timeout(60)
  void directMaxBytesZeroDisablesDirect() {
    Options o = options(Transport.SHM, Algorithm.AUTO).toBuilder().directMaxBytes(0).build();
    try (RankGroup g = RankGroup.start(2, o, Duration.ofSeconds(30))) {
      Spec s = new Spec(Coll.ALL_REDUCE, DataType.INT32, ReduceOp.SUM, 1, 2, 0);
      CollectiveRunner.Outcome out =
          CollectiveRunner.run(
              g,
              s,
              Seeds.forCase(s.toString()),
              Variant.OUT_OF_PLACE,
              false,
              "AUTO, directMaxBytes 0");
      assertEquals(List.of(Algorithm.RING, Algorithm.RING), out.algorithms());
    }
  }

  /** DIRECT needs shared memory: forcing it over sockets is refused at init, with a reason. */
  @Test
  @Timeout(60)
  void directOverSocketIsRefusedAtInit() {
    AssertionError e =
        assertThrows(
            AssertionError.class,
            () ->
                RankGroup.start(
                        2, options(Transport.SOCKET, Algorithm.DIRECT), Duration.ofSeconds(30))
                    .close());
    ColibriException ce = (ColibriException) e.getCause();
    assertEquals(ErrorCode.INVALID_USAGE, ce.code(), ce.toString());
    assertTrue(
        ce.getMessage().contains("direct") && ce.getMessage().contains("shm"),
        "message should say that direct needs shm: " + ce.getMessage());
  }

  /**
   * A forced DIRECT collective whose scratch would exceed stagingCapBytes fails with
   * OUT_OF_MEMORY naming the cap, instead of allocating past it.
   */
  @Test
  @Timeout(60)
  void forcedDirectAboveStagingCapIsOutOfMemory() {
    Options o =
        options(Transport.SHM, Algorithm.DIRECT).toBuilder().stagingCapBytes(64 * 1024).build();
    try (RankGroup g = RankGroup.start(2, o, Duration.ofSeconds(30))) {
      List<Throwable> errors =
          g.run(
              "allReduce of 128 KiB with DIRECT and a 64 KiB cap",
              r -> {
                ByteBuffer b = r.recv.reset(128 * 1024).data();
                try {
                  r.comm.allReduce(b, b, 32 * 1024, DataType.FLOAT32, ReduceOp.SUM);
                  return null;
                } catch (ColibriException e) {
                  return e;
                }
              });
      for (int r = 0; r < 2; r++) {
        Throwable t = errors.get(r);
        assertTrue(
            t instanceof ColibriException,
            "rank " + r + " should fail with" + " OUT_OF_MEMORY, got " + t);
        assertEquals(ErrorCode.OUT_OF_MEMORY, ((ColibriException) t).code(), t.toString());
        assertTrue(t.getMessage().contains("65536"), "message should name the cap: " + t);
      }
    }
  }

  /**
   * NaN propagates through MIN, MAX and SUM wherever it sits (first or later input), infinities
   * come through SUM/MAX/MIN, on the ring and the direct path, for every float type.
   */
  @ParameterizedTest(name = "special values with {0}")
  @MethodSource("ringAndDirect")
  @Timeout(120)
  void nanAndInfinityPropagate(Algorithm algorithm) {
    int n = 3;
    try (RankGroup g =
        RankGroup.start(n, options(Transport.SHM, algorithm), Duration.ofSeconds(30))) {
      for (DataType t :
          new DataType[] {
            DataType.FLOAT16, DataType.BFLOAT16, DataType.FLOAT32, DataType.FLOAT64
          }) {
        long nanBits =
            t == DataType.FLOAT16
                ? 0x7e00
                : t == DataType.BFLOAT16
                    ? 0x7fc0
                    : t == DataType.FLOAT32 ? 0x7fc00000L : 0x7ff8000000000000L;
        long infBits =
            t == DataType.FLOAT16
                ? 0x7c00
                : t == DataType.BFLOAT16
                    ? 0x7f80
                    : t == DataType.FLOAT32 ? 0x7f800000L : 0x7ff0000000000000L;
        for (ReduceOp op : new ReduceOp[] {ReduceOp.MIN, ReduceOp.MAX, ReduceOp.SUM}) {
          for (Coll c : new Coll[] {Coll.ALL_REDUCE, Coll.REDUCE_SCATTER}) {
            Spec s = new Spec(c, t, op, 40, n, 0);
            CollectiveRunner.run(
                g,
                s,
                Seeds.forCase("special " + s),
                Variant.OUT_OF_PLACE,
                true,
                "algorithm " + algorithm + ", NaN and infinity inputs",
                (rank, in) -> {
                  long len = s.sendElems();
                  for (long i = 0; i < len; i += 10) {
                    // element i: NaN on rank 0 only; i+1: NaN on the last rank only;
                    // i+2: NaN on every rank; i+3: +inf on rank 1; i+4: -inf on rank 0.
                    if (rank == 0) {
                      Elements.putBits(in, t, i, nanBits);
                      Elements.putBits(in, t, i + 4, infBits | signBit(t));
                    }
                    if (rank == n - 1) {
                      Elements.putBits(in, t, i + 1, nanBits);
                    }
                    Elements.putBits(in, t, i + 2, nanBits);
                    if (rank == 1) {
                      Elements.putBits(in, t, i + 3, infBits);
                    }
                  }
                });
          }
        }
      }
    }
  }

  private static long signBit(DataType t) {
    return 1L << (t.size() * 8 - 1);
  }

  static Stream<Algorithm> ringAndDirect() {
    return Stream.of(Algorithm.RING, Algorithm.DIRECT);
  }

  /** Every root of a broadcast, both algorithms, with a non-root send that is garbage. */
  @ParameterizedTest(name = "broadcast from every root with {0}")
  @MethodSource("ringAndDirect")
  @Timeout(120)
  void broadcastFromEveryRoot(Algorithm algorithm) {
    int n = 4;
    try (RankGroup g =
        RankGroup.start(n, options(Transport.SHM, algorithm), Duration.ofSeconds(30))) {
      for (int root = 0; root < n; root++) {
        for (long count : new long[] {1, 5_001}) {
          Spec s = new Spec(Coll.BROADCAST, DataType.INT32, null, count, n, root);
          CollectiveRunner.run(
              g,
              s,
              Seeds.forCase(s + " " + algorithm),
              Variant.OUT_OF_PLACE,
              true,
              "algorithm " + algorithm);
        }
      }
    }
  }

  /** A communicator of one rank copies (NONE) for every collective, and init needs no peer. */
  @Test
  @Timeout(60)
  void oneRankCommunicatorCopies() {
    try (Communicator c =
        Communicator.init(UniqueId.create(), 0, 1, options(Transport.AUTO, Algorithm.AUTO))) {
      assertEquals(0, c.rank());
      assertEquals(1, c.size());
      ByteBuffer in = ByteBuffer.allocateDirect(16).order(java.nio.ByteOrder.nativeOrder());
      ByteBuffer out = ByteBuffer.allocateDirect(16).order(java.nio.ByteOrder.nativeOrder());
      for (int i = 0; i < 4; i++) {
        in.putInt(i * 4, i * 7 - 5);
      }
      c.allReduce(in, out, 4, DataType.INT32, ReduceOp.AVG);
      assertEquals(-1L, out.mismatch(in), "AVG over one rank is the input");
      assertEquals(Algorithm.NONE, c.lastAlgorithm());
    }
  }

  /**
   * With the default options (AUTO), a small broadcast as the very first collective of a fresh
   * communicator (and again right after trim()) works: AUTO sends it on the direct path, where
   * non-root ranks post nothing.
   */
  @ParameterizedTest(name = "first collective is a broadcast on {0} ranks")
  @MethodSource("rankCounts")
  @Timeout(60)
  void smallBroadcastAsFirstCollectiveWithDefaultOptions(int n) {
    try (RankGroup g =
        RankGroup.start(
            n, Options.builder().timeout(Duration.ofSeconds(30)).build(), Duration.ofSeconds(45))) {
      Spec s = new Spec(Coll.BROADCAST, DataType.FLOAT32, null, 16, n, 0);
      CollectiveRunner.run(
          g,
          s,
          Seeds.forCase("first " + s),
          Variant.OUT_OF_PLACE,
          true,
          "default options, first collective of the communicator");
    }
  }

  @Test
  @Timeout(60)
  void smallBroadcastAfterTrimWithDefaultOptions() {
    int n = 2;
    try (RankGroup g =
        RankGroup.start(
            n, Options.builder().timeout(Duration.ofSeconds(30)).build(), Duration.ofSeconds(45))) {
      Spec ar = new Spec(Coll.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, 16, n, 0);
      CollectiveRunner.run(
          g, ar, Seeds.forCase("before trim"), Variant.OUT_OF_PLACE, false, "default options");
      g.run(
          "trim",
          r -> {
            r.comm.trim();
            return null;
          });
      Spec s = new Spec(Coll.BROADCAST, DataType.FLOAT32, null, 16, n, 1);
      CollectiveRunner.run(
          g,
          s,
          Seeds.forCase("after trim " + s),
          Variant.OUT_OF_PLACE,
          true,
          "default options, right after trim()");
    }
  }
}
