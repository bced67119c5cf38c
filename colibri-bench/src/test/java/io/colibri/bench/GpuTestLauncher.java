/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import org.junit.platform.engine.discovery.ClassSelector;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Runs colibri-bench's {@code gpu}-tagged test classes (named {@code *GpuTest}) on a GPU host that has a Java runtime but no
 * Maven (the GPU bundle's): {@code java -cp "lib/*:test/*" io.colibri.bench.GpuTestLauncher}.
 * Prints each test as it ends and the summary; exits 0 when every test passed, 1 otherwise (a
 * test skipped or aborted, as where no GPU is visible, included: each says why).
 */
public final class GpuTestLauncher {

  private GpuTestLauncher() {}

  /**
   * @param args none
   */
  public static void main(String[] args) {
    List<ClassSelector> classes = gpuTestClasses(System.getProperty("java.class.path"));
    if (classes.isEmpty()) {
      System.out.println(
          "no class named *GpuTest on the class path: " + System.getProperty("java.class.path"));
      System.exit(1);
    }
    LauncherDiscoveryRequest request =
        LauncherDiscoveryRequestBuilder.request()
            .selectors(classes)
            .filters(TagFilter.includeTags("gpu"))
            .build();
    SummaryGeneratingListener summary = new SummaryGeneratingListener();
    TestExecutionListener progress =
        new TestExecutionListener() {
          @Override
          public void executionFinished(
              TestIdentifier id, org.junit.platform.engine.TestExecutionResult result) {
            if (id.isTest()
                || result.getStatus()
                    != org.junit.platform.engine.TestExecutionResult.Status.SUCCESSFUL) {
              System.out.println(
                  result.getStatus()
                      + " "
                      + id.getLegacyReportingName()
                      + " "
                      + id.getUniqueId().replaceAll(".*\\[class:([^\\]]*)\\].*", "$1")
                      + result.getThrowable().map(t -> ": " + t).orElse(""));
            }
          }

          @Override
          public void executionSkipped(TestIdentifier id, String reason) {
            System.out.println("SKIPPED " + id.getDisplayName() + ": " + reason);
          }
        };
    Launcher launcher = LauncherFactory.create();
    launcher.execute(request, summary, progress);
    TestExecutionSummary s = summary.getSummary();
    s.printTo(new PrintWriter(System.out, true));
    s.printFailuresTo(new PrintWriter(System.out, true), 30);
    // Skipped or aborted (no GPU, no CUDA runtime) is not a pass: this runs where a GPU should be.
    boolean passed =
        s.getTotalFailureCount() == 0
            && s.getTestsSucceededCount() > 0
            && s.getTestsAbortedCount() == 0
            && s.getTestsSkippedCount() == 0
            && s.getContainersAbortedCount() == 0;
    System.exit(passed ? 0 : 1);
  }

  /**
   * The classes of package io.colibri.bench and below named {@code *GpuTest}, found by reading the
   * jars and folders of {@code classPath} here rather than by JUnit's package scan, which opens jars as
   * file systems through {@code jdk.zipfs}, a module the trimmed runtime leaves out. By name: the
   * other test classes are never loaded (some need AWT, which that runtime lacks too).
   *
   * @param classPath entries separated as in {@code java.class.path}
   * @return a selector for each such class
   */
  static List<ClassSelector> gpuTestClasses(String classPath) {
    List<ClassSelector> found = new ArrayList<>();
    for (String entry : classPath.split(File.pathSeparator)) {
      Path p = Path.of(entry);
      try {
        if (Files.isDirectory(p)) {
          try (Stream<Path> files = Files.walk(p)) {
            files.forEach(
                f ->
                    addIfGpuTest(
                        p.relativize(f).toString().replace(File.separatorChar, '/'), found));
          }
        } else if (Files.isRegularFile(p) && entry.endsWith(".jar")) {
          try (JarFile jar = new JarFile(p.toFile())) {
            for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
              addIfGpuTest(e.nextElement().getName(), found);
            }
          }
        }
      } catch (IOException e) {
        throw new UncheckedIOException("reading the class path entry " + entry, e);
      }
    }
    return found;
  }

  private static void addIfGpuTest(String name, List<ClassSelector> found) {
    if (name.startsWith("io/colibri/bench/")
        && name.endsWith("GpuTest.class")
        && !name.contains("$")) {
      found.add(
          selectClass(name.substring(0, name.length() - ".class".length()).replace('/', '.')));
    }
  }
}
