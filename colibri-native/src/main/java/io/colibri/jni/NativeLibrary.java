/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;

/**
 * Loads {@code libcolibri.so.0} and {@code jniColibriLib} once, through JavaCPP: both are resources
 * of the natives jar of this machine's platform (classifier linux-x86_64 or linux-arm64) under
 * {@code io/colibri/jni/<platform>/}, where JavaCPP looks for its platform; JavaCPP extracts them to its cache ({@code ~/.javacpp/cache} unless {@code -Dorg.bytedeco.javacpp.cachedir}
 * says otherwise) and loads them, libcolibri first. A failure becomes an UNSUPPORTED
 * {@link ColibriException} that says which jar to add; {@code -Dorg.bytedeco.javacpp.logger.debug=true}
 * shows where JavaCPP looked.
 */
final class NativeLibrary {
  private static volatile boolean loaded;
  private static volatile ColibriException failure;

  private NativeLibrary() {}

  /**
   * Makes sure the native libraries are loaded.
   *
   * @throws ColibriException UNSUPPORTED if they cannot be
   */
  static void ensureLoaded() {
    if (loaded) {
      return;
    }
    synchronized (NativeLibrary.class) {
      if (loaded) {
        return;
      }
      if (failure != null) {
        throw new ColibriException(failure.code(), failure.getMessage(), failure);
      }
      try {
        ColibriLib.load();
        ColibriLib.versionCode(); // throws UnsatisfiedLinkError if JavaCPP found nothing to load
        useKernelImagesFromClasspath();
        useNetworkPluginsFromClasspath();
        NativeLog.install();
        loaded = true;
      } catch (UnsatisfiedLinkError | ExceptionInInitializerError | NoClassDefFoundError e) {
        Throwable cause =
            e instanceof ExceptionInInitializerError && e.getCause() != null ? e.getCause() : e;
        failure =
            new ColibriException(
                ErrorCode.UNSUPPORTED,
                "could not load the Colibri native library for "
                    + System.getProperty("os.name")
                    + " "
                    + System.getProperty("os.arch")
                    + " ("
                    + cause
                    + "): "
                    + whatToAdd()
                    + "; run with -Dorg.bytedeco.javacpp.logger.debug=true to see where it was"
                    + " looked for",
                cause);
        throw failure;
      }
    }
  }

  /**
   * The file of the loaded libcolibri.so.0 (where JavaCPP extracted it), for code that calls its C
   * functions itself; its name when JavaCPP did not record the file (the dynamic loader then finds
   * the copy already loaded by that name).
   */
  static String path() {
    String p = path;
    if (p == null) {
      ensureLoaded();
      String loaded = org.bytedeco.javacpp.Loader.getLoadedLibraries().get("colibri@.0");
      p = loaded != null ? loaded : "libcolibri.so.0";
      path = p;
    }
    return p;
  }

  private static volatile String path;

  /** Where io.colibri:colibri-cuda keeps the kernel images (one per compute capability). */
  static final String KERNEL_RESOURCES = "/io/colibri/cuda/kernels/";

  /**
   * The list of the images beside them, one file name a line ('#' lines are comments): the
   * native build writes it from its list of compute capabilities (COLIBRI_KERNEL_ARCHS in
   * src/CMakeLists.txt), and colibri-cuda packages it with the images.
   */
  static final String KERNEL_LIST = KERNEL_RESOURCES + "kernel-images.txt";

  /**
   * The file names that {@link #KERNEL_LIST} holds, in order; empty when it is not on the class
   * path (no colibri-cuda).
   */
  static java.util.List<String> kernelImages() throws java.io.IOException {
    java.io.InputStream in = NativeLibrary.class.getResourceAsStream(KERNEL_LIST);
    if (in == null) {
      return java.util.List.of();
    }
    try (java.io.BufferedReader r =
        new java.io.BufferedReader(
            new java.io.InputStreamReader(in, java.nio.charset.StandardCharsets.UTF_8))) {
      return r.lines()
          .map(String::strip)
          .filter(l -> !l.isEmpty() && !l.startsWith("#"))
          .collect(java.util.stream.Collectors.toUnmodifiableList());
    }
  }

