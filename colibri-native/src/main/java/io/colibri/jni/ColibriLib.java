/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FunctionPointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Const;
import org.bytedeco.javacpp.annotation.MemberGetter;
import org.bytedeco.javacpp.annotation.Name;
import org.bytedeco.javacpp.annotation.Platform;
import org.bytedeco.javacpp.annotation.Properties;

/**
 * JNI mapping of the C ABI in {@code colibri.h}, one Java method per C function. JavaCPP generates
 * and compiles the JNI library ({@code jniColibriLib}) from this class at build time and bundles
 * {@code libcolibri.so.0} next to it (see colibri-native/pom.xml); {@link Loader#load()} extracts
 * and loads both.
 *
 * <p>Conventions: {@code clbResult_t} is an {@code int}; {@code clbComm_t}, buffer addresses and
 * streams are {@code long}; {@code size_t} and {@code int64_t} are {@code long}; out-parameters are
 * one-element arrays (JavaCPP copies them back); a {@code clbUniqueId} is a {@code byte[128]}.
 * The {@link ByteBuffer} overloads of the collectives take direct buffers: the generated code passes
 * {@code GetDirectBufferAddress(buffer) + position()}, with no allocation. Nothing is checked here:
 * {@link NativeCommunicator} checks arguments before it calls in.
 *
 * <p>Internal to colibri-native; not an API.
 */
@Properties(value = @Platform(value = "linux", include = "colibri/colibri.h", link = "colibri@.0"))
public final class ColibriLib {
  static {
    Loader.load();
  }

  private ColibriLib() {}

  /** Forces the class, and with it the native libraries, to load. */
  static void load() {}

  // ---- constants (checked against the header by the tests) ----

  /**
   * {@return {@code CLB_VERSION_CODE}: the header's version, major * 10000 + minor * 100 + patch}
   */
  public static native @MemberGetter @Name("CLB_VERSION_CODE") int versionCode();

  /** {@return {@code CLB_PROTOCOL_VERSION}: the version of the bootstrap wire protocol} */
  public static native @MemberGetter @Name("CLB_PROTOCOL_VERSION") int protocolVersion();

  /** {@return {@code CLB_UNIQUE_ID_BYTES}: the size of a {@code clbUniqueId} in bytes (128)} */
  public static native @MemberGetter @Name("CLB_UNIQUE_ID_BYTES") int uniqueIdBytes();

  /**
   * {@return {@code CLB_DEFAULT_PIPELINE_DEPTH}: the default of {@code clbConfig_t.pipelineDepth}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_PIPELINE_DEPTH") int defaultPipelineDepth();

  /** {@return {@code CLB_DEFAULT_CHUNK_BYTES}: the default of {@code clbConfig_t.chunkBytes}} */
  public static native @MemberGetter @Name("CLB_DEFAULT_CHUNK_BYTES") long defaultChunkBytes();

  /**
   * {@return {@code CLB_DEFAULT_DIRECT_MAX_BYTES}: the default of
   * {@code clbConfig_t.directMaxBytes}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_DIRECT_MAX_BYTES") long
      defaultDirectMaxBytes();

  /**
   * {@return {@code CLB_DEFAULT_STAGING_CAP_BYTES}: the default of
   * {@code clbConfig_t.stagingCapBytes}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_STAGING_CAP_BYTES") long
      defaultStagingCapBytes();

  /** {@return {@code CLB_DEFAULT_TIMEOUT_MS}: the default of {@code clbConfig_t.timeoutMs}} */
  public static native @MemberGetter @Name("CLB_DEFAULT_TIMEOUT_MS") long defaultTimeoutMs();

  /**
   * {@return {@code CLB_DEFAULT_VERSION_CHECK}: the default of {@code clbConfig_t.versionCheck}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERSION_CHECK") int defaultVersionCheck();

  /** {@return {@code CLB_SPLIT_NOCOLOR}: the color of a rank that joins no new communicator} */
  public static native @MemberGetter @Name("CLB_SPLIT_NOCOLOR") int splitNoColor();

  /** {@return {@code CLB_DEFAULT_VERBS_PORT}: the default of {@code clbConfig_t.verbsPort}} */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_PORT") int defaultVerbsPort();

  /**
   * {@return {@code CLB_DEFAULT_VERBS_GID_INDEX}: the default of {@code clbConfig_t.verbsGidIndex}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_GID_INDEX") int
      defaultVerbsGidIndex();

  /**
   * {@return {@code CLB_DEFAULT_VERBS_TRAFFIC_CLASS}: the default of
   * {@code clbConfig_t.verbsTrafficClass}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_TRAFFIC_CLASS") int
      defaultVerbsTrafficClass();

  /**
   * {@return {@code CLB_DEFAULT_VERBS_TIMEOUT}: the default of {@code clbConfig_t.verbsTimeout}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_TIMEOUT") int defaultVerbsTimeout();

  /**
   * {@return {@code CLB_DEFAULT_VERBS_RETRY_COUNT}: the default of
   * {@code clbConfig_t.verbsRetryCount}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_RETRY_COUNT") int
      defaultVerbsRetryCount();

  /**
   * {@return {@code CLB_DEFAULT_VERBS_QPS_PER_CONNECTION}: the default of
   * {@code clbConfig_t.verbsQpsPerConnection}}
   */
  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_QPS_PER_CONNECTION") int
      defaultVerbsQpsPerConnection();

  /**
   * {@return {@code CLB_VERBS_DEVICE_BYTES}: the bytes of {@code clbConfig_t.verbsDevice}, the
   * terminating NUL included (64)}
   */
  public static native @MemberGetter @Name("CLB_VERBS_DEVICE_BYTES") int verbsDeviceBytes();

