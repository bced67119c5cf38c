/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.Pointer;

/**
 * The GPU decoder's collectives on one rank, on device buffers and the rank's stream: Colibri's
 * ({@link ColibriDeviceCollectives}) or NCCL's ({@link NcclDeviceCollectives}), so that one
 * decoder runs over either in the same run.
 */
public interface DeviceCollectives extends AutoCloseable {

  /** @return the group's size */
  int size();

  /** @return this rank */
  int rank();

  /** @return the library's name and version, for the report */
  String library();

  /**
   * Sums {@code count} elements over the ranks, in place, on {@code stream}.
   *
   * @param buf the device buffer
   * @param count elements
   * @param type their type
   * @param stream the rank's stream
   */
  void allReduceSum(Pointer buf, long count, Precision type, CUstream_st stream);

  /**
   * Gathers every rank's {@code count} elements of {@code send} into {@code recv}, rank-major, on
   * {@code stream}.
   *
   * @param send this rank's part
   * @param recv size() × count elements
   * @param count elements per rank
   * @param type their type
   * @param stream the rank's stream
   */
  void allGather(Pointer send, Pointer recv, long count, Precision type, CUstream_st stream);

  /**
   * Replays a graph that holds this library's calls, as the library wants it replayed.
   *
   * @param graph the instantiated graph
   * @param stream the rank's stream
   */
  void launchGraph(CUgraphExec_st graph, CUstream_st stream);

  /**
   * Throws the library's asynchronous error, if it has one (a device wait that timed out leaves
   * its kernels' outputs undefined while the stream itself completes).
   */
  void checkHealthy();

  /**
   * Registers a device buffer that this library's collectives will use, so that ranks in other
   * processes read it in place instead of copying it through staging memory of the library's own.
   * Collective: every rank registers its buffers at the same point of its sequence of calls, before
   * any capture that uses them. Libraries without such a registration do nothing.
   *
   * @param buf the start of the buffer (device memory from cudaMalloc)
   * @param bytes its size
   * @return what deregisters it (also collective): close it before freeing the buffer
   */
  default Registered register(Pointer buf, long bytes) {
    return () -> {};
  }

  /** A buffer registered with {@link #register}; closing it deregisters it. */
  interface Registered extends AutoCloseable {
    @Override
    void close();
  }

  /** @return the device memory the library counts as its own, in bytes, or -1 where it does not say */
  long ownDeviceBytes();

  /**
   * {@code cudaGraphLaunch}, for libraries that replay a graph as CUDA does.
   *
   * @param graph the instantiated graph
   * @param stream the stream
   */
  static void cudaLaunch(CUgraphExec_st graph, CUstream_st stream) {
    int rc = org.bytedeco.cuda.global.cudart.cudaGraphLaunch(graph, stream);
    if (rc != org.bytedeco.cuda.global.cudart.cudaSuccess) {
      throw new IllegalStateException("cudaGraphLaunch failed: error " + rc);
    }
  }

  /** Destroys the communicator. */
  @Override
  void close();
}
