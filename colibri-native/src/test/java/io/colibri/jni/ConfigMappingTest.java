/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.colibri.Algorithm;
import io.colibri.LogLevel;
import io.colibri.Option;
import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.VersionCheck;
import io.colibri.jni.ColibriLib.ClbConfig;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Java options and the native clbConfig_t agree: same defaults, every field carried over. */
class ConfigMappingTest {

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
      assertEquals(((VersionCheck) Option.VERSION_CHECK.defaultValue()).code(),
          c.versionCheck());
      assertEquals(Option.VERBS_DEVICE.defaultValue(), c.verbsDeviceName());
      assertEquals((int) Option.VERBS_PORT.defaultValue(), c.verbsPort());
      assertEquals((int) Option.VERBS_GID_INDEX.defaultValue(), c.verbsGidIndex());
      assertEquals((int) Option.VERBS_TRAFFIC_CLASS.defaultValue(), c.verbsTrafficClass());
      assertEquals((int) Option.VERBS_TIMEOUT.defaultValue(), c.verbsTimeout());
      assertEquals((int) Option.VERBS_RETRY_COUNT.defaultValue(), c.verbsRetryCount());
      assertEquals((int) Option.VERBS_QPS_PER_CONNECTION.defaultValue(),
          c.verbsQpsPerConnection());
    }
    // The C macros too.
    assertEquals((int) Option.PIPELINE_DEPTH.defaultValue(), ColibriLib.defaultPipelineDepth());
    assertEquals((long) Option.CHUNK_BYTES.defaultValue(), ColibriLib.defaultChunkBytes());
    assertEquals((long) Option.DIRECT_MAX_BYTES.defaultValue(),
        ColibriLib.defaultDirectMaxBytes());
    assertEquals((long) Option.STAGING_CAP_BYTES.defaultValue(),
        ColibriLib.defaultStagingCapBytes());
    assertEquals(((Duration) Option.TIMEOUT.defaultValue()).toMillis(),
        ColibriLib.defaultTimeoutMs());
    assertEquals(((VersionCheck) Option.VERSION_CHECK.defaultValue()).code(),
        ColibriLib.defaultVersionCheck());
    assertEquals((int) Option.VERBS_PORT.defaultValue(), ColibriLib.defaultVerbsPort());
    assertEquals((int) Option.VERBS_GID_INDEX.defaultValue(), ColibriLib.defaultVerbsGidIndex());
    assertEquals((int) Option.VERBS_TRAFFIC_CLASS.defaultValue(),
        ColibriLib.defaultVerbsTrafficClass());
    assertEquals((int) Option.VERBS_TIMEOUT.defaultValue(), ColibriLib.defaultVerbsTimeout());
    assertEquals((int) Option.VERBS_RETRY_COUNT.defaultValue(),
        ColibriLib.defaultVerbsRetryCount());
    assertEquals((int) Option.VERBS_QPS_PER_CONNECTION.defaultValue(),
        ColibriLib.defaultVerbsQpsPerConnection());
    assertEquals(64, ColibriLib.verbsDeviceBytes());
  }

  @Test
  void everyFieldIsSetFromOptions() {
    NativeLibrary.ensureLoaded();
    Options o = Options.builder().transport(Transport.SOCKET).algorithm(Algorithm.RING)
        .logLevel(LogLevel.DEBUG).pipelineDepth(7).chunkBytes(12288).directMaxBytes(777)
        .stagingCapBytes(1L << 33).timeout(Duration.ofMillis(4321))
        .versionCheck(VersionCheck.EXACT).verbsDevice("mlx5_2").verbsPort(2).verbsGidIndex(3)
        .verbsTrafficClass(106).verbsTimeout(18).verbsRetryCount(5).verbsQpsPerConnection(3)
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
      assertEquals(0, ColibriLib.clbTransportFromName(t.configName(), code),
          ColibriLib.clbGetLastError());
      assertEquals(t.code(), code[0], t.name());
      assertEquals(t.configName(), ColibriLib.clbTransportName(t.code()));
    }
    for (Algorithm a : new Algorithm[] {Algorithm.AUTO, Algorithm.RING, Algorithm.DIRECT}) {
      int[] code = new int[1];
      assertEquals(0, ColibriLib.clbAlgorithmFromName(a.configName(), code),
          ColibriLib.clbGetLastError());
      assertEquals(a.code(), code[0], a.name());
      assertEquals(a.configName(), ColibriLib.clbAlgorithmName(a.code()));
    }
  }
}
