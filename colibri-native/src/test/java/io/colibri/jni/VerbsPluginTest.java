/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.colibri.Communicator;
import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.UniqueId;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Transport VERBS is a network plugin (libcolibri_verbs.so, in colibri-verbs' linux-x86_64 jar):
 * without it on the classpath, init fails naming that jar; with it (here a folder in the jar's
 * layout, since colibri-verbs is built after this module), NativeLibrary extracts it and the core
 * loads it, and over the verbs emulator as a stand-in libibverbs.so.1 (the native build's
 * verbs-emu/, put on the child's library path) two ranks connect. Both run in child JVMs whose
 * environment has no COLIBRI_* variable (so no COLIBRI_PLUGIN_DIR from surefire): the plugin comes
 * from the classpath only, and neither it nor the core knows it talks to an emulator.
 */
class VerbsPluginTest {

  private static final Path BUILD =
      Path.of(System.getProperty("colibri.nativeBuildDir", "../build/native"));

  @Test
  void withoutThePluginVerbsNamesTheJar() throws Exception {
    String out = runChild(System.getProperty("java.class.path"), Map.of());
    assertEquals(
        2,
        out.lines()
            .filter(
                l ->
                    l.startsWith("rank ")
                        && l.contains("failed")
                        && l.contains(
                            "io.colibri:colibri-verbs (classifier "
                                + org.bytedeco.javacpp.Loader.getPlatform()
                                + ")"))
            .count(),
        "want both ranks to name the jar in:\n" + out);
  }

  @Test
  void pluginFromTheClasspathRunsOverTheStandinLibibverbs(@TempDir Path dir) throws Exception {
    Path lib = BUILD.resolve("libcolibri_verbs.so");
    Path standin = BUILD.resolve("verbs-emu");
    // Both come from the native build with its tests (scripts/test.sh builds them before Maven).
    assumeTrue(
        Files.isRegularFile(lib) && Files.isDirectory(standin),
        "no " + lib + " or " + standin + ": a native build without verbs.h or without its tests");
    Path res = dir.resolve("io/colibri/verbs/" + org.bytedeco.javacpp.Loader.getPlatform());
    Files.createDirectories(res);
    Files.copy(lib, res.resolve("libcolibri_verbs.so"));
    String cp = dir + File.pathSeparator + System.getProperty("java.class.path");
    String out = runChild(cp, Map.of("LD_LIBRARY_PATH", standin.toAbsolutePath().toString()));
    assertEquals(
        2,
        out.lines()
            .filter(l -> l.startsWith("rank ") && l.contains("verbs: colibri_emu0 port 1"))
            .count(),
        "want both ranks connected over the stand-in in:\n" + out);
  }

  private static String runChild(String classPath, Map<String, String> env) throws Exception {
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
    cmd.add(classPath);
    // Its own JavaCPP cache, so that an extracted plugin of another test run is not found there.
    cmd.add("-Dorg.bytedeco.javacpp.cachedir=" + Files.createTempDirectory("colibri-javacpp"));
    cmd.add(VerbsPluginTest.class.getName());
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment()
        .keySet()
        .removeIf(k -> k.startsWith("COLIBRI_") || k.equals("LD_LIBRARY_PATH"));
    pb.environment().putAll(env);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child did not finish:\n" + out);
    return out;
  }

  /** The child: two ranks on threads over transport verbs; prints each one's outcome. */
  public static void main(String[] args) throws Exception {
    UniqueId id = UniqueId.create();
    Options options = Options.builder().transport(Transport.VERBS).build();
    String[] lines = new String[2];
    Thread[] threads = new Thread[2];
    for (int r = 0; r < 2; r++) {
      final int rank = r;
      threads[r] =
          new Thread(
              () -> {
                try (Communicator c = Communicator.init(id, rank, 2, options)) {
                  lines[rank] = "rank " + rank + ": " + c.transportInfo().replace('\n', '|');
                } catch (Throwable t) {
                  lines[rank] = "rank " + rank + " failed: " + String.valueOf(t).replace('\n', '|');
                }
              });
      threads[r].start();
    }
    for (int r = 0; r < 2; r++) {
      threads[r].join();
      System.out.println(lines[r]);
    }
    System.exit(0);
  }
}
