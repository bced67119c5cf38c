/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.colibri.Algorithm;
import io.colibri.ErrorCode;
import io.colibri.LogLevel;
import io.colibri.Option;
import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.VersionCheck;
import io.colibri.jni.ColibriLib.ClbConfig;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Java options and the native clbConfig_t agree: the same knobs (io.colibri.Option's table and the
 * native one behind clbConfigSet), the same defaults and ranges, every field carried over.
 */
class ConfigMappingTest {

  private static String nativeGet(ClbConfig c, Option o) {
    byte[] buf = new byte[128];
    int rc = ColibriLib.clbConfigGet(c, ColibriLib.utf8z(o.nativeName()), buf, buf.length);
    assertEquals(0, rc, o + ": " + ColibriLib.clbGetLastError());
    return ColibriLib.fromUtf8z(buf);
  }

  private static int nativeSet(ClbConfig c, String name, String value) {
    return ColibriLib.clbConfigSet(c, ColibriLib.utf8z(name), ColibriLib.utf8z(value));
  }

  @Test
  void javaAndNativeListTheSameKnobs() {
    NativeLibrary.ensureLoaded();
    java.util.List<String> nativeNames = new java.util.ArrayList<>();
    for (int i = 0; ColibriLib.clbConfigOptionName(i) != null; i++) {
      nativeNames.add(ColibriLib.clbConfigOptionName(i));
    }
    java.util.List<String> javaNames = new java.util.ArrayList<>();
    for (Option o : Option.values()) {
      javaNames.add(o.nativeName());
    }
    assertEquals(nativeNames, javaNames, "the same knobs, in the same order");
  }

  @Test
  void everyDefaultIsTheNativeOne() {
    assumeTrue(noColibriEnvironment(), "COLIBRI_* or colibri.* set: defaults are not defaults");
    NativeLibrary.ensureLoaded();
    try (ClbConfig c = new ClbConfig()) {
      assertEquals(0, ColibriLib.clbConfigInit(c), ColibriLib.clbGetLastError());
      for (Option o : Option.values()) {
        assertEquals(o.format(o.defaultValue()), nativeGet(c, o), o.name());
      }
    }
  }

  /** The bounds of a numeric knob, from its valid values ("1..64", "auto (-1), 0..1048576 ..."). */
  private static long[] bounds(Option o) {
    String[] range =
        o.validValues().replaceAll("^auto \\(-1\\), ", "").replaceAll(" .*", "").split("\\.\\.");
    return new long[] {Long.parseLong(range[0]), Long.parseLong(range[1])};
  }

  private static boolean numeric(Option o) {
    return o.type() == Integer.class || o.type() == Long.class || o.type() == Duration.class;
  }

  /** The bounds of every numeric knob and the words of every worded one are the native table's. */
  @Test
  void everyRangeIsTheNativeOne() {
    NativeLibrary.ensureLoaded();
    try (ClbConfig c = NativeProvider.toConfig(Options.defaults())) {
      for (Option o : Option.values()) {
        String name = o.nativeName();
        if (numeric(o)) {
          long min = bounds(o)[0];
          long max = bounds(o)[1];
          assertEquals(
              0,
              nativeSet(c, name, Long.toString(min)),
              o + " takes its minimum " + min + ": " + ColibriLib.clbGetLastError());
          assertEquals(
              0,
              nativeSet(c, name, Long.toString(max)),
              o + " takes its maximum " + max + ": " + ColibriLib.clbGetLastError());
          if (!(min == 0 && o.validValues().startsWith("auto"))) { // -1: auto
            assertEquals(
                ErrorCode.INVALID_ARGUMENT.code(),
                nativeSet(c, name, Long.toString(min - 1)),
                o + " refuses " + (min - 1));
          }
          if (max < Long.MAX_VALUE) {
            assertEquals(
                ErrorCode.INVALID_ARGUMENT.code(),
                nativeSet(c, name, Long.toString(max + 1)),
                o + " refuses " + (max + 1));
          }
        } else if (o == Option.VERBS_DEVICE) {
          assertEquals(0, nativeSet(c, name, "d".repeat(63)), ColibriLib.clbGetLastError());
          assertEquals(ErrorCode.INVALID_ARGUMENT.code(), nativeSet(c, name, "d".repeat(64)));
        } else { // words, and the enums by their config names
          for (String w : o.validValues().split(", ")) {
            assertEquals(
                0, nativeSet(c, name, w), o + " takes " + w + ": " + ColibriLib.clbGetLastError());
            assertEquals(w, nativeGet(c, o));
          }
          assertEquals(ErrorCode.INVALID_ARGUMENT.code(), nativeSet(c, name, "nope"), o.name());
        }
      }
    }
  }

