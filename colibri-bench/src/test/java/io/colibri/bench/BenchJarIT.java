/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.colibri.bench.common.Commands;
import io.colibri.bench.common.Mappers;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The shaded jars as they are shipped (failsafe, after package): {@code java -jar
 * target/colibri-bench.jar} with only the Java modules of the GPU bundle's trimmed runtime
 * (shared/gpu/pack.sh's jlink list, through {@code --limit-modules}): help, the doctor's JSON and a
 * tiny sweep and the decoder on the CPU need no java.desktop, and picocli and Jackson are inside
 * the jar (the CUDA presets are not: the decoder on a GPU says so). The chart command,
 * which draws with AWT, runs on the full runtime and says what is missing on the trimmed one.
 * Compare from colibri-jmh.jar reads JMH's JSON on the trimmed one.
 */
class BenchJarIT {

  /** The modules of the trimmed JRE that scripts/gpu-bundle.sh and jmh-bundle.sh carry. */
  static final String BUNDLE_MODULES =
      "java.base,java.logging,java.management,jdk.management,jdk.unsupported,java.xml";

  private static final Path JAR = Path.of("target", "colibri-bench.jar");
  private static final Path JMH_JAR =
      Path.of(System.getProperty("colibri.jmh.jar", "target/colibri-jmh.jar"));

  /** Exit code, stdout, stderr. */
  private record Run(int rc, String out, String err) {
    String all() {
      return "exit code " + rc + "\nstdout:\n" + out + "\nstderr:\n" + err;
    }
  }

  private static Run java(boolean trimmed, String... args) throws Exception {
    List<String> command = new ArrayList<>();
    command.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
    if (trimmed) {
      command.add("--limit-modules");
      command.add(BUNDLE_MODULES);
    }
    command.addAll(List.of(args));
    Path out = Files.createTempFile(Path.of("target"), "bench-jar", ".out");
    Path err = Files.createTempFile(Path.of("target"), "bench-jar", ".err");
    Process p =
        new ProcessBuilder(command)
            .redirectOutput(out.toFile())
            .redirectError(err.toFile())
            .start();
    if (!p.waitFor(100, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError(
          command + " did not finish in 100 s:\n" + Files.readString(out) + Files.readString(err));
    }
    Run r =
        new Run(
            p.exitValue(),
            Files.readString(out, StandardCharsets.UTF_8),
            Files.readString(err, StandardCharsets.UTF_8));
    Files.delete(out);
    Files.delete(err);
    return r;
  }

  @Test
  @Timeout(300)
  void runsOnTheGpuBundlesRuntime() throws Exception {
    assertTrue(Files.isRegularFile(JAR), "the shaded jar is missing: " + JAR.toAbsolutePath());
    String jar = JAR.toString();

    Run help = java(true, "-jar", jar, "--help");
    assertEquals(0, help.rc(), help.all());
    assertTrue(help.out().contains("\n  doctor ") && help.out().contains("\n  chart "), help.all());

    Run doctor = java(true, "-jar", jar, "doctor", "--json", "--no-gpu");
    JsonNode report = Mappers.JSON.readTree(doctor.out());
    assertEquals(report.get("summary").get("exit_code").asInt(), doctor.rc(), doctor.all());
    assertTrue(report.get("version").asText().matches("\\d+\\.\\d+\\.\\d+"), doctor.all());
    assertTrue(report.get("host").get("cpus").asInt() > 0, doctor.all());
    assertEquals(
        "PASS",
        report.get("checks").get(0).get("status").asText(),
        "the library loads from the jar: " + doctor.all());

    Path dir = Files.createDirectories(Path.of("target", "bench-jar-it"));
    Path csv = dir.resolve("sweep.csv");
    Run perf =
        java(
            true,
            "-jar",
            jar,
            "--threads",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "64",
            "-w",
            "0",
            "-n",
            "1",
            "--collectives",
            "allreduce",
            "--csv",
            csv.toString());
    assertEquals(0, perf.rc(), perf.all());
    assertEquals(5, Files.readAllLines(csv).size(), "header and 8, 16, 32, 64 B");
    // Colibri's INFO lines (through the JVM's logging) stay out of the tables unless asked for.
    assertFalse(perf.all().contains("rank 0/2 ready"), perf.all());
    Run loud =
        java(
            true,
            "-Dcolibri.logLevel=info",
            "-jar",
            jar,
            "--threads",
            "--ranks",
            "2",
            "-b",
            "8",
            "-e",
            "8",
            "-w",
            "0",
            "-n",
            "1",
            "--collectives",
            "allreduce");
    assertEquals(0, loud.rc(), loud.all());
    assertTrue(loud.err().contains("rank 0/2 ready"), loud.all());

    // The decoder on the CPU from the slim jar, which has no CUDA presets (on a GPU it says why).
    Run decode = java(true, "-jar", jar, "decode", "--tp", "2", "--check", "--new", "4");
    assertEquals(0, decode.rc(), decode.all());
    assertTrue(decode.out().contains("ok: TP=2 equals TP=1"), decode.all());
    Run decodeGpu = java(true, "-jar", jar, "decode", "--device", "gpu", "--new", "2");
    assertEquals(Commands.EXIT_FAILED, decodeGpu.rc(), decodeGpu.all());
    assertTrue(decodeGpu.err().contains("the CUDA runtime could not be loaded"), decodeGpu.all());

    Run chart =
        java(
            false,
            "-jar",
            jar,
            "chart",
            "--out",
            dir.resolve("charts").toString(),
            "--collectives",
            "allreduce",
            csv.toString());
    assertEquals(0, chart.rc(), chart.all());
    assertTrue(
        Files.isRegularFile(dir.resolve("charts").resolve("allReduce-busbw.png")), chart.all());
    Run trimmedChart =
        java(true, "-jar", jar, "chart", "--out", dir.resolve("none").toString(), csv.toString());
    assertEquals(Commands.EXIT_FAILED, trimmedChart.rc(), trimmedChart.all());
    assertTrue(
        trimmedChart.err().contains("this Java runtime has no java.desktop module"),
        trimmedChart.all());
  }

  @Test
  @Timeout(120)
  void compareReadsJmhJsonOnTheGpuBundlesRuntime() throws Exception {
    assertTrue(Files.isRegularFile(JMH_JAR), "the JMH jar is missing: " + JMH_JAR);
    Path json = Path.of("..", "results", "gpu", "2026-11-30-x2-ll", "jmh-custom.json");
    if (!Files.isRegularFile(json)) {
      return; // module built outside the repository
    }
    Run compare =
        java(
            true,
            "-cp",
            JMH_JAR.toString(),
            "io.colibri.bench.jmh.Compare",
            "--gpus",
            "2",
            json.toString());
    assertEquals(0, compare.rc(), compare.all());
    assertTrue(compare.out().contains("# Colibri vs NCCL"), compare.all());
  }
}
