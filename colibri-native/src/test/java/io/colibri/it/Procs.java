/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/** Child JVMs running {@link RankProcess}, with their output collected line by line. */
final class Procs {
  private Procs() {}

  /** One child: the process and what it printed so far. */
  static final class Child {
    final String name;
    final Process process;
    final List<String> out = new CopyOnWriteArrayList<>();
    final List<String> err = new CopyOnWriteArrayList<>();

    Child(String name, Process process) {
      this.name = name;
      this.process = process;
      pump(process.getInputStream(), out);
      pump(process.getErrorStream(), err);
    }

    private static void pump(java.io.InputStream in, List<String> sink) {
      Thread t =
          new Thread(
              () -> {
                try (BufferedReader r =
                    new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                  for (String line; (line = r.readLine()) != null; ) {
                    sink.add(line);
                  }
                } catch (IOException ignored) {
                  // the process ended
                }
              });
      t.setDaemon(true);
      t.start();
    }

    /** Waits for the exit; -1 if it did not exit in time (then it is killed). */
    int waitFor(long millis) throws InterruptedException {
      if (!process.waitFor(millis, TimeUnit.MILLISECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
        return -1;
      }
      // let the pumps drain
      Thread.sleep(50);
      return process.exitValue();
    }

    boolean printed(String prefix) {
      return out.stream().anyMatch(l -> l.startsWith(prefix));
    }

    String line(String prefix) {
      return out.stream().filter(l -> l.startsWith(prefix)).findFirst().orElse(null);
    }

    String describe() {
      return name
          + " (pid "
          + process.pid()
          + ")\n   stdout: "
          + String.join("\n           ", out)
          + "\n   stderr: "
          + String.join("\n           ", err);
    }
  }

  static String javaBinary() {
    return ProcessHandle.current()
        .info()
        .command()
        .orElse(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
  }

  static Child start(String name, Map<String, String> env, String... args) throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(javaBinary());
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add("-Xmx256m");
    cmd.add("-XX:+UseSerialGC");
    cmd.add("-XX:TieredStopAtLevel=1");
    cmd.add(RankProcess.class.getName());
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    if (env != null) {
      pb.environment().putAll(env);
    }
    return new Child(name, pb.start());
  }
}
