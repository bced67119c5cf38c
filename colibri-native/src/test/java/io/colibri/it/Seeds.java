/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

/**
 * Seeds of the random inputs. The base seed is fixed (reproducible runs) unless
 * {@code -Dcolibri.test.seed=...} sets it; every case derives its own seed from the base and its
 * name, and every failure message prints the case's seed. Setting the property to a failing
 * case's seed makes every case use exactly that seed, which reproduces the failing one.
 */
final class Seeds {
  static final String PROPERTY = "colibri.test.seed";
  private static final String FORCED = System.getProperty(PROPERTY);
  static final long BASE = 0xC011B41_5EEDL;

  private Seeds() {}

  /** The seed of the case called {@code name}. */
  static long forCase(String name) {
    if (FORCED != null && !FORCED.isBlank()) {
      String t = FORCED.strip().toLowerCase();
      return t.startsWith("0x") ? Long.parseUnsignedLong(t.substring(2), 16) : Long.parseLong(t);
    }
    return mix(BASE ^ mix(name.hashCode() * 0x9E3779B97F4A7C15L + name.length()));
  }

  /** The seed of rank {@code rank}'s input in a case. */
  static long forRank(long caseSeed, int rank) {
    return mix(caseSeed + 0x9E3779B97F4A7C15L * (rank + 1));
  }

  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