  // ---- structs ----

  /** {@code clbConfig_t}. Start from {@link #clbConfigInit}. */
  @Name("clbConfig_t")
  public static class ClbConfig extends Pointer {
    static {
      Loader.load();
    }

    /** A zeroed {@code clbConfig_t} in native memory; free it with {@link #close()}. */
    public ClbConfig() {
      super((Pointer) null);
      allocate();
    }

    private native void allocate();

    /**
     * {@return {@code size}: the struct's size in bytes ({@code sizeof(clbConfig_t)}, set by
     * {@link #clbConfigInit})}
     */
    public native @Cast("size_t") long size();

    /**
     * Sets {@code size}.
     *
     * @param size the struct's size in bytes ({@code sizeof(clbConfig_t)}, set by
     *     {@link #clbConfigInit})
     * @return this struct
     */
    public native ClbConfig size(long size);

    /** {@return {@code transport}: a {@code clbTransport_t}} */
    public native int transport();

    /**
     * Sets {@code transport}.
     *
     * @param transport a {@code clbTransport_t}
     * @return this struct
     */
    public native ClbConfig transport(int transport);

    /** {@return {@code algorithm}: a {@code clbAlgorithm_t}, forced for every call} */
    public native int algorithm();

    /**
     * Sets {@code algorithm}.
     *
     * @param algorithm a {@code clbAlgorithm_t}, forced for every call
     * @return this struct
     */
    public native ClbConfig algorithm(int algorithm);

    /** {@return {@code logLevel}: a {@code clbLogLevel_t}} */
    public native int logLevel();

    /**
     * Sets {@code logLevel}.
     *
     * @param logLevel a {@code clbLogLevel_t}
     * @return this struct
     */
    public native ClbConfig logLevel(int logLevel);

    /** {@return {@code pipelineDepth}: chunks in flight per link, 1..64} */
    public native int pipelineDepth();

    /**
     * Sets {@code pipelineDepth}.
     *
     * @param pipelineDepth chunks in flight per link, 1..64
     * @return this struct
     */
    public native ClbConfig pipelineDepth(int pipelineDepth);

    /** {@return {@code chunkBytes}: the ring chunk size in bytes, 4 KiB..64 MiB} */
    public native @Cast("int64_t") long chunkBytes();

    /**
     * Sets {@code chunkBytes}.
     *
     * @param chunkBytes the ring chunk size in bytes, 4 KiB..64 MiB
     * @return this struct
     */
    public native ClbConfig chunkBytes(long chunkBytes);

    /** {@return {@code directMaxBytes}: the largest message in bytes on the direct path} */
    public native @Cast("int64_t") long directMaxBytes();

    /**
     * Sets {@code directMaxBytes}.
     *
     * @param directMaxBytes the largest message in bytes on the direct path
     * @return this struct
     */
    public native ClbConfig directMaxBytes(long directMaxBytes);

    /** {@return {@code stagingCapBytes}: the cap on staging memory per rank in bytes} */
    public native @Cast("int64_t") long stagingCapBytes();

    /**
     * Sets {@code stagingCapBytes}.
     *
     * @param stagingCapBytes the cap on staging memory per rank in bytes
     * @return this struct
     */
    public native ClbConfig stagingCapBytes(long stagingCapBytes);

    /** {@return {@code timeoutMs}: how long a peer may stay silent, in milliseconds} */
    public native @Cast("int64_t") long timeoutMs();

    /**
     * Sets {@code timeoutMs}.
     *
     * @param timeoutMs how long a peer may stay silent, in milliseconds
     * @return this struct
     */
    public native ClbConfig timeoutMs(long timeoutMs);

    /** {@return {@code versionCheck}: a {@code clbVersionCheck_t}} */
    public native int versionCheck();

    /**
     * Sets {@code versionCheck}.
     *
     * @param versionCheck a {@code clbVersionCheck_t}
     * @return this struct
     */
    public native ClbConfig versionCheck(int versionCheck);

    /** {@return {@code verbsPort}: the port of the RDMA device, 1..255} */
    public native int verbsPort();

    /**
     * Sets {@code verbsPort}.
     *
     * @param verbsPort the port of the RDMA device, 1..255
     * @return this struct
     */
    public native ClbConfig verbsPort(int verbsPort);

    /**
     * {@return {@code verbsGidIndex}: the GID index; -1: the RoCE v2 GID on Ethernet, 0 on
     * InfiniBand}
     */
    public native int verbsGidIndex();

    /**
     * Sets {@code verbsGidIndex}.
     *
     * @param verbsGidIndex the GID index; -1: the RoCE v2 GID on Ethernet, 0 on InfiniBand
     * @return this struct
     */
    public native ClbConfig verbsGidIndex(int verbsGidIndex);

    /** {@return {@code verbsTrafficClass}: the GRH traffic class, 0..255} */
    public native int verbsTrafficClass();

    /**
     * Sets {@code verbsTrafficClass}.
     *
     * @param verbsTrafficClass the GRH traffic class, 0..255
     * @return this struct
     */
    public native ClbConfig verbsTrafficClass(int verbsTrafficClass);

    /** {@return {@code verbsTimeout}: the local ACK timeout exponent, 4.096 us * 2^value, 0..31} */
    public native int verbsTimeout();

    /**
     * Sets {@code verbsTimeout}.
     *
     * @param verbsTimeout the local ACK timeout exponent, 4.096 us * 2^value, 0..31
     * @return this struct
     */
    public native ClbConfig verbsTimeout(int verbsTimeout);

    /** {@return {@code verbsRetryCount}: the transport retries, 0..7} */
    public native int verbsRetryCount();

