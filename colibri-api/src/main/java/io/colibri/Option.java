/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;

/**
 * Every knob of a communicator, listed once: its name, system property, environment variable,
 * type, default, valid range and meaning. Matches {@code clbConfig_t} and the defaults in
 * {@code colibri.h}. {@link Options} holds the values; {@link Options#describeAll()} renders this
 * table for the documentation.
 *
 * <p>A knob's value comes from, in order of precedence: the {@link Options.Builder}, the system
 * property {@code colibri.<name>}, the environment variable {@code COLIBRI_<NAME>}, the default.
 */
public enum Option {
  /** {@code clbConfig_t.transport}: the {@link Transport} between ranks; default auto. */
  TRANSPORT(
      "transport",
      "TRANSPORT",
      Kind.TRANSPORT,
      Transport.AUTO,
      0,
      0,
      "Transport between ranks: `shm` (one host), `socket` (TCP, any hosts), `verbs` (RDMA"
          + " through the verbs network plugin of the colibri-verbs jar, which loads libibverbs at"
          + " run time; ring algorithm only; tuned by the `verbs*` options below), or `auto` (shm"
          + " between ranks on one host, socket otherwise; never verbs)."),
  /** {@code clbConfig_t.algorithm}: the {@link Algorithm} forced for every call; default auto. */
  ALGORITHM(
      "algorithm",
      "ALGORITHM",
      Kind.ALGORITHM,
      Algorithm.AUTO,
      0,
      0,
      "Algorithm forced for every collective: `ring`, `direct`, or `auto` (picked by message size"
          + " and topology)."),
  /** {@code clbConfig_t.logLevel}: how much the core logs ({@link LogLevel}); default warn. */
  LOG_LEVEL(
      "logLevel",
      "LOG_LEVEL",
      Kind.LOG_LEVEL,
      LogLevel.WARN,
      0,
      0,
      "How much the native core logs (warnings and errors unless this asks for more). Under Java"
          + " the lines go to logger `io.colibri`, whose level caps it; on stderr it is the"
          + " threshold (\"Logging\" above)."),
  /** {@code clbConfig_t.pipelineDepth}: ring chunks in flight per link, 1..64; default 4. */
  PIPELINE_DEPTH(
      "pipelineDepth",
      "PIPELINE_DEPTH",
      Kind.INT,
      4,
      1,
      64,
      "Chunks in flight per link in the ring algorithm."),
  /** {@code clbConfig_t.chunkBytes}: ring chunk size in bytes, 4 KiB..64 MiB; default 256 KiB. */
  CHUNK_BYTES(
      "chunkBytes",
      "CHUNK_BYTES",
      Kind.BYTES,
      256L * 1024,
      4096,
      64L * 1024 * 1024,
      "Size of one ring chunk in bytes."),
  /**
   * {@code clbConfig_t.directMaxBytes}: largest message in bytes that auto sends on the direct
   * path, 0..1 GiB (0: never); default 64 KiB.
   */
  DIRECT_MAX_BYTES(
      "directMaxBytes",
      "DIRECT_MAX_BYTES",
      Kind.BYTES,
      64L * 1024,
      0,
      1024L * 1024 * 1024,
      "Largest message in bytes that `auto` sends on the direct path (allGather and reduceScatter:"
          + " the whole nranks x count buffer); 0: never direct."),
  /**
   * {@code clbConfig_t.stagingCapBytes}: cap on one rank's staging memory in bytes, 64 KiB..1 TiB;
   * default 64 MiB.
   */
  STAGING_CAP_BYTES(
      "stagingCapBytes",
      "STAGING_CAP_BYTES",
      Kind.BYTES,
      64L * 1024 * 1024,
      64L * 1024,
      1024L * 1024 * 1024 * 1024,
      "Cap on the staging memory one rank may hold; a collective that needs more fails with"
          + " OUT_OF_MEMORY."),
  /**
   * {@code clbConfig_t.timeoutMs}: how long a peer may stay silent before the call fails with
   * TIMEOUT, 1 ms..24 h; default 60 s.
   */
  TIMEOUT(
      "timeout",
      "TIMEOUT_MS",
      Kind.MILLIS,
      Duration.ofSeconds(60),
      1,
      24L * 3600 * 1000,
      "A peer silent this long makes the call fail with TIMEOUT. System property and environment"
          + " variable are in milliseconds."),
  /**
   * {@code clbConfig_t.versionCheck}: what init does when ranks run different versions
   * ({@link VersionCheck}); default strict.
   */
  VERSION_CHECK(
      "versionCheck",
      "VERSION_CHECK",
      Kind.VERSION_CHECK,
      VersionCheck.STRICT,
      0,
      0,
      "What init does when ranks run different versions (exchanged at bootstrap): `strict` fails"
          + " on a different Colibri version and warns about a different NVIDIA driver or NIC"
          + " firmware; `exact` fails on any of the three; `warn` only warns. The strictest setting"
          + " of any rank applies."),
  /** {@code clbConfig_t.verbsPort}: the port of the RDMA device, 1..255; default 1. */
  VERBS_PORT(
      "verbsPort", "VERBS_PORT", Kind.INT, 1, 1, 255, "Transport `verbs`: the port of the device."),
  /**
   * {@code clbConfig_t.verbsGidIndex}: the GID index, -1..255; -1 (default): the RoCE v2 GID on
   * Ethernet, 0 on InfiniBand.
   */
  VERBS_GID_INDEX(
      "verbsGidIndex",
      "VERBS_GID_INDEX",
      Kind.INT,
      -1,
      -1,
      255,
      "Transport `verbs`: the GID index (`show_gids` lists them); -1: the RoCE v2 GID on Ethernet"
          + " (IPv4-mapped first), 0 on InfiniBand."),
  /** {@code clbConfig_t.verbsTrafficClass}: the GRH traffic class, 0..255; default 0. */
  VERBS_TRAFFIC_CLASS(
      "verbsTrafficClass",
      "VERBS_TRAFFIC_CLASS",
      Kind.INT,
      0,
      0,
      255,
      "Transport `verbs`: the traffic class of the GRH (RoCE, global routes), e.g. the DSCP of a"
          + " lossless queue shifted left by 2 (DSCP 26: 104)."),
  /**
   * {@code clbConfig_t.verbsTimeout}: the local ACK timeout exponent (4.096 us x 2^value), 0..31;
   * default 14.
   */
  VERBS_TIMEOUT(
      "verbsTimeout",
      "VERBS_TIMEOUT",
      Kind.INT,
      14,
      0,
      31,
      "Transport `verbs`: the local ACK timeout exponent of the queue pairs, 4.096 us x 2^value"
          + " (14: 67 ms; 0: wait forever) before a retransmission."),
  /** {@code clbConfig_t.verbsRetryCount}: retransmissions after an ACK timeout, 0..7; default 7. */
  VERBS_RETRY_COUNT(
      "verbsRetryCount",
      "VERBS_RETRY_COUNT",
      Kind.INT,
      7,
      0,
      7,
      "Transport `verbs`: how many times in a row a queue pair retransmits after an ACK timeout"
          + " before the call fails (retry exceeded)."),
  /** {@code clbConfig_t.verbsDevice}: the RDMA device of verbs; "" (default): the first device. */
  VERBS_DEVICE(
      "verbsDevice",
      "VERBS_DEVICE",
      Kind.STRING,
      "",
      0,
      63,
      "Transport `verbs`: the RDMA device, as `ibv_devices` names it (e.g. `mlx5_0`); empty: the"
          + " first device."),
  /**
   * {@code clbConfig_t.verbsQpsPerConnection}: RC queue pairs per link that messages are striped
   * over, 1..8; default 1.
   */
  VERBS_QPS_PER_CONNECTION(
      "verbsQpsPerConnection",
      "VERBS_QPS_PER_CONNECTION",
      Kind.INT,
      1,
      1,
      8,
      "Transport `verbs`: messages are striped over this many RC queue pairs per link, e.g. to"
          + " spread a link over several paths of a RoCE fabric (ECMP) or ports. Both ends must use"
          + " the same count."),
  /** {@code clbConfig_t.devicePath}: the device path a collective on GPU buffers takes. */
  DEVICE_PATH(
      "devicePath",
      "DEVICE_PATH",
      "auto",
      "Device buffers: the path of every collective (docs/device.md): `ll` (flag-carrying lines,"
          + " small messages), `staged` (through the shared buffers), `direct` (the peers' buffers"
          + " read in place), or `auto` (by size and placement).",
      "auto",
      "ll",
      "staged",
      "direct"),
  /** {@code clbConfig_t.deviceLaunch}: how a rank puts its kernels on its stream. */
  DEVICE_LAUNCH(
      "deviceLaunch",
      "DEVICE_LAUNCH",
      "auto",
      "Device buffers: `graph` launches an eager call's kernel by replaying a prepared one-kernel"
          + " CUDA graph (about half the calling thread's cost of a launch), `kernel` launches it"
          + " ordinarily, `auto` replays where the rank is alone in its process.",
      "auto",
      "graph",
      "kernel"),
  /** {@code clbConfig_t.deviceGate}: whether wide kernels first wait for every rank. */
  DEVICE_GATE(
      "deviceGate",
      "DEVICE_GATE",
      "auto",
      "Device buffers: `on` makes a call whose kernel takes more than 2 blocks first run a one-warp"
          + " gate that waits until every rank is in the call, so that ranks sharing a GPU cannot"
          + " hold its SMs against each other (docs/device.md); `auto` gates where a rank of"
          + " another process shares the GPU; `off` never does (for measurements).",
      "auto",
      "on",
      "off"),
  /** {@code clbConfig_t.deviceMeet}: whether ranks sharing a GPU in one process meet to launch. */
  DEVICE_MEET(
      "deviceMeet",
      "DEVICE_MEET",
      "on",
      "Device buffers: `off` lets ranks that share a GPU in one process launch without meeting on"
          + " the host first: a little faster in eager mode but open to the deadlock docs/device.md"
          + " describes (their captured calls may then be replayed with a plain cudaGraphLaunch).",
      "on",
      "off"),
  /** {@code clbConfig_t.deviceP2P}: whether GPUs' memory is reached directly (peer access). */
  DEVICE_P2P(
      "deviceP2P",
      "DEVICE_P2P",
      "auto",
      "Device buffers: `off` puts every rank's shared buffers in host memory, as between GPUs"
          + " without peer access, and sends point-to-point messages between rank processes"
          + " through host memory. Any rank's `off` applies to all; set it alike on both ranks of"
          + " a point-to-point pair.",
      "auto",
      "off"),
  /** {@code clbConfig_t.deviceP2PInPlace}: whether large messages between rank threads move in place. */
  DEVICE_P2P_IN_PLACE(
      "deviceP2PInPlace",
      "DEVICE_P2P_IN_PLACE",
      "on",
      "Device buffers: `off` moves every point-to-point message between rank threads on one GPU"
          + " in LL lines, none read in place.",
      "on",
      "off"),
  /** {@code clbConfig_t.deviceCheckCalls}: 1 compares every device call across ranks. */
  DEVICE_CHECK_CALLS(
      "deviceCheckCalls",
      "DEVICE_CHECK_CALLS",
      Kind.INT,
      0,
      0,
      1,
      "Device buffers: 1 compares every device call across ranks and names a mismatch (for"
          + " debugging; it costs an exchange per call)."),
  /** {@code clbConfig_t.stuckWarnPercent}: the share of the timeout after which a wait warns. */
  STUCK_WARN_PERCENT(
      "stuckWarnPercent",
      "STUCK_WARN_PERCENT",
      Kind.INT,
      50,
      0,
      99,
      "A device wait, or a wait for the ranks sharing the GPU, that lasts this share of the"
          + " timeout is logged as a WARN naming the call and the ranks not there yet; 0: never."),
  /** {@code clbConfig_t.verbsGpuMemory}: how device buffers between hosts reach the NIC. */
  VERBS_GPU_MEMORY(
      "verbsGpuMemory",
      "VERBS_GPU_MEMORY",
      "auto",
      "Transport `verbs`, device buffers: how the NIC reaches GPU memory (docs/multinode.md):"
          + " `dmabuf`, `peermem` (nvidia-peermem), `host` (staged through pinned host memory), or"
          + " `auto` (dma-buf, then peermem, else host with a warning). A forced mode that cannot"
          + " work fails the first device call over verbs.",
      "auto",
      "dmabuf",
      "peermem",
      "host"),
  /** {@code clbConfig_t.deviceLLMaxBytes}: the largest message per destination on the LL path. */
  DEVICE_LL_MAX_BYTES(
      "deviceLLMaxBytes",
      "DEVICE_LL_MAX_BYTES",
      Kind.BYTES_OR_AUTO,
      -1L,
      0,
      1024L * 1024,
      "Device buffers: the largest message in bytes per destination that takes the LL path (its"
          + " buffer is 4 x ranks times this); `auto` (-1): 256 KiB, less with more than 6 ranks"
          + " so that the buffer stays within 6 MiB."),
  /** {@code clbConfig_t.deviceDirectMinBytes}: the smallest message of the direct paths. */
  DEVICE_DIRECT_MIN_BYTES(
      "deviceDirectMinBytes",
      "DEVICE_DIRECT_MIN_BYTES",
      Kind.BYTES,
      0L,
      0,
      Long.MAX_VALUE,
      "Device buffers: the smallest message in bytes that takes the direct and zero-copy paths;"
          + " 0: where docs/performance.md measured them faster.");

