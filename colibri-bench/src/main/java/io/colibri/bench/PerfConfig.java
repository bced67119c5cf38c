/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;

/** The command line of {@link Perf}, parsed and checked. Immutable once {@link #parse} returns. */
final class PerfConfig {

  /** Largest buffer the tool allocates (a direct ByteBuffer holds at most 2 GiB - 1). */
  static final long MAX_BYTES_LIMIT = 1L << 30;

  static final long DEFAULT_MIN_BYTES = 8;
  static final long DEFAULT_MAX_BYTES = 64L << 20;
  static final long DEFAULT_STEP_FACTOR = 2;
  static final int DEFAULT_RANKS = 4;
  static final int DEFAULT_WARMUP = 5;
  static final int DEFAULT_ITERS = 20;

  int ranks = DEFAULT_RANKS;
  boolean threads;
  long minBytes = DEFAULT_MIN_BYTES;
  long maxBytes = DEFAULT_MAX_BYTES;
  long stepFactor = DEFAULT_STEP_FACTOR;
  long stepBytes; // > 0: linear steps instead of the factor
  boolean check = true;
  int warmup = DEFAULT_WARMUP;
  int iters = DEFAULT_ITERS;
  DataType type = DataType.FLOAT32;
  ReduceOp op = ReduceOp.SUM;
  int root;
  EnumSet<Collective> collectives = EnumSet.allOf(Collective.class);
  Transport transport = Transport.AUTO;
  Algorithm algorithm = Algorithm.AUTO;
  long timeoutMs; // 0: the Options default (COLIBRI_TIMEOUT_MS or 60 s)
  Path csv;
  Path json;
  /** --progress (true), --no-progress (false), neither (null: on when on a terminal). */
  Boolean progress;
  boolean help;

  // Set only on the child processes that the launcher starts.
  int childRank = -1;
  String childId;

  /** The arguments as given, for the children (which parse the same sweep). */
  final List<String> original = new ArrayList<>();