    /**
     * Sets {@code verbsRetryCount}.
     *
     * @param verbsRetryCount the transport retries, 0..7
     * @return this struct
     */
    public native ClbConfig verbsRetryCount(int verbsRetryCount);

    /** {@return {@code verbsQpsPerConnection}: the RC queue pairs per link, 1..8} */
    public native int verbsQpsPerConnection();

    /**
     * Sets {@code verbsQpsPerConnection}.
     *
     * @param verbsQpsPerConnection the RC queue pairs per link, 1..8
     * @return this struct
     */
    public native ClbConfig verbsQpsPerConnection(int verbsQpsPerConnection);

    /**
     * Byte {@code i} of {@code char verbsDevice[CLB_VERBS_DEVICE_BYTES]}.
     *
     * @param i index, 0..{@code CLB_VERBS_DEVICE_BYTES}-1
     * @return the byte (UTF-8; 0 ends the name)
     */
    public native @Cast("char") byte verbsDevice(int i);

    /**
     * Sets byte {@code i} of {@code verbsDevice}.
     *
     * @param i index, 0..{@code CLB_VERBS_DEVICE_BYTES}-1
     * @param b the byte (UTF-8; 0 ends the name)
     * @return this struct
     */
    public native ClbConfig verbsDevice(int i, byte b);

    /** {@return {@code verbsDevice} up to its NUL, decoded as UTF-8; "" for the first device} */
    public String verbsDeviceName() {
      int n = verbsDeviceBytes();
      byte[] b = new byte[n];
      int len = 0;
      while (len < n && (b[len] = verbsDevice(len)) != 0) {
        len++;
      }
      return new String(b, 0, len, StandardCharsets.UTF_8);
    }

    /**
     * Sets {@code verbsDevice} to {@code name} (UTF-8), NUL-padded.
     *
     * @param name the RDMA device name, at most {@code CLB_VERBS_DEVICE_BYTES} - 1 bytes in UTF-8;
     *     "" for the first device; not null
     * @return this struct
     * @throws
     * IllegalArgumentException if it does not fit with its NUL
     */
    public ClbConfig verbsDeviceName(String name) {
      byte[] b = name.getBytes(StandardCharsets.UTF_8);
      int n = verbsDeviceBytes();
      if (b.length >= n) {
        throw new IllegalArgumentException(
            "verbsDevice \""
                + name
                + "\" is "
                + b.length
                + " bytes long; clbConfig_t holds at most "
                + (n - 1));
      }
      for (int i = 0; i < n; i++) {
        verbsDevice(i, i < b.length ? b[i] : 0);
      }
      return this;
    }
  }

  /** {@code clbMemStats_t}. */
  @Name("clbMemStats_t")
  public static class ClbMemStats extends Pointer {
    static {
      Loader.load();
    }

    /** A zeroed {@code clbMemStats_t} in native memory; free it with {@link #close()}. */
    public ClbMemStats() {
      super((Pointer) null);
      allocate();
    }

    private native void allocate();

    /**
     * {@return {@code hostBytes}: host memory Colibri holds now, in bytes (staging, control
     * blocks)}
     */
    public native @MemberGetter @Cast("int64_t") long hostBytes();

    /** {@return {@code hostPeakBytes}: the most host memory it ever held at once, in bytes} */
    public native @MemberGetter @Cast("int64_t") long hostPeakBytes();

    /** {@return {@code deviceBytes}: device memory Colibri holds now, in bytes} */
    public native @MemberGetter @Cast("int64_t") long deviceBytes();

    /** {@return {@code devicePeakBytes}: the most device memory it ever held at once, in bytes} */
    public native @MemberGetter @Cast("int64_t") long devicePeakBytes();
  }

  /** {@code clbDeviceInfo_t}: filled by {@link #clbDeviceInfo}. */
  @Name("clbDeviceInfo_t")
  public static class ClbDeviceInfo extends Pointer {
    static {
      Loader.load();
    }

    /** A zeroed {@code clbDeviceInfo_t} in native memory; free it with {@link #close()}. */
    public ClbDeviceInfo() {
      super((Pointer) null);
      allocate();
    }

    private native void allocate();

    /** {@return {@code name}: the GPU's name, e.g. "NVIDIA H200"} */
    public native @MemberGetter @Cast("const char*") String name();

    /** {@return {@code major}: the major compute capability} */
    public native @MemberGetter int major();

    /** {@return {@code minor}: the minor compute capability} */
    public native @MemberGetter int minor();

    /**
     * {@return {@code driverVersion}: the CUDA version the driver supports, 1000 * major + 10 *
     * minor}
     */
    public native @MemberGetter int driverVersion();

    /**
     * {@return {@code pciBusId}: the PCI address, domain:bus:device.function in hex, e.g.
     * "0000:1b:00.0"}
     */
    public native @MemberGetter @Cast("const char*") String pciBusId();

    /**
     * {@return {@code image}: the kernel image device collectives load: "sm80", "sm90", ... (one
     * per compute capability of the native build's COLIBRI_KERNEL_ARCHS) or "ptx"}
     */
    public native @MemberGetter @Cast("const char*") String image();

    /**
     * {@return {@code gpuDirectRdma}: whether the driver supports GPUDirect RDMA for this GPU: 1,
     * 0, or -1 unknown}
     */
    public native @MemberGetter int gpuDirectRdma();

    /**
     * {@return {@code dmaBuf}: whether device memory can be exported as a dma-buf: 1, 0, or -1
     * unknown}
     */
    public native @MemberGetter int dmaBuf();
  }

  // ---- errors and version ----

  /**
   * Calls {@code clbGetErrorString}: the name of a result code.
   *
   * @param result a {@code clbResult_t}
   * @return the code's name, a static string
   */
  public static native @Cast("const char*") String clbGetErrorString(
      @Cast("clbResult_t") int result);

