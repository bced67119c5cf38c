/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.chart;

import io.colibri.bench.chart.ChartCommand.Options;
import io.colibri.bench.perf.ResultFile.InputException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.XYStyler;

/**
 * The charts of the decode command's CSV ({@code decode --csv}): time per step, time to the first
 * token and GPU memory added by the library's init, against the TP size, one series per file,
 * library, type and mode (eager or graph). A TP size run more than once shows its median.
 */
final class DecodeCharts {

  private DecodeCharts() {}

  /** One line: the TP sizes' values of one metric. */
  record Line(String label, TreeMap<Integer, List<Double>> byTp) {}

  /**
   * The lines of {@code column} in the files, keyed by their label.
   *
   * @param files label → file, in order
   * @param column the column to draw (ms_per_step, ttft_ms, init_mib)
   * @return the lines, in the order first met
   * @throws InputException when a file is not a decode CSV or a row is malformed
   */
  static List<Line> lines(Map<String, Path> files, String column) throws InputException {
    Map<String, Line> lines = new LinkedHashMap<>();
    for (Map.Entry<String, Path> f : files.entrySet()) {
      List<String> text;
      try {
        text = Files.readAllLines(f.getValue(), StandardCharsets.UTF_8);
      } catch (IOException e) {
        throw new InputException(f.getValue() + ": " + e.getMessage());
      }
      if (text.isEmpty() || !text.get(0).startsWith(ChartCommand.DECODE_HEADER_START)) {
        throw new InputException(
            f.getValue()
                + " is not a decode CSV (decode --csv): its first line is not a"
                + " header starting with "
                + ChartCommand.DECODE_HEADER_START
                + "; chart draws one kind of file at a time");
      }
      List<String> header = List.of(text.get(0).split(",", -1));
      int at = header.indexOf(column);
      int tpAt = header.indexOf("tp");
      if (at < 0 || tpAt < 0) {
        throw new InputException(f.getValue() + " has no " + (at < 0 ? column : "tp") + " column");
      }
      for (int i = 1; i < text.size(); i++) {
        if (text.get(i).isBlank()) {
          continue;
        }
        String[] row = text.get(i).split(",", -1);
        if (row.length != header.size()) {
          throw new InputException(
              f.getValue()
                  + " line "
                  + (i + 1)
                  + ": "
                  + row.length
                  + " values under "
                  + header.size()
                  + " columns");
        }
        if (row[at].isEmpty()) {
          continue; // no value (memory on the CPU)
        }
        String label =
            f.getKey() + " " + row[0] + " " + row[2] + " " + row[3] + qualifiers(header, row);
        try {
          int tp = Integer.parseInt(row[tpAt]);
          double v = Double.parseDouble(row[at]);
          lines
              .computeIfAbsent(label, k -> new Line(k, new TreeMap<>()))
              .byTp()
              .computeIfAbsent(tp, k -> new ArrayList<>())
              .add(v);
        } catch (NumberFormatException e) {
          throw new InputException(f.getValue() + " line " + (i + 1) + ": " + e.getMessage());
        }
      }
    }
    return new ArrayList<>(lines.values());
  }

  /**
   * What tells a row's run apart beyond library, type and mode, where it is not the default:
   * ranks as processes, spread over GPUs, the prompt in several passes.
   */
  static String qualifiers(List<String> header, String[] row) {
    StringBuilder q = new StringBuilder();
    String as = value(header, row, "ranks_as");
    String placement = value(header, row, "placement");
    String chunk = value(header, row, "prefill_chunk");
    String prompt = value(header, row, "prompt");
    if ("processes".equals(as)) {
      q.append(" processes");
    }
    if ("spread".equals(placement)) {
      q.append(" spread");
    }
    if (chunk != null
        && prompt != null
        && !chunk.equals(prompt)
        && "gpu".equals(value(header, row, "device"))) {
      q.append(" chunk ").append(chunk);
    }
    return q.toString();
  }

  private static String value(List<String> header, String[] row, String column) {
    int at = header.indexOf(column);
    return at < 0 ? null : row[at];
  }

  /** The median of some values. */
  static double median(List<Double> v) {
    List<Double> s = new ArrayList<>(v);
    s.sort(null);
    int n = s.size();
    return n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
  }

  /** Writes the charts; returns the files written. */
  static List<Path> render(Map<String, Path> files, Options o) throws IOException, InputException {
    Files.createDirectories(o.out);
    String[][] metrics = {
      {"ms_per_step", "decode-step", "time per decode step", "ms per step"},
      {"ttft_ms", "decode-ttft", "time to the first token", "ms"},
      {"init_mib", "decode-init-memory", "GPU memory added by the library's init", "MiB"}
    };
    List<Path> written = new ArrayList<>();
    for (String[] m : metrics) {
      List<Line> lines = lines(files, m[0]);
      if (lines.isEmpty()) {
        continue;
      }
      String title = m[2] + (o.title != null && !o.title.isBlank() ? " — " + o.title.strip() : "");
      XYChart chart =
          new XYChartBuilder()
              .width(o.width)
              .height(o.height)
              .title(title)
              .xAxisTitle("tensor-parallel size (ranks)")
              .yAxisTitle(m[3])
              .build();
      XYStyler st = ChartDrawing.style(chart);
      st.setYAxisMin(0.0);
      int maxTp = 1;
      for (Line l : lines) {
        double[] x = new double[l.byTp().size()];
        double[] y = new double[x.length];
        int i = 0;
        for (Map.Entry<Integer, List<Double>> e : l.byTp().entrySet()) {
          x[i] = ChartDrawing.log2(e.getKey());
          y[i++] = median(e.getValue());
          maxTp = Math.max(maxTp, e.getKey());
        }
        chart.addSeries(l.label(), x, y);
      }
      st.setXAxisMin(0.0);
      st.setXAxisMax(Math.max(1.0, Math.ceil(ChartDrawing.log2(maxTp))));
      chart.setCustomXAxisTickLabelsFormatter(
          x -> {
            long e = Math.round(x);
            return Math.abs(x - e) > 1e-6 || e < 0 || e > 30 ? "" : Long.toString(1L << e);
          });
      written.add(
          ChartDrawing.writePng(
              BitmapEncoder.getBufferedImage(chart), o.out.resolve(o.prefix + m[1] + ".png")));
    }
    return written;
  }
}
