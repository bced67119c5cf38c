/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.bench.common.Commands;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.TypeConversionException;

/**
 * The perf command: its command line (picocli options, checked as they are parsed and once more
 * together) and what it runs, {@code Perf.execute}. Immutable once parsed. The tool's command
 * line ({@code io.colibri.bench.Cli}) adds it as the command {@code perf}.
 */
@Command(
    name = "perf",
    mixinStandardHelpOptions = true,
    versionProvider = Commands.VersionProvider.class,
    header = "Measures the collectives over a sweep of message sizes (the default command).",
    abbreviateSynopsis = true,
    sortOptions = false,
    description = {
      "Runs the collectives on N local ranks and prints one table per collective"
          + " (nccl-tests style); only rank 0 prints. Without a command name,"
          + " java -jar colibri-bench.jar [OPTIONS] runs perf.",
      ""
    },
    footer = {
      "",
      "Sizes: for allGather and reduceScatter the size is the total buffer (ranks x per-rank"
          + " part), as in nccl-tests; sizes that do not divide evenly are rounded down.",
      "Time: average per operation over -n iterations, the slowest rank's, measured from a"
          + " barrier to the end of that rank's last iteration. algbw = size / time;"
          + " busbw = algbw x 2(n-1)/n (allReduce), (n-1)/n (allGather, reduceScatter),"
          + " 1 (broadcast).",
      "Colibri settings not on this command line come from COLIBRI_* variables"
          + " (docs/configuration.md).",
      "",
      "Exit code: 0 ok, 1 wrong elements, 2 bad command line, 3 a rank failed.",
      "Charts from result files: java -jar colibri-bench.jar chart --help"
    })
public final class PerfConfig implements Callable<Integer> {

  /** Largest buffer the tool allocates (a direct ByteBuffer holds at most 2 GiB - 1). */
  static final long MAX_BYTES_LIMIT = 1L << 30;

  @Spec private CommandSpec spec;

  private final PrintStream out;
  private final PrintStream err;

  int ranks;
  boolean threads;
  long minBytes;
  long maxBytes;
  long stepFactor;
  long stepBytes; // > 0: linear steps instead of the factor
  boolean check = true;
  int warmup;
  int iters;
  DataType type;
  ReduceOp op;
  int root;
  EnumSet<Collective> collectives;
  Transport transport;
  Algorithm algorithm;
  long timeoutMs; // 0: the Options default (COLIBRI_TIMEOUT_MS or 60 s)

  /** --progress (true), --no-progress (false), neither (null: on when on a terminal). */
  Boolean progress;

  @Option(
      names = "--csv",
      paramLabel = "FILE",
      order = 30,
      description = "also write every row as CSV")
  Path csv;

  @Option(
      names = "--json",
      paramLabel = "FILE",
      order = 31,
      description = "also write the run (settings and rows) as JSON")
  Path json;

  // Set only on the child processes that the launcher starts.
  int childRank = -1;

  @Option(names = "--child-id", hidden = true, description = "internal to the launcher")
  String childId;

  /** The arguments as given, for the children (which parse the same sweep). */
  List<String> original = List.of();

  /**
   * The command, printing to {@code out} and {@code err} when it runs.
   *
   * @param out where rank 0's tables go
   * @param err where progress and problems go
   */
  public PerfConfig(PrintStream out, PrintStream err) {
    this.out = out;
    this.err = err;
  }

  /**
   * Records the perf options as the command line gave them (without the command name), which
   * rank 0 passes on to the ranks it starts; set before the command line is parsed.
   *
   * @param args the perf options
   */
  public void arguments(List<String> args) {
    original = List.copyOf(args);
  }

  /** Parses and checks {@code args} (without running anything). */
  static PerfConfig parse(String... args) {
    PerfConfig c = new PerfConfig(null, null);
    Commands.configure(new CommandLine(c)).parseArgs(args);
    c.checkTogether();
    c.original = List.of(args);
    return c;
  }

  @Override
  public Integer call() {
    checkTogether();
    return Perf.execute(this, out, err);
  }

  // ---- the options, in the order of --help ----

  @Option(
      names = {"-N", "--ranks"},
      paramLabel = "N",
      order = 1,
      defaultValue = "4",
      description = "number of ranks (default ${DEFAULT-VALUE})")
  void ranks(int n) {
    ranks = (int) range("--ranks", n, 1, 1024);
  }

  @Option(names = "--threads", order = 2, description = "run the ranks as threads of this JVM")
  void threads(boolean on) {
    threads = true;
  }

