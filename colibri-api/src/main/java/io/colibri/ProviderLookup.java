/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import io.colibri.spi.CommunicatorProvider;
import java.util.Iterator;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;

/** Finds the {@link CommunicatorProvider} once, with {@link ServiceLoader}. */
final class ProviderLookup {
  private static volatile CommunicatorProvider provider;

  private ProviderLookup() {}

  static CommunicatorProvider provider() {
    CommunicatorProvider p = provider;
    if (p == null) {
      synchronized (ProviderLookup.class) {
        p = provider;
        if (p == null) {
          p = load();
          provider = p;
        }
      }
    }
    return p;
  }

  private static CommunicatorProvider load() {
    ClassLoader[] loaders = {
      Thread.currentThread().getContextClassLoader(), ProviderLookup.class.getClassLoader()
    };
    for (ClassLoader loader : loaders) {
      try {
        Iterator<CommunicatorProvider> it =
            ServiceLoader.load(CommunicatorProvider.class, loader).iterator();
        if (it.hasNext()) {
          return it.next();
        }
      } catch (ServiceConfigurationError e) {
        throw new ColibriException(
            ErrorCode.UNSUPPORTED,
            "the Colibri provider on the class path"
                + " could not be loaded ("
                + e.getMessage()
                + "): check that io.colibri:colibri-api and"
                + " io.colibri:colibri-native have the same version",
            e);
      }
    }
    throw new ColibriException(
        ErrorCode.UNSUPPORTED,
        "no Colibri implementation on the class path: add the dependency io.colibri:colibri-native"
            + " and its natives jar io.colibri:colibri-native with classifier "
            + (String.valueOf(System.getProperty("os.arch")).matches("aarch64.*|arm64.*|armv8.*")
                ? "linux-arm64"
                : "linux-x86_64")
            + " (same version as colibri-api)");
  }
}
