/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.chart;

import io.colibri.bench.chart.ChartCommand.Options;
import io.colibri.bench.chart.ChartCommand.Series;
import io.colibri.bench.common.SizeFormat;
import io.colibri.bench.perf.Collective;
import io.colibri.bench.perf.ResultFile.Measurement;
import java.awt.Color;
import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
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
 * The charts of {@link ChartCommand} (XChart, AWT): one PNG per collective and metric, and the
 * grids. Loaded only when the chart command draws.
 */
final class ChartDrawing {

  /** What a chart shows on its y axis. */
  enum Metric {
    BUSBW("busbw", "bus bandwidth", "busbw (GB/s)", false, m -> m.busbw),
    TIME("time", "time per call", "time per call (µs, log scale)", true, m -> m.timeUs),
    MEMORY(
        "memory",
        "memory held per rank",
        "memory per rank (MiB, log scale)",
        true,
        m -> m.memoryBytes / (1024.0 * 1024.0));

    final String fileName;
    final String title;
    final String axisTitle;
    final boolean logarithmic;
    final ToDoubleFunction<Measurement> value;

    Metric(
        String fileName,
        String title,
        String axisTitle,
        boolean logarithmic,
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

  private ChartDrawing() {}

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
        written.add(
            writePng(image, o.out.resolve(o.prefix + collective + "-" + metric.fileName + ".png")));
      }
      if (o.grid && !images.isEmpty()) {
        written.add(
            writePng(
                grid(images, o.width, o.height),
                o.out.resolve(o.prefix + metric.fileName + ".png")));
      }
    }
    return written;
  }

  /** Writes a PNG with the strongest compression (about 10% smaller than the default). */
  static Path writePng(BufferedImage image, Path path) throws IOException {
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
    BufferedImage grid = new BufferedImage(cols * width, rows * height, BufferedImage.TYPE_INT_RGB);
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
    XYChart chart =
        new XYChartBuilder()
            .width(o.width)
            .height(o.height)
            .title(title)
            .xAxisTitle("message size" + (allRanksData ? " (all ranks' data)" : ""))
            .yAxisTitle(metric.axisTitle)
            .build();
    XYStyler st = style(chart);
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
    chart.setCustomXAxisTickLabelsFormatter(ChartDrawing::sizeTickLabel);
    for (int i = 0; i < labels.size(); i++) {
      chart.addSeries(labels.get(i), data.get(i)[0], data.get(i)[1]);
    }
    return chart;
  }

  /** The charts' common look: lines with markers on white, a light grid, the legend top left. */
  static XYStyler style(XYChart chart) {
    XYStyler st = chart.getStyler();
    st.setDefaultSeriesRenderStyle(XYSeriesRenderStyle.Line);
    st.setChartBackgroundColor(Color.WHITE);
    st.setPlotBackgroundColor(Color.WHITE);
    st.setPlotBorderColor(Color.GRAY);
    st.setPlotGridLinesColor(new Color(225, 225, 225));
    st.setLegendPosition(LegendPosition.InsideNW);
    st.setLegendBorderColor(Color.LIGHT_GRAY);
    st.setMarkerSize(6);
    return st;
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
