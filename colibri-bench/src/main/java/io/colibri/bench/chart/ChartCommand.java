/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.chart;

import io.colibri.bench.common.Commands;
import io.colibri.bench.perf.Collective;
import io.colibri.bench.perf.PerfConfig;
import io.colibri.bench.perf.ResultFile;
import io.colibri.bench.perf.ResultFile.InputException;
import io.colibri.bench.perf.ResultFile.Measurement;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code colibri-bench.jar chart}: PNG charts from result files, one series per file, one chart
 * per collective and metric (bus bandwidth, time, and memory held when the files have it),
 * message size on a log2 axis; or, from the decode command's CSV, time per step, time to the
 * first token and init memory against the TP size. See {@code docs/perf-tool.md} and
 * {@code docs/end-to-end.md}. This class reads the command line and the files; {@code
 * ChartDrawing} and {@code DecodeCharts} draw, and only they touch AWT, so that the other commands
 * run on a Java runtime without java.desktop (the GPU bundle's).
 */
@Command(
    name = "chart",
    mixinStandardHelpOptions = true,
    versionProvider = Commands.VersionProvider.class,
    header = "Draws PNG charts of result files (perf's CSV and JSON, mpi_coll_bench's CSV).",
    sortOptions = false,
    description = {
      "Draws PNG charts from benchmark results: for every collective, bus bandwidth and time"
          + " per call against message size (log2 axis), and memory held per rank when the"
          + " files have a memory_bytes column. Each FILE is one series, labelled LABEL or the"
          + " file name.",
      "FILE: a CSV or JSON of the perf tool (--csv, --json) or the CSV of mpi_coll_bench"
          + " (scripts/bench-vs-mpi.sh). A file with several rank counts or types gives one"
          + " series for each.",
      "Or FILE: CSVs of the decode command (decode --csv): time per step, time to the first"
          + " token and GPU memory added by the library's init against the TP size, one series"
          + " per file, library, type and mode (the median where a TP size ran more than once).",
      ""
    },
    footer = {
      "",
      "Files written: PREFIX<collective>-busbw.png, -time.png and -memory.png;",
      "with --grid also PREFIXbusbw.png, PREFIXtime.png, ... (every collective);",
      "from decode CSVs: PREFIXdecode-step.png, -ttft.png and -init-memory.png.",
      "Example:",
      "  java -jar colibri-bench.jar chart --out charts A=a.csv \"Open MPI=b.csv\"",
      "Exit code: 0 charts written, 2 bad command line or input file, 3 could not write."
    })
public final class ChartCommand implements Callable<Integer> {

  static final int EXIT_OK = 0;
  static final int EXIT_USAGE = Commands.EXIT_USAGE;
  static final int EXIT_FAILED = Commands.EXIT_FAILED;

  /** The first columns of a decode CSV (decode --csv), which tell it from the perf tool's files. */
  static final String DECODE_HEADER_START = "library,device,dtype,mode,";

  static final int DEFAULT_WIDTH = 800;
  static final int DEFAULT_HEIGHT = 500;

  /** One line on the charts: a file (or the part of a file with one rank count and type). */
  static final class Series {
    final String label;
    final List<Measurement> points;

    Series(String label, List<Measurement> points) {
      this.label = label;
      this.points = points;
    }
  }

  /** The command line (the defaults when made with {@code new}). */
  static final class Options {
    @Spec(Spec.Target.MIXEE)
    private CommandSpec command;

    @Option(
        names = "--out",
        order = 1,
        paramLabel = "DIR",
        description = "where the PNGs go (default ${DEFAULT-VALUE}; created if missing)")
    Path out = Path.of("charts");

    int width = DEFAULT_WIDTH;
    int height = DEFAULT_HEIGHT;
    String prefix = "";

    @Option(
        names = "--title",
        order = 5,
        paramLabel = "TEXT",
        description = "added to every chart title (e.g. the machine)")
    String title;

    EnumSet<Collective> collectives; // null: every collective in the files

    @Option(
        names = "--grid",
        order = 7,
        description = "also one PNG per metric with every collective (2 per row)")
    boolean grid;

    @Parameters(
        paramLabel = "[LABEL=]FILE",
        arity = "0..*",
        description = "result files, one series each")
    final List<String> inputs = new ArrayList<>();

    @Option(
        names = "--width",
        order = 2,
        paramLabel = "PX",
        defaultValue = "" + DEFAULT_WIDTH,
        description = "width of one chart (default ${DEFAULT-VALUE})")
    void width(int px) {
      width = pixels("--width", px);
    }

    @Option(
        names = "--height",
        order = 3,
        paramLabel = "PX",
        defaultValue = "" + DEFAULT_HEIGHT,
        description = "height of one chart (default ${DEFAULT-VALUE})")
    void height(int px) {
      height = pixels("--height", px);
    }

    @Option(
        names = "--prefix",
        order = 4,
        paramLabel = "TEXT",
        description = "start of every file name (default none)")
    void prefix(String text) {
      if (text.contains("/") || text.contains("\\")) {
        throw new ParameterException(
            command.commandLine(),
            "--prefix '"
                + text
                + "' holds a"
                + " path separator: pass the directory with --out and a plain name with --prefix");
      }
      prefix = text;
    }

    @Option(
        names = "--collectives",
        order = 6,
        paramLabel = "LIST",
        completionCandidates = PerfConfig.CollectiveNames.class,
        description =
            "only these (all, or a comma list of ${COMPLETION-CANDIDATES};"
                + " default: all in the files)")
    void collectives(String list) {
      collectives =
          Commands.convert(command, "--collectives", () -> PerfConfig.parseCollectives(list));
    }

    private int pixels(String name, int px) {
      if (px < 200 || px > 10000) {
        throw new ParameterException(
            command.commandLine(), name + " is " + px + ": pass 200..10000 pixels");
      }
      return px;
    }
  }

  @Spec private CommandSpec spec;

  @Mixin private Options options;

  private final PrintStream out;
  private final PrintStream err;

  /**
   * The command, printing the files written to {@code out} and problems to {@code err}.
   *
   * @param out where the names of the files written go
   * @param err where problems go
   */
  public ChartCommand(PrintStream out, PrintStream err) {
    this.out = out;
    this.err = err;
  }

  @Override
  public Integer call() {
    Options o = options;
    if (o.inputs.isEmpty()) {
      throw new ParameterException(
          spec.commandLine(),
          "no result files: pass one or more"
              + " [LABEL=]FILE, e.g. chart --out charts Colibri=colibri.csv MPI=mpi.csv");
    }
    List<Series> series = null;
    Map<String, Path> files;
    boolean decode;
    try {
      files = labelled(o.inputs);
      decode = isDecodeCsv(files.values().iterator().next());
      if (decode && (o.collectives != null || o.grid)) {
        throw new ParameterException(
            spec.commandLine(),
            (o.grid ? "--grid" : "--collectives")
                + " draws the perf tool's files; a decode CSV's charts are one per metric against"
                + " the TP size: leave it out");
      }
      if (!decode) {
        series = load(o.inputs, o.collectives);
      }
    } catch (InputException e) {
      err.println("colibri chart: " + e.getMessage());
      return EXIT_USAGE;
    }
    // Charts are files, never windows: no display needed, and none is looked for.
    System.setProperty("java.awt.headless", "true");
    try {
      List<Path> written;
      try {
        written = decode ? DecodeCharts.render(files, o) : ChartDrawing.render(series, o);
      } catch (InputException e) {
        err.println("colibri chart: " + e.getMessage());
        return EXIT_USAGE;
      }
      for (Path p : written) {
        out.println("wrote " + p);
      }
      if (written.isEmpty()) {
        err.println(
            "colibri chart: nothing to draw: no file has a row for the collectives"
                + " asked for; check --collectives and the files");
        return EXIT_USAGE;
      }
      return EXIT_OK;
    } catch (IOException e) {
      err.println(
          "colibri chart: could not write the charts to "
              + o.out
              + ": "
              + e
              + "; check that the directory is writable and the disk not full");
      return EXIT_FAILED;
    } catch (RuntimeException | Error e) {
      err.println("colibri chart: could not draw the charts: " + e);
      if (e instanceof NoClassDefFoundError
          && String.valueOf(e.getMessage()).startsWith("java/awt")) {
        err.println(
            "colibri chart: this Java runtime has no java.desktop module (AWT), which the"
                + " charts are drawn with (a trimmed runtime, such as the GPU bundle's, leaves it"
                + " out); run chart with a full Java 17 or later");
      } else if (mentionsFonts(e)) {
        err.println(
            "colibri chart: Java found no usable font to draw the labels with; install"
                + " fontconfig and a font (Debian/Ubuntu: apt-get install fontconfig"
                + " fonts-dejavu-core)");
      } else {
        e.printStackTrace(err);
      }
      return EXIT_FAILED;
    }
  }

  private static boolean mentionsFonts(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      String s =
          String.valueOf(t.getMessage()).toLowerCase(Locale.ROOT)
              + t.getClass().getName().toLowerCase(Locale.ROOT);
      if (s.contains("font")) {
        return true;
      }
      for (StackTraceElement f : t.getStackTrace()) {
        if (f.getClassName().toLowerCase(Locale.ROOT).contains("font")) {
          return true;
        }
      }
    }
    return false;
  }

  // ---- inputs ----

  /**
   * The series of the command line's {@code [LABEL=]FILE} arguments, in order. A file with more
   * than one rank count or element type gives one series per combination.
   */
  static List<Series> load(List<String> inputs, Set<Collective> only) throws InputException {
    List<Series> all = new ArrayList<>();
    for (Map.Entry<String, Path> file : labelled(inputs).entrySet()) {
      String label = file.getKey();
      Path path = file.getValue();
      List<Measurement> rows = new ArrayList<>();
      for (Measurement m : ResultFile.read(path)) {
        Collective c = Collective.byName(m.collective);
        if (only == null || (c != null && only.contains(c))) {
          rows.add(m);
        }
      }
      Map<String, List<Measurement>> variants = new LinkedHashMap<>();
      for (Measurement m : rows) {
        variants.computeIfAbsent(m.ranks + "/" + m.type, k -> new ArrayList<>()).add(m);
      }
      boolean manyRanks = rows.stream().mapToInt(m -> m.ranks).distinct().count() > 1;
      boolean manyTypes = rows.stream().map(m -> String.valueOf(m.type)).distinct().count() > 1;
      for (List<Measurement> v : variants.values()) {
        Measurement first = v.get(0);
        String suffix =
            (manyRanks ? " n=" + first.ranks : "")
                + (manyTypes && first.type != null ? " " + first.type : "");
        all.add(new Series(label + suffix, v));
      }
    }
    return all;
  }

  /**
   * The command line's {@code [LABEL=]FILE} arguments as label → file, in order.
   *
   * @throws InputException for an empty label, or one given to two files
   */
  static Map<String, Path> labelled(List<String> inputs) throws InputException {
    Map<String, Path> files = new LinkedHashMap<>();
    for (String spec : inputs) {
      String label;
      Path path;
      int eq = spec.indexOf('=');
      if (eq >= 0 && !Files.exists(Path.of(spec))) {
        label = spec.substring(0, eq).strip();
        path = Path.of(spec.substring(eq + 1));
        if (label.isEmpty()) {
          throw new InputException(
              "'"
                  + spec
                  + "': the label before '=' is empty; write"
                  + " LABEL=FILE, or just FILE to use the file name");
        }
      } else {
        path = Path.of(spec);
        label = defaultLabel(path);
      }
      if (files.putIfAbsent(label, path) != null) {
        throw new InputException(
            "the label '"
                + label
                + "' is given to two files; give each"
                + " its own with LABEL=FILE (e.g. Colibri=a.csv \"Open MPI\"=b.csv)");
      }
    }
    return files;
  }

  /** Whether the file's first line is a decode CSV's header (false when it cannot be read). */
  static boolean isDecodeCsv(Path path) {
    try (java.io.BufferedReader r =
        Files.newBufferedReader(path, java.nio.charset.StandardCharsets.UTF_8)) {
      String first = r.readLine();
      return first != null && first.startsWith(DECODE_HEADER_START);
    } catch (IOException | RuntimeException e) {
      return false; // the perf tool's reader says what is wrong with it
    }
  }

  /** "2026-11-30-colibri-n2" for results/host/2026-11-30-colibri-n2.csv. */
  static String defaultLabel(Path path) {
    Path f = path.getFileName();
    String name = f == null ? path.toString() : f.toString();
    String lower = name.toLowerCase(Locale.ROOT);
    for (String ext : new String[] {".csv", ".json", ".txt"}) {
      if (lower.endsWith(ext) && name.length() > ext.length()) {
        return name.substring(0, name.length() - ext.length());
      }
    }
    return name;
  }
}
