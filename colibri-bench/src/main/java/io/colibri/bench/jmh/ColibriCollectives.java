/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import io.colibri.Communicator;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

/**
 * Colibri's collectives on device memory ({@link DeviceCollectives} says how they are timed).
 * Ranks are threads of this JVM: each creates its communicator ({@code Communicator.init} with a
 * shared {@code UniqueId}) and makes the first calls (set-up, which meets the peers on the host)
 * from its own thread; after that a device call only enqueues kernels on the rank's stream and
 * returns, so the benchmark thread issues every rank's calls in turn, like NCCL's group call.
 * With more than one rank per GPU that needs {@code COLIBRI_DEVICE_MEET=off} (scripts/jmh-gpu.sh
 * sets it): ranks sharing a GPU otherwise meet on the host inside every call, which one thread
 * issuing the calls in turn never completes.
 * Calls go through the {@code Communicator} overloads with raw addresses and a stream handle.
 */
@State(Scope.Benchmark)
public class ColibriCollectives extends DeviceCollectives {
  /** Ranks on each GPU (ranks r*n .. r*n+n-1 share GPU r); 1 for the comparison with NCCL. */
  @Param({"1"})
  public int ranksPerGpu;

  private Communicator[] comms;
  private long[] sendAddress;
  private long[] recvAddress;
  private long[] streamHandle;

  @Override
  protected String library() {
    return "Colibri";
  }

  @Override
  protected void loadLibrary() {
    Cuda.load();
  }

  @Override
  protected int ranksPerGpu() {
    return ranksPerGpu;
  }

  @Override
  protected void initComms() {
    sendAddress = new long[nranks];
    recvAddress = new long[nranks];
    streamHandle = new long[nranks];
    for (int r = 0; r < nranks; r++) {
      sendAddress[r] = send[r].address();
      recvAddress[r] = recv[r].address();
      streamHandle[r] = streams[r].address();
    }
    UniqueId id = UniqueId.create();
    Communicator[] made = new Communicator[nranks];
    RankThreads.run(
        "Communicator.init",
        nranks,
        120,
        r -> {
          Cuda.setDevice(gpuOf[r]);
          made[r] = Communicator.init(id, r, nranks);
        });
    comms = made;
  }

  @Override
  protected void warmUp() {
    RankThreads.run(
        "first " + coll.label,
        nranks,
        120,
        r -> {
          Cuda.setDevice(gpuOf[r]);
          issue(r);
          issue(r);
          Cuda.synchronize(streams[r]);
        });
  }

  @Override
  protected void issueRound() {
    for (int r = 0; r < nranks; r++) {
      useGpuOf(r);
      issue(r);
    }
  }

  private void issue(int r) {
    Communicator c = comms[r];
    switch (coll) {
      case ALL_REDUCE:
        c.allReduce(sendAddress[r], recvAddress[r], count, type, ReduceOp.SUM, streamHandle[r]);
        break;
      case ALL_GATHER:
        c.allGather(sendAddress[r], recvAddress[r], count, type, streamHandle[r]);
        break;
      case REDUCE_SCATTER:
        c.reduceScatter(sendAddress[r], recvAddress[r], count, type, ReduceOp.SUM, streamHandle[r]);
        break;
      case BROADCAST:
        c.broadcast(sendAddress[r], recvAddress[r], count, type, 0, streamHandle[r]);
        break;
      default:
        throw new IllegalStateException(String.valueOf(coll));
    }
  }

  @Override
  protected void closeComms() {
    Communicator[] all = comms;
    comms = null;
    if (all != null) {
      RankThreads.run(
          "close",
          all.length,
          120,
          r -> {
            if (all[r] != null) {
              all[r].close();
            }
          });
    }
  }
}
