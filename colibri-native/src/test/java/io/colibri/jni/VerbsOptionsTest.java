/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Communicator;
import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.UniqueId;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The verbs options travel from Java to the queue pairs: two ranks (threads of a child JVM, which
 * runs the native build's verbs plugin over the verbs emulator, the stand-in libibverbs.so.1 in
 * the build's verbs-emu/) report in
 * transportInfo() the device, GID index, traffic class, timeout and retry count they connected
 * with, some set on the builder, one from a system property.
 */
class VerbsOptionsTest {

  private static final String WANT =
      "verbs: colibri_emu0 port 1, GID index 1, path MTU"
          + " 4096, traffic class 106, timeout 9, retry count 3";

  @Test
  void builderAndSystemPropertyReachTheVerbsTransport() throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(
        ProcessHandle.current()
            .info()
            .command()
            .orElse(
                System.getProperty("java.home")
                    + File.separator
                    + "bin"
                    + File.separator
                    + "java"));
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add("-Dcolibri.verbsDevice=colibri_emu0");
    cmd.add("-Dcolibri.verbsTimeout=9"); // the builder does not set it: the property applies
    cmd.add(VerbsOptionsTest.class.getName());
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().keySet().removeIf(k -> k.startsWith("COLIBRI_"));
    Path build = Path.of(System.getProperty("colibri.nativeBuildDir", "../build/native"));
    pb.environment().put("COLIBRI_PLUGIN_DIR", build.toAbsolutePath().toString());
    pb.environment().put("LD_LIBRARY_PATH", build.resolve("verbs-emu").toAbsolutePath().toString());
    pb.environment().put("COLIBRI_VERBS_TRAFFIC_CLASS", "32"); // the builder wins over it
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child did not finish:\n" + out);
    assertEquals(0, p.exitValue(), out);
    // The child's own lines ("rank r: <transportInfo>"), not the log lines that name the link too.
    assertEquals(
        2,
        out.lines().filter(l -> l.startsWith("rank ") && l.contains(WANT)).count(),
        "want \"" + WANT + "\" from both ranks in:\n" + out);
  }

  /** The child: two ranks on threads over transport verbs; prints each rank's transportInfo(). */
  public static void main(String[] args) throws Exception {
    UniqueId id = UniqueId.create();
    Options options =
        Options.builder()
            .transport(Transport.VERBS)
            .verbsPort(1)
            .verbsGidIndex(1)
            .verbsTrafficClass(106)
            .verbsRetryCount(3)
            .build();
    String[] infos = new String[2];
    Throwable[] failures = new Throwable[2];
    Thread[] threads = new Thread[2];
    for (int r = 0; r < 2; r++) {
      final int rank = r;
      threads[r] =
          new Thread(
              () -> {
                try (Communicator c = Communicator.init(id, rank, 2, options)) {
                  infos[rank] = c.transportInfo();
                } catch (Throwable t) {
                  failures[rank] = t;
                }
              });
      threads[r].start();
    }
    int rc = 0;
    for (int r = 0; r < 2; r++) {
      threads[r].join();
      if (failures[r] != null) {
        System.out.println("rank " + r + " failed: " + failures[r]);
        rc = 1;
      } else {
        System.out.println("rank " + r + ": " + infos[r].replace('\n', '|'));
      }
    }
    System.exit(rc);
  }
}
