/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import java.util.Locale;

/** The four collectives, by the names the {@code collective} parameter takes. */
enum Coll {
  ALL_REDUCE("allReduce"),
  ALL_GATHER("allGather"),
  REDUCE_SCATTER("reduceScatter"),
  BROADCAST("broadcast");

  final String label;

  Coll(String label) {
    this.label = label;
  }

  /** True where each rank's part is {@code bytes / nranks} (the size counts all ranks' data). */
  boolean sizeCountsAllRanks() {
    return this == ALL_GATHER || this == REDUCE_SCATTER;
  }

  static Coll parse(String name) {
    String n = name.trim().toLowerCase(Locale.ROOT).replace("_", "").replace("-", "");
    for (Coll c : values()) {
      if (c.label.toLowerCase(Locale.ROOT).equals(n)) {
        return c;
      }
    }
    throw new IllegalArgumentException(
        "unknown collective '" + name + "': use allReduce, allGather, reduceScatter or broadcast");
  }
}
