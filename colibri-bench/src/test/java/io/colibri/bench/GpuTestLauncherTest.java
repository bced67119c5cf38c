/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.platform.engine.discovery.ClassSelector;

/** The GPU bundle's launcher finds its test classes in jars and folders without a package scan. */
class GpuTestLauncherTest {

  private static List<String> names(String classPath) {
    return GpuTestLauncher.gpuTestClasses(classPath).stream()
        .map(ClassSelector::getClassName)
        .sorted()
        .collect(Collectors.toList());
  }

  @Test
  void findsTheGpuTestsOfAFolder() throws Exception {
    Path classes =
        Path.of(
            GpuTestLauncherTest.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<String> found = names(classes.toString());
    assertTrue(found.contains("io.colibri.bench.decode.DeviceDecoderGpuTest"), "found " + found);
    assertTrue(found.stream().allMatch(n -> n.endsWith("GpuTest")), "found " + found);
  }

  @Test
  void findsOnlyGpuTestsOfThisPackageInAJar(@TempDir Path dir) throws IOException {
    Path jar = dir.resolve("tests.jar");
    try (OutputStream out = Files.newOutputStream(jar);
        JarOutputStream j = new JarOutputStream(out)) {
      for (String name :
          new String[] {
            "io/colibri/bench/decode/AGpuTest.class",
            "io/colibri/bench/decode/AGpuTest$Inner.class",
            "io/colibri/bench/BGpuTest.class",
            "io/colibri/bench/CpuTest.class",
            "io/colibri/other/CGpuTest.class",
            "META-INF/MANIFEST.MF"
          }) {
        j.putNextEntry(new JarEntry(name));
        j.closeEntry();
      }
    }
    Path missing = dir.resolve("absent.jar");
    assertEquals(
        List.of("io.colibri.bench.BGpuTest", "io.colibri.bench.decode.AGpuTest"),
        names(jar + File.pathSeparator + missing));
  }
}
