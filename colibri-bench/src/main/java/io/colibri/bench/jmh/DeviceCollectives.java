/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import io.colibri.DataType;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.Pointer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One collective on device memory, the same way for both libraries: every rank has its own send
 * and receive buffer (cudaMalloc, zeroed) and its own non-blocking stream on its GPU; one thread
 * (the benchmark's) issues {@link #CALLS} calls on every rank, rank after rank for each call (NCCL
 * inside ncclGroupStart/End when there are several ranks), then synchronizes every stream. The
 * score is that wall time divided by {@link #CALLS}: microseconds per collective, from the first
 * enqueue to the end of the last rank's last kernel (see docs/jmh.md for why).
 *
 * <p>In {@code mode=graph} the {@link #CALLS} calls of each rank are captured once into a CUDA
 * graph per rank (at set-up, after a warm-up), and one operation launches every rank's graph and
 * synchronizes.
 *
 * <p>Sizes follow nccl-tests and the perf tool: {@code bytes} is each rank's message for allReduce
 * and broadcast, all ranks' data (the gathered buffer, the buffer to scatter) for allGather and
 * reduceScatter; rounded down to whole elements, at least one per rank. Reductions are sums,
 * broadcast's root is rank 0, every call is out of place.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 500, timeUnit = TimeUnit.MILLISECONDS)
@Measurement(iterations = 3, time = 500, timeUnit = TimeUnit.MILLISECONDS)
public abstract class DeviceCollectives {
  /** Calls per rank in one benchmark operation; JMH divides the time by it. */
  public static final int CALLS = 20;

  /** allReduce, allGather, reduceScatter or broadcast. */
  @Param({"allReduce", "allGather", "reduceScatter", "broadcast"})
  public String collective;

  /** Message size in bytes (suffixes K, M, G allowed: 64K, 256M). */
  @Param({"8", "1048576", "67108864"})
  public String bytes;

  /** Element type: float32, bfloat16 (also float16, float64, the integer types). */
  @Param({"float32", "bfloat16"})
  public String dtype;

  /** eager (calls issued in the timed loop) or graph (CUDA graphs replayed). */
  @Param({"eager"})
  public String mode;

  /** GPUs to use, GPU 0 up; 0 = every visible GPU. */
  @Param({"0"})
  public int gpus;

  /** The collective of {@link #collective}, parsed at set-up. */
  protected Coll coll;

  /** The element type of {@link #dtype}, parsed at set-up. */
  protected DataType type;

  /** Number of ranks: GPUs used times {@link #ranksPerGpu()}. */
  protected int nranks;

  /** GPU of each rank. */
  protected int[] gpuOf;

  /** Elements per rank: allReduce and broadcast count, allGather send count, reduceScatter recv count. */
  protected long count;

  /** Each rank's send buffer (device memory, zeroed), indexed by rank. */
  protected Pointer[] send;

  /** Each rank's receive buffer (device memory, zeroed), indexed by rank. */
  protected Pointer[] recv;

  /** Each rank's non-blocking stream on its GPU, indexed by rank. */
  protected CUstream_st[] streams;

  private boolean graphMode;
  private CUgraph_st[] graphs;
  private CUgraphExec_st[] execs;
  private int currentGpu = -1;
  private int usedGpus;

  /** {@return the library's name in messages, e.g. "Colibri"} */
  protected abstract String library();

  /** Loads the library's bindings (and the CUDA runtime's), with a clear message if they cannot. */
  protected abstract void loadLibrary();

  /** {@return ranks per GPU, 1 or more (Colibri can put several on one GPU; NCCL 2.28 cannot)} */
  protected int ranksPerGpu() {
    return 1;
  }

  /** Creates the communicators (buffers and streams exist). */
  protected abstract void initComms();

  /** Runs the collective at least once on every rank and waits: set-up that calls may need. */
  protected abstract void warmUp();

  /** Issues one call of the collective on every rank, from this thread. */
  protected abstract void issueRound();

  /** Frees the communicators (streams are idle). */
  protected abstract void closeComms();

  /**
   * Parses the parameters, allocates every rank's buffers and stream, creates the communicators,
   * warms up and, in graph mode, captures the graphs.
   */
  @Setup(Level.Trial)
  public void setUp() {
    coll = Coll.parse(collective);
    type = Sizes.parseType(dtype);
    long size = Sizes.parseBytes(bytes);
    switch (mode.trim().toLowerCase(Locale.ROOT)) {
      case "eager":
        graphMode = false;
        break;
      case "graph":
        graphMode = true;
        break;
      default:
        throw new IllegalArgumentException("mode '" + mode + "': use eager or graph");
    }
    int perGpu = ranksPerGpu();
    if (perGpu < 1) {
      throw new IllegalArgumentException("ranksPerGpu must be 1 or more, not " + perGpu);
    }
    loadLibrary();
    int visible = Cuda.deviceCount();
    if (visible == 0) {
      throw new IllegalStateException(
          "no GPU is visible (cudaGetDeviceCount = 0): "
              + library()
              + " device benchmarks need one");
    }
    if (gpus < 0 || gpus > visible) {
      throw new IllegalArgumentException(
          "gpus="
              + gpus
              + " but "
              + visible
              + " GPU(s) are"
              + " visible: use 0 (all) or 1.."
              + visible);
    }
    usedGpus = gpus == 0 ? visible : gpus;
    nranks = usedGpus * perGpu;
    gpuOf = new int[nranks];
    for (int r = 0; r < nranks; r++) {
      gpuOf[r] = r / perGpu;
    }
    count = Sizes.countPerRank(coll, size, type, nranks);
    long bufferBytes = count * type.size() * (coll.sizeCountsAllRanks() ? nranks : 1);
    send = new Pointer[nranks];
    recv = new Pointer[nranks];
    streams = new CUstream_st[nranks];
    for (int r = 0; r < nranks; r++) {
      send[r] = Cuda.malloc(bufferBytes, gpuOf[r]);
      recv[r] = Cuda.malloc(bufferBytes, gpuOf[r]);
      streams[r] = Cuda.createStream(gpuOf[r]);
    }
    currentGpu = -1;
    initComms();
    warmUp();
    if (graphMode) {
      capture();
    }
    System.out.println(
        "# "
            + library()
            + ": "
            + coll.label
            + ", "
            + count
            + " "
            + type
            + " per rank ("
            + bufferBytes
            + " B buffers), "
            + nranks
            + " rank(s) on "
            + usedGpus
            + " GPU(s) ["
            + Cuda.describeDevice(0)
            + "], "
            + (graphMode ? "CUDA graph" : "eager")
            + ", "
            + CALLS
            + " calls per rank per operation");
  }

  /**
   * Makes rank {@code r}'s GPU current on this thread (only a call when it changes).
   *
   * @param r the rank, 0..nranks-1
   */
  protected final void useGpuOf(int r) {
    int g = gpuOf[r];
    if (g != currentGpu) {
      Cuda.setDevice(g);
      currentGpu = g;
    }
  }

  private void capture() {
    graphs = new CUgraph_st[nranks];
    execs = new CUgraphExec_st[nranks];
    currentGpu = -1;
    for (int r = 0; r < nranks; r++) {
      useGpuOf(r);
      Cuda.beginCapture(streams[r]);
    }
    RuntimeException failure = null;
    try {
      for (int k = 0; k < CALLS; k++) {
        issueRound();
      }
    } catch (RuntimeException e) {
      failure = e;
    }
    currentGpu = -1;
    for (int r = 0; r < nranks; r++) {
      useGpuOf(r);
      try {
        graphs[r] = Cuda.endCapture(streams[r]);
      } catch (RuntimeException e) {
        if (failure == null) {
          failure = e;
        } else {
          failure.addSuppressed(e);
        }
      }
    }
    if (failure != null) {
      throw new IllegalStateException(
          library()
              + ": capturing "
              + CALLS
              + " "
              + coll.label
              + " calls into CUDA graphs failed: "
              + failure.getMessage(),
          failure);
    }
    // Every rank's graph is instantiated and uploaded before any runs: instantiation may wait for
    // work in the context, and a running rank waits for its peers.
    for (int r = 0; r < nranks; r++) {
      useGpuOf(r);
      execs[r] = Cuda.instantiate(graphs[r]);
    }
    for (int r = 0; r < nranks; r++) {
      useGpuOf(r);
      Cuda.upload(execs[r], streams[r]);
    }
    synchronizeAll();
  }

  private void synchronizeAll() {
    for (int r = 0; r < nranks; r++) {
      Cuda.synchronize(streams[r]);
    }
  }

  /**
   * {@link #CALLS} collectives on every rank, then every stream synchronized: JMH reports this
   * time / {@link #CALLS}.
   */
  @Benchmark
  @OperationsPerInvocation(CALLS)
  public void perCall() {
    currentGpu = -1;
    if (graphMode) {
      for (int r = 0; r < nranks; r++) {
        useGpuOf(r);
        Cuda.launch(execs[r], streams[r]);
      }
    } else {
      useGpuOf(0);
      for (int k = 0; k < CALLS; k++) {
        issueRound();
      }
    }
    synchronizeAll();
  }

  /** Waits for every stream, then frees the graphs, communicators, buffers and streams. */
  @TearDown(Level.Trial)
  public void tearDown() {
    try {
      if (streams != null) {
        for (CUstream_st s : streams) {
          if (s != null && !s.isNull()) {
            Cuda.synchronize(s);
          }
        }
      }
    } finally {
      if (execs != null) {
        for (CUgraphExec_st e : execs) {
          Cuda.destroy(e);
        }
      }
      if (graphs != null) {
        for (CUgraph_st g : graphs) {
          Cuda.destroy(g);
        }
      }
      closeComms();
      for (int r = 0; send != null && r < nranks; r++) {
        Cuda.setDevice(gpuOf[r]);
        Cuda.free(send[r]);
        Cuda.free(recv[r]);
        Cuda.destroy(streams[r]);
      }
    }
  }
}
