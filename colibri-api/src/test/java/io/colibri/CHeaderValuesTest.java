/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Java enums and defaults against the values in src/include/colibri/colibri.h, read from the
 * header itself, so that a change on either side breaks the build.
 */
class CHeaderValuesTest {

  private static final Path HEADER = Paths.get("..", "src", "include", "colibri", "colibri.h");
  private static String header;
  private static final Map<String, Long> ENUMS = new HashMap<>();

  @BeforeAll
  static void readHeader() throws IOException {
    assertTrue(Files.isRegularFile(HEADER), "C header not found at " + HEADER.toAbsolutePath());
    header = Files.readString(HEADER, StandardCharsets.UTF_8);
    // "clbName = 3" inside the typedef enums
    Matcher m = Pattern.compile("\\b(clb[A-Za-z0-9]+)\\s*=\\s*(\\d+)").matcher(header);
    while (m.find()) {
      ENUMS.put(m.group(1), Long.parseLong(m.group(2)));
    }
  }

  private static long enumValue(String name) {
    Long v = ENUMS.get(name);
    assertTrue(v != null, name + " not found in " + HEADER);
    return v;
  }

  private static long define(String name) {
    Matcher m = Pattern.compile("#define\\s+" + name + "\\s+(.+)").matcher(header);
    assertTrue(m.find(), name + " not found in " + HEADER);
    // "(256 * 1024)" or "60000"
    long product = 1;
    for (String factor : m.group(1).replaceAll("[()]", "").split("\\*")) {
      product *= Long.parseLong(factor.strip());
    }
    return product;
  }

  @Test
  void dataTypeCodes() {
    String[] names = {
      "clbInt8",
      "clbUint8",
      "clbInt32",
      "clbUint32",
      "clbInt64",
      "clbUint64",
      "clbFloat16",
      "clbBfloat16",
      "clbFloat32",
      "clbFloat64"
    };
    DataType[] types = DataType.values();
    assertEquals(enumValue("clbNumTypes"), types.length);
    for (int i = 0; i < names.length; i++) {
      assertEquals(enumValue(names[i]), types[i].code(), types[i].name());
      assertEquals(types[i], DataType.fromCode(types[i].code()));
    }
  }

  @Test
  void dataTypeSizes() {
    assertEquals(1, DataType.INT8.size());
    assertEquals(1, DataType.UINT8.size());
    assertEquals(4, DataType.INT32.size());
    assertEquals(4, DataType.UINT32.size());
    assertEquals(8, DataType.INT64.size());
    assertEquals(8, DataType.UINT64.size());
    assertEquals(2, DataType.FLOAT16.size());
    assertEquals(2, DataType.BFLOAT16.size());
    assertEquals(4, DataType.FLOAT32.size());
    assertEquals(8, DataType.FLOAT64.size());
  }

  @Test
  void reduceOpCodes() {
    String[] names = {"clbSum", "clbProd", "clbMin", "clbMax", "clbAvg"};
    assertEquals(enumValue("clbNumOps"), ReduceOp.values().length);
    for (int i = 0; i < names.length; i++) {
      assertEquals(enumValue(names[i]), ReduceOp.values()[i].code(), names[i]);
    }
  }

  @Test
  void algorithmTransportLogLevelCodes() {
    String[] algos = {"clbAlgoAuto", "clbAlgoRing", "clbAlgoDirect", "clbAlgoNone"};
    assertEquals(enumValue("clbNumAlgos"), Algorithm.values().length);
    for (int i = 0; i < algos.length; i++) {
      assertEquals(enumValue(algos[i]), Algorithm.values()[i].code(), algos[i]);
    }
    String[] transports = {
      "clbTransportAuto", "clbTransportShm", "clbTransportSocket", "clbTransportVerbs"
    };
    assertEquals(enumValue("clbNumTransports"), Transport.values().length);
    for (int i = 0; i < transports.length; i++) {
      assertEquals(enumValue(transports[i]), Transport.values()[i].code(), transports[i]);
    }
    String[] checks = {"clbVersionCheckWarn", "clbVersionCheckStrict", "clbVersionCheckExact"};
    assertEquals(enumValue("clbNumVersionChecks"), VersionCheck.values().length);
    for (int i = 0; i < checks.length; i++) {
      assertEquals(enumValue(checks[i]), VersionCheck.values()[i].code(), checks[i]);
    }
    String[] levels = {"clbLogOff", "clbLogError", "clbLogWarn", "clbLogInfo", "clbLogDebug"};
    for (int i = 0; i < levels.length; i++) {
      assertEquals(enumValue(levels[i]), LogLevel.values()[i].code(), levels[i]);
    }
  }

