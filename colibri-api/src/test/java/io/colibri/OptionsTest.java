/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
    assertEquals(4, o.pipelineDepth());                  // CLB_DEFAULT_PIPELINE_DEPTH
    assertEquals(256 * 1024, o.chunkBytes());            // CLB_DEFAULT_CHUNK_BYTES
    assertEquals(64 * 1024, o.directMaxBytes());         // CLB_DEFAULT_DIRECT_MAX_BYTES
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
    Map<String, String> env = env("COLIBRI_CHUNK_BYTES", "8192", "COLIBRI_PIPELINE_DEPTH", "8",
        "COLIBRI_TRANSPORT", "socket", "COLIBRI_TIMEOUT_MS", "1500");
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
    Options o = Options.builder().build(env("COLIBRI_TRANSPORT", "")::get,
        props("colibri.transport", "", "colibri.algorithm", ""));
    assertEquals(Transport.AUTO, o.transport());
    assertEquals(Algorithm.AUTO, o.algorithm());
  }

  @Test
  void versionCheckFromEveryPlace() {
    assertEquals("colibri.versionCheck", Option.VERSION_CHECK.systemProperty());
    assertEquals("COLIBRI_VERSION_CHECK", Option.VERSION_CHECK.environmentVariable());
    assertEquals(VersionCheck.EXACT,
        Options.resolve(env("COLIBRI_VERSION_CHECK", "EXACT"), NO_PROPS).versionCheck());
    Options o = Options.resolve(env("COLIBRI_VERSION_CHECK", "exact"),
        props("colibri.versionCheck", "warn"));
    assertEquals(VersionCheck.WARN, o.versionCheck());
    assertEquals("system property colibri.versionCheck", o.source(Option.VERSION_CHECK));
    assertEquals(VersionCheck.STRICT, Options.builder().versionCheck(VersionCheck.STRICT)
        .build(env("COLIBRI_VERSION_CHECK", "warn")::get, NO_PROPS).versionCheck());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_VERSION_CHECK", "lenient"), NO_PROPS));
    assertTrue(e.getMessage().contains("strict, exact, warn")
        && e.getMessage().contains("environment COLIBRI_VERSION_CHECK"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Options.builder().versionCheck(null));
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
    Option[] verbs = {Option.VERBS_DEVICE, Option.VERBS_PORT, Option.VERBS_GID_INDEX,
        Option.VERBS_TRAFFIC_CLASS, Option.VERBS_TIMEOUT, Option.VERBS_RETRY_COUNT,
        Option.VERBS_QPS_PER_CONNECTION};
    String[] names = {"verbsDevice", "verbsPort", "verbsGidIndex", "verbsTrafficClass",
        "verbsTimeout", "verbsRetryCount", "verbsQpsPerConnection"};
    String[] envs = {"COLIBRI_VERBS_DEVICE", "COLIBRI_VERBS_PORT", "COLIBRI_VERBS_GID_INDEX",
        "COLIBRI_VERBS_TRAFFIC_CLASS", "COLIBRI_VERBS_TIMEOUT", "COLIBRI_VERBS_RETRY_COUNT",
        "COLIBRI_VERBS_QPS_PER_CONNECTION"};
    for (int i = 0; i < verbs.length; i++) {
      assertEquals(names[i], verbs[i].camelName());
      assertEquals("colibri." + names[i], verbs[i].systemProperty());
      assertEquals(envs[i], verbs[i].environmentVariable());
    }
    assertEquals(String.class, Option.VERBS_DEVICE.type());
    assertEquals(Integer.class, Option.VERBS_TRAFFIC_CLASS.type());
    assertEquals(Integer.class, Option.VERBS_QPS_PER_CONNECTION.type());

    Options e = Options.resolve(env("COLIBRI_VERBS_DEVICE", "mlx5_1", "COLIBRI_VERBS_PORT", "2",
        "COLIBRI_VERBS_GID_INDEX", "3", "COLIBRI_VERBS_TRAFFIC_CLASS", "106",
        "COLIBRI_VERBS_TIMEOUT", "18", "COLIBRI_VERBS_RETRY_COUNT", "5",
        "COLIBRI_VERBS_QPS_PER_CONNECTION", "4"), NO_PROPS);
    assertEquals("mlx5_1", e.verbsDevice());
    assertEquals(2, e.verbsPort());
    assertEquals(3, e.verbsGidIndex());
    assertEquals(106, e.verbsTrafficClass());
    assertEquals(18, e.verbsTimeout());
    assertEquals(5, e.verbsRetryCount());
    assertEquals(4, e.verbsQpsPerConnection());
    assertEquals("environment COLIBRI_VERBS_QPS_PER_CONNECTION",
        e.source(Option.VERBS_QPS_PER_CONNECTION));
    assertEquals("environment COLIBRI_VERBS_TRAFFIC_CLASS", e.source(Option.VERBS_TRAFFIC_CLASS));

    Options p = Options.resolve(env("COLIBRI_VERBS_DEVICE", "mlx5_1", "COLIBRI_VERBS_TIMEOUT", "18"),
        props("colibri.verbsDevice", "mlx5_2", "colibri.verbsTimeout", "20",
            "colibri.verbsTrafficClass", "184", "colibri.verbsQpsPerConnection", "2"));
    assertEquals("mlx5_2", p.verbsDevice());
    assertEquals("system property colibri.verbsDevice", p.source(Option.VERBS_DEVICE));
    assertEquals(20, p.verbsTimeout());
    assertEquals(184, p.verbsTrafficClass());
    assertEquals(2, p.verbsQpsPerConnection());
    assertEquals("system property colibri.verbsQpsPerConnection",
        p.source(Option.VERBS_QPS_PER_CONNECTION));

    Options b = Options.builder().verbsDevice("mlx5_4").verbsPort(255).verbsGidIndex(255)
        .verbsTrafficClass(255).verbsTimeout(31).verbsRetryCount(0).verbsQpsPerConnection(8)
        .build(env("COLIBRI_VERBS_DEVICE", "mlx5_1", "COLIBRI_VERBS_RETRY_COUNT", "6",
            "COLIBRI_VERBS_QPS_PER_CONNECTION", "3")::get,
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
    Options.builder().verbsPort(1).verbsGidIndex(-1).verbsTrafficClass(0).verbsTimeout(0)
        .verbsRetryCount(7).verbsQpsPerConnection(1).verbsQpsPerConnection(8)
        .verbsDevice("x".repeat(63));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsPort(0));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsPort(256));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsGidIndex(-2));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsGidIndex(65536));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsTrafficClass(-1));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsTrafficClass(256));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsTimeout(32));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsRetryCount(8));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsQpsPerConnection(0));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsQpsPerConnection(9));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().verbsDevice(null));
    IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().verbsDevice("x".repeat(64)));
    assertTrue(tooLong.getMessage().contains("verbsDevice from builder")
        && tooLong.getMessage().contains("is 64 bytes long")
        && tooLong.getMessage().contains("0..63 bytes"), tooLong.getMessage());
    // UTF-8 bytes count, not characters: 32 two-byte characters are 64 bytes.
    assertThrows(IllegalArgumentException.class,
        () -> Options.builder().verbsDevice("\u00e9".repeat(32)));

    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_VERBS_TIMEOUT", "32"), NO_PROPS));
    String m = e.getMessage();
    assertTrue(m.contains("verbsTimeout") && m.contains("environment COLIBRI_VERBS_TIMEOUT")
        && m.contains("\"32\" is out of range") && m.contains("0..31")
        && m.contains("default 14"), m);
    IllegalArgumentException tc = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(NO_ENV, props("colibri.verbsTrafficClass", "0x20")));
    assertTrue(tc.getMessage().contains("system property colibri.verbsTrafficClass")
        && tc.getMessage().contains("is not a whole number")
        && tc.getMessage().contains("0..255"), tc.getMessage());
    IllegalArgumentException rc = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_VERBS_RETRY_COUNT", "8"), NO_PROPS));
    assertTrue(rc.getMessage().contains("environment COLIBRI_VERBS_RETRY_COUNT")
        && rc.getMessage().contains("0..7"), rc.getMessage());
    IllegalArgumentException qps = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_VERBS_QPS_PER_CONNECTION", "9"), NO_PROPS));
    assertTrue(qps.getMessage().contains("environment COLIBRI_VERBS_QPS_PER_CONNECTION")
        && qps.getMessage().contains("1..8") && qps.getMessage().contains("default 1"),
        qps.getMessage());
    IllegalArgumentException dev = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_VERBS_DEVICE", "m".repeat(64)), NO_PROPS));
    assertTrue(dev.getMessage().contains("environment COLIBRI_VERBS_DEVICE")
        && dev.getMessage().contains("is 64 bytes long"), dev.getMessage());
    assertEquals("mlx5_0", Options.builder().set(Option.VERBS_DEVICE, "mlx5_0")
        .build(NO_ENV::get, NO_PROPS).verbsDevice());
  }

  @Test
  void enumNamesAreCaseInsensitiveLikeTheNativeLibrary() {
    Options o = Options.resolve(env("COLIBRI_TRANSPORT", "SHM", "COLIBRI_ALGORITHM", "Ring",
        "COLIBRI_LOG_LEVEL", "debug"), NO_PROPS);
    assertEquals(Transport.SHM, o.transport());
    assertEquals(Algorithm.RING, o.algorithm());
    assertEquals(LogLevel.DEBUG, o.logLevel());
  }

  @Test
  void spacesAreRefusedLikeTheNativeLibrary() {
    // clbConfigInit refuses " shm " and "  ": Java gives the same answer for the same text.
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_TRANSPORT", " shm "), NO_PROPS));
    assertTrue(e.getMessage().contains("\" shm \" is not a transport"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_PIPELINE_DEPTH", " 4"), NO_PROPS));
  }

  @Test
  void invalidEnvironmentValueNamesKnobSourceValueAndRange() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_CHUNK_BYTES", "100"), NO_PROPS));
    String m = e.getMessage();
    assertTrue(m.contains("chunkBytes"), m);
    assertTrue(m.contains("environment COLIBRI_CHUNK_BYTES"), m);
    assertTrue(m.contains("\"100\""), m);
    assertTrue(m.contains("4096..67108864"), m);
    assertTrue(m.contains("64 MiB"), m);
  }

  @Test
  void invalidSystemPropertyNamesIt() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(NO_ENV, props("colibri.transport", "rdma")));
    String m = e.getMessage();
    assertTrue(m.contains("transport"), m);
    assertTrue(m.contains("system property colibri.transport"), m);
    assertTrue(m.contains("\"rdma\""), m);
    assertTrue(m.contains("auto, shm, socket"), m);
  }

  @Test
  void systemPropertyIsCheckedEvenWhenEnvironmentIsValid() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_PIPELINE_DEPTH", "2"),
            props("colibri.pipelineDepth", "two")));
    assertTrue(e.getMessage().contains("is not a whole number"), e.getMessage());
    assertTrue(e.getMessage().contains("system property colibri.pipelineDepth"), e.getMessage());
  }

  @Test
  void invalidEnvironmentIsIgnoredWhenTheBuilderSetsTheKnob() {
    Options o = Options.builder().pipelineDepth(2)
        .build(env("COLIBRI_PIPELINE_DEPTH", "garbage")::get, NO_PROPS);
    assertEquals(2, o.pipelineDepth());
  }

  @Test
  void invalidBuilderValueFailsAtOnce() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().pipelineDepth(65));
    String m = e.getMessage();
    assertTrue(m.contains("pipelineDepth from builder"), m);
    assertTrue(m.contains("65"), m);
    assertTrue(m.contains("1..64"), m);
    assertTrue(m.contains("default 4"), m);
  }

  @Test
  void rangesAreInclusive() {
    Options.builder().pipelineDepth(1).pipelineDepth(64)
        .chunkBytes(4096).chunkBytes(64L << 20)
        .directMaxBytes(0).directMaxBytes(1L << 30)
        .stagingCapBytes(64L << 10).stagingCapBytes(1L << 40)
        .timeout(Duration.ofMillis(1)).timeout(Duration.ofHours(24));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().pipelineDepth(0));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().chunkBytes(4095));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().chunkBytes((64L << 20) + 1));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().directMaxBytes(-1));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().directMaxBytes((1L << 30) + 1));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().stagingCapBytes((64L << 10) - 1));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().stagingCapBytes((1L << 40) + 1));
    assertThrows(IllegalArgumentException.class, () -> Options.builder().timeout(Duration.ZERO));
    assertThrows(IllegalArgumentException.class,
        () -> Options.builder().timeout(Duration.ofHours(24).plusMillis(1)));
  }

  @Test
  void timeoutMustBeWholeMilliseconds() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().timeout(Duration.ofMillis(5).plusNanos(1)));
    assertTrue(e.getMessage().contains("whole number of milliseconds"), e.getMessage());
    IllegalArgumentException neg = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().timeout(Duration.ofSeconds(-1)));
    assertTrue(neg.getMessage().contains("out of range"), neg.getMessage());
    IllegalArgumentException huge = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_TIMEOUT_MS", "99999999999999"), NO_PROPS));
    assertTrue(huge.getMessage().contains("environment COLIBRI_TIMEOUT_MS"), huge.getMessage());
    assertTrue(huge.getMessage().contains("86400000"), huge.getMessage());
  }

  @Test
  void intOverflowInTextIsOutOfRangeNotWrapped() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_PIPELINE_DEPTH", "4294967300"), NO_PROPS));
    assertTrue(e.getMessage().contains("\"4294967300\" is out of range"), e.getMessage());
  }

  @Test
  void noneCannotBeForced() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().algorithm(Algorithm.NONE));
    assertTrue(e.getMessage().contains("cannot be forced"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> Options.resolve(env("COLIBRI_ALGORITHM", "none"), NO_PROPS));
  }

  @Test
  void nullBuilderValueSaysWhatToPass() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().transport(null));
    assertTrue(e.getMessage().contains("transport from builder is null"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Options.builder().timeout(null));
  }

  @Test
  void setFromTextParsesLikeSystemProperty() {
    Options o = Options.builder().set(Option.TIMEOUT, "250").set(Option.TRANSPORT, "shm")
        .build(NO_ENV::get, NO_PROPS);
    assertEquals(Duration.ofMillis(250), o.timeout());
    assertEquals(Transport.SHM, o.transport());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Options.builder().set(Option.CHUNK_BYTES, "1M"));
    assertTrue(e.getMessage().contains("chunkBytes from builder: \"1M\" is not a whole number"),
        e.getMessage());
  }

  @Test
  void clearFallsBackToTheNextSource() {
    Options.Builder b = Options.builder().pipelineDepth(2);
    b.clear(Option.PIPELINE_DEPTH);
    assertEquals(8, b.build(env("COLIBRI_PIPELINE_DEPTH", "8")::get, NO_PROPS).pipelineDepth());
  }

  @Test
  void toBuilderKeepsValuesAndSources() {
    Options a = Options.builder().chunkBytes(8192)
        .build(env("COLIBRI_TRANSPORT", "socket")::get, NO_PROPS);
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

  private static int count(String s, String sub) {
    int n = 0;
    for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + 1)) {
      n++;
    }
    return n;
  }
}
