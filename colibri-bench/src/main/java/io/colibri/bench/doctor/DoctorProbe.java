/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import io.colibri.ColibriException;
import io.colibri.bench.common.Version;
import io.colibri.jni.Device;
import io.colibri.jni.NativeProvider;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;

/**
 * What the doctor learns from the native core and the JVM rather than from files: the library, the
 * driver's view of the GPUs, and whether a shared library loads. {@link #system()} asks the real
 * ones; tests pass a fake. Methods that need the driver throw {@link ColibriException} with the
 * core's message when it cannot answer.
 */
interface DoctorProbe {

  /**
   * The loaded Colibri library.
   *
   * @param version "0.1.0"
   * @param core the libcolibri.so.0 file that was loaded, or null if unknown
   * @param jni the JNI library file, or null if unknown
   */
  record Library(String version, String core, String jni) {}

  /** Loads the Colibri library; throws ColibriException (or another RuntimeException) if it cannot. */
  Library library();

  /** Number of GPUs the driver sees. */
  int gpuCount();

  /** The driver's view of GPU {@code device}. */
  Device.Info gpu(int device);

  /** Whether GPU {@code device} can map GPU {@code peer}'s memory. */
  boolean canAccessPeer(int device, int peer);

  /** Null if the shared library {@code file} loads into this process, else why not. */
  String load(Path file);

  /** "17.0.15 (Debian)" or similar. */
  String javaVersion();

  /** The environment (LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES). */
  Map<String, String> env();

  /** The real library, driver and JVM. */
  static DoctorProbe system() {
    return new DoctorProbe() {
      @Override
      public Library library() {
        int v = new NativeProvider().version(); // loads the natives or throws UNSUPPORTED with why
        String core = null;
        String jni = null;
        for (String path : org.bytedeco.javacpp.Loader.getLoadedLibraries().values()) {
          if (path == null) {
            continue;
          }
          String name = Paths.get(path).getFileName().toString();
          if (name.startsWith("libcolibri.so")) {
            core = path;
          } else if (name.startsWith("libjniColibriLib")) {
            jni = path;
          }
        }
        return new Library(Version.text(v), core, jni);
      }

      @Override
      public int gpuCount() {
        return Device.count();
      }

      @Override
      public Device.Info gpu(int device) {
        return Device.info(device);
      }

      @Override
      public boolean canAccessPeer(int device, int peer) {
        return Device.canAccessPeer(device, peer);
      }

      @Override
      public String load(Path file) {
        try {
          System.load(file.toAbsolutePath().toString());
          return null;
        } catch (UnsatisfiedLinkError | SecurityException e) {
          return String.valueOf(e.getMessage());
        }
      }

      @Override
      public String javaVersion() {
        return System.getProperty("java.version")
            + " ("
            + System.getProperty("java.vendor")
            + ", "
            + System.getProperty("java.home")
            + ")";
      }

      @Override
      public Map<String, String> env() {
        return System.getenv();
      }
    };
  }
}
