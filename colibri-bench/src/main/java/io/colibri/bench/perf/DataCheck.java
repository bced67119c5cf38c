/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import io.colibri.DataType;
import io.colibri.ReduceOp;
import java.nio.ByteBuffer;

/**
 * Inputs of the perf tool and the check of results against a reference computed in Java.
 *
 * <p>Inputs: element {@code i} of rank {@code p} is a small integer {@code k(p, i)} in 0..8 from
 * a hash of (p, i) (no short period, so a shifted or misplaced block is caught). Signed integer
 * types hold {@code k - 4}, unsigned ones {@code k}, floating types {@code (k - 4) / 2} (exact in
 * every type, including float16 and bfloat16).
 *
 * <p>Reference: integers exactly, with the wrap-around of the type (sum and prod modulo 2^bits;
 * avg = wrapped sum / nranks truncated toward zero; min/max). Floating types: the reference is
 * computed in float64 from the exact inputs, and an element is wrong when it is NaN or further
 * from the reference than the bound of the accuracy contract (docs/semantics.md), which covers
 * both the ring (n - 1 roundings to the element type) and the direct path (accumulation in the
 * accumulation type, one final rounding). With {@code u} the unit roundoff of the element type
 * (2^-11 float16, 2^-8 bfloat16, 2^-24 float32, 2^-53 float64), {@code ua} that of the type the
 * arithmetic runs in (float32 for float16/bfloat16), {@code S} the sum of the inputs' magnitudes:
 * sum {@code (n-1) u S + n ua S + u |ref|}; avg that divided by n, plus {@code u |ref|}; prod
 * {@code (n u + n ua) |ref|}; min and max exact. Copies (allGather, broadcast) must be exact.
 */
final class DataCheck {
  private DataCheck() {}

  /** Byte written over a recv buffer before the checked call, so stale results do not pass. */
  static final byte SENTINEL = (byte) 0xA5;

  /** The input k(p, i) in 0..8. */
  static int k(int rank, long index) {
    long z = index * 0x9E3779B97F4A7C15L + (rank + 1L) * 0xD1B54A32D192ED03L;
    z = (z ^ (z >>> 32)) * 0xBF58476D1CE4E5B9L;
    z ^= z >>> 29;
    return (int) ((z >>> 33) % 9);
  }

  /** Writes k(rank, first + j) as {@code type} to element j of {@code buf}, for j < count. */
  static void fill(ByteBuffer buf, DataType type, int rank, long first, long count) {
    int n = (int) count;
    switch (type) {
      case INT8:
      case UINT8:
        {
          int bias = type == DataType.INT8 ? 4 : 0;
          for (int j = 0; j < n; j++) {
            buf.put(j, (byte) (k(rank, first + j) - bias));
          }
          break;
        }
      case INT32:
      case UINT32:
        {
          int bias = type == DataType.INT32 ? 4 : 0;
          for (int j = 0; j < n; j++) {
            buf.putInt(j * 4, k(rank, first + j) - bias);
          }
          break;
        }
      case INT64:
      case UINT64:
        {
          int bias = type == DataType.INT64 ? 4 : 0;
          for (int j = 0; j < n; j++) {
            buf.putLong(j * 8, k(rank, first + j) - bias);
          }
          break;
        }
      case FLOAT16:
      case BFLOAT16:
        {
          short[] table = new short[9];
          for (int v = 0; v < 9; v++) {
            float f = (v - 4) * 0.5f;
            table[v] =
                type == DataType.FLOAT16 ? halfBits(f) : (short) (Float.floatToIntBits(f) >>> 16);
          }
          for (int j = 0; j < n; j++) {
            buf.putShort(j * 2, table[k(rank, first + j)]);
          }
          break;
        }
      case FLOAT32:
        for (int j = 0; j < n; j++) {
          buf.putFloat(j * 4, (k(rank, first + j) - 4) * 0.5f);
        }
        break;
      case FLOAT64:
        for (int j = 0; j < n; j++) {
          buf.putDouble(j * 8, (k(rank, first + j) - 4) * 0.5);
        }
        break;
      default:
        throw new IllegalArgumentException("type " + type);
    }
  }

