/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import static org.junit.jupiter.api.Assertions.fail;

import io.colibri.Communicator;
import io.colibri.UniqueId;
import io.colibri.jni.Device;
import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Device collectives with every rank in a JVM of its own (CUDA IPC between them: the LL and staged
 * device paths), on GPU 0 (or spread over the GPUs with CLB_TEST_SPREAD=1): 2, 4 and 8 ranks,
 * each a {@link DeviceRankProcess} started with this JVM's java binary and class path, the id
 * created here and passed in the environment. Every child checks every element itself; this test
 * waits (120 s at most, then kills them) and wants every exit code 0, showing the children's
 * output otherwise. Tagged gpu; where there is no GPU (CI) it is skipped with the driver's reason,
 * before anything starts. scripts/gpu-check.sh runs it on a GPU host. A second test runs the
 * ranks with registered send and recv buffers (zero copy; CLB_TEST_REGISTER=1, see
 * {@link DeviceRankProcess}).
 */
@Tag("gpu")
class DeviceCollectivesProcessGpuTest {
  /** For the whole group: JVM start, CUDA context, bootstrap, 72 collectives and their checks. */
  private static final long GROUP_TIMEOUT_S = 120;

  /** After one child failed, how long the others get (their collectives time out after 30 s). */
  private static final long AFTER_A_FAILURE_S = 45;

  @BeforeEach
  void needsAGpu() {
    DeviceCollectivesGpuTest.assumeAGpu();
  }

  @ParameterizedTest(name = "{0} ranks as processes")
  @ValueSource(ints = {2, 4, 8})
  @Timeout(GROUP_TIMEOUT_S + 60)
  void allFourCollectivesWithRanksAsProcesses(int n) throws Exception {
    runRanks(n, false);
  }

  @ParameterizedTest(name = "{0} ranks as processes, registered buffers")
  @ValueSource(ints = {2, 4, 8})
  @Timeout(GROUP_TIMEOUT_S + 60)
  void allFourCollectivesOnRegisteredBuffersUseZeroCopy(int n) throws Exception {
    runRanks(n, true);
  }

  /** Starts {@code n} rank processes (registering their buffers if asked) and checks their exits. */
  private static void runRanks(int n, boolean registered) throws Exception {
    UniqueId id = UniqueId.create();
    Path logs = Files.createTempDirectory("colibri-device-ranks-");
    List<Process> children = new ArrayList<>();
    try {
      List<String> command = childCommand();
      for (int r = 0; r < n; r++) {
        List<String> cmd = new ArrayList<>(command);
        cmd.add(Integer.toString(r));
        cmd.add(Integer.toString(n));
        ProcessBuilder pb =
            new ProcessBuilder(cmd)
                .redirectOutput(logs.resolve("rank" + r + ".out").toFile())
                .redirectError(logs.resolve("rank" + r + ".err").toFile());
        // The id holds the bootstrap secret: environment, not the command line (ps shows that).
        pb.environment().put(DeviceRankProcess.ID_ENV, id.toString());
        if (registered) {
          pb.environment().put(DeviceRankProcess.REGISTER_ENV, "1");
        }
        children.add(pb.start());
      }
      String timedOut = waitForAll(children);
      StringBuilder report = new StringBuilder();
      boolean ok = timedOut == null;
      for (int r = 0; r < n; r++) {
        Process p = children.get(r);
        String exit = p.isAlive() ? "still running" : Integer.toString(p.exitValue());
        ok &= "0".equals(exit);
        report
            .append("\n--- rank ")
            .append(r)
            .append(" of ")
            .append(n)
            .append(" (pid ")
            .append(p.pid())
            .append("): exit ")
            .append(exit)
            .append("\n stdout: ")
            .append(tail(logs.resolve("rank" + r + ".out")))
            .append("\n stderr: ")
            .append(tail(logs.resolve("rank" + r + ".err")));
      }
      if (!ok) {
        fail(
            n
                + " rank processes on "
                + (registered ? "registered " : "")
                + "device memory: "
                + (timedOut != null ? timedOut : "not every rank exited with 0")
                + "\n command: "
                + String.join(" ", command)
                + " RANK "
                + n
                + (registered ? " (with " + DeviceRankProcess.REGISTER_ENV + "=1)" : "")
                + report);
      }
      System.out.println(n + " rank processes passed:" + report);
    } finally {
      for (Process p : children) {
        if (p.isAlive()) {
          p.destroyForcibly();
        }
      }
      for (Process p : children) {
        p.waitFor(10, TimeUnit.SECONDS);
      }
      deleteQuietly(logs);
    }
  }

