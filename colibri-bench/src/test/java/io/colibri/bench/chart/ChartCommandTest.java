/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.chart;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.bench.MainRun;
import io.colibri.bench.common.SizeFormat;
import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.knowm.xchart.XYChart;

/** {@code chart}: PNGs from small result files written here, and clear errors for bad ones. */
class ChartCommandTest {

  private static final byte[] PNG_SIGNATURE = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

  @TempDir Path dir;

  private static MainRun chart(String... args) {
    String[] all = new String[args.length + 1];
    all[0] = "chart";
    System.arraycopy(args, 0, all, 1, args.length);
    return MainRun.of(all);
  }

  /** A perf-tool CSV: allReduce and allGather, 8 B .. 1 MiB, 2 ranks. */
  private Path colibriCsv(boolean memory) throws Exception {
    StringBuilder sb =
        new StringBuilder(
            "collective,ranks,size_bytes,count,type,op,root,time_us,"
                + "algbw_gbps,busbw_gbps,wrong,algorithm"
                + (memory ? ",memory_bytes" : "")
                + "\n");
    for (String c : new String[] {"allReduce", "allGather"}) {
      for (long size = 8; size <= 1 << 20; size *= 2) {
        double time = 2 + size / 2000.0;
        double algbw = size / (time * 1e3);
        sb.append(c)
            .append(",2,")
            .append(size)
            .append(',')
            .append(size / 4)
            .append(",float32,")
            .append(c.equals("allReduce") ? "sum" : "-")
            .append(",,")
            .append(time)
            .append(',')
            .append(algbw)
            .append(',')
            .append(algbw)
            .append(",0,ring")
            .append(memory ? "," + (131072 + size) : "")
            .append('\n');
      }
    }
    Path p = dir.resolve("colibri.csv");
    Files.writeString(p, sb.toString());
    return p;
  }

  /** An mpi_coll_bench CSV: allReduce only, 1 KiB .. 1 MiB. */
  private Path mpiCsv() throws Exception {
    StringBuilder sb =
        new StringBuilder("collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps\n");
    for (long size = 1024; size <= 1 << 20; size *= 2) {
      double time = 1 + size / 3000.0;
      double algbw = size / (time * 1e3);
      sb.append("allReduce,2,")
          .append(size)
          .append(',')
          .append(time)
          .append(',')
          .append(algbw)
          .append(',')
          .append(algbw)
          .append('\n');
    }
    Path p = dir.resolve("mpi.csv");
    Files.writeString(p, sb.toString());
    return p;
  }

  /** Checks the PNG signature, that ImageIO decodes it, its size, and that it is not blank. */
  private static BufferedImage assertPng(Path p, int width, int height) throws Exception {
    assertTrue(Files.isRegularFile(p), p + " written");
    byte[] bytes = Files.readAllBytes(p);
    assertTrue(bytes.length > 1000, p + " is " + bytes.length + " bytes");
    assertArrayEquals(PNG_SIGNATURE, Arrays.copyOf(bytes, 8), p + ": PNG signature");
    BufferedImage image = ImageIO.read(p.toFile());
    assertNotNull(image, p + ": ImageIO decodes it");
    assertEquals(width, image.getWidth(), p + ": width");
    assertEquals(height, image.getHeight(), p + ": height");
    Set<Integer> colors = new HashSet<>();
    int dark = 0;
    for (int y = 0; y < height; y += 2) {
      for (int x = 0; x < width; x += 2) {
        int rgb = image.getRGB(x, y) & 0xFFFFFF;
        colors.add(rgb);
        if ((rgb & 0xFF) + ((rgb >> 8) & 0xFF) + ((rgb >> 16) & 0xFF) < 300) {
          dark++;
        }
      }
    }
    assertTrue(colors.size() > 20, p + ": only " + colors.size() + " colours");
    assertTrue(dark > 200, p + ": only " + dark + " dark pixels (no text or lines drawn?)");
    return image;
  }

  private Set<String> pngs(Path out) throws Exception {
    if (!Files.isDirectory(out)) {
      return Set.of();
    }
    try (Stream<Path> s = Files.list(out)) {
      return s.map(p -> p.getFileName().toString()).collect(Collectors.toSet());
    }
  }