  /** Thrown for a bad command line; the message says what to change. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  static String usage() {
    return String.join("\n",
        "Usage: java -jar colibri-bench.jar [options]",
        "",
        "Measures Colibri collectives on N local ranks and prints one table per collective",
        "(nccl-tests style). Only rank 0 prints. Exit code: 0 ok, 1 wrong elements, 2 bad",
        "command line, 3 a rank failed.",
        "",
        "Ranks:",
        "  --ranks N               number of ranks (default " + DEFAULT_RANKS + ")",
        "  --threads               run the ranks as threads of this JVM (default: one JVM",
        "                          process per rank; this process is rank 0)",
        "Sweep:",
        "  -b, --min-bytes SIZE    smallest message (default " + DEFAULT_MIN_BYTES + "); suffixes K M G",
        "  -e, --max-bytes SIZE    largest message (default " + (DEFAULT_MAX_BYTES >> 20) + "M, at most 1G)",
        "  -f, --step-factor F     multiply the size by F each step (default " + DEFAULT_STEP_FACTOR + ")",
        "  -i, --step-bytes SIZE   add SIZE each step instead of multiplying",
        "  -w, --warmup N          untimed iterations per size (default " + DEFAULT_WARMUP + ")",
        "  -n, --iters N           timed iterations per size (default " + DEFAULT_ITERS + ")",
        "  -c, --check [0|1]       check every element of the result (default 1);",
        "      --no-check          same as -c 0",
        "What:",
        "  --collectives LIST      all, or a comma list of allreduce,allgather,reducescatter,",
        "                          broadcast (default all)",
        "  -t, -d, --type TYPE     float32 (default), float16, bfloat16, float64, int8, uint8,",
        "                          int32, uint32, int64, uint64",
        "  -o, --op OP             sum (default), prod, min, max, avg",
        "  -r, --root R            root of broadcast (default 0)",
        "How:",
        "  --transport T           auto (default), shm, socket, verbs",
        "  --algorithm A           auto (default), ring, direct",
        "  --timeout MS            a peer silent this long is an error (default: Colibri's, 60000)",
        "Output:",
        "  --csv FILE              also write every row as CSV",
        "  --json FILE             also write the run (settings and rows) as JSON",
        "  --progress              show on stderr which size runs ([3/24] allReduce 1 MiB);",
        "                          default: on when stdout and stderr are a terminal",
        "  --no-progress           never show it",
        "  -h, --help              this text",
        "",
        "Sizes: for allGather and reduceScatter the size is the total buffer (ranks x per-rank",
        "part), as in nccl-tests; sizes that do not divide evenly are rounded down.",
        "Time: average per operation over -n iterations, the slowest rank's, measured from a",
        "barrier to the end of that rank's last iteration. algbw = size / time;",
        "busbw = algbw x 2(n-1)/n (allReduce), (n-1)/n (allGather, reduceScatter), 1 (broadcast).",
        "Colibri settings not on this command line come from COLIBRI_* variables (docs).",
        "",
        "Charts from result files: java -jar colibri-bench.jar chart --help");
  }

  static PerfConfig parse(String[] args) throws UsageException {
    PerfConfig c = new PerfConfig();
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      if (arg == null) {
        throw new UsageException("argument " + i + " is null");
      }
      String name = arg;
      String inline = null;
      if (arg.startsWith("--") && arg.indexOf('=') > 0) {
        name = arg.substring(0, arg.indexOf('='));
        inline = arg.substring(arg.indexOf('=') + 1);
      }
      boolean childOnly = name.equals("--child-rank") || name.equals("--child-id");
      int start = i;
      switch (name) {
        case "-h":
        case "--help":
          c.help = true;
          break;
        case "--ranks":
        case "-N":
          c.ranks = (int) range(name, intValue(name, value(args, i++, inline)), 1, 1024);
          break;
        case "--threads":
          c.threads = true;
          break;
        case "--processes":
          c.threads = false;
          break;
        case "-b":
        case "--min-bytes":
          c.minBytes = size(name, value(args, i++, inline));
          break;
        case "-e":
        case "--max-bytes":
          c.maxBytes = size(name, value(args, i++, inline));
          break;
        case "-f":
        case "--step-factor":
          c.stepFactor = range(name, longValue(name, value(args, i++, inline)), 2, 1 << 20);
          break;
        case "-i":
        case "--step-bytes":
          c.stepBytes = size(name, value(args, i++, inline));
          break;
        case "-w":
        case "--warmup":
          c.warmup = (int) range(name, intValue(name, value(args, i++, inline)), 0, 1_000_000);
          break;
        case "-n":
        case "--iters":
          c.iters = (int) range(name, intValue(name, value(args, i++, inline)), 1, 1_000_000);
          break;
        case "-c":
        case "--check":
          if (inline != null) {
            c.check = bool(name, inline);
          } else if (i + 1 < args.length && isBool(args[i + 1])) {
            c.check = bool(name, args[++i]);
          } else {
            c.check = true;
          }
          break;
        case "--no-check":
          c.check = false;
          break;
        case "-t":
        case "-d":
        case "--type":
          c.type = type(value(args, i++, inline));
          break;
        case "-o":
        case "--op":
          c.op = op(value(args, i++, inline));
          break;
        case "-r":
        case "--root":
          c.root = (int) range(name, intValue(name, value(args, i++, inline)), 0, 1023);
          break;
        case "--collectives":
          c.collectives = collectives(value(args, i++, inline));
          break;
        case "--transport":
          c.transport = transport(value(args, i++, inline));
          break;
        case "--algorithm":
          c.algorithm = algorithm(value(args, i++, inline));
          break;
        case "--timeout":
          c.timeoutMs = range(name, longValue(name, value(args, i++, inline)), 1, 86_400_000L);
          break;
        case "--csv":
          c.csv = Path.of(value(args, i++, inline));
          break;
        case "--json":
          c.json = Path.of(value(args, i++, inline));
          break;
        case "--progress":
          c.progress = Boolean.TRUE;
          break;
        case "--no-progress":
          c.progress = Boolean.FALSE;
          break;
        case "--child-rank":
          c.childRank = intValue(name, value(args, i++, inline));
          break;
        case "--child-id":
          c.childId = value(args, i++, inline);
          break;
        default:
          throw new UsageException("unknown option '" + arg + "' (see --help)");
      }
      if (inline != null && i != start) {
        i = start; // value came after '=': nothing consumed from the next argument
      }
      if (!childOnly) {
        for (int j = start; j <= i; j++) {
          c.original.add(args[j]);
        }
      }
    }
    if (c.help) {
      return c;
    }
    if (c.minBytes < 1) {
      throw new UsageException("--min-bytes is " + c.minBytes + ": pass 1 or more");
    }
    if (c.maxBytes > MAX_BYTES_LIMIT) {
      throw new UsageException("--max-bytes " + c.maxBytes + " is above the limit of "
          + MAX_BYTES_LIMIT + " (1G): pass a smaller size");
    }
    if (c.maxBytes < c.minBytes) {
      throw new UsageException("--max-bytes " + c.maxBytes + " is below --min-bytes "
          + c.minBytes + ": pass a max at least as large as the min");
    }
    if (c.root >= c.ranks) {
      throw new UsageException("--root " + c.root + " is out of range for " + c.ranks
          + " ranks: pass 0.." + (c.ranks - 1));
    }
    if (c.collectives.isEmpty()) {
      throw new UsageException("--collectives names none: pass all or a comma list");
    }
    if (c.childRank >= c.ranks || (c.childRank >= 0) != (c.childId != null)) {
      throw new UsageException("--child-rank and --child-id are internal to the launcher");
    }
    return c;
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
    return ranks + " ranks (" + (threads ? "threads in one JVM" : "one JVM process each")
        + "), transport " + transport.configName() + ", algorithm " + algorithm.configName()
        + ", " + Perf.typeName(type) + ", op " + Perf.opName(op) + ", warmup " + warmup
        + ", iters " + iters + ", check " + (check ? "on" : "off");
  }

  // ---- value parsing ----

  private static String value(String[] args, int i, String inline) throws UsageException {
    if (inline != null) {
      return inline;
    }
    if (i + 1 >= args.length) {
      throw new UsageException("option " + args[i] + " needs a value (see --help)");
    }
    return args[i + 1];
  }

  private static int intValue(String name, String text) throws UsageException {
    long v = longValue(name, text);
    if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
      throw new UsageException(name + " " + text + " is out of range");
    }
    return (int) v;
  }

  private static long longValue(String name, String text) throws UsageException {
    try {
      return Long.parseLong(text.strip());
    } catch (NumberFormatException e) {
      throw new UsageException(name + " needs a whole number, got '" + text + "'");
    }
  }

  private static long range(String name, long v, long min, long max) throws UsageException {
    if (v < min || v > max) {
      throw new UsageException(name + " is " + v + ": pass " + min + ".." + max);
    }
    return v;
  }

  /** A size such as 8, 64K, 1M, 1G (powers of 1024; a trailing B or iB is allowed). */
  static long size(String name, String text) throws UsageException {
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
      throw new UsageException(name + " needs a size such as 8, 64K, 1M or 1G, got '" + text + "'");
    }
    if (v < 0 || v > MAX_BYTES_LIMIT / mult) {
      throw new UsageException(name + " " + text + " is out of range: pass 0.." + "1G");
    }
    return v * mult;
  }

  private static boolean isBool(String s) {
    try {
      bool("", s);
      return true;
    } catch (UsageException e) {
      return false;
    }
  }

  private static boolean bool(String name, String text) throws UsageException {
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
        throw new UsageException(name + " takes 0 or 1, got '" + text + "'");
    }
  }

  static DataType type(String text) throws UsageException {
    switch (text.strip().toLowerCase(Locale.ROOT)) {
      case "int8":
      case "char":
        return DataType.INT8;
      case "uint8":
        return DataType.UINT8;
      case "int32":
      case "int":
        return DataType.INT32;
      case "uint32":
        return DataType.UINT32;
      case "int64":
        return DataType.INT64;
      case "uint64":
        return DataType.UINT64;
      case "float16":
      case "half":
      case "fp16":
        return DataType.FLOAT16;
      case "bfloat16":
      case "bf16":
        return DataType.BFLOAT16;
      case "float32":
      case "float":
      case "fp32":
        return DataType.FLOAT32;
      case "float64":
      case "double":
      case "fp64":
        return DataType.FLOAT64;
      default:
        throw new UsageException("unknown type '" + text + "': pass float32, float16, bfloat16,"
            + " float64, int8, uint8, int32, uint32, int64 or uint64");
    }
  }

  static ReduceOp op(String text) throws UsageException {
    switch (text.strip().toLowerCase(Locale.ROOT)) {
      case "sum":
        return ReduceOp.SUM;
      case "prod":
        return ReduceOp.PROD;
      case "min":
        return ReduceOp.MIN;
      case "max":
        return ReduceOp.MAX;
      case "avg":
        return ReduceOp.AVG;
      default:
        throw new UsageException("unknown op '" + text + "': pass sum, prod, min, max or avg");
    }
  }

  static EnumSet<Collective> collectives(String text) throws UsageException {
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
        throw new UsageException("unknown collective '" + p + "': pass all, or a comma list of"
            + " allreduce, allgather, reducescatter, broadcast");
      }
      set.add(c);
    }
    return set;
  }

  static Transport transport(String text) throws UsageException {
    for (Transport t : Transport.values()) {
      if (t.configName().equals(text.strip().toLowerCase(Locale.ROOT))) {
        return t;
      }
    }
    throw new UsageException("unknown transport '" + text + "': pass auto, shm, socket or verbs");
  }

  static Algorithm algorithm(String text) throws UsageException {
    String t = text.strip().toLowerCase(Locale.ROOT);
    for (Algorithm a : Algorithm.values()) {
      if (a != Algorithm.NONE && a.configName().equals(t)) {
        return a;
      }
    }
    throw new UsageException("unknown algorithm '" + text + "': pass auto, ring or direct");
  }
}