  @Test
  void errorCodes() {
    String[] names = {
      "clbInvalidArgument",
      "clbInvalidUsage",
      "clbSystemError",
      "clbInternalError",
      "clbRemoteError",
      "clbTimeout",
      "clbAborted",
      "clbAuthError",
      "clbUnsupported",
      "clbOutOfMemory"
    };
    assertEquals(enumValue("clbNumResults") - 1, ErrorCode.values().length);
    for (int i = 0; i < names.length; i++) {
      ErrorCode e = ErrorCode.values()[i];
      assertEquals(enumValue(names[i]), e.code(), names[i]);
      assertEquals(e, ErrorCode.fromCode((int) enumValue(names[i])));
    }
  }

  @Test
  void defaultsAndIdSize() {
    assertEquals(define("CLB_DEFAULT_PIPELINE_DEPTH"), (int) Option.PIPELINE_DEPTH.defaultValue());
    assertEquals(define("CLB_DEFAULT_CHUNK_BYTES"), (long) Option.CHUNK_BYTES.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_DIRECT_MAX_BYTES"), (long) Option.DIRECT_MAX_BYTES.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_STAGING_CAP_BYTES"), (long) Option.STAGING_CAP_BYTES.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_TIMEOUT_MS"),
        ((java.time.Duration) Option.TIMEOUT.defaultValue()).toMillis());
    assertEquals(define("CLB_UNIQUE_ID_BYTES"), UniqueId.BYTES);
    assertEquals(define("CLB_DEFAULT_VERBS_PORT"), (int) Option.VERBS_PORT.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_VERBS_GID_INDEX"), (int) Option.VERBS_GID_INDEX.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_VERBS_TRAFFIC_CLASS"), (int) Option.VERBS_TRAFFIC_CLASS.defaultValue());
    assertEquals(define("CLB_DEFAULT_VERBS_TIMEOUT"), (int) Option.VERBS_TIMEOUT.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_VERBS_RETRY_COUNT"), (int) Option.VERBS_RETRY_COUNT.defaultValue());
    assertEquals(
        define("CLB_DEFAULT_VERBS_QPS_PER_CONNECTION"),
        (int) Option.VERBS_QPS_PER_CONNECTION.defaultValue());
    // verbsDevice: a char array of CLB_VERBS_DEVICE_BYTES, its NUL included.
    assertTrue(
        Option.VERBS_DEVICE
            .validValues()
            .contains("0.." + (define("CLB_VERBS_DEVICE_BYTES") - 1) + " bytes"),
        Option.VERBS_DEVICE.validValues());
    // "#define CLB_DEFAULT_VERSION_CHECK clbVersionCheckStrict"
    Matcher m =
        Pattern.compile("#define\\s+CLB_DEFAULT_VERSION_CHECK\\s+(clb\\w+)").matcher(header);
    assertTrue(m.find(), "CLB_DEFAULT_VERSION_CHECK not found in " + HEADER);
    assertEquals(
        enumValue(m.group(1)), ((VersionCheck) Option.VERSION_CHECK.defaultValue()).code());
  }

  @Test
  void everyConfigFieldHasItsEnvironmentVariable() {
    for (Option o : Option.values()) {
      assertTrue(
          header.contains(o.environmentVariable()),
          o.environmentVariable() + " is not documented in clbConfig_t");
    }
  }
}