  /** Overwrites the first {@code bytes} bytes of {@code buf} with {@link #SENTINEL}. */
  static void poison(ByteBuffer buf, long bytes) {
    for (int j = 0; j < (int) bytes; j++) {
      buf.put(j, SENTINEL);
    }
  }

  /**
   * Elements j < count of {@code recv} (from element {@code at}) that differ from rank
   * {@code src}'s input element {@code first + j}: the check of a copy.
   */
  static long countWrongCopy(
      ByteBuffer recv, DataType type, int src, long at, long first, long count) {
    long wrong = 0;
    for (long j = 0; j < count; j++) {
      int kv = k(src, first + j);
      int idx = (int) (at + j);
      if (isFloat(type)) {
        double want = (kv - 4) * 0.5;
        if (Double.compare(readDouble(recv, type, idx), want) != 0) {
          wrong++;
        }
      } else if (readLong(recv, type, idx) != intInput(type, kv)) {
        wrong++;
      }
    }
    return wrong;
  }

  /**
   * Elements j < count of {@code recv} that differ from the reduction over all ranks of input
   * element {@code first + j}.
   */
  static long countWrongReduced(
      ByteBuffer recv, DataType type, ReduceOp op, int nranks, long first, long count) {
    long wrong = 0;
    if (isFloat(type)) {
      double u = unitRoundoff(type);
      for (long j = 0; j < count; j++) {
        double got = readDouble(recv, type, (int) j);
        if (!closeEnough(got, first + j, op, nranks, u)) {
          wrong++;
        }
      }
    } else {
      for (long j = 0; j < count; j++) {
        if (readLong(recv, type, (int) j) != intReference(type, op, nranks, first + j)) {
          wrong++;
        }
      }
    }
    return wrong;
  }

  /**
   * Whether {@code got} is within the bound of the float64 reference for element {@code i};
   * {@code u} is the unit roundoff of the element type (see {@link #unitRoundoff}).
   */
  static boolean closeEnough(double got, long i, ReduceOp op, int nranks, double u) {
    if (Double.isNaN(got)) {
      return false;
    }
    // Unit roundoff of the type the arithmetic runs in: float32 for float16/bfloat16/float32.
    double ua = u == 0x1p-53 ? 0x1p-53 : 0x1p-24;
    double ref;
    double tol;
    switch (op) {
      case SUM:
      case AVG:
        {
          double sum = 0;
          double mag = 0;
          for (int p = 0; p < nranks; p++) {
            double v = (k(p, i) - 4) * 0.5;
            sum += v;
            mag += Math.abs(v);
          }
          double sumTol = (nranks - 1) * u * mag + nranks * ua * mag + u * Math.abs(sum);
          if (op == ReduceOp.SUM) {
            ref = sum;
            tol = sumTol;
          } else {
            ref = sum / nranks;
            tol = sumTol / nranks + u * Math.abs(ref);
          }
          break;
        }
      case PROD:
        {
          double prod = 1;
          for (int p = 0; p < nranks; p++) {
            prod *= (k(p, i) - 4) * 0.5;
          }
          ref = prod;
          tol = nranks * (u + ua) * Math.abs(prod);
          break;
        }
      case MIN:
      case MAX:
        {
          double best = (k(0, i) - 4) * 0.5;
          for (int p = 1; p < nranks; p++) {
            double v = (k(p, i) - 4) * 0.5;
            best = op == ReduceOp.MIN ? Math.min(best, v) : Math.max(best, v);
          }
          ref = best;
          tol = 0;
          break;
        }
      default:
        throw new IllegalArgumentException("op " + op);
    }
    return Math.abs(got - ref) <= tol;
  }

  /** The exact result for element {@code i} of an integer type, as {@link #readLong} reads it. */
  static long intReference(DataType type, ReduceOp op, int nranks, long i) {
    long acc = intInput(type, k(0, i));
    for (int p = 1; p < nranks; p++) {
      long v = intInput(type, k(p, i));
      switch (op) {
        case SUM:
        case AVG:
          acc += v; // modulo 2^64, which wrap() narrows to the type's width
          break;
        case PROD:
          acc *= v;
          break;
        case MIN:
          acc =
              type == DataType.UINT64
                  ? (Long.compareUnsigned(v, acc) < 0 ? v : acc)
                  : Math.min(acc, v);
          break;
        case MAX:
          acc =
              type == DataType.UINT64
                  ? (Long.compareUnsigned(v, acc) > 0 ? v : acc)
                  : Math.max(acc, v);
          break;
        default:
          throw new IllegalArgumentException("op " + op);
      }
    }
    acc = wrap(type, acc);
    if (op == ReduceOp.AVG) {
      acc = type == DataType.UINT64 ? Long.divideUnsigned(acc, nranks) : acc / nranks;
    }
    return acc;
  }

