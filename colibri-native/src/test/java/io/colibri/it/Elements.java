/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.DataType;
import io.colibri.ReduceOp;
import java.nio.ByteBuffer;
import java.util.SplittableRandom;

/**
 * Element access (as raw bits in a long), element values, and the random inputs of the tests.
 * Buffers are in native byte order, as Colibri reads them.
 */
final class Elements {
  private Elements() {}

  static boolean isFloat(DataType t) {
    return t == DataType.FLOAT16
        || t == DataType.BFLOAT16
        || t == DataType.FLOAT32
        || t == DataType.FLOAT64;
  }

  static boolean isUnsigned(DataType t) {
    return t == DataType.UINT8 || t == DataType.UINT32 || t == DataType.UINT64;
  }

  /** Unit roundoff of the element type. */
  static double unitRoundoff(DataType t) {
    switch (t) {
      case FLOAT16:
        return Math.scalb(1.0, -11);
      case BFLOAT16:
        return Math.scalb(1.0, -8);
      case FLOAT32:
        return Math.scalb(1.0, -24);
      case FLOAT64:
        return Math.scalb(1.0, -53);
      default:
        return 0;
    }
  }

  /** Smallest positive (subnormal) value of the type. */
  static double minSubnormal(DataType t) {
    switch (t) {
      case FLOAT16:
        return Math.scalb(1.0, -24);
      case BFLOAT16:
        return Math.scalb(1.0, -133);
      case FLOAT32:
        return Float.MIN_VALUE;
      case FLOAT64:
        return Double.MIN_VALUE;
      default:
        return 0;
    }
  }

  /** Raw bits of element {@code i}, zero-extended. */
  static long bits(ByteBuffer b, DataType t, long i) {
    int off = Math.toIntExact(i * t.size());
    switch (t.size()) {
      case 1:
        return b.get(off) & 0xffL;
      case 2:
        return b.getShort(off) & 0xffffL;
      case 4:
        return b.getInt(off) & 0xffffffffL;
      default:
        return b.getLong(off);
    }
  }

  static void putBits(ByteBuffer b, DataType t, long i, long bits) {
    int off = Math.toIntExact(i * t.size());
    switch (t.size()) {
      case 1:
        b.put(off, (byte) bits);
        break;
      case 2:
        b.putShort(off, (short) bits);
        break;
      case 4:
        b.putInt(off, (int) bits);
        break;
      default:
        b.putLong(off, bits);
        break;
    }
  }

  /** Integer value of raw bits: sign-extended for signed types, zero-extended for unsigned. */
  static long intValue(DataType t, long bits) {
    switch (t) {
      case INT8:
        return (byte) bits;
      case INT32:
        return (int) bits;
      case UINT8:
        return bits & 0xffL;
      case UINT32:
        return bits & 0xffffffffL;
      default:
        return bits;
    }
  }

  /** Raw bits of an integer value wrapped to the type's width. */
  static long wrap(DataType t, long v) {
    switch (t.size()) {
      case 1:
        return v & 0xffL;
      case 4:
        return v & 0xffffffffL;
      default:
        return v;
    }
  }

  /** Value of a floating-point element's bits. */
  static double floatValue(DataType t, long bits) {
    switch (t) {
      case FLOAT16:
        return Halves.halfToFloat((int) bits);
      case BFLOAT16:
        return Halves.bfloat16ToFloat((int) bits);
      case FLOAT32:
        return Float.intBitsToFloat((int) bits);
      case FLOAT64:
        return Double.longBitsToDouble(bits);
      default:
        throw new IllegalArgumentException(t + " is not a floating-point type");
    }
  }

  /** An element for display: its value and, for floats and unsigned types, its bits. */
  static String show(DataType t, long bits) {
    if (isFloat(t)) {
      return floatValue(t, bits) + " (0x" + Long.toHexString(bits) + ")";
    }
    if (t == DataType.UINT64) {
      return Long.toUnsignedString(bits);
    }
    return Long.toString(intValue(t, bits));
  }

  /**
   * Fills elements [0, count) of {@code b} with random inputs suited to {@code op}:
   * <ul>
   *   <li>integers: uniformly random bits of the full width (wrap-around is exercised); for PROD
   *       every other element is small (-3..3, or 0..3 unsigned) so that products do not all wrap
   *       to 0;
   *   <li>floats: nonzero, finite, exactly representable, magnitudes 2^-8..2^9 with random
   *       mantissas and signs (halves also get some subnormals); for PROD magnitudes in 0.5..2.
   * </ul>
   * Zeros are avoided for floats so that MIN/MAX have a unique answer (no -0 / +0 ties).
   */
  static void fillRandom(ByteBuffer b, DataType t, ReduceOp op, long count, SplittableRandom rnd) {
    boolean prod = op == ReduceOp.PROD;
    for (long i = 0; i < count; i++) {
      long bits;
      switch (t) {
        case INT8:
        case UINT8:
        case INT32:
        case UINT32:
        case INT64:
        case UINT64:
          if (prod && (i & 1) == 0) {
            bits = wrap(t, isUnsigned(t) ? rnd.nextInt(4) : rnd.nextInt(7) - 3);
          } else {
            bits = wrap(t, rnd.nextLong());
          }
          break;
        case FLOAT16:
          {
            long sign = rnd.nextBoolean() ? 0x8000 : 0;
            int e = prod ? rnd.nextInt(2) - 1 : rnd.nextInt(17) - 8;
            long mant = rnd.nextInt(1 << 10);
            if (!prod && rnd.nextInt(32) == 0) {
              bits = sign | (mant == 0 ? 1 : mant); // subnormal
            } else {
              bits = sign | ((long) (e + 15) << 10) | mant;
            }
            break;
          }
        case BFLOAT16:
          {
            long sign = rnd.nextBoolean() ? 0x8000 : 0;
            int e = prod ? rnd.nextInt(2) - 1 : rnd.nextInt(17) - 8;
            long mant = rnd.nextInt(1 << 7);
            if (!prod && rnd.nextInt(32) == 0) {
              bits = sign | (mant == 0 ? 1 : mant); // subnormal
            } else {
              bits = sign | ((long) (e + 127) << 7) | mant;
            }
            break;
          }
        case FLOAT32:
          {
            int e = prod ? rnd.nextInt(2) - 1 : rnd.nextInt(17) - 8;
            float v = Math.scalb(1f + rnd.nextInt(1 << 23) / (float) (1 << 23), e);
            bits = Float.floatToRawIntBits(rnd.nextBoolean() ? v : -v) & 0xffffffffL;
            break;
          }
        default:
          {
            int e = prod ? rnd.nextInt(2) - 1 : rnd.nextInt(17) - 8;
            double v = Math.scalb(1.0 + rnd.nextLong(1L << 52) / (double) (1L << 52), e);
            bits = Double.doubleToRawLongBits(rnd.nextBoolean() ? v : -v);
            break;
          }
      }
      putBits(b, t, i, bits);
    }
  }
}