  @Option(
      names = "--processes",
      order = 3,
      description = "one JVM process per rank, this process is rank 0 (the default)")
  void processes(boolean on) {
    threads = false;
  }

  @Option(
      names = {"-b", "--min-bytes"},
      paramLabel = "SIZE",
      order = 4,
      defaultValue = "8",
      converter = SizeConverter.class,
      description = "smallest message (default ${DEFAULT-VALUE}); suffixes K M G (powers of 1024)")
  void minBytes(long bytes) {
    minBytes = bytes;
  }

  @Option(
      names = {"-e", "--max-bytes"},
      paramLabel = "SIZE",
      order = 5,
      defaultValue = "64M",
      converter = SizeConverter.class,
      description = "largest message (default ${DEFAULT-VALUE}, at most 1G)")
  void maxBytes(long bytes) {
    maxBytes = bytes;
  }

  @Option(
      names = {"-f", "--step-factor"},
      paramLabel = "F",
      order = 6,
      defaultValue = "2",
      description = "multiply the size by F each step (default ${DEFAULT-VALUE})")
  void stepFactor(long f) {
    stepFactor = range("--step-factor", f, 2, 1 << 20);
  }

  @Option(
      names = {"-i", "--step-bytes"},
      paramLabel = "SIZE",
      order = 7,
      converter = SizeConverter.class,
      description = "add SIZE each step instead of multiplying")
  void stepBytes(long bytes) {
    stepBytes = bytes;
  }

  @Option(
      names = {"-w", "--warmup"},
      paramLabel = "N",
      order = 8,
      defaultValue = "5",
      description = "untimed iterations per size (default ${DEFAULT-VALUE})")
  void warmup(int n) {
    warmup = (int) range("--warmup", n, 0, 1_000_000);
  }

  @Option(
      names = {"-n", "--iters"},
      paramLabel = "N",
      order = 9,
      defaultValue = "20",
      description = "timed iterations per size (default ${DEFAULT-VALUE})")
  void iters(int n) {
    iters = (int) range("--iters", n, 1, 1_000_000);
  }

  @Option(
      names = {"-c", "--check"},
      paramLabel = "0|1",
      arity = "0..1",
      fallbackValue = "1",
      order = 10,
      description =
          "check every element of the result (default 1; also" + " true/false, on/off, yes/no)")
  void check(String value) {
    check = bool("--check", value);
  }

  @Option(names = "--no-check", order = 11, description = "same as -c 0")
  void noCheck(boolean on) {
    check = false;
  }

  @Option(
      names = "--collectives",
      paramLabel = "LIST",
      order = 12,
      defaultValue = "all",
      completionCandidates = CollectiveNames.class,
      description = "all, or a comma list of ${COMPLETION-CANDIDATES} (default all)")
  void collectives(String list) {
    collectives = Commands.convert(spec, "--collectives", () -> parseCollectives(list));
  }

  @Option(
      names = {"-t", "-d", "--type"},
      paramLabel = "TYPE",
      order = 13,
      defaultValue = "float32",
      converter = TypeNames.class,
      completionCandidates = TypeNames.class,
      description = "${COMPLETION-CANDIDATES} (default ${DEFAULT-VALUE})")
  void type(DataType t) {
    type = t;
  }

  @Option(
      names = {"-o", "--op"},
      paramLabel = "OP",
      order = 14,
      defaultValue = "sum",
      converter = OpNames.class,
      completionCandidates = OpNames.class,
      description =
          "${COMPLETION-CANDIDATES} (default ${DEFAULT-VALUE}; allReduce and" + " reduceScatter)")
  void op(ReduceOp o) {
    op = o;
  }

  @Option(
      names = {"-r", "--root"},
      paramLabel = "R",
      order = 15,
      defaultValue = "0",
      description = "root of broadcast (default ${DEFAULT-VALUE})")
  void root(int r) {
    root = (int) range("--root", r, 0, 1023);
  }

  @Option(
      names = "--transport",
      paramLabel = "T",
      order = 16,
      defaultValue = "auto",
      converter = TransportNames.class,
      completionCandidates = TransportNames.class,
      description = "${COMPLETION-CANDIDATES} (default ${DEFAULT-VALUE})")
  void transport(Transport t) {
    transport = t;
  }

