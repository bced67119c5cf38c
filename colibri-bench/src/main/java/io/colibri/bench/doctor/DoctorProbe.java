/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import io.colibri.ColibriException;
import io.colibri.bench.common.Version;
import io.colibri.jni.Device;
import io.colibri.jni.NativeProvider;
import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;

/**
 * What the doctor learns from the native core, the kernel and the JVM rather than from files: the
 * library, the driver's view of the GPUs, whether a shared library loads, a file system's sizes
 * and whether another process shares a folder's memory. {@link #system()} asks the real ones;
 * tests pass a fake. Methods that need the driver throw {@link ColibriException} with the
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

  /**
   * A file system as statvfs and the mount table show it.
   *
   * @param type "tmpfs", or null if unknown
   * @param totalBytes its size
   * @param availableBytes what this user may still write
   * @param device its device number ("0:25"): the same in every process that sees this file
   *     system, whatever its namespaces; null if unknown
   */
  record Store(String type, long totalBytes, long availableBytes, String device) {}

  /**
   * What a second process saw of a file made in a folder ({@link DoctorShm#childSees}).
   *
   * @param outcome the verdict
   * @param detail what happened, for the report
   */
  record Sharing(Outcome outcome, String detail) {

    /** The verdicts. */
    enum Outcome {
      /** A child process read what this one wrote through a shared mapping, and wrote back. */
      SHARED,
      /** The child ran but did not see the same memory. */
      NOT_SHARED,
      /** No file could be made, sized or mapped there (permissions, read-only, full). */
      CANNOT_WRITE,
      /** No child could be run (no /bin/sh, or it did not finish): nothing was learned. */
      NOT_CHECKED
    }
  }

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

  /** The environment (LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES, the COLIBRI_* knobs). */
  Map<String, String> env();

  /** The file system {@code dir} is on; throws IOException when it cannot be read. */
  Store store(Path dir) throws IOException;

  /** Whether a child process shares the memory of a file made in {@code dir}. */
  Sharing sharing(Path dir);

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

      @Override
      public Store store(Path dir) throws IOException {
        FileStore fs = Files.getFileStore(dir);
        String device = null;
        try {
          device = DoctorShm.deviceText((Long) Files.getAttribute(dir, "unix:dev"));
        } catch (IOException | RuntimeException e) {
          // not a Unix file system view: the number stays unknown
        }
        return new Store(fs.type(), fs.getTotalSpace(), fs.getUsableSpace(), device);
      }

      @Override
      public Sharing sharing(Path dir) {
        return DoctorShm.childSees(dir);
      }
    };
  }
}