  /**
   * With colibri-cuda on the classpath, extracts its kernel images (those its kernel-images.txt
   * names) to JavaCPP's cache and tells the native library where they are (device collectives
   * load the one for the GPU). Without it, nothing happens: host collectives need no kernels, and
   * a device call says what is missing.
   */
  private static void useKernelImagesFromClasspath() {
    java.util.List<String> images;
    try {
      images = kernelImages();
    } catch (java.io.IOException | java.io.UncheckedIOException e) {
      System.getLogger("io.colibri")
          .log(
              System.Logger.Level.WARNING,
              "could not read the kernel image list of colibri-cuda ("
                  + e
                  + "); device collectives will report the images missing");
      return;
    }
    java.io.File dir = null;
    for (String image : images) {
      java.net.URL url = NativeLibrary.class.getResource(KERNEL_RESOURCES + image);
      if (url != null) {
        dir =
            extracted(
                url,
                "the CUDA kernel images of colibri-cuda",
                "device collectives will report them missing");
        if (dir == null) {
          return;
        }
      }
    }
    if (dir != null) {
      ColibriLib.clbSetKernelDir(dir.getAbsolutePath());
    }
  }

  /**
   * Extracts a classpath resource to JavaCPP's cache; its folder, or null after a warning that
   * says what could not be extracted and what follows from it.
   */
  private static java.io.File extracted(java.net.URL url, String what, String consequence) {
    try {
      return org.bytedeco.javacpp.Loader.cacheResource(url).getParentFile();
    } catch (java.io.IOException | java.io.UncheckedIOException e) {
      System.getLogger("io.colibri")
          .log(
              System.Logger.Level.WARNING,
              "could not extract " + what + " (" + e + "); " + consequence);
      return null;
    }
  }

  /** The platforms whose natives Colibri ships: the classifiers of its natives jars. */
  static final java.util.List<String> SHIPPED = java.util.List.of("linux-x86_64", "linux-arm64");

  /**
   * This machine's platform as JavaCPP names it, where it looks for the libraries (its
   * Loader.getPlatform(), which also honours -Dorg.bytedeco.javacpp.platform): the classifier of
   * the natives jars that serve it when it is one of {@link #SHIPPED}.
   */
  static final String PLATFORM = platform();

  private static String platform() {
    try {
      return org.bytedeco.javacpp.Loader.getPlatform();
    } catch (LinkageError e) { // no JavaCPP on the class path: the message says what is missing
      return platform(System.getProperty("os.name"), System.getProperty("os.arch"));
    }
  }

  /** JavaCPP's platform name for these os.name and os.arch values, as its Loader derives it. */
  static String platform(String osName, String osArch) {
    String os = osName == null ? "" : osName.toLowerCase(java.util.Locale.ROOT);
    String arch = osArch == null ? "" : osArch.toLowerCase(java.util.Locale.ROOT);
    if (os.startsWith("linux")) {
      os = "linux";
    }
    if (arch.equals("amd64") || arch.equals("x86-64") || arch.equals("x64")) {
      arch = "x86_64";
    } else if (arch.startsWith("aarch64") || arch.startsWith("armv8") || arch.startsWith("arm64")) {
      arch = "arm64";
    }
    return os + "-" + arch;
  }

  /** Which natives jar to add here, or that there is none for this platform. */
  static String whatToAdd() {
    return SHIPPED.contains(PLATFORM)
        ? "add io.colibri:colibri-native with classifier "
            + PLATFORM
            + " (same version as colibri-native) to the dependencies"
        : "Colibri ships natives for "
            + String.join(" and ", SHIPPED)
            + " only, and this JVM runs on "
            + PLATFORM;
  }

  /**
   * Where io.colibri:colibri-verbs (classifier linux-x86_64 or linux-arm64, this machine's) keeps
   * the verbs network plugin, the library that the core loads when transport VERBS is asked for.
   */
  static final String VERBS_PLUGIN = "/io/colibri/verbs/" + PLATFORM + "/libcolibri_verbs.so";

  /**
   * With colibri-verbs' natives jar on the classpath, extracts its plugin library to JavaCPP's
   * cache and tells the native library where it is. Without it, nothing happens: every transport
   * but VERBS works, and VERBS says which jar to add.
   */
  private static void useNetworkPluginsFromClasspath() {
    java.net.URL url = NativeLibrary.class.getResource(VERBS_PLUGIN);
    if (url == null) {
      return;
    }
    java.io.File dir =
        extracted(
            url,
            "the verbs network plugin of colibri-verbs",
            "transport VERBS will report it missing");
    if (dir != null) {
      ColibriLib.clbSetPluginDir(dir.getAbsolutePath());
    }
  }

  /** The failure of a native call: its code and the calling thread's last-error message. */
  static ColibriException error(int rc, String context) {
    String detail = ColibriLib.clbGetLastError();
    if (detail == null || detail.isEmpty()) {
      detail = ColibriLib.clbGetErrorString(rc) + " (the native library gave no details)";
    }
    return new ColibriException(ErrorCode.fromCode(rc), context + " failed: " + detail);
  }
}