  @Option(
      names = "--algorithm",
      paramLabel = "A",
      order = 17,
      defaultValue = "auto",
      converter = AlgorithmNames.class,
      completionCandidates = AlgorithmNames.class,
      description = "${COMPLETION-CANDIDATES} (default ${DEFAULT-VALUE})")
  void algorithm(Algorithm a) {
    algorithm = a;
  }

  @Option(
      names = "--timeout",
      paramLabel = "MS",
      order = 18,
      description =
          "a peer silent this long is an error (default: Colibri's, 60000 unless COLIBRI_TIMEOUT_MS"
              + " says otherwise)")
  void timeout(long ms) {
    timeoutMs = range("--timeout", ms, 1, 86_400_000L);
  }

  @Option(
      names = "--progress",
      order = 32,
      description =
          "show on stderr which size runs"
              + " ([3/24] allReduce 1 MiB); default: on when stdout and stderr are a terminal")
  void progress(boolean on) {
    progress = Boolean.TRUE;
  }

  @Option(names = "--no-progress", order = 33, description = "never show it")
  void noProgress(boolean on) {
    progress = Boolean.FALSE;
  }

  @Option(names = "--child-rank", hidden = true, description = "internal to the launcher")
  void childRank(int rank) {
    childRank = (int) range("--child-rank", rank, 0, 1023);
  }

  /** What no single option can check: the options together. */
  private void checkTogether() {
    if (minBytes < 1) {
      throw usage("--min-bytes is " + minBytes + ": pass 1 or more");
    }
    if (maxBytes < minBytes) {
      throw usage(
          "--max-bytes "
              + maxBytes
              + " is below --min-bytes "
              + minBytes
              + ": pass a max at least as large as the min");
    }
    if (root >= ranks) {
      throw usage(
          "--root " + root + " is out of range for " + ranks + " ranks: pass 0.." + (ranks - 1));
    }
    if (childRank >= ranks || (childRank >= 0) != (childId != null)) {
      throw usage("--child-rank and --child-id are internal to the launcher");
    }
  }

  private ParameterException usage(String message) {
    return new ParameterException(spec.commandLine(), message);
  }

  private long range(String name, long v, long min, long max) {
    if (v < min || v > max) {
      throw usage(name + " is " + v + ": pass " + min + ".." + max);
    }
    return v;
  }

  boolean isChild() {
    return childRank >= 0;
  }

  /**
   * Message sizes in bytes, from min to max: multiplied by the step factor, or increased by the
   * step bytes.
   */
  List<Long> sizes() {
    List<Long> sizes = new ArrayList<>();
    for (long s = minBytes; s <= maxBytes; ) {
      sizes.add(s);
      long next = stepBytes > 0 ? s + stepBytes : s * stepFactor;
      if (next <= s) {
        break;
      }
      s = next;
    }
    return sizes;
  }

  /** One line with the settings, for the header of the output. */
  String describe() {
    return ranks
        + " ranks ("
        + (threads ? "threads in one JVM" : "one JVM process each")
        + "), transport "
        + transport.configName()
        + ", algorithm "
        + algorithm.configName()
        + ", "
        + Perf.typeName(type)
        + ", op "
        + Perf.opName(op)
        + ", warmup "
        + warmup
        + ", iters "
        + iters
        + ", check "
        + (check ? "on" : "off");
  }

  // ---- values ----

  private boolean bool(String name, String text) {
    switch (text.strip().toLowerCase(Locale.ROOT)) {
      case "1":
      case "true":
      case "on":
      case "yes":
        return true;
      case "0":
      case "false":
      case "off":
      case "no":
        return false;
      default:
        throw usage(name + " takes 0 or 1, got '" + text + "'");
    }
  }

  /** A size such as 8, 64K, 1M, 1G (powers of 1024; a trailing B or iB is allowed). */
  static long size(String text) {
    String t = text.strip().toUpperCase(Locale.ROOT);
    if (t.endsWith("IB")) {
      t = t.substring(0, t.length() - 2);
    } else if (t.endsWith("B")) {
      t = t.substring(0, t.length() - 1);
    }
    long mult = 1;
    if (!t.isEmpty()) {
      switch (t.charAt(t.length() - 1)) {
        case 'K':
          mult = 1L << 10;
          break;
        case 'M':
          mult = 1L << 20;
          break;
        case 'G':
          mult = 1L << 30;
          break;
        default:
          break;
      }
    }
    if (mult != 1) {
      t = t.substring(0, t.length() - 1);
    }
    long v;
    try {
      v = Long.parseLong(t);
    } catch (NumberFormatException e) {
      throw new TypeConversionException(
          "needs a size such as 8, 64K, 1M or 1G, got '" + text + "'");
    }
    if (v < 0 || v > MAX_BYTES_LIMIT / mult) {
      throw new TypeConversionException("'" + text + "' is out of range: pass 0..1G");
    }
    return v * mult;
  }

