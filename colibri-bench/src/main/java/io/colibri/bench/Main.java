/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import io.colibri.bench.common.Commands;
import io.colibri.bench.doctor.Doctor;
import java.io.PrintStream;
import java.util.logging.Logger;

/**
 * The entry point of colibri-bench.jar (its Main-Class): {@code java -jar colibri-bench.jar
 * [perf|doctor|chart|generate-completion|help] ...}, perf when the first argument names no
 * command. See {@code docs/perf-tool.md}, {@code docs/troubleshooting.md} and {@code --help}.
 */
public final class Main {

  /** Colibri's INFO lines would come between the tool's output: see {@link Commands}. */
  private static final Logger COLIBRI_LOGGER = Commands.quietColibriLogger();

  private Main() {}

  /**
   * Runs the tool with standard output and error, then exits with its exit code.
   *
   * @param args the command line (see {@code --help})
   */
  public static void main(String[] args) {
    int rc = run(args, System.out, System.err);
    System.out.flush();
    System.err.flush();
    System.exit(rc);
  }

  /**
   * Runs the tool (perf, or the command that the first argument names); returns the exit code.
   * Rank 0 prints to {@code out}, problems go to {@code err}. Does not call {@link System#exit}.
   *
   * @param args the command line (see {@code --help})
   * @param out where rank 0's tables and reports go
   * @param err where problems go
   * @return the exit code: 0 ok, 2 bad command line; perf: 1 wrong elements, 3 a rank failed;
   *     doctor: 1 a check failed; chart: 3 the charts could not be written
   */
  public static int run(String[] args, PrintStream out, PrintStream err) {
    return run(args, out, err, new Doctor(out));
  }

  /**
   * {@link #run(String[], PrintStream, PrintStream)} with {@code doctor} as the doctor command
   * (tests give it a fake view of the driver).
   *
   * @param args the command line (see {@code --help})
   * @param out where rank 0's tables and reports go
   * @param err where problems go
   * @param doctor the doctor command, printing to {@code out}
   * @return the exit code, as {@link #run(String[], PrintStream, PrintStream)}'s
   */
  public static int run(String[] args, PrintStream out, PrintStream err, Doctor doctor) {
    return Cli.run(args, out, err, doctor);
  }
}