  /** How a knob's text is read and its value checked. */
  enum Kind {
    TRANSPORT,
    ALGORITHM,
    LOG_LEVEL,
    VERSION_CHECK,
    INT,
    BYTES,
    MILLIS,
    /** Text of min..max bytes in UTF-8 (a fixed-size char array in clbConfig_t). */
    STRING,
    /** One of a few words (a String, lower case), an int code in clbConfig_t. */
    WORDS,
    /** Bytes in min..max, or -1 written "auto". */
    BYTES_OR_AUTO
  }

  private final String camelName;
  private final String systemProperty;
  private final String environmentVariable;
  private final Kind kind;
  private final Object defaultValue;
  private final long min;
  private final long max;
  private final String description;
  private final String[] words;

  Option(
      String camelName, String envSuffix, String defaultWord, String description, String... words) {
    this(camelName, envSuffix, Kind.WORDS, defaultWord, 0, words.length - 1, description, words);
  }

  Option(
      String camelName,
      String envSuffix,
      Kind kind,
      Object defaultValue,
      long min,
      long max,
      String description) {
    this(camelName, envSuffix, kind, defaultValue, min, max, description, new String[0]);
  }

  Option(
      String camelName,
      String envSuffix,
      Kind kind,
      Object defaultValue,
      long min,
      long max,
      String description,
      String[] words) {
    this.camelName = camelName;
    this.systemProperty = "colibri." + (kind == Kind.MILLIS ? camelName + "Ms" : camelName);
    this.environmentVariable = "COLIBRI_" + envSuffix;
    this.kind = kind;
    this.defaultValue = defaultValue;
    this.min = min;
    this.max = max;
    this.description = description;
    this.words = words;
  }

