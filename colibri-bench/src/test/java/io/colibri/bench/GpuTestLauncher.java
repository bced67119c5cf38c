/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintWriter;
import org.junit.platform.engine.discovery.ClassNameFilter;
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
    LauncherDiscoveryRequest request =
        LauncherDiscoveryRequestBuilder.request()
            .selectors(selectPackage("io.colibri.bench"))
            // By name first: the other test classes are never loaded
            // (some need AWT, which a trimmed runtime leaves out).
            .filters(
                ClassNameFilter.includeClassNamePatterns(".*GpuTest"), TagFilter.includeTags("gpu"))
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
}
