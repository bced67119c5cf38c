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
   * @throws ColibriException INVALID_ARGUMENT if a system property or environment variable is
   *     invalid
   */
  public static Options defaults() {
    return builder().build();
  }

  /** A builder with nothing set. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * A builder holding this object's values, each still marked with where it came from (a builder
   * call, a system property, an environment variable or the default).
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

  public Transport transport() {
    return (Transport) values.get(Option.TRANSPORT);
  }

  public Algorithm algorithm() {
    return (Algorithm) values.get(Option.ALGORITHM);
  }

  public LogLevel logLevel() {
    return (LogLevel) values.get(Option.LOG_LEVEL);
  }

  public int pipelineDepth() {
    return (Integer) values.get(Option.PIPELINE_DEPTH);
  }

  public long chunkBytes() {
    return (Long) values.get(Option.CHUNK_BYTES);
  }

  public long directMaxBytes() {
    return (Long) values.get(Option.DIRECT_MAX_BYTES);
  }

  public long stagingCapBytes() {
    return (Long) values.get(Option.STAGING_CAP_BYTES);
  }

  public Duration timeout() {
    return (Duration) values.get(Option.TIMEOUT);
  }

  public VersionCheck versionCheck() {
    return (VersionCheck) values.get(Option.VERSION_CHECK);
  }

  /** The RDMA device of transport verbs; "" for the first one. */
  public String verbsDevice() {
    return (String) values.get(Option.VERBS_DEVICE);
  }

  public int verbsPort() {
    return (Integer) values.get(Option.VERBS_PORT);
  }

  /** -1: chosen automatically. */
  public int verbsGidIndex() {
    return (Integer) values.get(Option.VERBS_GID_INDEX);
  }

  public int verbsTrafficClass() {
    return (Integer) values.get(Option.VERBS_TRAFFIC_CLASS);
  }

  /** The local ACK timeout exponent (4.096 us x 2^value). */
  public int verbsTimeout() {
    return (Integer) values.get(Option.VERBS_TIMEOUT);
  }

  public int verbsRetryCount() {
    return (Integer) values.get(Option.VERBS_RETRY_COUNT);
  }

  /** RC queue pairs per link (1..8) that messages are striped over. */
  public int verbsQpsPerConnection() {
    return (Integer) values.get(Option.VERBS_QPS_PER_CONNECTION);
  }

  /** The value of {@code option}, of type {@link Option#type()}. */
  public Object get(Option option) {
    return values.get(nonNull(option, "get"));
  }

  /**
   * Where the value of {@code option} came from: "builder", "system property colibri.x",
   * "environment COLIBRI_X" or "default".
   */
  public String source(Option option) {
    return sources.get(nonNull(option, "source"));
  }

  /**
   * A markdown table of every knob: name, system property, environment variable, type, default,
   * valid values and description.
   */
  public static String describeAll() {
    StringBuilder sb = new StringBuilder();
    sb.append("| Option | System property | Environment variable | Type | Default | Valid values"
        + " | Description |\n");
    sb.append("|---|---|---|---|---|---|---|\n");
    for (Option o : Option.values()) {
      sb.append("| `").append(o.camelName()).append("` | `").append(o.systemProperty())
          .append("` | `").append(o.environmentVariable()).append("` | ")
          .append(o.typeText()).append(" | ").append(o.defaultText()).append(" | ")
          .append(o.validValues()).append(" | ").append(o.description()).append(" |\n");
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
      sb.append(o == Option.TIMEOUT ? ((Duration) v).toMillis() + "ms"
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
      throw new ColibriException(ErrorCode.INVALID_ARGUMENT, "Options " + method + "(option): the"
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

    /** @see Option#TRANSPORT */
    public Builder transport(Transport transport) {
      return put(Option.TRANSPORT, transport);
    }

    /**
     * Forces the algorithm of every collective ({@link Algorithm#NONE} is not accepted).
     *
     * @see Option#ALGORITHM
     */
    public Builder algorithm(Algorithm algorithm) {
      return put(Option.ALGORITHM, algorithm);
    }

    /** @see Option#LOG_LEVEL */
    public Builder logLevel(LogLevel logLevel) {
      return put(Option.LOG_LEVEL, logLevel);
    }

    /** @see Option#PIPELINE_DEPTH */
    public Builder pipelineDepth(int pipelineDepth) {
      return put(Option.PIPELINE_DEPTH, pipelineDepth);
    }

    /** @see Option#CHUNK_BYTES */
    public Builder chunkBytes(long chunkBytes) {
      return put(Option.CHUNK_BYTES, chunkBytes);
    }

    /** @see Option#DIRECT_MAX_BYTES */
    public Builder directMaxBytes(long directMaxBytes) {
      return put(Option.DIRECT_MAX_BYTES, directMaxBytes);
    }

    /** @see Option#STAGING_CAP_BYTES */
    public Builder stagingCapBytes(long stagingCapBytes) {
      return put(Option.STAGING_CAP_BYTES, stagingCapBytes);
    }

    /**
     * A whole number of milliseconds, from 1 ms to 24 h.
     *
     * @see Option#TIMEOUT
     */
    public Builder timeout(Duration timeout) {
      return put(Option.TIMEOUT, timeout);
    }

    /** @see Option#VERSION_CHECK */
    public Builder versionCheck(VersionCheck versionCheck) {
      return put(Option.VERSION_CHECK, versionCheck);
    }

    /**
     * The RDMA device name, at most 63 bytes; "" for the first device.
     *
     * @see Option#VERBS_DEVICE
     */
    public Builder verbsDevice(String verbsDevice) {
      return put(Option.VERBS_DEVICE, verbsDevice);
    }

    /** @see Option#VERBS_PORT */
    public Builder verbsPort(int verbsPort) {
      return put(Option.VERBS_PORT, verbsPort);
    }

    /** @see Option#VERBS_GID_INDEX */
    public Builder verbsGidIndex(int verbsGidIndex) {
      return put(Option.VERBS_GID_INDEX, verbsGidIndex);
    }

    /** @see Option#VERBS_TRAFFIC_CLASS */
    public Builder verbsTrafficClass(int verbsTrafficClass) {
      return put(Option.VERBS_TRAFFIC_CLASS, verbsTrafficClass);
    }

    /** @see Option#VERBS_TIMEOUT */
    public Builder verbsTimeout(int verbsTimeout) {
      return put(Option.VERBS_TIMEOUT, verbsTimeout);
    }

    /** @see Option#VERBS_RETRY_COUNT */
    public Builder verbsRetryCount(int verbsRetryCount) {
      return put(Option.VERBS_RETRY_COUNT, verbsRetryCount);
    }

    /** @see Option#VERBS_QPS_PER_CONNECTION */
    public Builder verbsQpsPerConnection(int verbsQpsPerConnection) {
      return put(Option.VERBS_QPS_PER_CONNECTION, verbsQpsPerConnection);
    }

    /**
     * Sets {@code option} from text, as its system property would (e.g. "shm", "1048576"; the
     * timeout in milliseconds). For configuration files and command lines.
     *
     * @throws ColibriException INVALID_ARGUMENT if {@code option} or {@code text} is null or the
     *     text is not a valid value of the option
     */
    public Builder set(Option option, String text) {
      nonNull(option, "set");
      if (text == null) {
        throw new ColibriException(ErrorCode.INVALID_ARGUMENT, option.camelName() + " from "
            + BUILDER + " is null: pass one of " + option.validValues() + ", or call clear(Option."
            + option.name() + ") to use the system property, environment variable or default");
      }
      values.put(option, option.parse(text, BUILDER));
      sources.put(option, BUILDER);
      return this;
    }

    /** Forgets what was set for {@code option}: system property, environment or default apply. */
    public Builder clear(Option option) {
      values.remove(nonNull(option, "clear"));
      sources.remove(option);
      return this;
    }

    /**
     * The options: values set here, then system properties, environment variables, defaults.
     *
     * @throws ColibriException INVALID_ARGUMENT if a system property or environment variable is
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
