/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import io.colibri.bench.ResultFile.InputException;
import io.colibri.bench.ResultFile.Measurement;
import java.awt.Color;
import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.ToDoubleFunction;
import javax.imageio.IIOImage;
import javax.imageio.ImageIO;
import javax.imageio.ImageWriteParam;
import javax.imageio.ImageWriter;
import javax.imageio.stream.ImageOutputStream;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries.XYSeriesRenderStyle;
import org.knowm.xchart.style.Styler.LegendPosition;
import org.knowm.xchart.style.XYStyler;

/**
 * {@code colibri-bench.jar chart}: PNG charts from result files, one series per file, one chart
 * per collective and metric (bus bandwidth, time, and memory held when the files have it),
 * message size on a log2 axis. See {@code docs/perf-tool.md}.
 */
final class ChartCommand {

  static final int EXIT_OK = 0;
  static final int EXIT_USAGE = 2;
  static final int EXIT_FAILED = 3;

  static final int DEFAULT_WIDTH = 800;
  static final int DEFAULT_HEIGHT = 500;

  /** What a chart shows on its y axis. */
  enum Metric {
    BUSBW("busbw", "bus bandwidth", "busbw (GB/s)", false, m -> m.busbw),
    TIME("time", "time per call", "time per call (µs, log scale)", true, m -> m.timeUs),
    MEMORY("memory", "memory held per rank", "memory per rank (MiB, log scale)", true,
        m -> m.memoryBytes / (1024.0 * 1024.0));

    final String fileName;
    final String title;
    final String axisTitle;
    final boolean logarithmic;
    final ToDoubleFunction<Measurement> value;

    Metric(String fileName, String title, String axisTitle, boolean logarithmic,
        ToDoubleFunction<Measurement> value) {
      this.fileName = fileName;
      this.title = title;
      this.axisTitle = axisTitle;
      this.logarithmic = logarithmic;
      this.value = value;
    }

    /** Whether the point has a value that this chart can draw. */
    boolean has(Measurement m) {
      switch (this) {
        case MEMORY:
          return m.memoryBytes > 0;
        case TIME:
          return m.timeUs > 0;
        default:
          return true;
      }
    }
  }

  /** One line on the charts: a file (or the part of a file with one rank count and type). */
  static final class Series {
    final String label;
    final List<Measurement> points;

    Series(String label, List<Measurement> points) {
      this.label = label;
      this.points = points;
    }
  }

  /** The command line. */
  static final class Options {
    Path out = Path.of("charts");
    int width = DEFAULT_WIDTH;
    int height = DEFAULT_HEIGHT;
    String prefix = "";
    String title;
    boolean grid;
    EnumSet<Collective> collectives; // null: every collective in the files
    boolean help;
    final List<String> inputs = new ArrayList<>();
  }

  private ChartCommand() {}

  static String usage() {
    return String.join("\n",
        "Usage: java -jar colibri-bench.jar chart [options] [LABEL=]FILE...",
        "",
        "Draws PNG charts from benchmark results: for every collective, bus bandwidth and time",
        "per call against message size (log2 axis), and memory held per rank when the files",
        "have a memory_bytes column. Each FILE is one series, labelled LABEL or the file name.",
        "FILE: a CSV or JSON of the perf tool (--csv, --json) or the CSV of mpi_coll_bench",
        "(scripts/bench-vs-mpi.sh). A file with several rank counts or types gives one series",
        "for each.",
        "",
        "  --out DIR           where the PNGs go (default charts; created if missing)",
        "  --width PX          width of one chart (default " + DEFAULT_WIDTH + ")",
        "  --height PX         height of one chart (default " + DEFAULT_HEIGHT + ")",
        "  --prefix TEXT       start of every file name (default none)",
        "  --title TEXT        added to every chart title (e.g. the machine)",
        "  --collectives LIST  only these (comma list of allreduce, allgather, reducescatter,",
        "                      broadcast; default: all in the files)",
        "  --grid              also one PNG per metric with every collective (2 per row)",
        "  -h, --help          this text",
        "",
        "Files written: PREFIX<collective>-busbw.png, PREFIX<collective>-time.png,",
        "PREFIX<collective>-memory.png (with --grid also PREFIXbusbw.png, PREFIXtime.png, ...).",
        "Example:",
        "  java -jar colibri-bench.jar chart --out charts Colibri=colibri.csv \"Open MPI=mpi.csv\"",
        "Exit code: 0 charts written, 2 bad command line or input file, 3 could not write.");
  }

