/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.Properties;
import java.util.function.Function;

/**
 * The settings of a communicator: immutable, every value checked. Each knob is described once in
 * {@link Option}; a value comes from, in order of precedence:
 *
 * <ol>
 *   <li>the {@link Builder} ({@code Options.builder().chunkBytes(1 << 20).build()}),
 *   <li>the system property {@code colibri.<name>} ({@code -Dcolibri.chunkBytes=1048576}),
 *   <li>the environment variable {@code COLIBRI_<NAME>} ({@code COLIBRI_CHUNK_BYTES=1048576}),
 *   <li>the default.
 * </ol>
 *
 * <p>System properties and environment variables are read when {@link Builder#build()} runs; an
 * empty one counts as unset. They take the same text as the native library's {@code clbConfigInit}
 * accepts: names case-insensitive ("shm", "SHM"), numbers in decimal, no spaces. A value that is
 * not valid, from any source, makes {@code build()} (or the builder method, at once) throw a
 * {@link ColibriException} with {@link ErrorCode#INVALID_ARGUMENT} whose message names the knob,
 * where the value came from, the value and what is valid. For Java users these options are the
 * single source of truth: every field of the native {@code clbConfig_t} is set from them.
 */
public final class Options {

  private static final String BUILDER = "builder";

  private final EnumMap<Option, Object> values;
  private final EnumMap<Option, String> sources;

  private Options(EnumMap<Option, Object> values, EnumMap<Option, String> sources) {
    this.values = values;
    this.sources = sources;
  }

  /**
   * The options when the code sets nothing: each knob from its system property, its environment
   * variable, or its default.
   *
   * @return the options, read from the system properties and environment now
   * @throws ColibriException INVALID_ARGUMENT if a system property or environment variable is
   *     invalid
   */
  public static Options defaults() {
    return builder().build();
  }

