/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import io.colibri.DataType;
import java.util.Locale;

/** Parsing of the benchmarks' text parameters (sizes, element types) and element counts. */
final class Sizes {
  private Sizes() {}

  /** Bytes from "8", "64K", "1M", "1G" (powers of 1024; an optional trailing B or iB). */
  static long parseBytes(String text) {
    String t = text.trim().toUpperCase(Locale.ROOT);
    if (t.endsWith("IB")) {
      t = t.substring(0, t.length() - 2);
    } else if (t.endsWith("B")) {
      t = t.substring(0, t.length() - 1);
    }
    long unit = 1;
    if (!t.isEmpty()) {
      switch (t.charAt(t.length() - 1)) {
        case 'K':
          unit = 1L << 10;
          break;
        case 'M':
          unit = 1L << 20;
          break;
        case 'G':
          unit = 1L << 30;
          break;
        default:
          break;
      }
    }
    if (unit != 1) {
      t = t.substring(0, t.length() - 1);
    }
    long n;
    try {
      n = Long.parseLong(t.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "size '" + text + "' is not a byte count such as 8, 65536," + " 64K, 1M or 256M");
    }
    if (n <= 0) {
      throw new IllegalArgumentException("size '" + text + "' must be positive");
    }
    return Math.multiplyExact(n, unit);
  }

  /** The Colibri type of "float32", "bfloat16", "float16", ... (case and '_' ignored). */
  static DataType parseType(String text) {
    String t = text.trim().toUpperCase(Locale.ROOT).replace("_", "");
    for (DataType d : DataType.values()) {
      if (d.name().equals(t)) {
        return d;
      }
    }
    throw new IllegalArgumentException(
        "unknown dtype '"
            + text
            + "': use float32, bfloat16, float16, float64, int8, uint8, int32, uint32, int64 or"
            + " uint64");
  }

  /**
   * Elements per rank for a collective of {@code bytes}: {@code bytes / size} for allReduce and
   * broadcast, {@code bytes / size / nranks} for allGather and reduceScatter (where the size counts
   * all ranks' data, as in nccl-tests); rounded down, at least 1.
   */
  static long countPerRank(Coll c, long bytes, DataType type, int nranks) {
    long elements = bytes / type.size();
    if (c.sizeCountsAllRanks()) {
      elements /= nranks;
    }
    return Math.max(1, elements);
  }
}
