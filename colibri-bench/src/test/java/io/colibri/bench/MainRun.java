/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/** One run of the whole command line ({@link Main#run}) in this JVM: what it printed and returned. */
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
   * Everything, for an assertion's message.
   *
   * @return the exit code and both streams
   */
  public String both() {
    return "exit code " + rc + "\nstdout:\n" + out + "\nstderr:\n" + err;
  }
}