  /**
   * {@return the name of the {@code clbConfig_t} field it sets, which {@code clbConfigSet} takes:
   * the camel name, "timeoutMs" for the timeout}
   */
  public String nativeName() {
    return kind == Kind.MILLIS ? camelName + "Ms" : camelName;
  }

  /**
   * {@return the knob's name, as in the builder method and {@code clbConfig_t}
   * (e.g. "chunkBytes")}
   */
  public String camelName() {
    return camelName;
  }

  /**
   * {@return the system property that sets it (e.g. "colibri.chunkBytes"; "colibri.timeoutMs" for
   * the timeout)}
   */
  public String systemProperty() {
    return systemProperty;
  }

  /** {@return the environment variable that sets it (e.g. "COLIBRI_CHUNK_BYTES")} */
  public String environmentVariable() {
    return environmentVariable;
  }

  /**
   * {@return the Java type of its value: {@link Transport}, {@link Algorithm}, {@link LogLevel},
   * {@link VersionCheck}, {@link Integer}, {@link Long} (bytes), {@link Duration} or
   * {@link String}}
   */
  public Class<?> type() {
    switch (kind) {
      case TRANSPORT:
        return Transport.class;
      case ALGORITHM:
        return Algorithm.class;
      case LOG_LEVEL:
        return LogLevel.class;
      case VERSION_CHECK:
        return VersionCheck.class;
      case INT:
        return Integer.class;
      case BYTES:
        return Long.class;
      case STRING:
      case WORDS:
        return String.class;
      case BYTES_OR_AUTO:
        return Long.class;
      default:
        return Duration.class;
    }
  }