  /** Every knob set to a value other than its default reaches the native field. */
  @Test
  void everyKnobReachesTheNativeConfig() {
    NativeLibrary.ensureLoaded();
    Options.Builder b = Options.builder();
    java.util.Map<Option, String> want = new java.util.EnumMap<>(Option.class);
    for (Option o : Option.values()) {
      String other = otherValue(o);
      b.set(o, other);
      want.put(o, other);
    }
    Options options = b.build();
    try (ClbConfig c = NativeProvider.toConfig(options)) {
      for (Option o : Option.values()) {
        assertEquals(want.get(o), nativeGet(c, o), o.name());
        org.junit.jupiter.api.Assertions.assertNotEquals(
            o.format(o.defaultValue()), nativeGet(c, o), o + " was tested at its default");
      }
    }
  }

  /** A valid value of {@code o} other than its default, as text. */
  private static String otherValue(Option o) {
    String dflt = o.format(o.defaultValue());
    if (numeric(o)) {
      long max = bounds(o)[1];
      return Long.toString(Long.toString(max).equals(dflt) ? bounds(o)[0] : max);
    }
    if (o == Option.VERBS_DEVICE) {
      return "mlx5_3";
    }
    for (String w : o.validValues().split(", ")) {
      if (!w.equals(dflt)) {
        return w;
      }
    }
    throw new AssertionError(o + " has a single value");
  }

  private static boolean noColibriEnvironment() {
    for (Option o : Option.values()) {
      if (System.getenv(o.environmentVariable()) != null
          || System.getProperty(o.systemProperty()) != null) {
        return false;
      }
    }
    return true;
  }

  @Test
  void javaDefaultsEqualClbConfigInit() {
    assumeTrue(noColibriEnvironment(), "COLIBRI_* or colibri.* set: defaults are not defaults");
    NativeLibrary.ensureLoaded();
    try (ClbConfig c = new ClbConfig()) {
      assertEquals(0, ColibriLib.clbConfigInit(c), ColibriLib.clbGetLastError());
      assertEquals(c.sizeof(), c.size());
      assertEquals(((Transport) Option.TRANSPORT.defaultValue()).code(), c.transport());
      assertEquals(((Algorithm) Option.ALGORITHM.defaultValue()).code(), c.algorithm());
      assertEquals(((LogLevel) Option.LOG_LEVEL.defaultValue()).code(), c.logLevel());
      assertEquals((int) Option.PIPELINE_DEPTH.defaultValue(), c.pipelineDepth());
      assertEquals((long) Option.CHUNK_BYTES.defaultValue(), c.chunkBytes());
      assertEquals((long) Option.DIRECT_MAX_BYTES.defaultValue(), c.directMaxBytes());
      assertEquals((long) Option.STAGING_CAP_BYTES.defaultValue(), c.stagingCapBytes());
      assertEquals(((Duration) Option.TIMEOUT.defaultValue()).toMillis(), c.timeoutMs());
      assertEquals(((VersionCheck) Option.VERSION_CHECK.defaultValue()).code(), c.versionCheck());
      assertEquals(Option.VERBS_DEVICE.defaultValue(), c.verbsDeviceName());
      assertEquals((int) Option.VERBS_PORT.defaultValue(), c.verbsPort());
      assertEquals((int) Option.VERBS_GID_INDEX.defaultValue(), c.verbsGidIndex());
      assertEquals((int) Option.VERBS_TRAFFIC_CLASS.defaultValue(), c.verbsTrafficClass());
      assertEquals((int) Option.VERBS_TIMEOUT.defaultValue(), c.verbsTimeout());
      assertEquals((int) Option.VERBS_RETRY_COUNT.defaultValue(), c.verbsRetryCount());
      assertEquals((int) Option.VERBS_QPS_PER_CONNECTION.defaultValue(), c.verbsQpsPerConnection());
    }
    // The C macros too.
    assertEquals((int) Option.PIPELINE_DEPTH.defaultValue(), ColibriLib.defaultPipelineDepth());
    assertEquals((long) Option.CHUNK_BYTES.defaultValue(), ColibriLib.defaultChunkBytes());
    assertEquals((long) Option.DIRECT_MAX_BYTES.defaultValue(), ColibriLib.defaultDirectMaxBytes());
    assertEquals(
        (long) Option.STAGING_CAP_BYTES.defaultValue(), ColibriLib.defaultStagingCapBytes());
    assertEquals(
        ((Duration) Option.TIMEOUT.defaultValue()).toMillis(), ColibriLib.defaultTimeoutMs());
    assertEquals(
        ((VersionCheck) Option.VERSION_CHECK.defaultValue()).code(),
        ColibriLib.defaultVersionCheck());
    assertEquals((int) Option.VERBS_PORT.defaultValue(), ColibriLib.defaultVerbsPort());
    assertEquals((int) Option.VERBS_GID_INDEX.defaultValue(), ColibriLib.defaultVerbsGidIndex());
    assertEquals(
        (int) Option.VERBS_TRAFFIC_CLASS.defaultValue(), ColibriLib.defaultVerbsTrafficClass());
    assertEquals((int) Option.VERBS_TIMEOUT.defaultValue(), ColibriLib.defaultVerbsTimeout());
    assertEquals(
        (int) Option.VERBS_RETRY_COUNT.defaultValue(), ColibriLib.defaultVerbsRetryCount());
    assertEquals(
        (int) Option.VERBS_QPS_PER_CONNECTION.defaultValue(),
        ColibriLib.defaultVerbsQpsPerConnection());
    assertEquals(64, ColibriLib.verbsDeviceBytes());
  }