  @Test
  void writesValidPngsOfTheAskedSizeOneSeriesPerFile() throws Exception {
    Path out = dir.resolve("charts");
    MainRun r =
        chart(
            "--out",
            out.toString(),
            "--width",
            "640",
            "--height",
            "400",
            "--grid",
            "Colibri=" + colibriCsv(false),
            "Open MPI=" + mpiCsv());
    assertEquals(0, r.rc, () -> "stdout:\n" + r.out + "\nstderr:\n" + r.err);
    assertEquals("", r.err);
    assertEquals(
        Set.of(
            "allReduce-busbw.png",
            "allGather-busbw.png",
            "busbw.png",
            "allReduce-time.png",
            "allGather-time.png",
            "time.png"),
        pngs(out),
        "no memory chart without memory_bytes; collectives only those in the files");
    for (String name :
        List.of("allReduce-busbw", "allGather-busbw", "allReduce-time", "allGather-time")) {
      assertPng(out.resolve(name + ".png"), 640, 400);
      assertTrue(r.out.contains("wrote " + out.resolve(name + ".png")), r.out);
    }
    assertPng(out.resolve("busbw.png"), 1280, 400); // two charts side by side
    assertPng(out.resolve("time.png"), 1280, 400);
    assertEquals("true", System.getProperty("java.awt.headless"));
  }

  @Test
  void memoryChartWhenTheFilesHaveMemoryAndPrefixAndCollectivesFilter() throws Exception {
    Path out = dir.resolve("m");
    MainRun r =
        chart(
            "--out=" + out,
            "--prefix",
            "n2-",
            "--collectives",
            "allreduce",
            colibriCsv(true).toString());
    assertEquals(0, r.rc, () -> "stdout:\n" + r.out + "\nstderr:\n" + r.err);
    assertEquals(
        Set.of("n2-allReduce-busbw.png", "n2-allReduce-time.png", "n2-allReduce-memory.png"),
        pngs(out));
    assertPng(
        out.resolve("n2-allReduce-memory.png"),
        ChartCommand.DEFAULT_WIDTH,
        ChartCommand.DEFAULT_HEIGHT);
  }

  @Test
  void chartOfOneCollectiveHasOneSeriesPerFileAndALog2SizeAxis() throws Exception {
    List<ChartCommand.Series> series =
        ChartCommand.load(List.of("Colibri=" + colibriCsv(false), mpiCsv().toString()), null);
    assertEquals(
        List.of("Colibri", "mpi"),
        series.stream().map(s -> s.label).collect(Collectors.toList()),
        "label=file, else the file name");
    ChartCommand.Options o = new ChartCommand.Options();
    XYChart ar = ChartDrawing.chart("allReduce", ChartDrawing.Metric.BUSBW, series, o);
    assertEquals(Set.of("Colibri", "mpi"), ar.getSeriesMap().keySet());
    assertEquals("allReduce: bus bandwidth, 2 ranks", ar.getTitle());
    assertEquals(3.0, ar.getStyler().getXAxisMin(), 0, "8 B = 2^3");
    assertEquals(20.0, ar.getStyler().getXAxisMax(), 0, "1 MiB = 2^20");
    assertFalse(ar.getStyler().isYAxisLogarithmic());
    assertTrue(
        ChartDrawing.chart("allReduce", ChartDrawing.Metric.TIME, series, o)
            .getStyler()
            .isYAxisLogarithmic());
    XYChart ag = ChartDrawing.chart("allGather", ChartDrawing.Metric.BUSBW, series, o);
    assertEquals(Set.of("Colibri"), ag.getSeriesMap().keySet(), "mpi.csv has no allGather");
    assertTrue(ag.getXAxisTitle().contains("all ranks"), ag.getXAxisTitle());
    assertNull(ChartDrawing.chart("allReduce", ChartDrawing.Metric.MEMORY, series, o));
    assertNull(ChartDrawing.chart("broadcast", ChartDrawing.Metric.BUSBW, series, o));
  }

  @Test
  void aFileWithSeveralRankCountsGivesASeriesForEach() throws Exception {
    Path p = dir.resolve("both.csv");
    Files.writeString(
        p,
        "collective,ranks,size_bytes,time_us,algbw_gbps,busbw_gbps\n"
            + "allReduce,2,1024,1,1,1\nallReduce,2,2048,2,1,1\n"
            + "allReduce,4,1024,3,1,1.5\nallReduce,4,2048,4,1,1.5\n");
    List<ChartCommand.Series> series = ChartCommand.load(List.of(p.toString()), null);
    assertEquals(
        List.of("both n=2", "both n=4"),
        series.stream().map(s -> s.label).collect(Collectors.toList()));
    XYChart c =
        ChartDrawing.chart(
            "allReduce", ChartDrawing.Metric.TIME, series, new ChartCommand.Options());
    assertEquals("allReduce: time per call", c.getTitle(), "no single rank count to name");
  }