  /** Runs the command; returns the exit code. Does not call System.exit. */
  static int run(String[] args, PrintStream out, PrintStream err) {
    Options o;
    try {
      o = parse(args);
    } catch (PerfConfig.UsageException e) {
      err.println("colibri chart: " + e.getMessage());
      return EXIT_USAGE;
    }
    if (o.help) {
      out.println(usage());
      return EXIT_OK;
    }
    List<Series> series;
    try {
      series = load(o.inputs, o.collectives);
    } catch (InputException e) {
      err.println("colibri chart: " + e.getMessage());
      return EXIT_USAGE;
    }
    // Charts are files, never windows: no display needed, and none is looked for.
    System.setProperty("java.awt.headless", "true");
    try {
      List<Path> written = render(series, o);
      for (Path p : written) {
        out.println("wrote " + p);
      }
      if (written.isEmpty()) {
        err.println("colibri chart: nothing to draw: no file has a row for the collectives"
            + " asked for; check --collectives and the files");
        return EXIT_USAGE;
      }
      return EXIT_OK;
    } catch (IOException e) {
      err.println("colibri chart: could not write the charts to " + o.out + ": " + e
          + "; check that the directory is writable and the disk not full");
      return EXIT_FAILED;
    } catch (RuntimeException | Error e) {
      err.println("colibri chart: could not draw the charts: " + e);
      if (mentionsFonts(e)) {
        err.println("colibri chart: Java found no usable font to draw the labels with; install"
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
      String s = String.valueOf(t.getMessage()).toLowerCase(Locale.ROOT)
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

  static Options parse(String[] args) throws PerfConfig.UsageException {
    Options o = new Options();
    boolean optionsDone = false;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      if (arg == null) {
        throw new PerfConfig.UsageException("argument " + i + " is null");
      }
      if (optionsDone || !arg.startsWith("-") || arg.equals("-")) {
        o.inputs.add(arg);
        continue;
      }
      String name = arg;
      String inline = null;
      if (arg.startsWith("--") && arg.indexOf('=') > 0) {
        name = arg.substring(0, arg.indexOf('='));
        inline = arg.substring(arg.indexOf('=') + 1);
      }
      switch (name) {
        case "--":
          optionsDone = true;
          break;
        case "-h":
        case "--help":
          o.help = true;
          break;
        case "--out":
          o.out = Path.of(inline != null ? inline : value(args, i++));
          break;
        case "--width":
          o.width = pixels(name, inline != null ? inline : value(args, i++));
          break;
        case "--height":
          o.height = pixels(name, inline != null ? inline : value(args, i++));
          break;
        case "--prefix":
          o.prefix = inline != null ? inline : value(args, i++);
          if (o.prefix.contains("/") || o.prefix.contains("\\")) {
            throw new PerfConfig.UsageException("--prefix '" + o.prefix + "' holds a path"
                + " separator: pass the directory with --out and a plain name with --prefix");
          }
          break;
        case "--title":
          o.title = inline != null ? inline : value(args, i++);
          break;
        case "--collectives":
          o.collectives = PerfConfig.collectives(inline != null ? inline : value(args, i++));
          if (o.collectives.isEmpty()) {
            throw new PerfConfig.UsageException("--collectives names none: pass all or a comma"
                + " list");
          }
          break;
        case "--grid":
          o.grid = true;
          break;
        default:
          throw new PerfConfig.UsageException("unknown option '" + arg + "' (see chart --help)");
      }
    }
    if (!o.help && o.inputs.isEmpty()) {
      throw new PerfConfig.UsageException("no result files: pass one or more [LABEL=]FILE, e.g."
          + " chart --out charts Colibri=colibri.csv MPI=mpi.csv (see chart --help)");
    }
    return o;
  }

  private static String value(String[] args, int i) throws PerfConfig.UsageException {
    if (i + 1 >= args.length) {
      throw new PerfConfig.UsageException("option " + args[i] + " needs a value (see chart"
          + " --help)");
    }
    return args[i + 1];
  }

  private static int pixels(String name, String text) throws PerfConfig.UsageException {
    int v;
    try {
      v = Integer.parseInt(text.strip());
    } catch (NumberFormatException e) {
      throw new PerfConfig.UsageException(name + " needs a whole number of pixels, got '" + text
          + "'");
    }
    if (v < 200 || v > 10000) {
      throw new PerfConfig.UsageException(name + " is " + v + ": pass 200..10000 pixels");
    }
    return v;
  }

  // ---- inputs ----

  /**
   * The series of the command line's {@code [LABEL=]FILE} arguments, in order. A file with more
   * than one rank count or element type gives one series per combination.
   */
  static List<Series> load(List<String> inputs, Set<Collective> only) throws InputException {
    List<Series> all = new ArrayList<>();
    Set<String> labels = new HashSet<>();
    for (String spec : inputs) {
      String label;
      Path path;
      int eq = spec.indexOf('=');
      if (eq >= 0 && !Files.exists(Path.of(spec))) {
        label = spec.substring(0, eq).strip();
        path = Path.of(spec.substring(eq + 1));
        if (label.isEmpty()) {
          throw new InputException("'" + spec + "': the label before '=' is empty; write"
              + " LABEL=FILE, or just FILE to use the file name");
        }
      } else {
        path = Path.of(spec);
        label = defaultLabel(path);
      }
      if (!labels.add(label)) {
        throw new InputException("the label '" + label + "' is given to two files; give each"
            + " its own with LABEL=FILE (e.g. Colibri=a.csv \"Open MPI\"=b.csv)");
      }
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
        String suffix = (manyRanks ? " n=" + first.ranks : "")
            + (manyTypes && first.type != null ? " " + first.type : "");
        all.add(new Series(label + suffix, v));
      }
    }
    return all;
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

  // ---- drawing ----

  /** Writes every chart; returns the files written, in order. */
  static List<Path> render(List<Series> series, Options o) throws IOException {
    Files.createDirectories(o.out);
    List<String> collectives = collectiveOrder(series);
    List<Path> written = new ArrayList<>();
    for (Metric metric : Metric.values()) {
      List<BufferedImage> images = new ArrayList<>();
      for (String collective : collectives) {
        XYChart chart = chart(collective, metric, series, o);
        if (chart == null) {
          continue;
        }
        BufferedImage image = BitmapEncoder.getBufferedImage(chart);
        images.add(image);
        written.add(writePng(image, o.out.resolve(o.prefix + collective + "-" + metric.fileName
            + ".png")));
      }
      if (o.grid && !images.isEmpty()) {
        written.add(writePng(grid(images, o.width, o.height),
            o.out.resolve(o.prefix + metric.fileName + ".png")));
      }
    }
    return written;
  }

  /** Writes a PNG with the strongest compression (about 10% smaller than the default). */
  private static Path writePng(BufferedImage image, Path path) throws IOException {
    Iterator<ImageWriter> writers = ImageIO.getImageWritersByFormatName("png");
    if (!writers.hasNext()) {
      throw new IOException("this Java has no PNG writer");
    }
    ImageWriter writer = writers.next();
    try {
      ImageWriteParam param = writer.getDefaultWriteParam();
      if (param.canWriteCompressed()) {
        param.setCompressionMode(ImageWriteParam.MODE_EXPLICIT);
        param.setCompressionQuality(0f);
      }
      Files.deleteIfExists(path); // the stream below does not truncate an existing file
      try (ImageOutputStream os = ImageIO.createImageOutputStream(path.toFile())) {
        if (os == null) {
          throw new IOException("cannot open " + path + " for writing");
        }
        writer.setOutput(os);
        writer.write(null, new IIOImage(image, null, null), param);
      }
    } finally {
      writer.dispose();
    }
    return path;
  }

  /** The images side by side, two per row, on white. */
  static BufferedImage grid(List<BufferedImage> images, int width, int height) {
    int cols = Math.min(2, images.size());
    int rows = (images.size() + cols - 1) / cols;
    BufferedImage grid = new BufferedImage(cols * width, rows * height,
        BufferedImage.TYPE_INT_RGB);
    Graphics2D g = grid.createGraphics();
    try {
      g.setColor(Color.WHITE);
      g.fillRect(0, 0, grid.getWidth(), grid.getHeight());
      for (int i = 0; i < images.size(); i++) {
        g.drawImage(images.get(i), (i % cols) * width, (i / cols) * height, null);
      }
    } finally {
      g.dispose();
    }
    return grid;
  }

  /** The collectives in the files: the four in their usual order, then others as they come. */
  private static List<String> collectiveOrder(List<Series> series) {
    Set<String> seen = new java.util.LinkedHashSet<>();
    for (Series s : series) {
      for (Measurement m : s.points) {
        seen.add(m.collective);
      }
    }
    List<String> order = new ArrayList<>();
    for (Collective c : Collective.values()) {
      if (seen.remove(c.displayName())) {
        order.add(c.displayName());
      }
    }
    order.addAll(seen);
    return order;
  }

  /** The chart of one collective and metric, or null when no series has a point for it. */
  static XYChart chart(String collective, Metric metric, List<Series> series, Options o) {
    List<String> labels = new ArrayList<>();
    List<double[][]> data = new ArrayList<>();
    Set<Integer> ranks = new HashSet<>();
    double minX = Double.POSITIVE_INFINITY;
    double maxX = Double.NEGATIVE_INFINITY;
    for (Series s : series) {
      List<Measurement> pts = new ArrayList<>();
      for (Measurement m : s.points) {
        if (m.collective.equals(collective) && metric.has(m)) {
          pts.add(m);
        }
      }
      if (pts.isEmpty()) {
        continue;
      }
      pts.sort((a, b) -> Long.compare(a.sizeBytes, b.sizeBytes));
      double[] x = new double[pts.size()];
      double[] y = new double[pts.size()];
      for (int i = 0; i < x.length; i++) {
        Measurement m = pts.get(i);
        x[i] = log2(m.sizeBytes);
        y[i] = metric.value.applyAsDouble(m);
        ranks.add(m.ranks);
        minX = Math.min(minX, x[i]);
        maxX = Math.max(maxX, x[i]);
      }
      labels.add(s.label);
      data.add(new double[][] {x, y});
    }
    if (labels.isEmpty()) {
      return null;
    }
    String title = collective + ": " + metric.title;
    if (ranks.size() == 1 && !ranks.contains(0)) {
      title += ", " + ranks.iterator().next() + " ranks";
    }
    if (o.title != null && !o.title.isBlank()) {
      title += " — " + o.title.strip();
    }
    Collective known = Collective.byName(collective);
    boolean allRanksData = known == Collective.ALL_GATHER || known == Collective.REDUCE_SCATTER;
    XYChart chart = new XYChartBuilder().width(o.width).height(o.height).title(title)
        .xAxisTitle("message size" + (allRanksData ? " (all ranks' data)" : ""))
        .yAxisTitle(metric.axisTitle).build();
    XYStyler st = chart.getStyler();
    st.setDefaultSeriesRenderStyle(XYSeriesRenderStyle.Line);
    st.setChartBackgroundColor(Color.WHITE);
    st.setPlotBackgroundColor(Color.WHITE);
    st.setPlotBorderColor(Color.GRAY);
    st.setPlotGridLinesColor(new Color(225, 225, 225));
    st.setLegendPosition(LegendPosition.InsideNW);
    st.setLegendBorderColor(Color.LIGHT_GRAY);
    st.setMarkerSize(6);
    st.setYAxisLogarithmic(metric.logarithmic);
    if (metric.logarithmic) {
      st.setYAxisDecimalPattern("#,##0.###"); // 0.1, 1, 10, 1,000 rather than 1E3
    } else {
      st.setYAxisMin(0.0);
    }
    // Whole powers of two at the ends, and ticks far enough apart that each falls on one.
    double lo = Math.floor(minX);
    double hi = Math.max(Math.ceil(maxX), lo + 1);
    st.setXAxisMin(lo);
    st.setXAxisMax(hi);
    st.setXAxisTickMarkSpacingHint(Math.max(60, (int) Math.ceil(o.width * 0.85 / (hi - lo))));
    chart.setCustomXAxisTickLabelsFormatter(ChartCommand::sizeTickLabel);
    for (int i = 0; i < labels.size(); i++) {
      chart.addSeries(labels.get(i), data.get(i)[0], data.get(i)[1]);
    }
    return chart;
  }

  static double log2(long bytes) {
    return Math.log(bytes) / Math.log(2);
  }

  /** Tick label at log2(size) = x: "8B", "1K", "64M"; nothing between whole powers of two. */
  static String sizeTickLabel(double x) {
    long e = Math.round(x);
    if (Math.abs(x - e) > 1e-6 || e < 0 || e > 62) {
      return "";
    }
    return SizeFormat.compact(1L << e);
  }
}
