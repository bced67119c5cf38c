/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static io.colibri.Refusals.invalidArgument;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;

class OptionsTest {

  private static final Map<String, String> NO_ENV = Map.of();
  private static final Properties NO_PROPS = new Properties();

  private static Properties props(String... keysAndValues) {
    Properties p = new Properties();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      p.setProperty(keysAndValues[i], keysAndValues[i + 1]);
    }
    return p;
  }

  private static Map<String, String> env(String... keysAndValues) {
    Map<String, String> m = new HashMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      m.put(keysAndValues[i], keysAndValues[i + 1]);
    }
    return m;
  }

  @Test
  void defaultsMatchTheCHeader() {
    Options o = Options.resolve(NO_ENV, NO_PROPS);
    assertEquals(Transport.AUTO, o.transport());
    assertEquals(Algorithm.AUTO, o.algorithm());
    assertEquals(LogLevel.WARN, o.logLevel());
    assertEquals(4, o.pipelineDepth()); // CLB_DEFAULT_PIPELINE_DEPTH
    assertEquals(256 * 1024, o.chunkBytes()); // CLB_DEFAULT_CHUNK_BYTES
    assertEquals(64 * 1024, o.directMaxBytes()); // CLB_DEFAULT_DIRECT_MAX_BYTES
    assertEquals(64 * 1024 * 1024, o.stagingCapBytes()); // CLB_DEFAULT_STAGING_CAP_BYTES
    assertEquals(Duration.ofMillis(60000), o.timeout()); // CLB_DEFAULT_TIMEOUT_MS
    assertEquals(VersionCheck.STRICT, o.versionCheck()); // CLB_DEFAULT_VERSION_CHECK
    for (Option opt : Option.values()) {
      assertEquals("default", o.source(opt));
    }
  }

  @Test
  void namesFollowOneScheme() {
    assertEquals("colibri.chunkBytes", Option.CHUNK_BYTES.systemProperty());
    assertEquals("COLIBRI_CHUNK_BYTES", Option.CHUNK_BYTES.environmentVariable());
    assertEquals("colibri.logLevel", Option.LOG_LEVEL.systemProperty());
    assertEquals("COLIBRI_LOG_LEVEL", Option.LOG_LEVEL.environmentVariable());
    assertEquals("colibri.timeoutMs", Option.TIMEOUT.systemProperty());
    assertEquals("COLIBRI_TIMEOUT_MS", Option.TIMEOUT.environmentVariable());
    assertEquals("COLIBRI_STAGING_CAP_BYTES", Option.STAGING_CAP_BYTES.environmentVariable());
  }

  @Test
  void builderBeatsSystemPropertyBeatsEnvironmentBeatsDefault() {
    Map<String, String> env =
        env(
            "COLIBRI_CHUNK_BYTES",
            "8192",
            "COLIBRI_PIPELINE_DEPTH",
            "8",
            "COLIBRI_TRANSPORT",
            "socket",
            "COLIBRI_TIMEOUT_MS",
            "1500");
    Properties props = props("colibri.chunkBytes", "16384", "colibri.pipelineDepth", "16");
    Options o = Options.builder().chunkBytes(32768).build(env::get, props);

    assertEquals(32768, o.chunkBytes());
    assertEquals("builder", o.source(Option.CHUNK_BYTES));
    assertEquals(16, o.pipelineDepth());
    assertEquals("system property colibri.pipelineDepth", o.source(Option.PIPELINE_DEPTH));
    assertEquals(Transport.SOCKET, o.transport());
    assertEquals("environment COLIBRI_TRANSPORT", o.source(Option.TRANSPORT));
    assertEquals(Duration.ofMillis(1500), o.timeout());
    assertEquals(LogLevel.WARN, o.logLevel());
    assertEquals("default", o.source(Option.LOG_LEVEL));
  }

  @Test
  void emptySystemPropertyOrEnvironmentCountsAsUnset() {
    Options o =
        Options.builder()
            .build(
                env("COLIBRI_TRANSPORT", "")::get,
                props("colibri.transport", "", "colibri.algorithm", ""));
    assertEquals(Transport.AUTO, o.transport());
    assertEquals(Algorithm.AUTO, o.algorithm());
  }

  @Test
  void versionCheckFromEveryPlace() {
    assertEquals("colibri.versionCheck", Option.VERSION_CHECK.systemProperty());
    assertEquals("COLIBRI_VERSION_CHECK", Option.VERSION_CHECK.environmentVariable());
    assertEquals(
        VersionCheck.EXACT,
        Options.resolve(env("COLIBRI_VERSION_CHECK", "EXACT"), NO_PROPS).versionCheck());
    Options o =
        Options.resolve(
            env("COLIBRI_VERSION_CHECK", "exact"), props("colibri.versionCheck", "warn"));
    assertEquals(VersionCheck.WARN, o.versionCheck());
    assertEquals("system property colibri.versionCheck", o.source(Option.VERSION_CHECK));
    assertEquals(
        VersionCheck.STRICT,
        Options.builder()
            .versionCheck(VersionCheck.STRICT)
            .build(env("COLIBRI_VERSION_CHECK", "warn")::get, NO_PROPS)
            .versionCheck());
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_VERSION_CHECK", "lenient"), NO_PROPS),
        "invalid versionCheck from environment COLIBRI_VERSION_CHECK: \"lenient\" is not a"
            + " version check",
        "strict, exact, warn");
    invalidArgument(
        () -> Options.builder().versionCheck(null),
        "versionCheck from builder is null",
        "strict, exact, warn",
        "default strict");
  }

  @Test
  void verbsOptionsFromEveryPlace() {
    Options d = Options.resolve(NO_ENV, NO_PROPS);
    assertEquals("", d.verbsDevice());
    assertEquals(1, d.verbsPort());
    assertEquals(-1, d.verbsGidIndex());
    assertEquals(0, d.verbsTrafficClass());
    assertEquals(14, d.verbsTimeout());
    assertEquals(7, d.verbsRetryCount());
    assertEquals(1, d.verbsQpsPerConnection());
    Option[] verbs = {
      Option.VERBS_DEVICE,
      Option.VERBS_PORT,
      Option.VERBS_GID_INDEX,
      Option.VERBS_TRAFFIC_CLASS,
      Option.VERBS_TIMEOUT,
      Option.VERBS_RETRY_COUNT,
      Option.VERBS_QPS_PER_CONNECTION
    };
    String[] names = {
      "verbsDevice",
      "verbsPort",
      "verbsGidIndex",
      "verbsTrafficClass",
      "verbsTimeout",
      "verbsRetryCount",
      "verbsQpsPerConnection"
    };
    String[] envs = {
      "COLIBRI_VERBS_DEVICE",
      "COLIBRI_VERBS_PORT",
      "COLIBRI_VERBS_GID_INDEX",
      "COLIBRI_VERBS_TRAFFIC_CLASS",
      "COLIBRI_VERBS_TIMEOUT",
      "COLIBRI_VERBS_RETRY_COUNT",
      "COLIBRI_VERBS_QPS_PER_CONNECTION"
    };
    for (int i = 0; i < verbs.length; i++) {
      assertEquals(names[i], verbs[i].camelName());
      assertEquals("colibri." + names[i], verbs[i].systemProperty());
      assertEquals(envs[i], verbs[i].environmentVariable());
    }
    assertEquals(String.class, Option.VERBS_DEVICE.type());
    assertEquals(Integer.class, Option.VERBS_TRAFFIC_CLASS.type());
    assertEquals(Integer.class, Option.VERBS_QPS_PER_CONNECTION.type());

    Options e =
        Options.resolve(
            env(
                "COLIBRI_VERBS_DEVICE",
                "mlx5_1",
                "COLIBRI_VERBS_PORT",
                "2",
                "COLIBRI_VERBS_GID_INDEX",
                "3",
                "COLIBRI_VERBS_TRAFFIC_CLASS",
                "106",
                "COLIBRI_VERBS_TIMEOUT",
                "18",
                "COLIBRI_VERBS_RETRY_COUNT",
                "5",
                "COLIBRI_VERBS_QPS_PER_CONNECTION",
                "4"),
            NO_PROPS);
    assertEquals("mlx5_1", e.verbsDevice());
    assertEquals(2, e.verbsPort());
    assertEquals(3, e.verbsGidIndex());
    assertEquals(106, e.verbsTrafficClass());
    assertEquals(18, e.verbsTimeout());
    assertEquals(5, e.verbsRetryCount());
    assertEquals(4, e.verbsQpsPerConnection());
    assertEquals(
        "environment COLIBRI_VERBS_QPS_PER_CONNECTION", e.source(Option.VERBS_QPS_PER_CONNECTION));
    assertEquals("environment COLIBRI_VERBS_TRAFFIC_CLASS", e.source(Option.VERBS_TRAFFIC_CLASS));

    Options p =
        Options.resolve(
            env("COLIBRI_VERBS_DEVICE", "mlx5_1", "COLIBRI_VERBS_TIMEOUT", "18"),
            props(
                "colibri.verbsDevice",
                "mlx5_2",
                "colibri.verbsTimeout",
                "20",
                "colibri.verbsTrafficClass",
                "184",
                "colibri.verbsQpsPerConnection",
                "2"));
    assertEquals("mlx5_2", p.verbsDevice());
    assertEquals("system property colibri.verbsDevice", p.source(Option.VERBS_DEVICE));
    assertEquals(20, p.verbsTimeout());
    assertEquals(184, p.verbsTrafficClass());
    assertEquals(2, p.verbsQpsPerConnection());
    assertEquals(
        "system property colibri.verbsQpsPerConnection", p.source(Option.VERBS_QPS_PER_CONNECTION));

    Options b =
        Options.builder()
            .verbsDevice("mlx5_4")
            .verbsPort(255)
            .verbsGidIndex(255)
            .verbsTrafficClass(255)
            .verbsTimeout(31)
            .verbsRetryCount(0)
            .verbsQpsPerConnection(8)
            .build(
                env(
                        "COLIBRI_VERBS_DEVICE",
                        "mlx5_1",
                        "COLIBRI_VERBS_RETRY_COUNT",
                        "6",
                        "COLIBRI_VERBS_QPS_PER_CONNECTION",
                        "3")
                    ::get,
                props("colibri.verbsPort", "2"));
    assertEquals("mlx5_4", b.verbsDevice());
    assertEquals(255, b.verbsPort());
    assertEquals(255, b.verbsGidIndex());
    assertEquals(255, b.verbsTrafficClass());
    assertEquals(31, b.verbsTimeout());
    assertEquals(0, b.verbsRetryCount());
    assertEquals("builder", b.source(Option.VERBS_RETRY_COUNT));
    assertEquals(8, b.verbsQpsPerConnection());
    assertEquals("builder", b.source(Option.VERBS_QPS_PER_CONNECTION));
    assertEquals("", Options.builder().verbsDevice("").build(NO_ENV::get, NO_PROPS).verbsDevice());
    assertTrue(b.toString().contains("verbsDevice=\"mlx5_4\" (builder)"), b.toString());
  }

  @Test
  void verbsOptionsAreRangeChecked() {
    Options.builder()
        .verbsPort(1)
        .verbsGidIndex(-1)
        .verbsTrafficClass(0)
        .verbsTimeout(0)
        .verbsRetryCount(7)
        .verbsQpsPerConnection(1)
        .verbsQpsPerConnection(8)
        .verbsDevice("x".repeat(63));
    invalidArgument(
        () -> Options.builder().verbsPort(0),
        "invalid verbsPort from builder: 0 is out of range",
        "1..255");
    invalidArgument(
        () -> Options.builder().verbsPort(256), "verbsPort from builder: 256", "1..255");
    invalidArgument(
        () -> Options.builder().verbsGidIndex(-2), "verbsGidIndex from builder: -2", "-1..255");
    invalidArgument(
        () -> Options.builder().verbsGidIndex(65536), "verbsGidIndex from builder: 65536");
    invalidArgument(
        () -> Options.builder().verbsTrafficClass(-1),
        "verbsTrafficClass from builder: -1 is out of range",
        "0..255");
    invalidArgument(
        () -> Options.builder().verbsTrafficClass(256), "verbsTrafficClass from builder: 256");
    invalidArgument(
        () -> Options.builder().verbsTimeout(32), "verbsTimeout from builder: 32", "0..31");
    invalidArgument(
        () -> Options.builder().verbsRetryCount(8), "verbsRetryCount from builder: 8", "0..7");
    invalidArgument(
        () -> Options.builder().verbsQpsPerConnection(0),
        "verbsQpsPerConnection from builder: 0",
        "1..8");
    invalidArgument(
        () -> Options.builder().verbsQpsPerConnection(9),
        "verbsQpsPerConnection from builder: 9",
        "1..8");
    invalidArgument(() -> Options.builder().verbsDevice(null), "verbsDevice from builder is null");
    invalidArgument(
        () -> Options.builder().verbsDevice("x".repeat(64)),
        "verbsDevice from builder",
        "is 64 bytes long",
        "0..63 bytes");
    // UTF-8 bytes count, not characters: 32 two-byte characters are 64 bytes.
    invalidArgument(
        () -> Options.builder().verbsDevice("\u00e9".repeat(32)),
        "verbsDevice from builder",
        "is 64 bytes long");

    invalidArgument(
        () -> Options.resolve(env("COLIBRI_VERBS_TIMEOUT", "32"), NO_PROPS),
        "verbsTimeout",
        "environment COLIBRI_VERBS_TIMEOUT",
        "\"32\" is out of range",
        "0..31",
        "default 14");
    invalidArgument(
        () -> Options.resolve(NO_ENV, props("colibri.verbsTrafficClass", "0x20")),
        "system property colibri.verbsTrafficClass",
        "is not a whole number",
        "0..255");
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_VERBS_RETRY_COUNT", "8"), NO_PROPS),
        "environment COLIBRI_VERBS_RETRY_COUNT",
        "0..7");
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_VERBS_QPS_PER_CONNECTION", "9"), NO_PROPS),
        "environment COLIBRI_VERBS_QPS_PER_CONNECTION",
        "1..8",
        "default 1");
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_VERBS_DEVICE", "m".repeat(64)), NO_PROPS),
        "environment COLIBRI_VERBS_DEVICE",
        "is 64 bytes long");
    assertEquals(
        "mlx5_0",
        Options.builder()
            .set(Option.VERBS_DEVICE, "mlx5_0")
            .build(NO_ENV::get, NO_PROPS)
            .verbsDevice());
  }

  @Test
  void enumNamesAreCaseInsensitiveLikeTheNativeLibrary() {
    Options o =
        Options.resolve(
            env(
                "COLIBRI_TRANSPORT",
                "SHM",
                "COLIBRI_ALGORITHM",
                "Ring",
                "COLIBRI_LOG_LEVEL",
                "debug"),
            NO_PROPS);
    assertEquals(Transport.SHM, o.transport());
    assertEquals(Algorithm.RING, o.algorithm());
    assertEquals(LogLevel.DEBUG, o.logLevel());
  }

  @Test
  void spacesAreRefusedLikeTheNativeLibrary() {
    // clbConfigInit refuses " shm " and "  ": Java gives the same answer for the same text.
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_TRANSPORT", " shm "), NO_PROPS),
        "\" shm \" is not a transport");
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_PIPELINE_DEPTH", " 4"), NO_PROPS),
        "environment COLIBRI_PIPELINE_DEPTH: \" 4\" is not a whole number");
  }

  @Test
  void invalidEnvironmentValueNamesKnobSourceValueAndRange() {
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_CHUNK_BYTES", "100"), NO_PROPS),
        "chunkBytes",
        "environment COLIBRI_CHUNK_BYTES",
        "\"100\"",
        "4096..67108864",
        "64 MiB");
  }

  /** Issue 14: a bad COLIBRI_TIMEOUT_MS was an IllegalArgumentException, not a ColibriException. */
  @Test
  void badTimeoutFromTheEnvironmentIsAColibriExceptionWithTheWholeMessage() {
    ColibriException e =
        invalidArgument(() -> Options.resolve(env("COLIBRI_TIMEOUT_MS", "abc"), NO_PROPS));
    assertEquals(
        "invalid timeout from environment COLIBRI_TIMEOUT_MS: \"abc\" is not a whole"
            + " number of milliseconds; valid values are 1..86400000 ms (1 ms..24 h). Fix it, or"
            + " unset it to use the default 60000 ms.",
        e.getMessage());
    assertEquals("io.colibri.ColibriException [INVALID_ARGUMENT]: " + e.getMessage(), e.toString());
  }

  @Test
  void invalidSystemPropertyNamesIt() {
    invalidArgument(
        () -> Options.resolve(NO_ENV, props("colibri.transport", "rdma")),
        "transport",
        "system property colibri.transport",
        "\"rdma\"",
        "auto, shm, socket");
  }

  @Test
  void systemPropertyIsCheckedEvenWhenEnvironmentIsValid() {
    invalidArgument(
        () ->
            Options.resolve(
                env("COLIBRI_PIPELINE_DEPTH", "2"), props("colibri.pipelineDepth", "two")),
        "is not a whole number",
        "system property colibri.pipelineDepth");
  }

  @Test
  void invalidEnvironmentIsIgnoredWhenTheBuilderSetsTheKnob() {
    Options o =
        Options.builder()
            .pipelineDepth(2)
            .build(env("COLIBRI_PIPELINE_DEPTH", "garbage")::get, NO_PROPS);
    assertEquals(2, o.pipelineDepth());
  }

  @Test
  void invalidBuilderValueFailsAtOnce() {
    invalidArgument(
        () -> Options.builder().pipelineDepth(65),
        "pipelineDepth from builder",
        "65",
        "1..64",
        "default 4");
  }

  @Test
  void rangesAreInclusive() {
    Options.builder()
        .pipelineDepth(1)
        .pipelineDepth(64)
        .chunkBytes(4096)
        .chunkBytes(64L << 20)
        .directMaxBytes(0)
        .directMaxBytes(1L << 30)
        .stagingCapBytes(64L << 10)
        .stagingCapBytes(1L << 40)
        .timeout(Duration.ofMillis(1))
        .timeout(Duration.ofHours(24));
    String out = " is out of range";
    invalidArgument(
        () -> Options.builder().pipelineDepth(0), "pipelineDepth from builder: 0" + out);
    invalidArgument(
        () -> Options.builder().chunkBytes(4095), "chunkBytes from builder: 4095" + out);
    invalidArgument(
        () -> Options.builder().chunkBytes((64L << 20) + 1),
        "chunkBytes from builder: 67108865" + out);
    invalidArgument(
        () -> Options.builder().directMaxBytes(-1), "directMaxBytes from builder: -1" + out);
    invalidArgument(
        () -> Options.builder().directMaxBytes((1L << 30) + 1),
        "directMaxBytes from builder: 1073741825" + out);
    invalidArgument(
        () -> Options.builder().stagingCapBytes((64L << 10) - 1),
        "stagingCapBytes from builder: 65535" + out);
    invalidArgument(
        () -> Options.builder().stagingCapBytes((1L << 40) + 1),
        "stagingCapBytes from builder: 1099511627777" + out);
    invalidArgument(
        () -> Options.builder().timeout(Duration.ZERO), "timeout from builder: 0 ms" + out);
    invalidArgument(
        () -> Options.builder().timeout(Duration.ofHours(24).plusMillis(1)),
        "timeout from builder: 86400001 ms" + out);
  }

  @Test
  void timeoutMustBeWholeMilliseconds() {
    invalidArgument(
        () -> Options.builder().timeout(Duration.ofMillis(5).plusNanos(1)),
        "whole number of milliseconds");
    invalidArgument(() -> Options.builder().timeout(Duration.ofSeconds(-1)), "out of range");
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_TIMEOUT_MS", "99999999999999"), NO_PROPS),
        "environment COLIBRI_TIMEOUT_MS",
        "86400000");
  }

  @Test
  void intOverflowInTextIsOutOfRangeNotWrapped() {
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_PIPELINE_DEPTH", "4294967300"), NO_PROPS),
        "\"4294967300\" is out of range");
  }

  @Test
  void noneCannotBeForced() {
    invalidArgument(() -> Options.builder().algorithm(Algorithm.NONE), "cannot be forced");
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_ALGORITHM", "none"), NO_PROPS),
        "environment COLIBRI_ALGORITHM: \"none\" is not an algorithm that can be forced");
  }

  @Test
  void nullBuilderValueSaysWhatToPass() {
    invalidArgument(
        () -> Options.builder().transport(null),
        "transport from builder is null",
        "auto, shm, socket, verbs");
    invalidArgument(
        () -> Options.builder().timeout(null), "timeout from builder is null", "default 60000");
    invalidArgument(
        () -> Options.builder().set(Option.TRANSPORT, null),
        "transport from builder is null",
        "clear(Option.TRANSPORT)");
  }

  @Test
  void nullOptionIsRefusedNamingTheMethod() {
    Options o = Options.resolve(NO_ENV, NO_PROPS);
    invalidArgument(
        () -> o.get(null), "Options get(option): the option is null", "Option.CHUNK_BYTES");
    invalidArgument(() -> o.source(null), "Options source(option): the option is null");
    invalidArgument(() -> Options.builder().set(null, "shm"), "Options set(option)");
    invalidArgument(() -> Options.builder().clear(null), "Options clear(option)");
  }

  @Test
  void setFromTextParsesLikeSystemProperty() {
    Options o =
        Options.builder()
            .set(Option.TIMEOUT, "250")
            .set(Option.TRANSPORT, "shm")
            .build(NO_ENV::get, NO_PROPS);
    assertEquals(Duration.ofMillis(250), o.timeout());
    assertEquals(Transport.SHM, o.transport());
    invalidArgument(
        () -> Options.builder().set(Option.CHUNK_BYTES, "1M"),
        "chunkBytes from builder: \"1M\" is not a whole number");
  }

  @Test
  void clearFallsBackToTheNextSource() {
    Options.Builder b = Options.builder().pipelineDepth(2);
    b.clear(Option.PIPELINE_DEPTH);
    assertEquals(8, b.build(env("COLIBRI_PIPELINE_DEPTH", "8")::get, NO_PROPS).pipelineDepth());
  }

  @Test
  void toBuilderKeepsValuesAndSources() {
    Options a =
        Options.builder().chunkBytes(8192).build(env("COLIBRI_TRANSPORT", "socket")::get, NO_PROPS);
    Options b = a.toBuilder().pipelineDepth(3).build(NO_ENV::get, NO_PROPS);
    assertEquals(8192, b.chunkBytes());
    assertEquals(Transport.SOCKET, b.transport());
    assertEquals("environment COLIBRI_TRANSPORT", b.source(Option.TRANSPORT));
    assertEquals(3, b.pipelineDepth());
    assertNotEquals(a, b);
    assertEquals(a, a.toBuilder().build(NO_ENV::get, NO_PROPS));
    assertEquals(a.hashCode(), a.toBuilder().build(NO_ENV::get, NO_PROPS).hashCode());
  }

  @Test
  void toStringShowsEveryKnobAndWhereNonDefaultsCameFrom() {
    String s = Options.builder().chunkBytes(8192).build(NO_ENV::get, NO_PROPS).toString();
    for (Option o : Option.values()) {
      assertTrue(s.contains(o.camelName() + "="), s);
    }
    assertTrue(s.contains("chunkBytes=8192 (builder)"), s);
    assertTrue(s.contains("timeout=60000ms,") || s.contains("timeout=60000ms}"), s);
  }

  @Test
  void describeAllListsEveryKnobOnce() {
    String table = Options.describeAll();
    assertTrue(table.startsWith("| Option |"), table);
    for (Option o : Option.values()) {
      assertEquals(1, count(table, "`" + o.environmentVariable() + "`"), o.name());
      assertTrue(table.contains("`" + o.systemProperty() + "`"), o.name());
    }
    assertEquals(Option.values().length + 2, table.split("\n").length);
  }

  @Test
  void typesMatchValues() {
    Options o = Options.resolve(NO_ENV, NO_PROPS);
    for (Option opt : Option.values()) {
      assertTrue(opt.type().isInstance(o.get(opt)), opt.name());
      assertTrue(opt.type().isInstance(opt.defaultValue()), opt.name());
    }
  }

  /** The device knobs: words in any case, numbers in range, "auto" for the LL limit. */
  @Test
  void deviceOptionsFromEveryPlace() {
    Options d = Options.resolve(NO_ENV, NO_PROPS);
    assertEquals("auto", d.get(Option.DEVICE_PATH));
    assertEquals("on", d.get(Option.DEVICE_MEET));
    assertEquals("auto", d.get(Option.DEVICE_P2P));
    assertEquals(50, d.get(Option.STUCK_WARN_PERCENT));
    assertEquals(-1L, d.get(Option.DEVICE_LL_MAX_BYTES));
    assertEquals("COLIBRI_DEVICE_P2P_IN_PLACE", Option.DEVICE_P2P_IN_PLACE.environmentVariable());
    assertEquals("colibri.deviceLLMaxBytes", Option.DEVICE_LL_MAX_BYTES.systemProperty());
    Options o =
        Options.resolve(
            env(
                "COLIBRI_DEVICE_PATH",
                "LL",
                "COLIBRI_DEVICE_LL_MAX_BYTES",
                "65536",
                "COLIBRI_VERBS_GPU_MEMORY",
                "Host"),
            props("colibri.deviceGate", "OFF"));
    assertEquals("ll", o.get(Option.DEVICE_PATH), "words are stored as the library writes them");
    assertEquals(65536L, o.get(Option.DEVICE_LL_MAX_BYTES));
    assertEquals("host", o.get(Option.VERBS_GPU_MEMORY));
    assertEquals("off", o.get(Option.DEVICE_GATE));
    assertEquals("system property colibri.deviceGate", o.source(Option.DEVICE_GATE));
    Options b =
        Options.builder()
            .set(Option.DEVICE_LL_MAX_BYTES, "auto")
            .set(Option.DEVICE_MEET, "OFF")
            .build();
    assertEquals(-1L, b.get(Option.DEVICE_LL_MAX_BYTES));
    assertEquals("auto", Option.DEVICE_LL_MAX_BYTES.format(-1L));
    assertEquals("off", b.get(Option.DEVICE_MEET));
    invalidArgument(
        () -> Options.resolve(env("COLIBRI_DEVICE_PATH", "fast"), NO_PROPS),
        "invalid devicePath from environment COLIBRI_DEVICE_PATH: \"fast\" is not one of them;"
            + " valid values are auto, ll, staged, direct");
    invalidArgument(
        () -> Options.builder().set(Option.DEVICE_LL_MAX_BYTES, "2097152"),
        "valid values are auto (-1), 0..1048576 (0 B..1 MiB)");
    invalidArgument(
        () -> Options.builder().set(Option.DEVICE_LL_MAX_BYTES, "-2"), "is out of range");
    invalidArgument(
        () -> Options.builder().set(Option.STUCK_WARN_PERCENT, "100"), "valid values are 0..99");
    invalidArgument(
        () -> Options.builder().verbsDevice("mlx5_0\nfoo"), "contains a control character");
  }

  private static int count(String s, String sub) {
    int n = 0;
    for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + 1)) {
      n++;
    }
    return n;
  }
}