  @Test
  void sizeLabelsAreHumanReadablePowersOfTwo() {
    assertEquals("8B", ChartDrawing.sizeTickLabel(3));
    assertEquals("512B", ChartDrawing.sizeTickLabel(9));
    assertEquals("1K", ChartDrawing.sizeTickLabel(10));
    assertEquals("64K", ChartDrawing.sizeTickLabel(16));
    assertEquals("1M", ChartDrawing.sizeTickLabel(20));
    assertEquals("256M", ChartDrawing.sizeTickLabel(28.0000000001));
    assertEquals("1G", ChartDrawing.sizeTickLabel(30));
    assertEquals("", ChartDrawing.sizeTickLabel(10.5), "no label between powers of two");
    assertEquals("1.5 KiB", SizeFormat.human(1536));
    assertEquals("8 B", SizeFormat.human(8));
    assertEquals("64 MiB", SizeFormat.human(64L << 20));
  }

  /** The committed comparisons with Open MPI (host) and NCCL (H200s) chart as they are. */
  @Test
  void chartsTheCommittedResults() throws Exception {
    Path host = Path.of("..", "results", "host");
    Path gpu = Path.of("..", "results", "gpu", "2026-11-30-x2-ll", "csv");
    if (!Files.isDirectory(host) || !Files.isDirectory(gpu)) {
      return; // module built outside the repository
    }
    Path out = dir.resolve("committed");
    MainRun r =
        chart(
            "--out",
            out.toString(),
            "--prefix",
            "n2-",
            "--grid",
            "Colibri=" + host.resolve("2026-11-30-colibri-n2.csv"),
            "Open MPI=" + host.resolve("2026-11-30-mpi-n2.csv"),
            "Colibri n4=" + host.resolve("2026-11-30-colibri-n4.csv"),
            "Colibri H200=" + gpu.resolve("colibri-n2-float32.csv"),
            "NCCL H200=" + gpu.resolve("nccl-n2-float32.csv"));
    assertEquals(0, r.rc, () -> "stdout:\n" + r.out + "\nstderr:\n" + r.err);
    Set<String> expected = new HashSet<>(Set.of("n2-busbw.png", "n2-time.png"));
    for (String c : List.of("allReduce", "allGather", "reduceScatter", "broadcast")) {
      expected.add("n2-" + c + "-busbw.png");
      expected.add("n2-" + c + "-time.png");
    }
    assertEquals(expected, pngs(out));
    assertPng(
        out.resolve("n2-allReduce-busbw.png"),
        ChartCommand.DEFAULT_WIDTH,
        ChartCommand.DEFAULT_HEIGHT);
  }

  @Test
  void missingFileIsAClearErrorAndNothingIsWritten() throws Exception {
    Path out = dir.resolve("none");
    MainRun r =
        chart(
            "--out",
            out.toString(),
            "Colibri=" + colibriCsv(false),
            dir.resolve("missing.csv").toString());
    assertEquals(2, r.rc);
    assertTrue(r.err.startsWith("colibri chart: "), r.err);
    assertTrue(r.err.contains("missing.csv: no such file; check the path"), r.err);
    assertEquals(Set.of(), pngs(out), "no chart from half the inputs");
  }

  @Test
  void unknownColumnAndEmptyFileAreClearErrors() throws Exception {
    Path unknown = dir.resolve("other-tool.csv");
    Files.writeString(
        unknown, "collective,size_bytes,time_us,busbw_gbps,p99_us\n" + "allReduce,8,1,1,2\n");
    MainRun r = chart("--out", dir.resolve("a").toString(), unknown.toString());
    assertEquals(2, r.rc);
    assertTrue(r.err.contains("other-tool.csv line 1: unknown column 'p99_us'"), r.err);
    assertTrue(r.err.contains("required: collective, size_bytes, time_us, busbw_gbps"), r.err);

    Path empty = dir.resolve("empty.csv");
    Files.writeString(empty, "");
    r = chart("--out", dir.resolve("b").toString(), empty.toString());
    assertEquals(2, r.rc);
    assertTrue(r.err.contains("empty.csv: the file is empty"), r.err);
    assertTrue(r.err.contains("perf tool: --csv FILE"), r.err);
  }