  @Test
  void everyFieldIsSetFromOptions() {
    NativeLibrary.ensureLoaded();
    Options o =
        Options.builder()
            .transport(Transport.SOCKET)
            .algorithm(Algorithm.RING)
            .logLevel(LogLevel.DEBUG)
            .pipelineDepth(7)
            .chunkBytes(12288)
            .directMaxBytes(777)
            .stagingCapBytes(1L << 33)
            .timeout(Duration.ofMillis(4321))
            .versionCheck(VersionCheck.EXACT)
            .verbsDevice("mlx5_2")
            .verbsPort(2)
            .verbsGidIndex(3)
            .verbsTrafficClass(106)
            .verbsTimeout(18)
            .verbsRetryCount(5)
            .verbsQpsPerConnection(3)
            .build();
    try (ClbConfig c = NativeProvider.toConfig(o)) {
      assertEquals(c.sizeof(), c.size());
      assertEquals(Transport.SOCKET.code(), c.transport());
      assertEquals(Algorithm.RING.code(), c.algorithm());
      assertEquals(LogLevel.DEBUG.code(), c.logLevel());
      assertEquals(7, c.pipelineDepth());
      assertEquals(12288, c.chunkBytes());
      assertEquals(777, c.directMaxBytes());
      assertEquals(1L << 33, c.stagingCapBytes());
      assertEquals(4321, c.timeoutMs());
      assertEquals(VersionCheck.EXACT.code(), c.versionCheck());
      assertEquals("mlx5_2", c.verbsDeviceName());
      assertEquals(2, c.verbsPort());
      assertEquals(3, c.verbsGidIndex());
      assertEquals(106, c.verbsTrafficClass());
      assertEquals(18, c.verbsTimeout());
      assertEquals(5, c.verbsRetryCount());
      assertEquals(3, c.verbsQpsPerConnection());
      for (int i = "mlx5_2".length(); i < ColibriLib.verbsDeviceBytes(); i++) {
        assertEquals(0, c.verbsDevice(i), "verbsDevice is NUL-padded");
      }
    }
    // The longest name fits with its NUL; the empty one (the first device) clears the field.
    String longest = "d".repeat(63);
    try (ClbConfig c = NativeProvider.toConfig(Options.builder().verbsDevice(longest).build())) {
      assertEquals(longest, c.verbsDeviceName());
    }
    try (ClbConfig c = NativeProvider.toConfig(Options.builder().verbsDevice("").build())) {
      assertEquals("", c.verbsDeviceName());
    }
  }

  @Test
  void transportAndAlgorithmNamesAgree() {
    NativeLibrary.ensureLoaded();
    for (Transport t : Transport.values()) {
      int[] code = new int[1];
      assertEquals(
          0, ColibriLib.clbTransportFromName(t.configName(), code), ColibriLib.clbGetLastError());
      assertEquals(t.code(), code[0], t.name());
      assertEquals(t.configName(), ColibriLib.clbTransportName(t.code()));
    }
    for (Algorithm a : new Algorithm[] {Algorithm.AUTO, Algorithm.RING, Algorithm.DIRECT}) {
      int[] code = new int[1];
      assertEquals(
          0, ColibriLib.clbAlgorithmFromName(a.configName(), code), ColibriLib.clbGetLastError());
      assertEquals(a.code(), code[0], a.name());
      assertEquals(a.configName(), ColibriLib.clbAlgorithmName(a.code()));
    }
  }
}