  static final class SizeConverter implements ITypeConverter<Long> {
    @Override
    public Long convert(String text) {
      return size(text);
    }
  }

  /**
   * The values of an option by their names on the command line: the option's converter (a name
   * in any case, with spaces around it) and its completion candidates (the names without their
   * aliases, in the order of --help).
   */
  abstract static class Names<T> extends ArrayList<String> implements ITypeConverter<T> {
    private static final long serialVersionUID = 1L;

    private final String what;
    private final Map<String, T> values = new HashMap<>();

    Names(String what) {
      this.what = what;
    }

    /** {@code name} (listed) and {@code aliases} (not listed) stand for {@code value}. */
    final void name(T value, String name, String... aliases) {
      add(name);
      values.put(name, value);
      for (String alias : aliases) {
        values.put(alias, value);
      }
    }

    @Override
    public final T convert(String text) {
      T value = values.get(text.strip().toLowerCase(Locale.ROOT));
      if (value == null) {
        throw new TypeConversionException(
            "unknown " + what + " '" + text + "': pass " + String.join(", ", this));
      }
      return value;
    }
  }

  static final class TypeNames extends Names<DataType> {
    private static final long serialVersionUID = 1L;

    TypeNames() {
      super("type");
      name(DataType.FLOAT32, "float32", "float", "fp32");
      name(DataType.FLOAT16, "float16", "half", "fp16");
      name(DataType.BFLOAT16, "bfloat16", "bf16");
      name(DataType.FLOAT64, "float64", "double", "fp64");
      name(DataType.INT8, "int8", "char");
      name(DataType.UINT8, "uint8");
      name(DataType.INT32, "int32", "int");
      name(DataType.UINT32, "uint32");
      name(DataType.INT64, "int64");
      name(DataType.UINT64, "uint64");
    }
  }

  static final class OpNames extends Names<ReduceOp> {
    private static final long serialVersionUID = 1L;

    OpNames() {
      super("op");
      for (ReduceOp op : ReduceOp.values()) {
        name(op, Perf.opName(op));
      }
    }
  }

  static final class TransportNames extends Names<Transport> {
    private static final long serialVersionUID = 1L;

    TransportNames() {
      super("transport");
      for (Transport t : Transport.values()) {
        name(t, t.configName());
      }
    }
  }

  static final class AlgorithmNames extends Names<Algorithm> {
    private static final long serialVersionUID = 1L;

    AlgorithmNames() {
      super("algorithm");
      for (Algorithm a : Algorithm.values()) {
        if (a != Algorithm.NONE) {
          name(a, a.configName());
        }
      }
    }
  }

  /**
   * The collectives of an option such as {@code --collectives allreduce,broadcast}: {@code all},
   * or a comma list of {@link CollectiveNames} (any case).
   *
   * @param text the option's value
   * @return the collectives it names, none twice
   * @throws TypeConversionException if it names no collective, or one that does not exist
   */
  public static EnumSet<Collective> parseCollectives(String text) {
    EnumSet<Collective> set = EnumSet.noneOf(Collective.class);
    for (String part : text.split(",")) {
      String p = part.strip();
      if (p.isEmpty()) {
        continue;
      }
      if (p.equalsIgnoreCase("all")) {
        set.addAll(EnumSet.allOf(Collective.class));
        continue;
      }
      Collective c = Collective.byName(p);
      if (c == null) {
        throw new TypeConversionException(
            "unknown collective '"
                + p
                + "': pass all, or a comma"
                + " list of "
                + String.join(", ", new CollectiveNames()));
      }
      set.add(c);
    }
    if (set.isEmpty()) {
      throw new TypeConversionException(
          "'" + text + "' names no collective: pass all or a" + " comma list");
    }
    return set;
  }

  /** The names of the collectives on the command line, in order: the completion candidates. */
  public static final class CollectiveNames extends ArrayList<String> {
    private static final long serialVersionUID = 1L;

    CollectiveNames() {
      super(
          List.of(
              "allreduce",
              "allgather",
              "reducescatter",
              "broadcast",
              "sendrecv",
              "alltoall",
              "alltoallv"));
    }
  }
}
