/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.bytedeco.cuda.global.nccl.ncclAllGather;
import static org.bytedeco.cuda.global.nccl.ncclAllReduce;
import static org.bytedeco.cuda.global.nccl.ncclBroadcast;
import static org.bytedeco.cuda.global.nccl.ncclGroupEnd;
import static org.bytedeco.cuda.global.nccl.ncclGroupStart;
import static org.bytedeco.cuda.global.nccl.ncclReduceScatter;
import static org.bytedeco.cuda.global.nccl.ncclSum;

import org.bytedeco.cuda.nccl.ncclComm;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

/**
 * NCCL's collectives on device memory ({@link DeviceCollectives} says how they are timed), through
 * the org.bytedeco CUDA presets. One rank per GPU (NCCL 2.28 refuses two ranks on one GPU), all
 * driven from the benchmark thread: communicators from ncclCommInitAll, every call of a round
 * inside ncclGroupStart/ncclGroupEnd when there are several ranks.
 */
@State(Scope.Benchmark)
public class NcclCollectives extends DeviceCollectives {
  private ncclComm[] comms;
  private int ncclType;
  private String name = "NCCL";

  @Override
  protected String library() {
    return name;
  }

  @Override
  protected void loadLibrary() {
    Nccl.load();
    name = "NCCL " + Nccl.versionText(Nccl.version());
  }

  @Override
  protected void initComms() {
    ncclType = Nccl.type(type);
    comms = Nccl.initAll(gpuOf.clone());
  }

  @Override
  protected void warmUp() {
    issueRound();
    issueRound();
    for (int r = 0; r < nranks; r++) {
      Cuda.synchronize(streams[r]);
      Nccl.checkAsync(comms[r]);
    }
  }

  @Override
  protected void issueRound() {
    if (nranks > 1) {
      Nccl.check(ncclGroupStart(), "ncclGroupStart", null);
    }
    for (int r = 0; r < nranks; r++) {
      issue(r);
    }
    if (nranks > 1) {
      Nccl.check(ncclGroupEnd(), "ncclGroupEnd", null);
    }
  }

  private void issue(int r) {
    ncclComm c = comms[r];
    int rc;
    switch (coll) {
      case ALL_REDUCE:
        rc = ncclAllReduce(send[r], recv[r], count, ncclType, ncclSum, c, streams[r]);
        break;
      case ALL_GATHER:
        rc = ncclAllGather(send[r], recv[r], count, ncclType, c, streams[r]);
        break;
      case REDUCE_SCATTER:
        rc = ncclReduceScatter(send[r], recv[r], count, ncclType, ncclSum, c, streams[r]);
        break;
      case BROADCAST:
        rc = ncclBroadcast(send[r], recv[r], count, ncclType, 0, c, streams[r]);
        break;
      default:
        throw new IllegalStateException(String.valueOf(coll));
    }
    if (rc != 0) {
      Nccl.check(rc, "nccl " + coll.label + " of " + count + " elements on rank " + r, c);
    }
  }

  @Override
  protected void closeComms() {
    ncclComm[] all = comms;
    comms = null;
    if (all != null) {
      try {
        for (ncclComm c : all) {
          if (c != null && !c.isNull()) {
            Nccl.checkAsync(c);
          }
        }
      } finally {
        Nccl.destroyAll(all);
      }
    }
  }
}
