/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import io.colibri.bench.chart.ChartCommand;
import io.colibri.bench.common.Commands;
import io.colibri.bench.decode.DecodeCommand;
import io.colibri.bench.doctor.Doctor;
import io.colibri.bench.perf.PerfConfig;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.Writer;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.AutoComplete;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.HelpCommand;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.Spec;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * The command line of colibri-bench.jar (picocli): the commands {@code perf} ({@link PerfConfig},
 * also what runs when the first argument names no command), {@code doctor} ({@link Doctor}),
 * {@code chart} ({@link ChartCommand}), {@code decode} ({@link DecodeCommand}), {@code generate-completion} (a bash/zsh completion script)
 * and {@code help}; {@code --help} and {@code --version} on each. A bad command line prints what
 * was wrong and where to look, and exits with 2. What the commands share (their name, how they
 * parse, {@code --version}) is {@link Commands}.
 */
@Command(
    name = Commands.NAME,
    mixinStandardHelpOptions = true,
    versionProvider = Commands.VersionProvider.class,
    description = {
      "Colibri's bench tool: measures the collectives (perf), checks a machine (doctor),"
          + " draws charts of result files (chart) and runs a tensor-parallel decoder (decode).",
      "Without a command it runs perf: java -jar colibri-bench.jar [perf options]"
          + " ('java -jar colibri-bench.jar perf --help' lists them).",
      ""
    },
    commandListHeading = "%nCommands:%n",
    footer = {
      "",
      "Exit code: 0 ok, 2 bad command line; perf: 1 wrong elements, 3 a rank failed;"
          + " doctor: 1 a check FAILed; chart: 3 could not write the charts;"
          + " decode: 1 --check failed, 3 a rank failed.",
      "JMH benchmarks (Colibri against NCCL on GPUs) are in colibri-jmh.jar: see docs/jmh.md."
    })
final class Cli {

  static final int EXIT_USAGE = Commands.EXIT_USAGE;
  static final int EXIT_FAILED = Commands.EXIT_FAILED;

  /** Arguments that the tool answers itself; any other first argument goes to perf. */
  private static final Set<String> OWN_OPTIONS = Set.of("-h", "--help", "-V", "--version");

  private Cli() {}

  /**
   * Runs the command line {@code args}; returns the exit code. Output goes to {@code out},
   * problems to {@code err}; {@code doctor} is the doctor command (printing to {@code out}). Does
   * not call {@link System#exit}.
   */
  static int run(String[] args, PrintStream out, PrintStream err, Doctor doctor) {
    PerfConfig perf = new PerfConfig(out, err);
    CommandLine cli = new CommandLine(new Cli());
    cli.addSubcommand(perf);
    cli.addSubcommand(doctor);
    cli.addSubcommand(new ChartCommand(out, err));
    cli.addSubcommand(new DecodeCommand(out, err));
    cli.addSubcommand(new Completion());
    cli.addSubcommand(new HelpCommand());
    Commands.configure(cli);
    PrintWriter outWriter = writer(out);
    PrintWriter errWriter = writer(err);
    cli.setOut(outWriter);
    cli.setErr(errWriter);
    cli.setParameterExceptionHandler(Cli::usageError);
    cli.setExecutionExceptionHandler(Cli::failure);

    String[] line = args;
    if (args.length == 0
        || !(cli.getSubcommands().containsKey(args[0]) || OWN_OPTIONS.contains(args[0]))) {
      line = new String[args.length + 1];
      line[0] = "perf";
      System.arraycopy(args, 0, line, 1, args.length);
    }
    if (line[0].equals("perf")) {
      perf.arguments(List.of(Arrays.copyOfRange(line, 1, line.length)));
    }
    int rc = cli.execute(line);
    outWriter.flush();
    errWriter.flush();
    return rc;
  }

  /** "colibri perf", "colibri chart", ... the start of every message of that command. */
  private static String who(CommandLine cmd) {
    return cmd.getParent() == null ? "colibri-bench" : "colibri " + cmd.getCommandName();
  }

  private static int usageError(ParameterException e, String[] args) {
    CommandLine cmd = e.getCommandLine();
    PrintWriter err = cmd.getErr();
    err.println(who(cmd) + ": " + e.getMessage());
    UnmatchedArgumentException.printSuggestions(e, err);
    err.println("See '" + cmd.getCommandSpec().qualifiedName() + " --help' for the options.");
    err.flush();
    return EXIT_USAGE;
  }

  private static int failure(Exception e, CommandLine cmd, ParseResult parsed) {
    PrintWriter err = cmd.getErr();
    err.println(who(cmd) + ": failed: " + e);
    e.printStackTrace(err);
    err.flush();
    return EXIT_FAILED;
  }

  /** A PrintWriter that hands every write to {@code out} at once (in out's charset). */
  private static PrintWriter writer(PrintStream out) {
    return new PrintWriter(
        new Writer() {
          @Override
          public void write(char[] chars, int offset, int length) {
            out.print(new String(chars, offset, length));
          }

          @Override
          public void flush() {
            out.flush();
          }

          @Override
          public void close() {
            out.flush();
          }
        },
        true);
  }

  /** {@code generate-completion}: the bash (and zsh) completion script of the tool. */
  @Command(
      name = "generate-completion",
      mixinStandardHelpOptions = true,
      versionProvider = Commands.VersionProvider.class,
      header = "Prints a bash (and zsh) completion script for the tool.",
      description = {
        "Prints a bash completion script (zsh: after 'autoload -U +X bashcompinit &&"
            + " bashcompinit') for a command NAME that runs colibri-bench.jar, e.g.:",
        "  alias colibri-bench='java -jar /opt/colibri/colibri-bench.jar'",
        "  source <(java -jar /opt/colibri/colibri-bench.jar generate-completion)",
        "It completes the commands, their options, and the values of --type, --op,"
            + " --transport, --algorithm and --collectives.",
        ""
      })
  static final class Completion implements Callable<Integer> {
    @Spec private CommandSpec spec;

    @Option(
        names = "--name",
        paramLabel = "NAME",
        defaultValue = "colibri-bench",
        description = "the command to complete (default ${DEFAULT-VALUE})")
    String name;

    @Override
    public Integer call() {
      PrintWriter out = spec.commandLine().getOut();
      out.print(AutoComplete.bash(name, spec.root().commandLine()));
      out.flush();
      return 0;
    }
  }
}