  @Test
  void decodeCsvsChartAgainstTheTpSize() throws Exception {
    // The decode command's own CSV (CPU: no memory columns), two TP sizes in one file.
    Path csv = dir.resolve("decode.csv");
    for (String tp : new String[] {"1", "2"}) {
      MainRun d = MainRun.of("decode", "--tp", tp, "--new", "2", "--csv", csv.toString());
      assertEquals(0, d.rc, d.both());
    }
    Path out = dir.resolve("decode-charts");
    MainRun r = chart("--out", out.toString(), "CPU=" + csv);
    assertEquals(0, r.rc, r.both());
    // No init memory on the CPU: two charts, not three.
    assertEquals(Set.of("decode-step.png", "decode-ttft.png"), pngs(out));
    assertPng(
        out.resolve("decode-step.png"), ChartCommand.DEFAULT_WIDTH, ChartCommand.DEFAULT_HEIGHT);
    // GPU rows: each series one library, type and mode; the median of repeated TP sizes.
    String header = Files.readAllLines(csv).get(0);
    Path gpu = dir.resolve("gpu.csv");
    Files.writeString(
        gpu,
        header
            + "\n"
            + "nccl,gpu,float32,graph,threads,one,4096,2,32000,16,8,8,1,1.5,10666.7,20.0,603.0,580.0,2800.0,10.0,,80,1000,\n"
            + "colibri,gpu,float32,graph,threads,one,4096,2,32000,16,8,8,1,1.6,10000.0,21.0,9.6,0.0,2800.0,10.0,1.0,80,1000,\n"
            + "colibri,gpu,float32,graph,threads,one,4096,2,32000,16,8,8,4,1.9,8421.1,22.0,9.7,0.0,700.0,10.0,4.0,80,1000,\n"
            + "colibri,gpu,float32,graph,threads,one,4096,2,32000,16,8,8,4,2.1,7619.0,22.0,9.7,0.0,700.0,10.0,4.0,80,1000,\n"
            + "colibri,gpu,float32,graph,processes,one,4096,2,32000,16,8,8,4,2.5,6400.0,22.0,9.7,0.0,700.0,10.0,4.0,80,1000,\n"
            + "colibri,gpu,float32,eager,threads,spread,4096,2,32000,16,8,2,4,2.5,6400.0,22.0,9.7,0.0,700.0,10.0,4.0,80,1000,\n");
    Path out2 = dir.resolve("gpu-charts");
    r = chart("--out", out2.toString(), "--prefix", "h200-", "H200=" + gpu);
    assertEquals(0, r.rc, r.both());
    assertEquals(
        Set.of("h200-decode-step.png", "h200-decode-ttft.png", "h200-decode-init-memory.png"),
        pngs(out2));
    java.util.List<DecodeCharts.Line> lines =
        DecodeCharts.lines(java.util.Map.of("H200", gpu), "ms_per_step");
    // Processes, spread and a prompt in several passes are lines of their own.
    assertEquals(
        java.util.List.of(
            "H200 nccl float32 graph",
            "H200 colibri float32 graph",
            "H200 colibri float32 graph processes",
            "H200 colibri float32 eager spread chunk 2"),
        lines.stream().map(DecodeCharts.Line::label).toList());
    assertEquals(2.0, DecodeCharts.median(lines.get(1).byTp().get(4)), 1e-9);
    r = chart("--out", out2.toString(), "--grid", "H200=" + gpu);
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("--grid draws the perf tool's files"), r.err);
    // A decode CSV with a perf file: said plainly.
    r = chart("--out", dir.resolve("mixed").toString(), "A=" + gpu, "B=" + colibriCsv(false));
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("is not a decode CSV"), r.err);
    // A short row names its line.
    Path bad = dir.resolve("bad.csv");
    Files.writeString(bad, header + "\ncolibri,gpu,float32,graph,1\n");
    r = chart("--out", dir.resolve("bad").toString(), bad.toString());
    assertEquals(2, r.rc, r.both());
    assertTrue(r.err.contains("line 2: 5 values under"), r.err);
  }

  @Test
  void badCommandLines() throws Exception {
    MainRun help = chart("--help");
    assertEquals(0, help.rc);
    assertTrue(help.out.contains("[LABEL=]FILE"), help.out);
    MainRun none = chart("--out", dir.toString());
    assertEquals(2, none.rc);
    assertTrue(none.err.contains("no result files"), none.err);
    MainRun opt = chart("--colour", "red", "x.csv");
    assertEquals(2, opt.rc);
    assertTrue(opt.err.contains("colibri chart: Unknown option: '--colour'"), opt.err);
    assertTrue(opt.err.contains("chart --help"), opt.err);
    assertEquals(2, chart("--width", "wide", "x.csv").rc);
    assertEquals(2, chart("--height", "50", "x.csv").rc);
    assertEquals(2, chart("--collectives", "alltoall", "x.csv").rc);
    MainRun label = chart("=" + colibriCsv(false));
    assertEquals(2, label.rc);
    assertTrue(label.err.contains("the label before '=' is empty"), label.err);
    Path c = colibriCsv(false);
    MainRun twice = chart("--out", dir.resolve("t").toString(), "A=" + c, "A=" + c);
    assertEquals(2, twice.rc);
    assertTrue(twice.err.contains("label 'A' is given to two files"), twice.err);
    MainRun filtered =
        chart("--out", dir.resolve("f").toString(), "--collectives", "broadcast", c.toString());
    assertEquals(2, filtered.rc);
    assertTrue(filtered.err.contains("nothing to draw"), filtered.err);
  }
}
