/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.bytedeco.cuda.global.nccl.ncclAllReduce;
import static org.bytedeco.cuda.global.nccl.ncclFloat32;
import static org.bytedeco.cuda.global.nccl.ncclSum;

import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import io.colibri.cuda.CudaCollectives;
import io.colibri.jni.ColibriLib;
import io.colibri.jni.Device;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.javacpp.Pointer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What one call costs the calling thread, on a 1-rank communicator with an 8-byte float32
 * allReduce (out of place), in nanoseconds per call.
 *
 * <ul>
 *   <li>{@code colibriHost}, {@code colibriHostAddress}: the host path (direct ByteBuffers, or
 *       their addresses with stream 0): Java, JNI, argument checks, the copy, return. Needs no GPU;
 *       the CI smoke benchmark.
 *   <li>{@code colibriDevice}: the device path on raw addresses: Java, JNI, checks, enqueueing the
 *       kernels on the stream, return. {@code colibriDeviceJavaCpp} the same through {@code
 *       CudaCollectives} with the presets' {@code Pointer}s.
 *   <li>{@code colibriDeviceBinding}: {@code clbAllReduce} straight through the binding, on a
 *       communicator made there: the JNI and native part of {@code colibriDevice}.
 *   <li>{@code ncclDevice}: {@code ncclAllReduce} through the presets' JavaCPP binding.
 *   <li>{@code cudaMemsetAsync}, {@code cuMemsetD8Async}: one 8-byte memset through the presets
 *       (runtime and driver), the floor for anything that enqueues work from Java.
 *   <li>{@code cuGraphLaunch}: the launch of a prepared graph of one 8-byte memset, the floor for
 *       a call that runs a kernel (Colibri's eager calls replay prepared graphs).
 *   <li>{@code jniFloor}: a native getter, the JNI transition alone.
 * </ul>
 *
 * <p>The device variants time {@link #BATCH} calls in a row into an idle stream and synchronize
 * the stream before each batch, outside the timing (a JMH invocation-level set-up), so the score
 * is the enqueue cost, not the GPU's time, and the queue never fills.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 500, timeUnit = TimeUnit.MILLISECONDS)
@Measurement(iterations = 3, time = 500, timeUnit = TimeUnit.MILLISECONDS)
public class CallOverhead {
  /** Device calls per timed invocation. */
  public static final int BATCH = 100;

  /** Two float32 elements: 8 bytes. */
  static final long COUNT = 2;

  static final long BYTES = 8;

  /** clbFloat32 and clbSum, the C ABI's codes. */
  static final int FLOAT32 = DataType.FLOAT32.code();

  static final int SUM = ReduceOp.SUM.code();

  /** A 1-rank communicator and two 8-byte direct buffers: no GPU involved. */
  @State(Scope.Thread)
  public static class Host {
    Communicator comm;
    ByteBuffer send;
    ByteBuffer recv;
    long sendAddress;
    long recvAddress;

    /** Creates the communicator and buffers and checks one allReduce's result. */
    @Setup(Level.Trial)
    public void setUp() {
      comm = Communicator.init(UniqueId.create(), 0, 1);
      send = ByteBuffer.allocateDirect((int) BYTES).order(ByteOrder.nativeOrder());
      recv = ByteBuffer.allocateDirect((int) BYTES).order(ByteOrder.nativeOrder());
      send.putFloat(0, 1.5f).putFloat(4, 2.5f);
      sendAddress = Device.address(send);
      recvAddress = Device.address(recv);
      comm.allReduce(send, recv, COUNT, DataType.FLOAT32, ReduceOp.SUM);
      if (recv.getFloat(0) != 1.5f || recv.getFloat(4) != 2.5f) {
        throw new IllegalStateException(
            "1-rank allReduce gave "
                + recv.getFloat(0)
                + ", "
                + recv.getFloat(4)
                + " instead of 1.5, 2.5");
      }
    }

    /** Closes the communicator. */
    @TearDown(Level.Trial)
    public void tearDown() {
      comm.close();
    }
  }

  /**
   * One allReduce on direct ByteBuffers.
   *
   * @param h the communicator and buffers
   */
  @Benchmark
  public void colibriHost(Host h) {
    h.comm.allReduce(h.send, h.recv, COUNT, DataType.FLOAT32, ReduceOp.SUM);
  }

  /**
   * The JNI floor: one call of a native getter that returns a constant.
   *
   * @return the constant, so that the call is not optimized away
   */
  @Benchmark
  public int jniFloor() {
    return ColibriLib.versionCode();
  }

  /**
   * One allReduce on the buffers' addresses, stream 0.
   *
   * @param h the communicator and buffers
   */
  @Benchmark
  public void colibriHostAddress(Host h) {
    h.comm.allReduce(h.sendAddress, h.recvAddress, COUNT, DataType.FLOAT32, ReduceOp.SUM, 0L);
  }

  /** Two 8-byte device buffers and a non-blocking stream on GPU 0 (not a JMH state itself). */
  static final class GpuBuffers {
    final Pointer send;
    final Pointer recv;
    final CUstream_st stream;
    final long sendAddress;
    final long recvAddress;
    final long streamHandle;

    GpuBuffers() {
      if (Cuda.deviceCount() == 0) {
        throw new IllegalStateException("no GPU is visible (cudaGetDeviceCount = 0)");
      }
      send = Cuda.malloc(BYTES, 0);
      recv = Cuda.malloc(BYTES, 0);
      stream = Cuda.createStream(0);
      sendAddress = send.address();
      recvAddress = recv.address();
      streamHandle = stream.address();
    }

    void drain() {
      Cuda.synchronize(stream);
    }

    void release() {
      Cuda.setDevice(0);
      Cuda.synchronize(stream);
      Cuda.free(send);
      Cuda.free(recv);
      Cuda.destroy(stream);
    }
  }

  /**
   * GPU buffers, for the floors: cudaMemsetAsync, the driver's cuMemsetD8Async and the launch of
   * a prepared graph of one 8-byte memset.
   */
  @State(Scope.Thread)
  public static class CudaGpu {
    GpuBuffers g;
    CUgraph_st graph;
    CUgraphExec_st exec;

    /**
     * Loads the CUDA runtime, allocates the buffers and stream on GPU 0 and captures the memset
     * graph.
     */
    @Setup(Level.Trial)
    public void setUp() {
      Cuda.load();
      g = new GpuBuffers();
      Cuda.beginCapture(g.stream);
      Cuda.check(
          org.bytedeco.cuda.global.cudart.cudaMemsetAsync(g.recv, 0, BYTES, g.stream),
          "cudaMemsetAsync (captured)");
      graph = Cuda.endCapture(g.stream);
      exec = Cuda.instantiate(graph);
      Cuda.upload(exec, g.stream);
      g.drain();
    }

    /** Outside the timing: every batch starts on an idle stream. */
    @Setup(Level.Invocation)
    public void drain() {
      g.drain();
    }

    /** Frees the graph, the buffers and the stream. */
    @TearDown(Level.Trial)
    public void tearDown() {
      g.drain();
      Cuda.destroy(exec);
      Cuda.destroy(graph);
      g.release();
    }
  }

  /** A 1-rank Colibri communicator with its device path set up, and GPU buffers. */
  @State(Scope.Thread)
  public static class ColibriGpu {
    GpuBuffers g;
    Communicator comm;

    /**
     * Allocates the buffers, creates the communicator and runs one allReduce to set up its device
     * path.
     */
    @Setup(Level.Trial)
    public void setUp() {
      Cuda.load();
      g = new GpuBuffers();
      comm = Communicator.init(UniqueId.create(), 0, 1);
      comm.allReduce(
          g.sendAddress, g.recvAddress, COUNT, DataType.FLOAT32, ReduceOp.SUM, g.streamHandle);
      g.drain();
    }

    /** Outside the timing: every batch starts on an idle stream. */
    @Setup(Level.Invocation)
    public void drain() {
      g.drain();
    }

    /** Waits for the stream, closes the communicator and frees the buffers. */
    @TearDown(Level.Trial)
    public void tearDown() {
      g.drain();
      comm.close();
      g.release();
    }
  }

  /** A 1-rank communicator made through the binding alone (no Java API), and GPU buffers. */
  @State(Scope.Thread)
  public static class BindingGpu {
    GpuBuffers g;
    Communicator loader;
    long handle;

    /**
     * Allocates the buffers, creates the communicator (after a Java one, which loads and sets up
     * the native library) and runs one clbAllReduce.
     */
    @Setup(Level.Trial)
    public void setUp() {
      Cuda.load();
      loader = Communicator.init(UniqueId.create(), 0, 1);
      g = new GpuBuffers();
      byte[] id = new byte[ColibriLib.uniqueIdBytes()];
      long[] comm = new long[1];
      check(ColibriLib.clbGetUniqueId(id), "clbGetUniqueId");
      check(ColibriLib.clbCommInitRank(comm, id, 0, 1, null), "clbCommInitRank");
      handle = comm[0];
      check(
          ColibriLib.clbAllReduce(
              g.sendAddress, g.recvAddress, COUNT, FLOAT32, SUM, handle, g.streamHandle),
          "clbAllReduce");
      g.drain();
    }

    /** Outside the timing: every batch starts on an idle stream. */
    @Setup(Level.Invocation)
    public void drain() {
      g.drain();
    }

    /** Waits for the stream, destroys the communicator and frees the buffers. */
    @TearDown(Level.Trial)
    public void tearDown() {
      g.drain();
      check(ColibriLib.clbCommDestroy(handle), "clbCommDestroy");
      loader.close();
      g.release();
    }

    static void check(int rc, String call) {
      if (rc != 0) {
        throw new IllegalStateException(call + ": " + ColibriLib.clbGetLastError());
      }
    }
  }

  /** A 1-rank NCCL communicator on GPU 0 and GPU buffers. */
  @State(Scope.Thread)
  public static class NcclGpu {
    GpuBuffers g;
    ncclComm comm;

    /** Allocates the buffers, creates the NCCL communicator and runs one ncclAllReduce. */
    @Setup(Level.Trial)
    public void setUp() {
      Nccl.load();
      g = new GpuBuffers();
      comm = Nccl.initAll(new int[] {0})[0];
      Nccl.check(
          ncclAllReduce(g.send, g.recv, COUNT, ncclFloat32, ncclSum, comm, g.stream),
          "ncclAllReduce",
          comm);
      g.drain();
    }

    /** Outside the timing: every batch starts on an idle stream. */
    @Setup(Level.Invocation)
    public void drain() {
      g.drain();
    }

    /**
     * Waits for the stream, checks NCCL's async error, destroys the communicator and frees the
     * buffers.
     */
    @TearDown(Level.Trial)
    public void tearDown() {
      g.drain();
      try {
        Nccl.checkAsync(comm);
      } finally {
        Nccl.destroyAll(new ncclComm[] {comm});
        g.release();
      }
    }
  }

  /**
   * {@link #BATCH} allReduce calls on raw device addresses, enqueued on the stream.
   *
   * @param s the communicator, buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void colibriDevice(ColibriGpu s) {
    Communicator comm = s.comm;
    GpuBuffers g = s.g;
    for (int i = 0; i < BATCH; i++) {
      comm.allReduce(
          g.sendAddress, g.recvAddress, COUNT, DataType.FLOAT32, ReduceOp.SUM, g.streamHandle);
    }
  }

  /**
   * {@link #BATCH} {@code clbAllReduce} calls straight through the binding, without the
   * communicator's Java checks: the part of {@code colibriDevice} that is JNI and native.
   *
   * @param s the communicator, buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void colibriDeviceBinding(BindingGpu s) {
    long h = s.handle;
    GpuBuffers g = s.g;
    for (int i = 0; i < BATCH; i++) {
      int rc =
          ColibriLib.clbAllReduce(
              g.sendAddress, g.recvAddress, COUNT, FLOAT32, SUM, h, g.streamHandle);
      if (rc != 0) {
        BindingGpu.check(rc, "clbAllReduce");
      }
    }
  }

  /**
   * {@link #BATCH} allReduce calls through {@code CudaCollectives} on the presets' pointers.
   *
   * @param s the communicator, buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void colibriDeviceJavaCpp(ColibriGpu s) {
    Communicator comm = s.comm;
    GpuBuffers g = s.g;
    for (int i = 0; i < BATCH; i++) {
      CudaCollectives.allReduce(
          comm, g.send, g.recv, COUNT, DataType.FLOAT32, ReduceOp.SUM, g.stream);
    }
  }

  /**
   * {@link #BATCH} {@code ncclAllReduce} calls, enqueued on the stream.
   *
   * @param s the NCCL communicator, buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void ncclDevice(NcclGpu s) {
    ncclComm comm = s.comm;
    GpuBuffers g = s.g;
    for (int i = 0; i < BATCH; i++) {
      int rc = ncclAllReduce(g.send, g.recv, COUNT, ncclFloat32, ncclSum, comm, g.stream);
      if (rc != 0) {
        Nccl.check(rc, "ncclAllReduce", comm);
      }
    }
  }

  /**
   * {@link #BATCH} 8-byte {@code cuMemsetD8Async} calls (the driver API), enqueued on the stream.
   *
   * @param s the buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void cuMemsetD8Async(CudaGpu s) {
    GpuBuffers g = s.g;
    for (int i = 0; i < BATCH; i++) {
      int rc =
          org.bytedeco.cuda.global.cudart.cuMemsetD8Async(g.recvAddress, (byte) 0, BYTES, g.stream);
      if (rc != 0) {
        throw new IllegalStateException("cuMemsetD8Async returned CUresult " + rc);
      }
    }
  }

  /**
   * {@link #BATCH} launches of a prepared graph of one 8-byte memset, enqueued on the stream.
   *
   * @param s the graph, buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void cuGraphLaunch(CudaGpu s) {
    GpuBuffers g = s.g;
    CUgraphExec_st exec = s.exec;
    for (int i = 0; i < BATCH; i++) {
      int rc = org.bytedeco.cuda.global.cudart.cuGraphLaunch(exec, g.stream);
      if (rc != 0) {
        throw new IllegalStateException("cuGraphLaunch returned CUresult " + rc);
      }
    }
  }

  /**
   * {@link #BATCH} 8-byte {@code cudaMemsetAsync} calls, enqueued on the stream.
   *
   * @param s the buffers and stream
   */
  @Benchmark
  @OperationsPerInvocation(BATCH)
  public void cudaMemsetAsync(CudaGpu s) {
    GpuBuffers g = s.g;
    for (int i = 0; i < BATCH; i++) {
      int rc = org.bytedeco.cuda.global.cudart.cudaMemsetAsync(g.recv, 0, BYTES, g.stream);
      if (rc != 0) {
        Cuda.check(rc, "cudaMemsetAsync");
      }
    }
  }
}
