/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.DataType;
import java.math.BigDecimal;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The GPU decoder's element types on the host: bfloat16's rounding, the names and the type codes. */
class PrecisionTest {

  /** The bfloat16 nearest to {@code f} by exact decimal arithmetic, ties to the even mantissa. */
  private static short nearest(float f) {
    int bits = Float.floatToRawIntBits(f);
    short down = (short) (bits >>> 16);
    short up = (short) (down + 1);
    BigDecimal x = new BigDecimal(f);
    BigDecimal dDown = x.subtract(new BigDecimal(Precision.fromBfloat16(down))).abs();
    float upValue = Precision.fromBfloat16(up);
    if (Float.isInfinite(upValue) || Float.isNaN(upValue)) {
      // Past the largest finite value: rounds to infinity when at least half an ulp above.
      return (bits & 0xffff) >= 0x8000 && ((bits & 0xffff) > 0x8000 || (down & 1) == 1) ? up : down;
    }
    BigDecimal dUp = x.subtract(new BigDecimal(upValue)).abs();
    int c = dDown.compareTo(dUp);
    return c < 0 ? down : c > 0 ? up : (down & 1) == 0 ? down : up;
  }

  @Test
  void bfloat16RoundsToNearestEven() {
    SplittableRandom r = new SplittableRandom(3);
    for (int i = 0; i < 200_000; i++) {
      float f = Float.intBitsToFloat(r.nextInt());
      if (Float.isNaN(f) || Float.isInfinite(f)) {
        continue;
      }
      assertEquals(
          nearest(f),
          Precision.toBfloat16(f),
          "for " + f + " (bits " + Integer.toHexString(Float.floatToRawIntBits(f)) + ")");
    }
    // Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even one, 1.
    assertEquals(1f, Precision.fromBfloat16(Precision.toBfloat16(1f + 0x1p-8f)));
    assertEquals(
        1f + 0x1p-6f, Precision.fromBfloat16(Precision.toBfloat16(1f + 0x1p-7f + 0x1p-8f)));
    assertEquals(
        Float.POSITIVE_INFINITY, Precision.fromBfloat16(Precision.toBfloat16(Float.MAX_VALUE)));
    assertEquals(
        Float.NEGATIVE_INFINITY,
        Precision.fromBfloat16(Precision.toBfloat16(Float.NEGATIVE_INFINITY)));
    assertEquals(-0f, Precision.fromBfloat16(Precision.toBfloat16(-0f)));
    assertTrue(Float.isNaN(Precision.fromBfloat16(Precision.toBfloat16(Float.NaN))));
    // A NaN whose payload lies in the low bits stays a NaN (it would round to infinity).
    assertTrue(
        Float.isNaN(
            Precision.fromBfloat16(Precision.toBfloat16(Float.intBitsToFloat(0x7f800001)))));
  }

  @Test
  void everyBfloat16SurvivesTheRoundTrip() {
    for (int b = 0; b < 0x10000; b++) {
      float f = Precision.fromBfloat16((short) b);
      if (!Float.isNaN(f)) {
        assertEquals((short) b, Precision.toBfloat16(f), "bits " + Integer.toHexString(b));
      }
    }
  }

  @Test
  void namesAndTypeCodes() {
    assertEquals(Precision.BFLOAT16, Precision.parse("BFloat16"));
    assertEquals(Precision.FLOAT32, Precision.parse("float32"));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> Precision.parse("half"));
    assertEquals("--dtype half: use float32 or bfloat16", e.getMessage());
    assertEquals(DataType.BFLOAT16, Precision.BFLOAT16.colibri());
    assertEquals(DataType.BFLOAT16.size(), Precision.BFLOAT16.bytes());
    assertEquals(DataType.FLOAT32.size(), Precision.FLOAT32.bytes());
    // The type codes of cudaDataType_t and ncclDataType_t, as the org.bytedeco presets define them.
    assertEquals(org.bytedeco.cuda.global.cudart.CUDA_R_16BF, Precision.BFLOAT16.cudaType());
    assertEquals(org.bytedeco.cuda.global.cudart.CUDA_R_32F, Precision.FLOAT32.cudaType());
    assertEquals(org.bytedeco.cuda.global.nccl.ncclBfloat16, Precision.BFLOAT16.ncclType());
    assertEquals(org.bytedeco.cuda.global.nccl.ncclFloat32, Precision.FLOAT32.ncclType());
  }
}