  /**
   * Waits until every child has exited; null if they all did in time, else why they were killed:
   * the group timeout, or the others outliving a failed rank by {@link #AFTER_A_FAILURE_S}.
   */
  private static String waitForAll(List<Process> children) throws InterruptedException {
    long start = System.nanoTime();
    long deadline = start + TimeUnit.SECONDS.toNanos(GROUP_TIMEOUT_S);
    String why = "killed after " + GROUP_TIMEOUT_S + " s (a hang?)";
    while (true) {
      boolean running = false;
      for (Process p : children) {
        if (p.isAlive()) {
          running = true;
        } else if (p.exitValue() != 0) {
          long soon = System.nanoTime() + TimeUnit.SECONDS.toNanos(AFTER_A_FAILURE_S);
          if (soon < deadline) {
            deadline = soon;
            why = "a rank failed; the others were killed " + AFTER_A_FAILURE_S + " s later";
          }
        }
      }
      if (!running) {
        return null;
      }
      if (System.nanoTime() - deadline > 0) {
        for (Process p : children) {
          if (p.isAlive()) {
            p.destroyForcibly();
          }
        }
        for (Process p : children) {
          p.waitFor(10, TimeUnit.SECONDS);
        }
        return why;
      }
      Thread.sleep(50);
    }
  }

  /** This JVM's java binary and class path, and the child's main class. */
  static List<String> childCommand() {
    List<String> cmd = new ArrayList<>();
    String home = System.getProperty("java.home");
    cmd.add(
        ProcessHandle.current()
            .info()
            .command()
            .orElse(home + File.separator + "bin" + File.separator + "java"));
    cmd.add("-Xmx256m"); // also the limit of direct buffers: a child stages 2 × 32 MB at most
    cmd.add("-XX:+UseSerialGC");
    for (String key : System.getProperties().stringPropertyNames()) {
      if (key.startsWith("colibri.") || key.startsWith("org.bytedeco.")) {
        cmd.add("-D" + key + "=" + System.getProperty(key));
      }
    }
    cmd.add("-cp");
    cmd.add(classPath());
    cmd.add(DeviceRankProcess.class.getName());
    return cmd;
  }

  /**
   * The class path this test was loaded from: java.class.path (Maven's surefire sets it to the
   * test class path), plus the URLs of any URLClassLoader that loaded it (the JUnit console
   * launcher's -cp, used on the GPU host, is one: there java.class.path holds only the launcher's
   * jar), plus where the classes the child needs come from.
   */
  static String classPath() {
    Set<String> entries = new LinkedHashSet<>();
    for (String e : System.getProperty("java.class.path", "").split(File.pathSeparator)) {
      if (!e.isEmpty()) {
        entries.add(e);
      }
    }
    for (ClassLoader l = DeviceRankProcess.class.getClassLoader(); l != null; l = l.getParent()) {
      if (l instanceof URLClassLoader) {
        for (URL u : ((URLClassLoader) l).getURLs()) {
          addFile(entries, u);
        }
      }
    }
    for (Class<?> c :
        new Class<?>[] {
          DeviceRankProcess.class, DeviceBuffer.class, Communicator.class, Device.class
        }) {
      CodeSource src = c.getProtectionDomain().getCodeSource();
      if (src != null && src.getLocation() != null) {
        addFile(entries, src.getLocation());
      }
    }
    return String.join(File.pathSeparator, entries);
  }

  private static void addFile(Set<String> entries, URL u) {
    if (!"file".equals(u.getProtocol())) {
      return;
    }
    try {
      entries.add(Paths.get(u.toURI()).toString());
    } catch (URISyntaxException | IllegalArgumentException e) {
      entries.add(u.getPath());
    }
  }

  /** The last 16k characters of a child's log. */
  private static String tail(Path log) {
    try {
      String s = new String(Files.readAllBytes(log), StandardCharsets.UTF_8).strip();
      if (s.length() > 16_000) {
        s = "..." + s.substring(s.length() - 16_000);
      }
      return s.isEmpty() ? "(nothing)" : s.replace("\n", "\n         ");
    } catch (IOException e) {
      return "(unreadable: " + e + ")";
    }
  }

  private static void deleteQuietly(Path dir) {
    try (var files = Files.list(dir)) {
      files.forEach(f -> f.toFile().delete());
    } catch (IOException ignored) {
      // a temp folder left behind
    }
    dir.toFile().delete();
  }
}