  /** {@return the value when nothing sets it, of type {@link #type()}} */
  public Object defaultValue() {
    return defaultValue;
  }

  /** {@return the values it accepts, in words (e.g. "4096..67108864 (4 KiB..64 MiB)")} */
  public String validValues() {
    switch (kind) {
      case TRANSPORT:
        return java.util.Arrays.stream(Transport.values())
            .map(Transport::configName)
            .collect(java.util.stream.Collectors.joining(", "));
      case ALGORITHM:
        return "auto, ring, direct";
      case LOG_LEVEL:
        return "off, error, warn, info, debug";
      case VERSION_CHECK:
        return "strict, exact, warn";
      case INT:
        return min + ".." + max;
      case BYTES:
        return min + ".." + max + " (" + bytesText(min) + ".." + bytesText(max) + ")";
      case STRING:
        return "text of " + min + ".." + max + " bytes (UTF-8)";
      case WORDS:
        return String.join(", ", words);
      case BYTES_OR_AUTO:
        return "auto (-1), "
            + min
            + ".."
            + max
            + " ("
            + bytesText(min)
            + ".."
            + bytesText(max)
            + ")";
      default:
        return min + ".." + max + " ms (" + millisText(min) + ".." + millisText(max) + ")";
    }
  }

  /** The type in words, for documentation: "int", "long (bytes)", "Duration (ms)", an enum name. */
  String typeText() {
    switch (kind) {
      case INT:
        return "int";
      case BYTES:
      case BYTES_OR_AUTO:
        return "long (bytes)";
      case MILLIS:
        return "Duration (ms)";
      case STRING:
      case WORDS:
        return "String";
      default:
        return type().getSimpleName();
    }
  }

