/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.common;

import java.util.Locale;

/** Message sizes as people read them: powers of 1024 with K, M, G. */
public final class SizeFormat {

  private static final String[] COMPACT = {"B", "K", "M", "G", "T"};
  private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB"};

  private SizeFormat() {}

  /**
   * For axis labels: 8 -&gt; "8B", 1024 -&gt; "1K", 3 MiB -&gt; "3M", 1536 -&gt; "1.5K".
   *
   * @param bytes a size in bytes
   * @return the size, short
   */
  public static String compact(long bytes) {
    return format(bytes, COMPACT, "", false);
  }

  /**
   * For progress and messages: 8 -&gt; "8 B", 1024 -&gt; "1 KiB", 1536 -&gt; "1.5 KiB".
   *
   * @param bytes a size in bytes
   * @return the size with its unit
   */
  public static String human(long bytes) {
    return format(bytes, UNITS, " ", false);
  }

  /**
   * Like {@link #human}, but a fraction always with one decimal: 1.25 GiB -&gt; "1.3 GiB".
   *
   * @param bytes a size in bytes
   * @return the size with its unit
   */
  public static String humanOneDecimal(long bytes) {
    return format(bytes, UNITS, " ", true);
  }

  private static String format(long bytes, String[] units, String sep, boolean oneDecimal) {
    if (bytes < 0) {
      return Long.toString(bytes);
    }
    int u = 0;
    double v = bytes;
    while (v >= 1024 && u < units.length - 1) {
      v /= 1024;
      u++;
    }
    String number =
        v == Math.rint(v)
            ? Long.toString((long) v)
            : oneDecimal
                ? String.format(Locale.ROOT, "%.1f", v)
                : String.format(Locale.ROOT, v < 10 ? "%.2f" : "%.1f", v)
                    .replaceAll("0+$", "")
                    .replaceAll("\\.$", "");
    return number + sep + units[u];
  }
}
