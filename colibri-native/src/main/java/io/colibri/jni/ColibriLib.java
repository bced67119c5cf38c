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

  public static native @MemberGetter @Name("CLB_VERSION_CODE") int versionCode();

  public static native @MemberGetter @Name("CLB_PROTOCOL_VERSION") int protocolVersion();

  public static native @MemberGetter @Name("CLB_UNIQUE_ID_BYTES") int uniqueIdBytes();

  public static native @MemberGetter @Name("CLB_DEFAULT_PIPELINE_DEPTH") int defaultPipelineDepth();

  public static native @MemberGetter @Name("CLB_DEFAULT_CHUNK_BYTES") long defaultChunkBytes();

  public static native @MemberGetter @Name("CLB_DEFAULT_DIRECT_MAX_BYTES") long defaultDirectMaxBytes();

  public static native @MemberGetter @Name("CLB_DEFAULT_STAGING_CAP_BYTES") long defaultStagingCapBytes();

  public static native @MemberGetter @Name("CLB_DEFAULT_TIMEOUT_MS") long defaultTimeoutMs();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERSION_CHECK") int defaultVersionCheck();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_PORT") int defaultVerbsPort();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_GID_INDEX") int defaultVerbsGidIndex();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_TRAFFIC_CLASS") int defaultVerbsTrafficClass();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_TIMEOUT") int defaultVerbsTimeout();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_RETRY_COUNT") int defaultVerbsRetryCount();

  public static native @MemberGetter @Name("CLB_DEFAULT_VERBS_QPS_PER_CONNECTION") int defaultVerbsQpsPerConnection();

  /** Bytes of {@code clbConfig_t.verbsDevice}, the terminating NUL included. */
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

    public native @Cast("size_t") long size();

    public native ClbConfig size(long size);

    public native int transport();

    public native ClbConfig transport(int transport);

    public native int algorithm();

    public native ClbConfig algorithm(int algorithm);

    public native int logLevel();

    public native ClbConfig logLevel(int logLevel);

    public native int pipelineDepth();

    public native ClbConfig pipelineDepth(int pipelineDepth);

    public native @Cast("int64_t") long chunkBytes();

    public native ClbConfig chunkBytes(long chunkBytes);

    public native @Cast("int64_t") long directMaxBytes();

    public native ClbConfig directMaxBytes(long directMaxBytes);

    public native @Cast("int64_t") long stagingCapBytes();

    public native ClbConfig stagingCapBytes(long stagingCapBytes);

    public native @Cast("int64_t") long timeoutMs();

    public native ClbConfig timeoutMs(long timeoutMs);

    public native int versionCheck();

    public native ClbConfig versionCheck(int versionCheck);

    public native int verbsPort();

    public native ClbConfig verbsPort(int verbsPort);

    public native int verbsGidIndex();

    public native ClbConfig verbsGidIndex(int verbsGidIndex);

    public native int verbsTrafficClass();

    public native ClbConfig verbsTrafficClass(int verbsTrafficClass);

    public native int verbsTimeout();

    public native ClbConfig verbsTimeout(int verbsTimeout);

    public native int verbsRetryCount();

    public native ClbConfig verbsRetryCount(int verbsRetryCount);

    public native int verbsQpsPerConnection();

    public native ClbConfig verbsQpsPerConnection(int verbsQpsPerConnection);

    /** Byte {@code i} of {@code char verbsDevice[CLB_VERBS_DEVICE_BYTES]}. */
    public native @Cast("char") byte verbsDevice(int i);

    public native ClbConfig verbsDevice(int i, byte b);

    /** {@code verbsDevice} up to its NUL (UTF-8). */
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
     * @throws IllegalArgumentException if it does not fit with its NUL
     */
    public ClbConfig verbsDeviceName(String name) {
      byte[] b = name.getBytes(StandardCharsets.UTF_8);
      int n = verbsDeviceBytes();
      if (b.length >= n) {
        throw new IllegalArgumentException("verbsDevice \"" + name + "\" is " + b.length
            + " bytes long; clbConfig_t holds at most " + (n - 1));
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

    public native @MemberGetter @Cast("int64_t") long hostBytes();

    public native @MemberGetter @Cast("int64_t") long hostPeakBytes();

    public native @MemberGetter @Cast("int64_t") long deviceBytes();

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

    public native @MemberGetter @Cast("const char*") String name();

    public native @MemberGetter int major();

    public native @MemberGetter int minor();

    public native @MemberGetter int driverVersion();

    public native @MemberGetter @Cast("const char*") String pciBusId();

    public native @MemberGetter @Cast("const char*") String image();

    public native @MemberGetter int gpuDirectRdma();

    public native @MemberGetter int dmaBuf();
  }

  // ---- errors and version ----

  public static native @Cast("const char*") String clbGetErrorString(
      @Cast("clbResult_t") int result);

  public static native @Cast("const char*") String clbGetLastError();

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

    protected LogCallback() {
      allocate();
    }

    private native void allocate();

    public native void call(int level, @Cast("const char*") BytePointer message, Pointer user);
  }

  public static native @Cast("clbResult_t") int clbSetLogCallback(LogCallback callback,
      Pointer user);

  public static native @Cast("clbResult_t") int clbSetLogLevel(int level);

  public static native @Cast("clbResult_t") int clbGetLogLevel(int[] level);

  // ---- configuration ----

  public static native @Cast("clbResult_t") int clbConfigInit(ClbConfig config);

  public static native @Cast("clbResult_t") int clbTransportFromName(
      @Cast("const char*") String name, int[] transport);

  public static native @Cast("clbResult_t") int clbAlgorithmFromName(
      @Cast("const char*") String name, int[] algorithm);

  public static native @Cast("const char*") String clbAlgorithmName(int algorithm);

  public static native @Cast("const char*") String clbTransportName(int transport);

  // ---- unique id ----

  public static native @Cast("clbResult_t") int clbGetUniqueId(@Cast("clbUniqueId*") byte[] id);

  public static native @Cast("clbResult_t") int clbUniqueIdFromAddress(
      @Cast("const char*") String host, int port, @Cast("const char*") String secret,
      @Cast("clbUniqueId*") byte[] id);

  public static native @Cast("clbResult_t") int clbUniqueIdRelease(
      @Cast("const clbUniqueId*") byte[] id);

  public static native @Cast("clbResult_t") int clbUniqueIdDescribe(
      @Cast("const clbUniqueId*") byte[] id, @Cast("char*") byte[] buf,
      @Cast("size_t") long bufBytes);

  // ---- communicator ----

  public static native @Cast("clbResult_t") int clbCommInitRank(@Cast("clbComm_t*") long[] comm,
      @Cast("const clbUniqueId*") byte[] id, int rank, int nranks, @Const ClbConfig config);

  public static native @Cast("clbResult_t") int clbCommDestroy(@Cast("clbComm_t") long comm);

  public static native @Cast("clbResult_t") int clbCommAbort(@Cast("clbComm_t") long comm);

  public static native @Cast("clbResult_t") int clbCommGetAsyncError(@Cast("clbComm_t") long comm,
      @Cast("clbResult_t*") int[] asyncError);

  public static native @Cast("clbResult_t") int clbCommRank(@Cast("clbComm_t") long comm,
      int[] rank);

  public static native @Cast("clbResult_t") int clbCommCount(@Cast("clbComm_t") long comm,
      int[] nranks);

  public static native @Cast("clbResult_t") int clbCommMemStats(@Cast("clbComm_t") long comm,
      ClbMemStats stats);

  public static native @Cast("clbResult_t") int clbCommTrim(@Cast("clbComm_t") long comm);

  public static native @Cast("clbResult_t") int clbCommLastAlgorithm(
      @Cast("clbComm_t") long comm, int[] algorithm);

  public static native @Cast("clbResult_t") int clbCommInfo(@Cast("clbComm_t") long comm,
      @Cast("char*") byte[] buf, @Cast("size_t") long bufBytes);

  public static native @Cast("clbResult_t") int clbCommRegister(@Cast("clbComm_t") long comm,
      @Cast("void*") long buff, @Cast("size_t") long bytes, @Cast("void**") long[] handle);

  public static native @Cast("clbResult_t") int clbCommDeregister(@Cast("clbComm_t") long comm,
      @Cast("void*") long handle);

  // ---- collectives on raw addresses (host memory you manage, device memory) ----

  public static native @Cast("clbResult_t") int clbAllReduce(@Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff, @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype, @Cast("clbRedOp_t") int op,
      @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbAllGather(@Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff, @Cast("size_t") long sendcount,
      @Cast("clbDataType_t") int datatype, @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbReduceScatter(
      @Cast("const void*") long sendbuff, @Cast("void*") long recvbuff,
      @Cast("size_t") long recvcount, @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op, @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbBroadcast(@Cast("const void*") long sendbuff,
      @Cast("void*") long recvbuff, @Cast("size_t") long count,
      @Cast("clbDataType_t") int datatype, int root, @Cast("clbComm_t") long comm,
      @Cast("void*") long stream);

  // ---- collectives on direct ByteBuffers: address + position() is passed ----

  public static native @Cast("clbResult_t") int clbAllReduce(ByteBuffer sendbuff,
      ByteBuffer recvbuff, @Cast("size_t") long count, @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op, @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbAllGather(ByteBuffer sendbuff,
      ByteBuffer recvbuff, @Cast("size_t") long sendcount, @Cast("clbDataType_t") int datatype,
      @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbReduceScatter(ByteBuffer sendbuff,
      ByteBuffer recvbuff, @Cast("size_t") long recvcount, @Cast("clbDataType_t") int datatype,
      @Cast("clbRedOp_t") int op, @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbBroadcast(ByteBuffer sendbuff,
      ByteBuffer recvbuff, @Cast("size_t") long count, @Cast("clbDataType_t") int datatype,
      int root, @Cast("clbComm_t") long comm, @Cast("void*") long stream);

  public static native @Cast("size_t") long clbTypeSize(@Cast("clbDataType_t") int datatype);

  // ---- device helpers (colibri.h "device helpers"; used by io.colibri.jni.Device) ----

  public static native @Cast("clbResult_t") int clbDeviceCount(int[] count);

  public static native @Cast("clbResult_t") int clbDeviceAlloc(@Cast("void**") long[] ptr,
      @Cast("size_t") long bytes, int device);

  public static native @Cast("clbResult_t") int clbDeviceFree(@Cast("void*") long ptr);

  public static native @Cast("clbResult_t") int clbMemcpy(@Cast("void*") long dst,
      @Cast("const void*") long src, @Cast("size_t") long bytes, @Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbStreamCreate(@Cast("void**") long[] stream,
      int device);

  public static native @Cast("clbResult_t") int clbStreamDestroy(@Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbStreamSynchronize(@Cast("void*") long stream);

  public static native @Cast("clbResult_t") int clbSetKernelDir(@Cast("const char*") String dir);

  public static native @Cast("clbResult_t") int clbDeviceInfo(int device, ClbDeviceInfo info);

  public static native @Cast("clbResult_t") int clbDeviceCanAccessPeer(int device, int peer,
      int[] canAccess);

  /** Address of a direct buffer's position (the cast is the whole function). */
  public static native @Cast("uintptr_t") @Name("reinterpret_cast<uintptr_t>") long addressOf(
      @Cast("const char*") ByteBuffer buffer);
}