  /** {@return what the knob does, in markdown, as in the table of {@link Options#describeAll()}} */
  public String description() {
    return description;
  }

  Kind kind() {
    return kind;
  }

  /**
   * The text form of a value, as the system property, the environment variable and the native
   * {@code clbConfigSet} take it.
   *
   * @param value a value of {@link #type()}
   * @return its text (a word, a number, "auto" for -1 of {@link #DEVICE_LL_MAX_BYTES})
   */
  public String format(Object value) {
    switch (kind) {
      case TRANSPORT:
        return ((Transport) value).configName();
      case ALGORITHM:
        return ((Algorithm) value).configName();
      case LOG_LEVEL:
        return ((LogLevel) value).configName();
      case VERSION_CHECK:
        return ((VersionCheck) value).configName();
      case MILLIS:
        return Long.toString(((Duration) value).toMillis());
      case BYTES_OR_AUTO:
        return (Long) value == -1 ? "auto" : value.toString();
      default:
        return value.toString();
    }
  }

  /**
   * Reads {@code text} (from {@code source}) into a checked value.
   *
   * @throws ColibriException INVALID_ARGUMENT naming the knob, the source, the text and the valid
   *     values
   */
  Object parse(String text, String source) {
    String t = text;
    switch (kind) {
      case TRANSPORT:
        for (Transport v : Transport.values()) {
          if (v.configName().equalsIgnoreCase(t)) {
            return v;
          }
        }
        throw invalid(source, quote(text), "is not a transport");
      case ALGORITHM:
        for (Algorithm v : Algorithm.values()) {
          if (v != Algorithm.NONE && v.configName().equalsIgnoreCase(t)) {
            return v;
          }
        }
        throw invalid(source, quote(text), "is not an algorithm that can be forced");
      case LOG_LEVEL:
        for (LogLevel v : LogLevel.values()) {
          if (v.configName().equalsIgnoreCase(t)) {
            return v;
          }
        }
        throw invalid(source, quote(text), "is not a log level");
      case VERSION_CHECK:
        for (VersionCheck v : VersionCheck.values()) {
          if (v.configName().equalsIgnoreCase(t)) {
            return v;
          }
        }
        throw invalid(source, quote(text), "is not a version check");
      case STRING:
      case WORDS:
        return check(text, source, quote(text));
      default:
        if (kind == Kind.BYTES_OR_AUTO && t.equalsIgnoreCase("auto")) {
          return -1L;
        }
        long n;
        try {
          n = Long.parseLong(t);
        } catch (NumberFormatException e) {
          throw invalid(
              source,
              quote(text),
              "is not a whole number"
                  + (kind == Kind.BYTES
                      ? " of bytes"
                      : kind == Kind.MILLIS ? " of milliseconds" : ""));
        }
        return check(
            kind == Kind.INT
                ? (Object) (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, n))
                : kind == Kind.MILLIS ? Duration.ofMillis(n) : n,
            source,
            quote(text));
    }
  }

  /**
   * Checks a typed value (from {@code source}) and returns it.
   *
   * @throws ColibriException INVALID_ARGUMENT naming the knob, the source, the value and the valid
   *     values
   */
  Object check(Object value, String source) {
    return check(value, source, null);
  }

  private Object check(Object value, String source, String shown) {
    if (value == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          camelName
              + " from "
              + source
              + " is null: pass a "
              + type().getSimpleName()
              + " ("
              + validValues()
              + "), or leave it unset for the default "
              + format(defaultValue));
    }
    if (!type().isInstance(value)) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          camelName
              + " from "
              + source
              + " is a "
              + value.getClass().getSimpleName()
              + ", not a "
              + type().getSimpleName());
    }
    long n;
    switch (kind) {
      case ALGORITHM:
        if (value == Algorithm.NONE) {
          throw invalid(
              source,
              shown != null ? shown : "NONE",
              "is only reported by lastAlgorithm(), it cannot be forced");
        }
        return value;
      case TRANSPORT:
      case LOG_LEVEL:
      case VERSION_CHECK:
        return value;
      case WORDS:
        for (String w : words) {
          if (w.equalsIgnoreCase((String) value)) {
            return w;
          }
        }
        throw invalid(source, shown != null ? shown : quote((String) value), "is not one of them");
      case STRING:
        String text = (String) value;
        n = text.getBytes(StandardCharsets.UTF_8).length;
        if (n < min || n > max) {
          throw invalid(source, shown != null ? shown : quote(text), "is " + n + " bytes long");
        }
        if (text.indexOf('\0') >= 0) { // C would stop there: "mlx5_0\0x" would mean "mlx5_0"
          throw invalid(source, shown != null ? shown : quote(text), "contains a NUL character");
        }
        if (text.chars().anyMatch(ch -> ch < 0x20 || ch == 0x7f)) { // as the native table refuses
          throw invalid(
              source, shown != null ? shown : quote(text), "contains a control character");
        }
        return value;
      case INT:
        n = (Integer) value;
        break;
      case BYTES:
        n = (Long) value;
        break;
      case BYTES_OR_AUTO:
        n = (Long) value;
        if (n == -1) {
          return value;
        }
        break;
      default:
        Duration d = (Duration) value;
        if (d.isNegative() || d.compareTo(Duration.ofMillis(max)) > 0) {
          throw invalid(source, shown != null ? shown : millisText(d), "is out of range");
        }
        n = d.toMillis();
        if (!Duration.ofMillis(n).equals(d)) {
          throw invalid(
              source,
              shown != null ? shown : d.toString(),
              "is not a whole number of milliseconds");
        }
        break;
    }
    if (n < min || n > max) {
      throw invalid(
          source,
          shown != null
              ? shown
              : kind == Kind.MILLIS ? millisText((Duration) value) : String.valueOf(n),
          "is out of range");
    }
    return value;
  }

  private ColibriException invalid(String source, String shown, String what) {
    return new ColibriException(
        ErrorCode.INVALID_ARGUMENT,
        "invalid "
            + camelName
            + " from "
            + source
            + ": "
            + shown
            + " "
            + what
            + "; valid values are "
            + validValues()
            + ". Fix it, or unset it to use the default "
            + defaultText()
            + ".");
  }

  /** The default in text, with its unit. */
  String defaultText() {
    switch (kind) {
      case BYTES:
        return defaultValue + " (" + bytesText((Long) defaultValue) + ")";
      case MILLIS:
        return format(defaultValue) + " ms";
      case STRING:
        return quote(format(defaultValue));
      default:
        return format(defaultValue);
    }
  }

  private static String quote(String text) {
    return "\"" + text + "\"";
  }

  /** 262144 → "256 KiB"; values that are not a whole number of KiB stay in bytes. */
  static String bytesText(long bytes) {
    String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    long v = bytes;
    while (u < units.length - 1 && v != 0 && v % 1024 == 0) {
      v /= 1024;
      u++;
    }
    return v + " " + units[u];
  }

  /** 60000 → "60 s". */
  static String millisText(long ms) {
    if (ms % 3_600_000 == 0 && ms != 0) {
      return ms / 3_600_000 + " h";
    }
    if (ms % 1000 == 0 && ms != 0) {
      return ms / 1000 + " s";
    }
    return ms + " ms";
  }

  private static String millisText(Duration d) {
    Duration ms = Duration.ofMillis(d.toMillis());
    return ms.equals(d) ? d.toMillis() + " ms" : d.toString().toLowerCase(Locale.ROOT);
  }
}
