/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.DataType;
import io.colibri.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class DataCheckTest {

  private static ByteBuffer buffer(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  @Test
  void inputsCoverTheRangeWithoutShortPeriod() {
    int[] seen = new int[9];
    int same = 0;
    for (long i = 0; i < 9000; i++) {
      seen[DataCheck.k(0, i)]++;
      if (DataCheck.k(0, i) == DataCheck.k(0, i + 9)) {
        same++;
      }
    }
    for (int v = 0; v < 9; v++) {
      assertTrue(seen[v] > 800 && seen[v] < 1200, "value " + v + " seen " + seen[v]);
    }
    assertTrue(same < 2000, "k(i) and k(i + 9) agree " + same + " times in 9000");
  }

  /** With one rank the reduction is the input itself: every type and op checks clean. */
  @Test
  void oneRankReductionIsTheInputAndACorruptElementIsCounted() {
    int count = 1000;
    for (DataType type : DataType.values()) {
      for (ReduceOp op : ReduceOp.values()) {
        ByteBuffer b = buffer(count * type.size());
        DataCheck.fill(b, type, 0, 0, count);
        assertEquals(0, DataCheck.countWrongReduced(b, type, op, 1, 0, count), type + " " + op);
        b.put(17 * type.size(), (byte) (b.get(17 * type.size()) ^ 0x40));
        assertEquals(1, DataCheck.countWrongReduced(b, type, op, 1, 0, count), type + " " + op);
      }
      ByteBuffer g = buffer(count * type.size());
      DataCheck.fill(g, type, 3, 500, count);
      assertEquals(0, DataCheck.countWrongCopy(g, type, 3, 0, 500, count), type.toString());
      assertEquals(
          count,
          DataCheck.countWrongCopy(g, type, 2, 0, 500, count) + countEqual(type),
          "another rank's data is (almost all) wrong: " + type);
      DataCheck.poison(g, (long) count * type.size());
      assertEquals(count, DataCheck.countWrongCopy(g, type, 3, 0, 500, count), type.toString());
    }
  }

  /** Elements where ranks 2 and 3 happen to have the same input (for the copy check above). */
  private static long countEqual(DataType type) {
    long n = 0;
    for (long i = 500; i < 1500; i++) {
      if (DataCheck.k(2, i) == DataCheck.k(3, i)) {
        n++;
      }
    }
    return n;
  }

  @Test
  void integerReferenceWraps() {
    // int8 prod of k - 4 over many ranks: compare with a direct byte computation.
    for (long i = 0; i < 200; i++) {
      byte prod = 1;
      int sum = 0;
      for (int p = 0; p < 7; p++) {
        prod = (byte) (prod * (DataCheck.k(p, i) - 4));
        sum += DataCheck.k(p, i) - 4;
      }
      assertEquals(prod, DataCheck.intReference(DataType.INT8, ReduceOp.PROD, 7, i));
      assertEquals(sum / 7, DataCheck.intReference(DataType.INT8, ReduceOp.AVG, 7, i));
    }
    assertEquals(0xFFL, DataCheck.wrap(DataType.UINT8, -1));
    assertEquals(-1L, DataCheck.wrap(DataType.INT32, 0xFFFF_FFFFL));
  }

  @Test
  void floatToleranceAllowsRoundingNotMistakes() {
    double u = DataCheck.unitRoundoff(DataType.FLOAT16);
    for (long i = 0; i < 100; i++) {
      double ref = 0;
      for (int p = 0; p < 4; p++) {
        ref += (DataCheck.k(p, i) - 4) * 0.5;
      }
      assertTrue(DataCheck.closeEnough(ref, i, ReduceOp.SUM, 4, u));
      assertFalse(DataCheck.closeEnough(ref + 0.5, i, ReduceOp.SUM, 4, u));
      assertFalse(DataCheck.closeEnough(Double.NaN, i, ReduceOp.SUM, 4, u));
    }
  }

  @Test
  void halfConversions() {
    for (int v = 0; v < 9; v++) {
      float f = (v - 4) * 0.5f;
      assertEquals(f, DataCheck.halfToFloat(DataCheck.halfBits(f)));
    }
    assertEquals(65504f, DataCheck.halfToFloat((short) 0x7BFF));
    assertEquals(0x1p-24f, DataCheck.halfToFloat((short) 0x0001));
    assertEquals(Float.NEGATIVE_INFINITY, DataCheck.halfToFloat((short) 0xFC00));
    assertTrue(Float.isNaN(DataCheck.halfToFloat((short) 0x7E00)));
  }
}