  /**
   * Calls {@code clbGetLastError}: the calling thread's message for its last failed call.
   *
   * @return the message, or "" when its last call succeeded (or it made none)
   */
  public static native @Cast("const char*") String clbGetLastError();

  /**
   * Calls {@code clbGetVersion}: the library's version, encoded as {@code CLB_VERSION_CODE}.
   *
   * @param version out: element 0 receives the version
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbGetVersion(int[] version);

  // ---- logging (used by io.colibri.jni.NativeLog) ----

  /**
   * {@code clbLogCallback_t}. A subclass overrides {@link #call} in Java; JavaCPP generates the C
   * function that calls it, attaching a native thread to the JVM (as a daemon) the first time
   * that thread logs, and detaching it when the thread ends. An exception must not leave
   * {@code call}: JavaCPP would rethrow it as a C++ exception into the core.
   */
  public static class LogCallback extends FunctionPointer {
    static {
      Loader.load();
    }

    /** Allocates the native function pointer that calls {@link #call}. */
    protected LogCallback() {
      allocate();
    }

    private native void allocate();

    /**
     * Receives one log line from the core, on any thread; must return soon, not throw and not call
     * Colibri.
     *
     * @param level the line's {@code clbLogLevel_t}, 1 (error) .. 4 (debug)
     * @param message the line, UTF-8, NUL-terminated, valid until this returns
     * @param user the pointer passed to {@link ColibriLib#clbSetLogCallback}
     */
    public native void call(int level, @Cast("const char*") BytePointer message, Pointer user);
  }

  /**
   * Calls {@code clbSetLogCallback}: sends the core's log lines to {@code callback} instead of
   * stderr; when it returns, the previous callback is not running and is not called again.
   *
   * @param callback the callback, or null to go back to stderr
   * @param user passed to every call of {@code callback}; may be null
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbSetLogCallback(
      LogCallback callback, Pointer user);

  /**
   * Calls {@code clbSetLogLevel}: sets the process's log threshold.
   *
   * @param level a {@code clbLogLevel_t}, 0 (off) .. 4 (debug): lines at it and below are emitted
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbSetLogLevel(int level);

  /**
   * Calls {@code clbGetLogLevel}: the process's log threshold.
   *
   * @param level out: element 0 receives the {@code clbLogLevel_t}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbGetLogLevel(int[] level);

  // ---- configuration ----

  /**
   * Calls {@code clbConfigInit} (the macro, so {@code clbConfigInitSized} with the struct's full
   * size): fills {@code config} with the defaults and the {@code COLIBRI_*} environment.
   *
   * @param config the struct to fill
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbConfigInit(ClbConfig config);

  /**
   * Calls {@code clbConfigSet}: sets one knob of a configuration by name, from text.
   *
   * @param config a full configuration, from {@link #clbConfigInit}
   * @param name the knob's name, NUL-terminated UTF-8 (see {@link #utf8z})
   * @param value its value as text, NUL-terminated UTF-8
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbConfigSet(
      ClbConfig config, @Cast("const char*") byte[] name, @Cast("const char*") byte[] value);

  /**
   * Calls {@code clbConfigGet}: one knob of a configuration as text.
   *
   * @param config a full configuration
   * @param name the knob's name, NUL-terminated UTF-8
   * @param buf out: the value, NUL-terminated UTF-8
   * @param bytes size of {@code buf}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbConfigGet(
      @Const ClbConfig config,
      @Cast("const char*") byte[] name,
      @Cast("char*") byte[] buf,
      @Cast("size_t") long bytes);

  /**
   * Calls {@code clbConfigOptionName}: the name of the i-th knob of the native table.
   *
   * @param i an index from 0
   * @return the name, or null past the last knob
   */
  public static native @Cast("const char*") String clbConfigOptionName(int i);

