/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.it.Spec.Coll;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The test references themselves: a reference that accepts anything would prove nothing. */
class ReferenceSelfTest {

  @Test
  void halfDecoderKnownValuesAndRoundTrip() {
    assertEquals(1.0f, Halves.halfToFloat(0x3c00));
    assertEquals(-2.0f, Halves.halfToFloat(0xc000));
    assertEquals(65504f, Halves.halfToFloat(0x7bff));
    assertEquals(Math.scalb(1f, -24), Halves.halfToFloat(0x0001));
    assertEquals(Math.scalb(1f, -14), Halves.halfToFloat(0x0400));
    assertEquals(Float.POSITIVE_INFINITY, Halves.halfToFloat(0x7c00));
    assertTrue(Float.isNaN(Halves.halfToFloat(0x7e00)));
    assertEquals(1.0f, Halves.bfloat16ToFloat(0x3f80));
    for (int h = 0; h < 0x10000; h++) {
      float f = Halves.halfToFloat(h);
      if (!Float.isNaN(f)) {
        assertEquals(h, Halves.floatToHalf(f), "round trip of 0x" + Integer.toHexString(h));
      }
    }
    assertEquals(0x3c00, Halves.floatToHalf(1.0f + Math.scalb(1f, -11))); // tie to even
    assertEquals(0x3c02, Halves.floatToHalf(1.0f + 3 * Math.scalb(1f, -11)));
  }

  private static ByteBuffer buf(DataType t, long... bits) {
    ByteBuffer b = ByteBuffer.allocateDirect(bits.length * t.size()).order(ByteOrder.nativeOrder());
    for (int i = 0; i < bits.length; i++) {
      Elements.putBits(b, t, i, bits[i]);
    }
    return b;
  }

  @Test
  void integerReferenceWrapsAndTruncates() {
    Spec s = new Spec(Coll.ALL_REDUCE, DataType.INT8, ReduceOp.AVG, 2, 3, 0);
    // 100 + 100 + 100 = 300 wraps to 44 -> 44 / 3 = 14; -100 * 3 = -300 wraps to -44 -> -14.
    List<ByteBuffer> in =
        List.of(
            buf(DataType.INT8, 100, 0x9c),
            buf(DataType.INT8, 100, 0x9c),
            buf(DataType.INT8, 100, 0x9c));
    Expected e = Expected.compute(s, in);
    assertTrue(e.check(0, buf(DataType.INT8, 14, (byte) -14 & 0xff), 5).isEmpty());
    assertEquals(1, e.check(0, buf(DataType.INT8, 15, (byte) -14 & 0xff), 5).size());
    Spec u = new Spec(Coll.ALL_REDUCE, DataType.UINT64, ReduceOp.MAX, 1, 2, 0);
    Expected eu = Expected.compute(u, List.of(buf(DataType.UINT64, -1L), buf(DataType.UINT64, 5)));
    assertTrue(eu.check(0, buf(DataType.UINT64, -1L), 5).isEmpty(), "unsigned compare");
  }

  @Test
  void floatReferenceHonoursTheBoundAndNoMore() {
    Spec s = new Spec(Coll.ALL_REDUCE, DataType.FLOAT16, ReduceOp.SUM, 1, 2, 0);
    // 1 + 2^-11: exact sum is not a half; the nearest halves are 1 and 1 + 2^-10.
    List<ByteBuffer> in = List.of(buf(DataType.FLOAT16, 0x3c00), buf(DataType.FLOAT16, 0x1000));
    Expected e = Expected.compute(s, in);
    assertTrue(e.check(0, buf(DataType.FLOAT16, 0x3c00), 5).isEmpty(), "rounded down is fine");
    assertTrue(e.check(0, buf(DataType.FLOAT16, 0x3c01), 5).isEmpty(), "rounded up is fine");
    assertFalse(e.check(0, buf(DataType.FLOAT16, 0x3c02), 5).isEmpty(), "two ulps off is not");
    assertFalse(e.check(0, buf(DataType.FLOAT16, 0x7e00), 5).isEmpty(), "NaN is not");
  }
}
