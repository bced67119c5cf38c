/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import io.colibri.bench.common.Commands;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One run of the whole command line ({@link Main#run}), in this JVM or in a JVM of its own (with
 * environment variables of its own): what it printed and returned.
 */
public final class MainRun {
  /** The exit code. */
  public final int rc;

  /** Standard output. */
  public final String out;

  /** Standard error. */
  public final String err;

  private MainRun(int rc, String out, String err) {
    this.rc = rc;
    this.out = out;
    this.err = err;
  }

  /**
   * Runs the command line with these arguments.
   *
   * @param args the arguments, as after {@code java -jar colibri-bench.jar}
   * @return what it printed and returned
   */
  public static MainRun of(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int rc;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      rc = Main.run(args, o, e);
    }
    return new MainRun(
        rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  /**
   * Runs the command line in a new JVM (this one's class path and -D properties) whose environment
   * adds {@code env}, as a user's shell would start it.
   *
   * @param env the variables to add
   * @param limit how long it may run before it is killed (the run then fails, saying so)
   * @param args the arguments
   * @return what it printed and returned
   */
  public static MainRun inOwnJvm(Map<String, String> env, Duration limit, String... args) {
    List<String> cmd = Commands.javaCommand(Main.class);
    cmd.addAll(List.of(args));
    Path out = null;
    Path err = null;
    try {
      out = Files.createTempFile("colibri-main-run", ".out");
      err = Files.createTempFile("colibri-main-run", ".err");
      ProcessBuilder pb =
          new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile());
      pb.environment().putAll(env);
      Process p = pb.start();
      boolean ended = p.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS);
      if (!ended) {
        p.destroyForcibly().waitFor();
      }
      String e = Files.readString(err);
      return new MainRun(
          ended ? p.exitValue() : -1,
          Files.readString(out),
          ended ? e : e + "\n(killed: still running after " + limit + ")");
    } catch (IOException e) {
      throw new IllegalStateException("could not run " + cmd + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while " + cmd + " ran", e);
    } finally {
      for (Path f : new Path[] {out, err}) {
        if (f != null) {
          try {
            Files.deleteIfExists(f);
          } catch (IOException ignored) {
            // a temporary file left behind
          }
        }
      }
    }
  }

  /**
   * Everything, for an assertion's message.
   *
   * @return the exit code and both streams
   */
  public String both() {
    return "exit code " + rc + "\nstdout:\n" + out + "\nstderr:\n" + err;
  }
}
