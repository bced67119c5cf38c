/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

/**
 * IEEE binary16 and bfloat16 decoding for the test references, written from the format
 * definitions and independent of the native conversions (Java 17 has no
 * {@code Float.float16ToFloat}). The tests generate half inputs directly as bit patterns, so they
 * only ever need to decode; {@link #floatToHalf} exists to cross-check the decoder.
 */
final class Halves {
  private Halves() {}

  /** The value of a binary16 bit pattern (exact: every half is a float). */
  static float halfToFloat(int bits) {
    int sign = (bits >>> 15) & 1;
    int exp = (bits >>> 10) & 0x1f;
    int mant = bits & 0x3ff;
    float magnitude;
    if (exp == 0) {
      magnitude = Math.scalb((float) mant, -24); // subnormal: mant * 2^-24
    } else if (exp == 31) {
      magnitude = mant == 0 ? Float.POSITIVE_INFINITY : Float.NaN;
    } else {
      magnitude = Math.scalb((float) (1024 + mant), exp - 25); // (1.mant) * 2^(exp-15)
    }
    return sign == 0 ? magnitude : -magnitude;
  }

  /** The value of a bfloat16 bit pattern: the upper half of a float32. */
  static float bfloat16ToFloat(int bits) {
    return Float.intBitsToFloat((bits & 0xffff) << 16);
  }

  /**
   * Round-to-nearest-even conversion to binary16, by exhaustive reasoning on doubles (slow, only
   * used to cross-check {@link #halfToFloat}).
   */
  static int floatToHalf(float f) {
    if (Float.isNaN(f)) {
      return 0x7e00;
    }
    int sign = (Float.floatToRawIntBits(f) >>> 31) << 15;
    double a = Math.abs((double) f);
    if (a >= 65520.0) {
      return sign | 0x7c00;
    }
    // Quantum of the binade of a (subnormals share the quantum 2^-24).
    int e = a == 0 ? -25 : Math.getExponent(a);
    double quantum = Math.scalb(1.0, Math.max(e, -14) - 10);
    double q = a / quantum; // exact: power-of-two scaling
    double r = Math.rint(q); // ties to even
    double value = r * quantum;
    // Re-encode value (which may have carried into the next binade).
    if (value == 0) {
      return sign;
    }
    int ve = Math.getExponent(value);
    if (ve < -14) {
      return sign | (int) (value / Math.scalb(1.0, -24));
    }
    int mant = (int) (value / Math.scalb(1.0, ve - 10)) - 1024;
    return sign | ((ve + 15) << 10) | mant;
  }
}