  /** {@return a builder with nothing set} */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * A builder holding this object's values, each still marked with where it came from (a builder
   * call, a system property, an environment variable or the default).
   *
   * @return a new builder; changing it leaves this object as it is
   */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.values.putAll(values);
    b.sources.putAll(sources);
    return b;
  }

  /**
   * The options that the given environment and system properties give, with nothing set on a
   * builder. For tests: {@link #defaults()} is {@code resolve(System.getenv(), System.getProperties())}.
   */
  static Options resolve(Map<String, String> env, Properties props) {
    return builder().build(env::get, props);
  }

  /** {@return the transport between ranks ({@link Option#TRANSPORT})} */
  public Transport transport() {
    return (Transport) values.get(Option.TRANSPORT);
  }

  /** {@return the algorithm forced for every collective, or auto ({@link Option#ALGORITHM})} */
  public Algorithm algorithm() {
    return (Algorithm) values.get(Option.ALGORITHM);
  }

  /** {@return how much the native core logs ({@link Option#LOG_LEVEL})} */
  public LogLevel logLevel() {
    return (LogLevel) values.get(Option.LOG_LEVEL);
  }

  /** {@return ring chunks in flight per link, 1..64 ({@link Option#PIPELINE_DEPTH})} */
  public int pipelineDepth() {
    return (Integer) values.get(Option.PIPELINE_DEPTH);
  }

  /** {@return the ring chunk size in bytes, 4 KiB..64 MiB ({@link Option#CHUNK_BYTES})} */
  public long chunkBytes() {
    return (Long) values.get(Option.CHUNK_BYTES);
  }

  /**
   * {@return the largest message in bytes that auto sends on the direct path; 0: never}
   *
   * @see Option#DIRECT_MAX_BYTES
   */
  public long directMaxBytes() {
    return (Long) values.get(Option.DIRECT_MAX_BYTES);
  }

  /** {@return the cap on one rank's staging memory in bytes ({@link Option#STAGING_CAP_BYTES})} */
  public long stagingCapBytes() {
    return (Long) values.get(Option.STAGING_CAP_BYTES);
  }

  /**
   * {@return how long a peer may stay silent, a whole number of milliseconds ({@link
   * Option#TIMEOUT})}
   */
  public Duration timeout() {
    return (Duration) values.get(Option.TIMEOUT);
  }

  /** {@return what init does when ranks run different versions ({@link Option#VERSION_CHECK})} */
  public VersionCheck versionCheck() {
    return (VersionCheck) values.get(Option.VERSION_CHECK);
  }

  /**
   * {@return the RDMA device of transport verbs; "" for the first one ({@link
   * Option#VERBS_DEVICE})}
   */
  public String verbsDevice() {
    return (String) values.get(Option.VERBS_DEVICE);
  }

  /** {@return the port of the RDMA device, 1..255 ({@link Option#VERBS_PORT})} */
  public int verbsPort() {
    return (Integer) values.get(Option.VERBS_PORT);
  }

  /**
   * {@return the GID index of transport verbs; -1: chosen automatically}
   *
   * @see Option#VERBS_GID_INDEX
   */
  public int verbsGidIndex() {
    return (Integer) values.get(Option.VERBS_GID_INDEX);
  }

  /** {@return the GRH traffic class, 0..255 ({@link Option#VERBS_TRAFFIC_CLASS})} */
  public int verbsTrafficClass() {
    return (Integer) values.get(Option.VERBS_TRAFFIC_CLASS);
  }

  /**
   * {@return the local ACK timeout exponent (4.096 us x 2^value) ({@link Option#VERBS_TIMEOUT})}
   */
  public int verbsTimeout() {
    return (Integer) values.get(Option.VERBS_TIMEOUT);
  }

  /** {@return retransmissions after an ACK timeout, 0..7 ({@link Option#VERBS_RETRY_COUNT})} */
  public int verbsRetryCount() {
    return (Integer) values.get(Option.VERBS_RETRY_COUNT);
  }

  /**
   * {@return RC queue pairs per link (1..8) that messages are striped over}
   *
   * @see Option#VERBS_QPS_PER_CONNECTION
   */
  public int verbsQpsPerConnection() {
    return (Integer) values.get(Option.VERBS_QPS_PER_CONNECTION);
  }

  /**
   * {@return the value of {@code option}, of type {@link Option#type()}}
   *
   * @param option the knob to read; not null
   * @throws ColibriException INVALID_ARGUMENT for a null option
   */
  public Object get(Option option) {
    return values.get(nonNull(option, "get"));
  }

  /**
   * Where the value of {@code option} came from: "builder", "system property colibri.x",
   * "environment COLIBRI_X" or "default".
   *
   * @param option the knob to look up; not null
   * @return where its value came from
   * @throws ColibriException INVALID_ARGUMENT for a null option
   */
  public String source(Option option) {
    return sources.get(nonNull(option, "source"));
  }

  /**
   * A markdown table of every knob: name, system property, environment variable, type, default,
   * valid values and description.
   *
   * @return the table, one line per knob after the header, each ending in {@code '\n'}
   */
  public static String describeAll() {
    StringBuilder sb = new StringBuilder();
    sb.append(
        "| Option | System property | Environment variable | Type | Default | Valid values"
            + " | Description |\n");
    sb.append("|---|---|---|---|---|---|---|\n");
    for (Option o : Option.values()) {
      sb.append("| `")
          .append(o.camelName())
          .append("` | `")
          .append(o.systemProperty())
          .append("` | `")
          .append(o.environmentVariable())
          .append("` | ")
          .append(o.typeText())
          .append(" | ")
          .append(o.defaultText())
          .append(" | ")
          .append(o.validValues())
          .append(" | ")
          .append(o.description())
          .append(" |\n");
    }
    return sb.toString();
  }

  /** Every knob with its value; values not at their default also say where they came from. */
  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("Options{");
    boolean first = true;
    for (Option o : Option.values()) {
      if (!first) {
        sb.append(", ");
      }
      first = false;
      sb.append(o.camelName()).append('=');
      Object v = values.get(o);
      sb.append(
          o == Option.TIMEOUT
              ? ((Duration) v).toMillis() + "ms"
              : v instanceof String ? "\"" + v + "\"" : v);
      String source = sources.get(o);
      if (!"default".equals(source)) {
        sb.append(" (").append(source).append(')');
      }
    }
    return sb.append('}').toString();
  }

  /** Equal when every value is equal, wherever it came from. */
  @Override
  public boolean equals(Object o) {
    return o instanceof Options && values.equals(((Options) o).values);
  }

  @Override
  public int hashCode() {
    return values.hashCode();
  }

  /** {@code option}, or INVALID_ARGUMENT naming the method that was given null. */
  private static Option nonNull(Option option, String method) {
    if (option == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "Options "
              + method
              + "(option): the"
              + " option is null: pass one of the constants of Option, such as Option.CHUNK_BYTES");
    }
    return option;
  }

  /**
   * Sets knobs in code. Each setter checks its value at once: a value out of range, or null, throws
   * a {@link ColibriException} with {@link ErrorCode#INVALID_ARGUMENT} that names the knob, the
   * value and what is valid. Not thread-safe.
   */
  public static final class Builder {
    private final EnumMap<Option, Object> values = new EnumMap<>(Option.class);
    private final EnumMap<Option, String> sources = new EnumMap<>(Option.class);

    private Builder() {}

    /**
     * Sets the transport between ranks.
     *
     * @param transport the transport; not null
     * @return this builder
     * @see Option#TRANSPORT
     */
    public Builder transport(Transport transport) {
      return put(Option.TRANSPORT, transport);
    }

    /**
     * Forces the algorithm of every collective ({@link Algorithm#NONE} is not accepted).
     *
     * @param algorithm the algorithm, or {@link Algorithm#AUTO} to let Colibri pick; not null
     * @return this builder
     * @see Option#ALGORITHM
     */
    public Builder algorithm(Algorithm algorithm) {
      return put(Option.ALGORITHM, algorithm);
    }

    /**
     * Sets how much the native core logs.
     *
     * @param logLevel the level; not null
     * @return this builder
     * @see Option#LOG_LEVEL
     */
    public Builder logLevel(LogLevel logLevel) {
      return put(Option.LOG_LEVEL, logLevel);
    }

    /**
     * Sets the number of ring chunks in flight per link.
     *
     * @param pipelineDepth chunks in flight, 1..64
     * @return this builder
     * @see Option#PIPELINE_DEPTH
     */
    public Builder pipelineDepth(int pipelineDepth) {
      return put(Option.PIPELINE_DEPTH, pipelineDepth);
    }

    /**
     * Sets the ring chunk size.
     *
     * @param chunkBytes bytes per chunk, 4096..67108864 (4 KiB..64 MiB)
     * @return this builder
     * @see Option#CHUNK_BYTES
     */
    public Builder chunkBytes(long chunkBytes) {
      return put(Option.CHUNK_BYTES, chunkBytes);
    }

    /**
     * Sets the largest message that auto sends on the direct path.
     *
     * @param directMaxBytes bytes, 0..1073741824 (1 GiB); 0: never direct
     * @return this builder
     * @see Option#DIRECT_MAX_BYTES
     */
    public Builder directMaxBytes(long directMaxBytes) {
      return put(Option.DIRECT_MAX_BYTES, directMaxBytes);
    }

    /**
     * Sets the cap on the staging memory one rank may hold.
     *
     * @param stagingCapBytes bytes, 65536..1099511627776 (64 KiB..1 TiB)
     * @return this builder
     * @see Option#STAGING_CAP_BYTES
     */
    public Builder stagingCapBytes(long stagingCapBytes) {
      return put(Option.STAGING_CAP_BYTES, stagingCapBytes);
    }

    /**
     * Sets how long a peer may stay silent before the call fails with TIMEOUT.
     *
     * @param timeout a whole number of milliseconds, from 1 ms to 24 h; not null
     * @return this builder
     * @see Option#TIMEOUT
     */
    public Builder timeout(Duration timeout) {
      return put(Option.TIMEOUT, timeout);
    }

    /**
     * Sets what init does when ranks run different versions.
     *
     * @param versionCheck the policy; not null
     * @return this builder
     * @see Option#VERSION_CHECK
     */
    public Builder versionCheck(VersionCheck versionCheck) {
      return put(Option.VERSION_CHECK, versionCheck);
    }

    /**
     * Sets the RDMA device of transport verbs.
     *
     * @param verbsDevice the device name as {@code ibv_devices} lists it, at most 63 bytes in
     *     UTF-8; "" for the first device; not null
     * @return this builder
     * @see Option#VERBS_DEVICE
     */
    public Builder verbsDevice(String verbsDevice) {
      return put(Option.VERBS_DEVICE, verbsDevice);
    }

    /**
     * Sets the port of the RDMA device.
     *
     * @param verbsPort the port number, 1..255
     * @return this builder
     * @see Option#VERBS_PORT
     */
    public Builder verbsPort(int verbsPort) {
      return put(Option.VERBS_PORT, verbsPort);
    }

    /**
     * Sets the GID index of transport verbs.
     *
     * @param verbsGidIndex the index, 0..255; -1: the RoCE v2 GID on Ethernet, 0 on InfiniBand
     * @return this builder
     * @see Option#VERBS_GID_INDEX
     */
    public Builder verbsGidIndex(int verbsGidIndex) {
      return put(Option.VERBS_GID_INDEX, verbsGidIndex);
    }

    /**
     * Sets the traffic class of the GRH.
     *
     * @param verbsTrafficClass the traffic class, 0..255 (e.g. DSCP 26 shifted left by 2: 104)
     * @return this builder
     * @see Option#VERBS_TRAFFIC_CLASS
     */
    public Builder verbsTrafficClass(int verbsTrafficClass) {
      return put(Option.VERBS_TRAFFIC_CLASS, verbsTrafficClass);
    }

    /**
     * Sets the local ACK timeout of the queue pairs.
     *
     * @param verbsTimeout the exponent, 0..31: 4.096 us x 2^value (14: 67 ms; 0: wait forever)
     * @return this builder
     * @see Option#VERBS_TIMEOUT
     */
    public Builder verbsTimeout(int verbsTimeout) {
      return put(Option.VERBS_TIMEOUT, verbsTimeout);
    }

    /**
     * Sets how many times a queue pair retransmits after an ACK timeout before the call fails.
     *
     * @param verbsRetryCount retransmissions in a row, 0..7
     * @return this builder
     * @see Option#VERBS_RETRY_COUNT
     */
    public Builder verbsRetryCount(int verbsRetryCount) {
      return put(Option.VERBS_RETRY_COUNT, verbsRetryCount);
    }

    /**
     * Sets the number of RC queue pairs per link that messages are striped over.
     *
     * @param verbsQpsPerConnection queue pairs per link, 1..8, the same on both ends
     * @return this builder
     * @see Option#VERBS_QPS_PER_CONNECTION
     */
    public Builder verbsQpsPerConnection(int verbsQpsPerConnection) {
      return put(Option.VERBS_QPS_PER_CONNECTION, verbsQpsPerConnection);
    }

    /**
     * Sets {@code option} from text, as its system property would (e.g. "shm", "1048576"; the
     * timeout in milliseconds). For configuration files and command lines.
     *
     * @param option the knob to set; not null
     * @param text the value in the text form of its system property; not null
     * @return this builder
     * @throws ColibriException INVALID_ARGUMENT if {@code option} or {@code text} is null or the
     *     text is not a valid value of the option
     */
    public Builder set(Option option, String text) {
      nonNull(option, "set");
      if (text == null) {
        throw new ColibriException(
            ErrorCode.INVALID_ARGUMENT,
            option.camelName()
                + " from "
                + BUILDER
                + " is null: pass one of "
                + option.validValues()
                + ", or call clear(Option."
                + option.name()
                + ") to use the system property, environment variable or default");
      }
      values.put(option, option.parse(text, BUILDER));
      sources.put(option, BUILDER);
      return this;
    }

    /**
     * Forgets what was set for {@code option}: system property, environment or default apply.
     *
     * @param option the knob to clear; not null
     * @return this builder
     * @throws ColibriException INVALID_ARGUMENT for a null option
     */
    public Builder clear(Option option) {
      values.remove(nonNull(option, "clear"));
      sources.remove(option);
      return this;
    }

    /**
     * The options: values set here, then system properties, environment variables, defaults.
     *
     * @return new, immutable options; the builder may be used on
     * @throws
     * ColibriException INVALID_ARGUMENT if a system property or environment variable is
     *     invalid
     */
    public Options build() {
      return build(System::getenv, System.getProperties());
    }

    /** {@link #build()} with the environment and system properties given, for tests. */
    Options build(Function<String, String> env, Properties props) {
      EnumMap<Option, Object> v = new EnumMap<>(Option.class);
      EnumMap<Option, String> s = new EnumMap<>(Option.class);
      for (Option o : Option.values()) {
        if (values.containsKey(o)) {
          v.put(o, values.get(o));
          s.put(o, sources.get(o));
          continue;
        }
        String prop = props == null ? null : props.getProperty(o.systemProperty());
        if (prop != null && !prop.isEmpty()) {
          String source = "system property " + o.systemProperty();
          v.put(o, o.parse(prop, source));
          s.put(o, source);
          continue;
        }
        String envValue = env == null ? null : env.apply(o.environmentVariable());
        if (envValue != null && !envValue.isEmpty()) {
          String source = "environment " + o.environmentVariable();
          v.put(o, o.parse(envValue, source));
          s.put(o, source);
          continue;
        }
        v.put(o, o.defaultValue());
        s.put(o, "default");
      }
      return new Options(v, s);
    }

    private Builder put(Option option, Object value) {
      values.put(option, option.check(value, BUILDER));
      sources.put(option, BUILDER);
      return this;
    }
  }
}
