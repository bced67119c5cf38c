/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import io.colibri.bench.common.SizeFormat;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.stream.Stream;

/**
 * Reading /proc, /sys and /dev below a root folder for the doctor: every absolute path is taken
 * relative to the root ("/" on a real machine, a temporary folder in tests). Reads never throw:
 * what cannot be read is null or empty, as a missing file often is in sysfs.
 */
final class DoctorFiles {
  private final Path root;

  DoctorFiles(Path root) {
    this.root = root;
  }

  Path root() {
    return root;
  }

  /** {@code abs} ("/sys/class/infiniband") below the root. */
  Path path(String abs) {
    String rel = abs;
    while (rel.startsWith("/")) {
      rel = rel.substring(1);
    }
    return rel.isEmpty() ? root : root.resolve(rel);
  }

  /** The whole file, trimmed, or null if it cannot be read. */
  static String read(Path file) {
    try {
      return new String(Files.readAllBytes(file), StandardCharsets.UTF_8).trim();
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  String read(String abs) {
    return read(path(abs));
  }

  /** The lines of a file, or null if it cannot be read. */
  static List<String> lines(Path file) {
    try {
      return Files.readAllLines(file, StandardCharsets.UTF_8);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** Names in a folder, sorted (numbers by value: "2" before "10"); empty if none or unreadable. */
  static List<String> list(Path dir) {
    List<String> names = new ArrayList<>();
    if (!Files.isDirectory(dir)) {
      return names;
    }
    try (Stream<Path> s = Files.list(dir)) {
      s.forEach(p -> names.add(p.getFileName().toString()));
    } catch (IOException | RuntimeException e) {
      return names;
    }
    Collections.sort(names, DoctorFiles::compareNames);
    return names;
  }

  List<String> list(String abs) {
    return list(path(abs));
  }

  private static int compareNames(String a, String b) {
    if (a.matches("\\d{1,9}") && b.matches("\\d{1,9}")) {
      return Integer.compare(Integer.parseInt(a), Integer.parseInt(b));
    }
    return a.compareTo(b);
  }

  /** "8 MiB", "64 KiB", "1.5 GiB", "100 bytes". */
  static String bytes(long n) {
    return n < 1024 ? n + " bytes" : SizeFormat.humanOneDecimal(n);
  }

  /** "a, b, c"; "none" when empty. */
  static String join(List<String> items) {
    return items.isEmpty() ? "none" : String.join(", ", items);
  }
}
