/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.Communicator;
import io.colibri.ReduceOp;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.Pointer;

/**
 * {@link DeviceCollectives} over a Colibri {@link Communicator}: its device collectives, and
 * graph replays through {@link Communicator#launchGraph} (which rank threads sharing a GPU need).
 */
public final class ColibriDeviceCollectives implements DeviceCollectives {

  private final Communicator comm;

  /** @param comm the rank's communicator (closed by {@link #close()}) */
  public ColibriDeviceCollectives(Communicator comm) {
    this.comm = comm;
  }

  @Override
  public int size() {
    return comm.size();
  }

  @Override
  public int rank() {
    return comm.rank();
  }

  @Override
  public String library() {
    return "Colibri";
  }

  @Override
  public void allReduceSum(Pointer buf, long count, Precision type, CUstream_st stream) {
    comm.allReduce(
        buf.address(), buf.address(), count, type.colibri(), ReduceOp.SUM, stream.address());
  }

  @Override
  public void allGather(
      Pointer send, Pointer recv, long count, Precision type, CUstream_st stream) {
    comm.allGather(send.address(), recv.address(), count, type.colibri(), stream.address());
  }

  /**
   * {@link Communicator#register}: between processes, calls on registered buffers read the peers'
   * buffers in place, and no staging buffer is allocated for them.
   */
  @Override
  public Registered register(Pointer buf, long bytes) {
    Communicator.Registration r = comm.register(buf.address(), bytes);
    return r::close;
  }

  @Override
  public void launchGraph(CUgraphExec_st graph, CUstream_st stream) {
    comm.launchGraph(graph.address(), stream.address());
  }

  @Override
  public void checkHealthy() {
    comm.checkHealthy();
  }

  @Override
  public long ownDeviceBytes() {
    return comm.memoryStats().devicePeakBytes();
  }

  @Override
  public void close() {
    comm.close();
  }
}
