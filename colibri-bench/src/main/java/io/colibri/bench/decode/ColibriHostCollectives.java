/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * {@link TpCollectives} over a Colibri {@link Communicator} on host memory: the calls move
 * direct buffers allocated once, at the largest size the decoder asks for (as a server's step
 * reuses its buffers), and the decoder's arrays are copied in and out.
 */
public final class ColibriHostCollectives implements TpCollectives {

  private final Communicator comm;
  private final ByteBuffer send;
  private final ByteBuffer recv;
  private final FloatBuffer sendF;
  private final FloatBuffer recvF;
  private final int maxCount;

  /**
   * @param comm the group's communicator (its owner closes it)
   * @param maxCount the most elements any call moves per rank
   */
  public ColibriHostCollectives(Communicator comm, int maxCount) {
    this.comm = comm;
    this.maxCount = maxCount;
    this.send = ByteBuffer.allocateDirect(4 * maxCount).order(ByteOrder.nativeOrder());
    this.recv =
        ByteBuffer.allocateDirect(4 * maxCount * comm.size()).order(ByteOrder.nativeOrder());
    this.sendF = send.asFloatBuffer();
    this.recvF = recv.asFloatBuffer();
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
  public void allReduceSum(float[] x, int count) {
    fits(count);
    sendF.clear();
    sendF.put(x, 0, count);
    comm.allReduce(send, send, count, DataType.FLOAT32, ReduceOp.SUM);
    sendF.clear();
    sendF.get(x, 0, count);
  }

  @Override
  public void allGather(float[] part, int count, float[] all) {
    fits(count);
    sendF.clear();
    sendF.put(part, 0, count);
    comm.allGather(send, recv, count, DataType.FLOAT32);
    recvF.clear();
    recvF.get(all, 0, count * comm.size());
  }

  private void fits(int count) {
    if (count > maxCount) {
      throw new IllegalArgumentException(
          count + " elements per rank: the buffers hold " + maxCount);
    }
  }

  /** Nothing to release: the buffers are the garbage collector's, the communicator its owner's. */
  @Override
  public void close() {}
}
