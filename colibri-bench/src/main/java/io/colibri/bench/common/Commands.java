/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.common;

import io.colibri.Option;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine;
import picocli.CommandLine.IVersionProvider;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.TypeConversionException;

/**
 * What the commands of colibri-bench.jar (perf, doctor, chart) share: the name in their usage
 * lines, the exit codes they have in common, how their command lines are parsed, their
 * {@code --version} ({@link VersionProvider}), and the quiet Colibri logger of the tool.
 */
public final class Commands {

  /** How the tool is run: the name in every usage line. */
  public static final String NAME = "java -jar colibri-bench.jar";

  /** Exit code of a bad command line, for every command. */
  public static final int EXIT_USAGE = 2;

  /** Exit code of a command that failed (perf: a rank failed; chart: no charts written). */
  public static final int EXIT_FAILED = 3;

  private Commands() {}

  /**
   * The command that starts {@code mainClass} in a new JVM as this one runs: the same Java, class
   * path and {@code -D} properties of the command line (the library's among them).
   *
   * @param mainClass the class whose {@code main} runs
   * @return the command, to which the caller adds the arguments
   */
  public static List<String> javaCommand(Class<?> mainClass) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      if (a.startsWith("-D")) {
        cmd.add(a);
      }
    }
    cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), mainClass.getName()));
    return cmd;
  }

  /**
   * What every command line of the tool does alike (set after the commands are added): the last
   * of a repeated option counts ({@code -n 5 -n 10}), and an argument that starts with {@code @}
   * is that argument (no argument files).
   *
   * @param cli the command line to set up
   * @return {@code cli}
   */
  public static CommandLine configure(CommandLine cli) {
    cli.setOverwrittenOptionsAllowed(true);
    cli.setExpandAtFiles(false);
    return cli;
  }

  /**
   * {@code conversion}'s value; a {@link TypeConversionException} from it becomes the usage
   * error of {@code option}, for options whose setter converts.
   *
   * @param <T> the option's type
   * @param spec the command whose option it is
   * @param option the option's name, for the message ("--collectives")
   * @param conversion converts the option's text
   * @return the converted value
   * @throws ParameterException if {@code conversion} throws a {@link TypeConversionException}
   */
  public static <T> T convert(CommandSpec spec, String option, Supplier<T> conversion) {
    try {
      return conversion.get();
    } catch (TypeConversionException e) {
      throw new ParameterException(
          spec.commandLine(), "Invalid value for option '" + option + "': " + e.getMessage());
    }
  }

  /**
   * The tool's own output is its tables and reports: Colibri's INFO lines (a rank ready, say)
   * would come between them, so the {@code io.colibri} logger starts at WARNING unless the JVM's
   * logging is configured (a {@code java.util.logging.config.file} or {@code .class}) or a
   * Colibri log level is asked for ({@code COLIBRI_LOG_LEVEL}, {@code -Dcolibri.logLevel}). The
   * caller holds the logger: JUL keeps only weak references to its loggers.
   *
   * @return the {@code io.colibri} logger
   */
  public static Logger quietColibriLogger() {
    Logger logger = Logger.getLogger("io.colibri");
    boolean configured =
        System.getProperty("java.util.logging.config.file") != null
            || System.getProperty("java.util.logging.config.class") != null
            || System.getProperty(Option.LOG_LEVEL.systemProperty()) != null
            || System.getenv(Option.LOG_LEVEL.environmentVariable()) != null;
    if (!configured && logger.getLevel() == null) {
      logger.setLevel(Level.WARNING);
    }
    return logger;
  }

  /** {@code --version} of every command: Colibri's version (from the native library) and Java's. */
  public static final class VersionProvider implements IVersionProvider {

    /** The provider picocli creates for {@code --version}. */
    public VersionProvider() {}

    @Override
    public String[] getVersion() {
      String colibri = Version.library();
      return new String[] {
        "colibri-bench: Colibri "
            + (colibri != null
                ? colibri
                : "(the native library does not load: 'java -jar colibri-bench.jar doctor' says"
                    + " why)"),
        "Java "
            + System.getProperty("java.version")
            + " ("
            + System.getProperty("java.vendor")
            + "), "
            + System.getProperty("os.name")
            + " "
            + System.getProperty("os.version")
            + " "
            + System.getProperty("os.arch")
      };
    }
  }
}
