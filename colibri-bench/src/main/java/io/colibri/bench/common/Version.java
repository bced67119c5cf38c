/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.common;

import io.colibri.spi.CommunicatorProvider;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;

/**
 * Colibri's version: the native library's, and version codes as text. Without picocli, so that
 * colibri-jmh.jar (which has no picocli) can use it too.
 */
public final class Version {

  private Version() {}

  /**
   * The version of the native library.
   *
   * @return "0.1.0" from the native library, or null if it cannot say
   */
  public static String library() {
    try {
      for (CommunicatorProvider p : ServiceLoader.load(CommunicatorProvider.class)) {
        return text(p.version());
      }
    } catch (RuntimeException | ServiceConfigurationError e) {
      return null;
    }
    return null;
  }

  /**
   * "major.minor.patch" from a version code major * 10000 + minor * 100 + patch: "0.1.0" from
   * 100, "2.28.3" from 22803 (Colibri's encoding, and NCCL's since 2.9).
   *
   * @param v the version code, 0 or more
   * @return the version as "major.minor.patch"
   */
  public static String text(int v) {
    return (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100);
  }
}