  /** The value of input k as an integer type (signed types: k - 4). */
  static long intInput(DataType type, int kv) {
    return isSigned(type) ? kv - 4 : kv;
  }

  /** {@code v} modulo 2^bits of the type, sign- or zero-extended as {@link #readLong} reads it. */
  static long wrap(DataType type, long v) {
    switch (type) {
      case INT8:
        return (byte) v;
      case UINT8:
        return v & 0xFFL;
      case INT32:
        return (int) v;
      case UINT32:
        return v & 0xFFFF_FFFFL;
      default:
        return v;
    }
  }

  static long readLong(ByteBuffer b, DataType type, int idx) {
    switch (type) {
      case INT8:
        return b.get(idx);
      case UINT8:
        return b.get(idx) & 0xFFL;
      case INT32:
        return b.getInt(idx * 4);
      case UINT32:
        return b.getInt(idx * 4) & 0xFFFF_FFFFL;
      case INT64:
      case UINT64:
        return b.getLong(idx * 8);
      default:
        throw new IllegalArgumentException("not an integer type: " + type);
    }
  }

  static double readDouble(ByteBuffer b, DataType type, int idx) {
    switch (type) {
      case FLOAT16:
        return halfToFloat(b.getShort(idx * 2));
      case BFLOAT16:
        return Float.intBitsToFloat((b.getShort(idx * 2) & 0xFFFF) << 16);
      case FLOAT32:
        return b.getFloat(idx * 4);
      case FLOAT64:
        return b.getDouble(idx * 8);
      default:
        throw new IllegalArgumentException("not a floating type: " + type);
    }
  }

  static boolean isFloat(DataType type) {
    return type == DataType.FLOAT16
        || type == DataType.BFLOAT16
        || type == DataType.FLOAT32
        || type == DataType.FLOAT64;
  }

  static boolean isSigned(DataType type) {
    return type == DataType.INT8 || type == DataType.INT32 || type == DataType.INT64;
  }

  /** Unit roundoff (half the distance from 1 to the next value) of a floating type. */
  static double unitRoundoff(DataType type) {
    switch (type) {
      case FLOAT16:
        return 0x1p-11;
      case BFLOAT16:
        return 0x1p-8;
      case FLOAT32:
        return 0x1p-24;
      case FLOAT64:
        return 0x1p-53;
      default:
        throw new IllegalArgumentException("not a floating type: " + type);
    }
  }

  /** IEEE binary16 bits to float: normals, subnormals, zeros, infinities and NaN. */
  static float halfToFloat(short bits) {
    int h = bits & 0xFFFF;
    int sign = (h & 0x8000) << 16;
    int exp = (h >>> 10) & 0x1F;
    int mant = h & 0x3FF;
    if (exp == 0x1F) {
      return Float.intBitsToFloat(sign | 0x7F80_0000 | (mant << 13));
    }
    if (exp == 0) {
      float f = mant * 0x1p-24f; // subnormal or zero: exact
      return sign != 0 ? -f : f;
    }
    return Float.intBitsToFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
  }

  /**
   * Float to IEEE binary16 bits, for values that binary16 holds exactly (the tool's inputs); other
   * values are not rounded correctly and are refused.
   */
  static short halfBits(float f) {
    if (f == 0) {
      return (short) (Float.floatToRawIntBits(f) >>> 16 & 0x8000);
    }
    int u = Float.floatToIntBits(f);
    int sign = (u >>> 16) & 0x8000;
    int exp = ((u >>> 23) & 0xFF) - 127 + 15;
    int mant = u & 0x7F_FFFF;
    if (exp < 1 || exp > 30 || (mant & 0x1FFF) != 0) {
      throw new IllegalArgumentException(f + " is not an exact float16 normal");
    }
    return (short) (sign | (exp << 10) | (mant >>> 13));
  }
}
