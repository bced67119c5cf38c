/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The CI smoke of the JMH jar (failsafe, after package): {@code java -jar target/colibri-jmh.jar}
 * runs the host-path call-overhead benchmark, no GPU needed, in one forked JVM with short
 * iterations (a few seconds), and writes a JSON result with a positive score.
 */
class JmhJarIT {

  @Test
  @Timeout(180)
  void hostCallOverheadRunsFromTheShadedJar() throws Exception {
    Path jar = Path.of(System.getProperty("colibri.jmh.jar", "target/colibri-jmh.jar"));
    assertTrue(Files.isRegularFile(jar), "the shaded JMH jar is missing: " + jar.toAbsolutePath());
    Path dir = Files.createDirectories(Path.of("target", "jmh-smoke"));
    Path json = dir.resolve("result.json");
    Path log = dir.resolve("output.txt");
    Files.deleteIfExists(json);
    String java =
        System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
    List<String> command =
        List.of(
            java,
            "-jar",
            jar.toString(),
            "CallOverhead\\.colibriHost$",
            "-f",
            "1",
            "-wi",
            "1",
            "-w",
            "300ms",
            "-i",
            "2",
            "-r",
            "300ms",
            "-foe",
            "true",
            "-rf",
            "json",
            "-rff",
            json.toString());
    Process p =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    if (!p.waitFor(150, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("JMH did not finish in 150 s; output:\n" + Files.readString(log));
    }
    String output = Files.readString(log, StandardCharsets.UTF_8);
    assertEquals(0, p.exitValue(), "JMH failed:\n" + output);
    assertTrue(Files.isRegularFile(json), "no JSON result; output:\n" + output);
    String result = Files.readString(json, StandardCharsets.UTF_8);
    assertTrue(
        result.contains("\"benchmark\" : \"io.colibri.bench.jmh.CallOverhead.colibriHost\""),
        result);
    Matcher score =
        Pattern.compile("\"primaryMetric\"\\s*:\\s*\\{\\s*\"score\"\\s*:\\s*([0-9.Ee+-]+)")
            .matcher(result);
    assertTrue(score.find(), "no score in\n" + result);
    double ns = Double.parseDouble(score.group(1));
    assertTrue(ns > 0 && ns < 1e9, "implausible score " + ns + " ns/op");
    System.out.println("colibri-jmh.jar: CallOverhead.colibriHost = " + ns + " ns/op (CI smoke)");
  }
}
