/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.bytedeco.cuda.global.cudart.cudaMemcpyAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToDevice;
import static org.bytedeco.cuda.global.cudart.cudaSuccess;

import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.Pointer;

/**
 * {@link DeviceCollectives} that move nothing ({@code decode --library none}): each rank runs
 * its shard's compute alone, so that a step's time with a library's collectives against this
 * one's is the collectives' share of the step. Above TP=1 the tokens are not the model's: an
 * all-reduce leaves this rank's partial sums, and the all-gather fills only this rank's part.
 */
public final class NoCollectives implements DeviceCollectives {

  private final int size;
  private final int rank;

  /**
   * @param size the group's size
   * @param rank this rank
   */
  public NoCollectives(int size, int rank) {
    this.size = size;
    this.rank = rank;
  }

  @Override
  public int size() {
    return size;
  }

  @Override
  public int rank() {
    return rank;
  }

  @Override
  public String library() {
    return "none";
  }

  @Override
  public void allReduceSum(Pointer buf, long count, Precision type, CUstream_st stream) {}

  @Override
  public void allGather(
      Pointer send, Pointer recv, long count, Precision type, CUstream_st stream) {
    // The part is this rank's: the head's GEMM has written it, and the argmax reads every part.
    // Copying it into its place keeps the read of this rank's part what it is with a library.
    long bytes = (long) type.bytes() * count;
    int rc =
        cudaMemcpyAsync(
            DeviceDecoder.at(recv.address() + bytes * rank),
            send,
            bytes,
            cudaMemcpyDeviceToDevice,
            stream);
    if (rc != cudaSuccess) {
      throw new IllegalStateException("cudaMemcpyAsync failed: error " + rc);
    }
  }

  @Override
  public void launchGraph(CUgraphExec_st graph, CUstream_st stream) {
    DeviceCollectives.cudaLaunch(graph, stream);
  }

  @Override
  public void checkHealthy() {}

  @Override
  public long ownDeviceBytes() {
    return 0;
  }

  @Override
  public void close() {}
}