  /**
   * Text as the {@code const char*} parameters take it.
   *
   * @param text the text
   * @return its UTF-8 bytes and a NUL
   */
  public static byte[] utf8z(String text) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    byte[] z = new byte[b.length + 1];
    System.arraycopy(b, 0, z, 0, b.length);
    return z;
  }

  /**
   * Text as a {@code char*} out-parameter holds it.
   *
   * @param buf the bytes a native call wrote
   * @return the UTF-8 text before the first NUL (all of it when there is none)
   */
  public static String fromUtf8z(byte[] buf) {
    int n = 0;
    while (n < buf.length && buf[n] != 0) {
      n++;
    }
    return new String(buf, 0, n, StandardCharsets.UTF_8);
  }

  /**
   * Calls {@code clbTransportFromName}: parses a transport name ("auto", "shm", "socket", "verbs").
   *
   * @param name the name
   * @param transport out: element 0 receives the {@code clbTransport_t}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbTransportFromName(
      @Cast("const char*") String name, int[] transport);

  /**
   * Calls {@code clbAlgorithmFromName}: parses an algorithm name ("auto", "ring", "direct").
   *
   * @param name the name
   * @param algorithm out: element 0 receives the {@code clbAlgorithm_t}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbAlgorithmFromName(
      @Cast("const char*") String name, int[] algorithm);

  /**
   * Calls {@code clbAlgorithmName}: the name of an algorithm.
   *
   * @param algorithm a {@code clbAlgorithm_t}
   * @return the lower-case name
   */
  public static native @Cast("const char*") String clbAlgorithmName(int algorithm);

  /**
   * Calls {@code clbTransportName}: the name of a transport.
   *
   * @param transport a {@code clbTransport_t}
   * @return the lower-case name
   */
  public static native @Cast("const char*") String clbTransportName(int transport);

  // ---- unique id ----

  /**
   * Calls {@code clbGetUniqueId}: makes a new id and starts its bootstrap root in this process.
   *
   * @param id out: receives the {@code clbUniqueId}, 128 bytes
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbGetUniqueId(@Cast("clbUniqueId*") byte[] id);

  /**
   * Calls {@code clbUniqueIdFromAddress}: the id of a root that rank 0 of {@code clbCommInitRank}
   * opens at {@code host:port}.
   *
   * @param host host name or IP address of rank 0
   * @param port TCP port of the root
   * @param secret passphrase every rank passes; null or empty: {@code COLIBRI_BOOTSTRAP_SECRET},
   *     else derived from host:port
   * @param id out: receives the {@code clbUniqueId}, 128 bytes
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbUniqueIdFromAddress(
      @Cast("const char*") String host,
      int port,
      @Cast("const char*") String secret,
      @Cast("clbUniqueId*") byte[] id);

  /**
   * Calls {@code clbUniqueIdRelease}: stops the root of an id made by {@code clbGetUniqueId} in
   * this process, if it still runs.
   *
   * @param id the {@code clbUniqueId}, 128 bytes
   * @return 0 ({@code clbSuccess}) also when the root already stopped or runs elsewhere, or the
   *     {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbUniqueIdRelease(
      @Cast("const clbUniqueId*") byte[] id);

  /**
   * Calls {@code clbUniqueIdDescribe}: a human-readable summary of an id (root address and version,
   * never the secret).
   *
   * @param id the {@code clbUniqueId}, 128 bytes
   * @param buf out: receives the summary, NUL-terminated
   * @param bufBytes size of {@code buf} in bytes
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbUniqueIdDescribe(
      @Cast("const clbUniqueId*") byte[] id,
      @Cast("char*") byte[] buf,
      @Cast("size_t") long bufBytes);

  // ---- communicator ----

  /**
   * Calls {@code clbCommInitRank}: joins the communicator of {@code id} as {@code rank} of
   * {@code nranks}, blocking until every rank has joined.
   *
   * @param comm out: element 0 receives the {@code clbComm_t} handle
   * @param id the {@code clbUniqueId}, 128 bytes, the same on every rank
   * @param rank this rank, 0..nranks-1
   * @param nranks number of ranks, 1..{@code CLB_MAX_RANKS}
   * @param config the settings, from {@link #clbConfigInit}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommInitRank(
      @Cast("clbComm_t*") long[] comm,
      @Cast("const clbUniqueId*") byte[] id,
      int rank,
      int nranks,
      @Const ClbConfig config);

  /**
   * Calls {@code clbCommDestroy}: frees everything the communicator holds (refused while another
   * thread is in a call on it).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommDestroy(@Cast("clbComm_t") long comm);

  /**
   * Calls {@code clbCommSplit}: the ranks passing the same color form a new communicator, ordered
   * by key (collective over every rank of {@code comm}).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param color the group, {@code >= 0}, or {@link #splitNoColor()} for none
   * @param key the order within the group (ties: by rank in {@code comm})
   * @param config the new communicator's settings, from {@link #clbConfigInit}
   * @param newcomm out: element 0 receives the new {@code clbComm_t} handle, 0 for no color
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommSplit(
      @Cast("clbComm_t") long comm,
      int color,
      int key,
      @Const ClbConfig config,
      @Cast("clbComm_t*") long[] newcomm);

  /**
   * Calls {@code clbCommShrink}: a new communicator of the ranks of {@code comm} not in {@code
   * excluded} (every rank not excluded calls it with the same ranks; the excluded ones need not be
   * alive).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param excluded the ranks left out
   * @param nexcluded how many of {@code excluded}
   * @param config the new communicator's settings, from {@link #clbConfigInit}
   * @param newcomm out: element 0 receives the new {@code clbComm_t} handle
   * @param flags 0, or 1 ({@code CLB_SHRINK_ABORT}) to abort {@code comm} first
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommShrink(
      @Cast("clbComm_t") long comm,
      @Const int[] excluded,
      int nexcluded,
      @Const ClbConfig config,
      @Cast("clbComm_t*") long[] newcomm,
      int flags);

  /**
   * Calls {@code clbCommGetUniqueId}: on one rank of {@code comm}, an id for growing it, whose root
   * runs in this process.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param id out: the id's bytes ({@code CLB_UNIQUE_ID_BYTES})
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommGetUniqueId(
      @Cast("clbComm_t") long comm, @Cast("clbUniqueId*") byte[] id);

  /**
   * Calls {@code clbCommGrow}: a communicator of {@code comm}'s ranks and new ones. On a rank of
   * {@code comm}: rank -1 and the coordinator's id or null; on a new rank: {@code comm} 0, the id
   * and its rank.
   *
   * @param comm the communicator's {@code clbComm_t} handle, or 0 on a new rank
   * @param nranks the grown communicator's size
   * @param id the id from {@link #clbCommGetUniqueId}, or null on a rank of {@code comm} that is
   *     not the coordinator
   * @param rank -1 on a rank of {@code comm}, else the new rank's
   * @param config the new communicator's settings, from {@link #clbConfigInit}, or null
   * @param newcomm out: element 0 receives the new {@code clbComm_t} handle
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommGrow(
      @Cast("clbComm_t") long comm,
      int nranks,
      @Cast("const clbUniqueId*") byte[] id,
      int rank,
      @Const ClbConfig config,
      @Cast("clbComm_t*") long[] newcomm);

  /**
   * Calls {@code clbCommAbort}: makes every blocked or later call on the communicator return
   * {@code clbAborted} and tells the peers; any thread.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommAbort(@Cast("clbComm_t") long comm);

  /**
   * Calls {@code clbCommRevoke}: as {@link #clbCommAbort}, but later calls are refused saying the
   * communicator was revoked, for {@link #clbCommShrink}.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommRevoke(@Cast("clbComm_t") long comm);

  /**
   * Calls {@code clbCommFail}: fails the communicator because this rank cannot go on with it (a
   * call it refused), and tells the peers at once, naming this rank and {@code reason}; any thread.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param reason why, as the peers' error gives it
   * @return {@code clbResult_t}: 0 on success, else an error that {@link #clbGetLastError()}
   *     explains
   */
  public static native @Cast("clbResult_t") int clbCommFail(
      @Cast("clbComm_t") long comm, @Cast("const char*") String reason);

  /**
   * Calls {@code clbCommRefuse}: this rank refuses a call for its arguments, checked here; the
   * communicator fails and the peers are told at once, naming this rank, the call and {@code
   * reason}, unless another thread is in a call on it (then {@code clbInvalidUsage}, nothing
   * changes); any thread.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param call the call refused ("allReduce")
   * @param collective 1 where the call is a collective (numbered among them), else 0
   * @param reason why, as the peers' error gives it
   * @return {@code clbResult_t}: the refusal ({@code clbInvalidArgument}) whose message {@link
   *     #clbGetLastError()} gives, or another error it explains
   */
  public static native @Cast("clbResult_t") int clbCommRefuse(
      @Cast("clbComm_t") long comm,
      @Cast("const char*") String call,
      int collective,
      @Cast("const char*") String reason);

  /**
   * Calls {@code clbCommGetAsyncError}: what has gone wrong on the communicator, without making a
   * call; any thread.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param asyncError out: element 0 receives {@code clbSuccess} or the error's {@code clbResult_t}
   * @return 0 ({@code clbSuccess}), or {@code clbInvalidArgument} for a null handle or array
   */
  public static native @Cast("clbResult_t") int clbCommGetAsyncError(
      @Cast("clbComm_t") long comm, @Cast("clbResult_t*") int[] asyncError);

  /**
   * Calls {@code clbCommRank}: this rank's number in the communicator.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param rank out: element 0 receives the rank
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommRank(
      @Cast("clbComm_t") long comm, int[] rank);

  /**
   * Calls {@code clbCommCount}: the number of ranks of the communicator.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param nranks out: element 0 receives the number of ranks
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommCount(
      @Cast("clbComm_t") long comm, int[] nranks);

  /**
   * Calls {@code clbCommMemStats}: the host and device memory the communicator holds, now and at
   * its peak.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param stats out: the struct to fill
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommMemStats(
      @Cast("clbComm_t") long comm, ClbMemStats stats);

  /**
   * Calls {@code clbCommTrim}: gives back host staging memory not in use (local; device buffers
   * stay).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommTrim(@Cast("clbComm_t") long comm);

  /**
   * Calls {@code clbCommSuspend}: gives back the memory the communicator's calls set up
   * (collective).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommSuspend(@Cast("clbComm_t") long comm);

  /**
   * Calls {@code clbCommResume}: ends a suspend on this rank.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommResume(@Cast("clbComm_t") long comm);

  /**
   * Calls {@code clbCommSuspended}: whether the communicator is suspended.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param suspended out: [0] is 1 while suspended, else 0
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommSuspended(
      @Cast("clbComm_t") long comm, int[] suspended);

  /**
   * Calls {@code clbCommLastAlgorithm}: the algorithm of this rank's last collective on the
   * communicator.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param algorithm out: element 0 receives the {@code clbAlgorithm_t}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommLastAlgorithm(
      @Cast("clbComm_t") long comm, int[] algorithm);

  /**
   * Calls {@code clbCommInfo}: what the communicator runs on, one fact per line (transport per
   * link, thresholds, libraries loaded).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param buf out: receives the text, NUL-terminated
   * @param bufBytes size of {@code buf} in bytes
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommInfo(
      @Cast("clbComm_t") long comm, @Cast("char*") byte[] buf, @Cast("size_t") long bufBytes);

  /**
   * Calls {@code clbCommRegister}: registers a device buffer for zero-copy reads by ranks in other
   * processes; collective.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param buff start of the buffer (device memory from {@code cudaMalloc}, {@code cuMemAlloc} or
   *     {@code clbDeviceAlloc})
   * @param bytes size of the buffer in bytes
   * @param handle out: element 0 receives the registration's handle, for {@link #clbCommDeregister}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommRegister(
      @Cast("clbComm_t") long comm,
      @Cast("void*") long buff,
      @Cast("size_t") long bytes,
      @Cast("void**") long[] handle);

  /**
   * Calls {@code clbCommDeregister}: ends a registration, after this rank's device work on the
   * communicator has finished; collective.
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param handle the handle from {@link #clbCommRegister}
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbCommDeregister(
      @Cast("clbComm_t") long comm, @Cast("void*") long handle);

  // ---- collectives on raw addresses (host memory you manage, device memory) ----

  /**
   * Calls {@code clbBarrier}: every rank waits for every other; on a stream when {@code stream}
   * is not 0 (enqueued, capturable).
   *
   * @param comm the communicator's {@code clbComm_t} handle, from {@link #clbCommInitRank}
   * @param stream a CUDA stream handle, or 0 for a barrier of the calling threads
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbBarrier(
      @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  /**
   * Calls {@code clbAllReduce} on raw addresses: every rank ends with the reduction of all ranks'
   * send buffers in its recv buffer.
   *
   * @param sendbuff address of this rank's input, {@code count} elements
   * @param recvbuff address of the output, {@code count} elements; may be the send buffer (in
   *     place)
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param op a {@code clbRedOp_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbAllReduce(
      @Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbAllGather} on raw addresses: every rank ends with all ranks' send buffers, in
   * rank order, in its recv buffer.
   *
   * @param sendbuff address of this rank's input, {@code sendcount} elements
   * @param recvbuff address of the output, nranks * {@code sendcount} elements
   * @param sendcount number of elements each rank contributes
   * @param datatype a {@code clbDataType_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbAllGather(
      @Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff,
      @Cast("size_t") long sendcount,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbReduceScatter} on raw addresses: reduces all ranks' send buffers and leaves
   * this rank's block of the result in its recv buffer.
   *
   * @param sendbuff address of this rank's input, nranks * {@code recvcount} elements
   * @param recvbuff address of the output, {@code recvcount} elements
   * @param recvcount number of elements of each rank's block
   * @param datatype a {@code clbDataType_t}
   * @param op a {@code clbRedOp_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbReduceScatter(
      @Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff,
      @Cast("size_t") long recvcount,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbBroadcast} on raw addresses: every rank ends with the root's send buffer in its
   * recv buffer.
   *
   * @param sendbuff address of this rank's input, {@code count} elements, read on the root only
   * @param recvbuff address of the output, {@code count} elements
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param root the rank whose send buffer is broadcast
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbBroadcast(
      @Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int root,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  // ---- collectives on direct ByteBuffers: address + position() is passed ----

  /**
   * Calls {@code clbAllReduce} on direct buffers: every rank ends with the reduction of all ranks'
   * send buffers in its recv buffer.
   *
   * @param sendbuff this rank's input, a direct buffer, from its position, {@code count} elements
   * @param recvbuff the output, a direct buffer, from its position, {@code count} elements; may be
   *     the send buffer (in place)
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param op a {@code clbRedOp_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbAllReduce(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbAllGather} on direct buffers: every rank ends with all ranks' send buffers, in
   * rank order, in its recv buffer.
   *
   * @param sendbuff this rank's input, a direct buffer, from its position, {@code sendcount}
   *     elements
   * @param recvbuff the output, a direct buffer, from its position, nranks * {@code sendcount}
   *     elements
   * @param sendcount number of elements each rank contributes
   * @param datatype a {@code clbDataType_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbAllGather(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long sendcount,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbReduceScatter} on direct buffers: reduces all ranks' send buffers and leaves
   * this rank's block of the result in its recv buffer.
   *
   * @param sendbuff this rank's input, a direct buffer, from its position, nranks *
   *     {@code recvcount} elements
   * @param recvbuff the output, a direct buffer, from its position, {@code recvcount} elements
   * @param recvcount number of elements of each rank's block
   * @param datatype a {@code clbDataType_t}
   * @param op a {@code clbRedOp_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbReduceScatter(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long recvcount,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbBroadcast} on direct buffers: every rank ends with the root's send buffer in
   * its recv buffer.
   *
   * @param sendbuff this rank's input, a direct buffer, from its position, {@code count} elements,
   *     read on the root only
   * @param recvbuff the output, a direct buffer, from its position, {@code count} elements
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param root the rank whose send buffer is broadcast
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream CUDA stream handle for device buffers; ignored for host buffers (pass 0)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbBroadcast(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int root,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  // ---- point-to-point and groups ----

  /**
   * Calls {@code clbSend} on a direct buffer: {@code count} elements to rank {@code peer}.
   *
   * @param sendbuff the data, a direct buffer, from its position
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param peer the receiving rank
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbSend(
      ByteBuffer sendbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int peer,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbSend} on a raw address.
   *
   * @param sendbuff address of the data
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param peer the receiving rank
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream a CUDA stream handle for device memory, or 0
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbSend(
      @Cast("const void*") long sendbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int peer,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbRecv} on a direct buffer: {@code count} elements from rank {@code peer}.
   *
   * @param recvbuff where the data goes, a direct buffer, from its position
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param peer the sending rank
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbRecv(
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int peer,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbRecv} on a raw address.
   *
   * @param recvbuff address where the data goes
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param peer the sending rank
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream a CUDA stream handle, or 0
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbRecv(
      @Cast("void*") long recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int peer,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbAllToAll} on direct buffers.
   *
   * @param sendbuff nranks blocks of {@code count} elements
   * @param recvbuff nranks blocks of {@code count} elements
   * @param count elements per peer
   * @param datatype a {@code clbDataType_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbAllToAll(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbAllToAllv} on direct buffers; counts and displacements in elements, nranks
   * entries each ({@code long} is {@code size_t} on the 64-bit platforms Colibri runs on).
   *
   * @param sendbuff the data to send
   * @param sendcounts elements to each rank
   * @param sdispls where each rank's elements start in sendbuff
   * @param recvbuff where the data goes
   * @param recvcounts elements from each rank
   * @param rdispls where each rank's elements go in recvbuff
   * @param datatype a {@code clbDataType_t}
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbAllToAllv(
      ByteBuffer sendbuff,
      @Cast("const size_t*") long[] sendcounts,
      @Cast("const size_t*") long[] sdispls,
      ByteBuffer recvbuff,
      @Cast("const size_t*") long[] recvcounts,
      @Cast("const size_t*") long[] rdispls,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbReduce} on direct buffers.
   *
   * @param sendbuff this rank's input
   * @param recvbuff the result, at the root
   * @param count number of elements
   * @param datatype a {@code clbDataType_t}
   * @param op a {@code clbRedOp_t}
   * @param root the rank that gets the result
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbReduce(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op,
      int root,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbGather} on direct buffers.
   *
   * @param sendbuff this rank's {@code count} elements
   * @param recvbuff nranks blocks, at the root
   * @param count elements per rank
   * @param datatype a {@code clbDataType_t}
   * @param root the rank that gathers
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbGather(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int root,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbScatter} on direct buffers.
   *
   * @param sendbuff nranks blocks, at the root
   * @param recvbuff this rank's {@code count} elements
   * @param count elements per rank
   * @param datatype a {@code clbDataType_t}
   * @param root the rank that scatters
   * @param comm the communicator's {@code clbComm_t} handle
   * @param stream 0 (host buffers)
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbScatter(
      ByteBuffer sendbuff,
      ByteBuffer recvbuff,
      @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype,
      int root,
      @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbGroupStart}: this thread's calls are recorded until its {@code clbGroupEnd}.
   *
   * @return 0 ({@code clbSuccess})
   */
  public static native @Cast("clbResult_t") int clbGroupStart();

  /**
   * Calls {@code clbGroupEnd}: the outermost end runs the group's calls.
   *
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbGroupEnd();

  /**
   * Calls {@code clbTypeSize}: the size of one element of a type.
   *
   * @param datatype a {@code clbDataType_t}
   * @return bytes per element
   */
  public static native @Cast("size_t") long clbTypeSize(@Cast("clbDataType_t") int datatype);

  // ---- device helpers (colibri.h "device helpers"; used by io.colibri.jni.Device) ----

  /**
   * Calls {@code clbDeviceCount}: the number of GPUs the driver sees.
   *
   * @param count out: element 0 receives the number of GPUs
   * @return 0 ({@code clbSuccess}), {@code clbUnsupported} without a GPU or driver, or another
   *     {@code clbResult_t} of the failure
   */
  public static native @Cast("clbResult_t") int clbDeviceCount(int[] count);

  /**
   * Calls {@code clbDeviceAlloc}: allocates device memory on a GPU.
   *
   * @param ptr out: element 0 receives the device address
   * @param bytes size in bytes
   * @param device the GPU, 0..count-1
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbDeviceAlloc(
      @Cast("void**") long[] ptr, @Cast("size_t") long bytes, int device);

  /**
   * Calls {@code clbDeviceFree}: frees memory from {@link #clbDeviceAlloc}.
   *
   * @param ptr the device address
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbDeviceFree(@Cast("void*") long ptr);

  /**
   * Calls {@code clbMemcpy}: copies between any host or device memory; with a stream the copy is
   * asynchronous on it.
   *
   * @param dst destination address
   * @param src source address
   * @param bytes number of bytes to copy
   * @param stream CUDA stream handle, or 0 for a synchronous copy
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbMemcpy(
      @Cast("void*") long dst,
      @Cast("const void*") long src,
      @Cast("size_t") long bytes,
      @Cast("void*") long stream);

  /**
   * Calls {@code clbStreamCreate}: creates a CUDA stream on a GPU.
   *
   * @param stream out: element 0 receives the stream handle
   * @param device the GPU, 0..count-1
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbStreamCreate(
      @Cast("void**") long[] stream, int device);

  /**
   * Calls {@code clbStreamDestroy}: destroys a stream from {@link #clbStreamCreate}.
   *
   * @param stream the stream handle
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbStreamDestroy(@Cast("void*") long stream);

  /**
   * Calls {@code clbGraphLaunch}: replays an instantiated CUDA graph holding device calls of the
   * given communicators, the rank threads that share the GPU meeting first as for eager calls.
   *
   * @param graphExec the {@code CUgraphExec} / {@code cudaGraphExec_t} handle
   * @param stream the stream handle
   * @param comms the communicators' {@code clbComm_t} handles
   * @param ncomms how many of {@code comms} to take
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbGraphLaunch(
      @Cast("void*") long graphExec,
      @Cast("void*") long stream,
      @Cast("const clbComm_t*") long[] comms,
      int ncomms);

  /**
   * Calls {@code clbStreamSynchronize}: waits until the work on a stream has finished.
   *
   * @param stream the stream handle
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbStreamSynchronize(@Cast("void*") long stream);

  /**
   * Calls {@code clbSetKernelDir}: sets the folder of the kernel images (colibri_kernels_sm*.cubin,
   * colibri_kernels.ptx) for the whole process.
   *
   * @param dir the folder
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbSetKernelDir(@Cast("const char*") String dir);

  /**
   * Calls {@code clbSetPluginDir}: sets the folder of the network plugins
   * ({@code libcolibri_verbs.so}, ...) for the whole process; the core looks there first when a
   * transport that is a plugin is asked for.
   *
   * @param dir the folder
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbSetPluginDir(@Cast("const char*") String dir);

  /**
   * Calls {@code clbDeviceInfo}: what the driver says about a GPU, creating no context.
   *
   * @param device the GPU, 0..count-1
   * @param info out: the struct to fill
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbDeviceInfo(int device, ClbDeviceInfo info);

  /**
   * Calls {@code clbDeviceCanAccessPeer}: whether a GPU can map another GPU's memory.
   *
   * @param device the GPU that maps
   * @param peer the GPU whose memory is mapped
   * @param canAccess out: element 0 receives 1 if it can (also when they are the same GPU), else 0
   * @return 0 ({@code clbSuccess}) or the {@code clbResult_t} of the failure, which
   *     {@link #clbGetLastError()} explains
   */
  public static native @Cast("clbResult_t") int clbDeviceCanAccessPeer(
      int device, int peer, int[] canAccess);

  /**
   * Address of a direct buffer's position (the cast is the whole function).
   *
   * @param buffer a direct buffer
   * @return the native address of its element at {@code position()}
   */
  public static native @Cast("uintptr_t") @Name("reinterpret_cast<uintptr_t>") long addressOf(
      @Cast("const char*") ByteBuffer buffer);
}
