/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.it.CollectiveRunner.Variant;
import io.colibri.it.Spec.Coll;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The full matrix on the host path with threads as ranks: every collective x every data type x
 * every reduction op (for allReduce and reduceScatter) x sizes x rank counts {1, 2, 3, 4, 8}, with
 * seeded random inputs, poisoned outputs, guard bytes, element-by-element comparison with a Java
 * reference ({@link Expected}), bitwise agreement of all ranks and a repeated call (determinism).
 *
 * <p>Options: the default transport and algorithm (AUTO: shm between threads, direct for small
 * messages, ring above), a staging cap of 256 KiB and 16 KiB chunks, so that the size called
 * "over the cap" (1.25 x the cap in bytes, plus 3 elements) and 1,000,003 elements both exceed the
 * staging cap many times and go round the ring in many pipelined slices.
 *
 * <p>Sizes are the API's count argument for allReduce and broadcast. For allGather and
 * reduceScatter, whose buffers hold nranks x count elements, the small sizes (0, 1, 7) are the
 * per-rank count and the large ones are split over the ranks (per-rank count = ceil(size /
 * nranks)), so that the total data stays the same size class.
 *
 * <p>Time: the whole product runs in the suite; with {@code -Dcolibri.test.matrix.large=rotate}
 * the 1,000,003 size is kept for one of every three (type x op) combinations only (rotating with
 * the rank count), every other size stays complete.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CollectiveMatrixTest {
  static final long STAGING_CAP = 256 * 1024;
  static final long CHUNK = 16 * 1024;
  static final long MILLION = 1_000_003;
  static final int[] RANKS = {1, 2, 3, 4, 8};

  static final Options OPTIONS =
      Options.builder()
          .stagingCapBytes(STAGING_CAP)
          .chunkBytes(CHUNK)
          .timeout(Duration.ofSeconds(60))
          .build();

  private final Map<Integer, RankGroup> groups = new HashMap<>();

  /** One case of the matrix. */
  record Case(int nranks, Coll coll, DataType type, ReduceOp op, String sizeName, long size) {
    @Override
    public String toString() {
      return coll.apiName
          + " "
          + type
          + (op != null ? " " + op : "")
          + " size "
          + sizeName
          + " on "
          + nranks
          + " rank"
          + (nranks == 1 ? "" : "s");
    }
  }

  static long overCapElements(DataType t) {
    return STAGING_CAP * 5 / 4 / t.size() + 3;
  }

  static Stream<Case> cases() {
    boolean rotate = "rotate".equals(System.getProperty("colibri.test.matrix.large"));
    List<Case> out = new ArrayList<>();
    for (int n : RANKS) {
      int combo = 0;
      for (Coll coll : Coll.values()) {
        List<ReduceOp> ops =
            coll.reduces() ? List.of(ReduceOp.values()) : Collections.singletonList(null);
        for (DataType t : DataType.values()) {
          for (ReduceOp op : ops) {
            combo++;
            out.add(new Case(n, coll, t, op, "0", 0));
            out.add(new Case(n, coll, t, op, "1", 1));
            out.add(new Case(n, coll, t, op, "7", 7));
            out.add(new Case(n, coll, t, op, "over-cap", overCapElements(t)));
            if (!rotate || (combo + n) % 3 == 0) {
              out.add(new Case(n, coll, t, op, "1000003", MILLION));
            }
          }
        }
      }
    }
    return out.stream();
  }

  private RankGroup group(int n) {
    RankGroup g = groups.get(n);
    if (g != null && g.isBroken()) {
      // A failed collective leaves the communicators unusable: start fresh for the next case.
      groups.remove(n);
      try {
        g.close();
      } catch (AssertionError ignored) {
        // already reported by the failing case
      }
      g = null;
    }
    if (g == null) {
      g = RankGroup.start(n, OPTIONS, Duration.ofSeconds(90));
      groups.put(n, g);
    }
    return g;
  }

  @AfterAll
  void closeGroups() {
    for (RankGroup g : groups.values()) {
      g.close();
    }
    groups.clear();
  }

  static long apiCount(Coll coll, long size, int n) {
    if (size <= 7 || coll == Coll.ALL_REDUCE || coll == Coll.BROADCAST) {
      return size;
    }
    return (size + n - 1) / n;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  @Timeout(180)
  void collectiveMatchesReference(Case c) {
    RankGroup g = group(c.nranks());
    long count = apiCount(c.coll(), c.size(), c.nranks());
    // Broadcast roots rotate with the size so that non-zero roots are covered.
    int root =
        c.coll() == Coll.BROADCAST
            ? (int) (Math.abs(c.size() + c.type().ordinal()) % c.nranks())
            : 0;
    Spec s = new Spec(c.coll(), c.type(), c.op(), count, c.nranks(), root);
    CollectiveRunner.Outcome o =
        CollectiveRunner.run(
            g,
            s,
            Seeds.forCase(c.toString()),
            Variant.OUT_OF_PLACE,
            true,
            "transport AUTO, algorithm AUTO, stagingCap 256 KiB, chunk 16 KiB");

    // AUTO picks DIRECT for messages up to directMaxBytes (64 KiB by default) and RING above;
    // NONE when nothing moves (count 0 or one rank).
    long msgBytes =
        count
            * c.type().size()
            * (c.coll() == Coll.ALL_GATHER || c.coll() == Coll.REDUCE_SCATTER ? c.nranks() : 1);
    Algorithm want =
        count == 0 || c.nranks() == 1
            ? Algorithm.NONE
            : msgBytes <= OPTIONS.directMaxBytes() ? Algorithm.DIRECT : Algorithm.RING;
    for (int r = 0; r < c.nranks(); r++) {
      assertEquals(
          want,
          o.algorithms().get(r),
          "lastAlgorithm() on rank "
              + r
              + " after "
              + s
              + " ("
              + msgBytes
              + " bytes, directMaxBytes "
              + OPTIONS.directMaxBytes()
              + ")");
    }
  }
}
