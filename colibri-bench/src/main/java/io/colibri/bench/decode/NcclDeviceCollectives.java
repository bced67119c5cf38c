/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.bytedeco.cuda.global.nccl.ncclAllGather;
import static org.bytedeco.cuda.global.nccl.ncclAllReduce;
import static org.bytedeco.cuda.global.nccl.ncclCommDestroy;
import static org.bytedeco.cuda.global.nccl.ncclCommGetAsyncError;
import static org.bytedeco.cuda.global.nccl.ncclCommInitRank;
import static org.bytedeco.cuda.global.nccl.ncclGetErrorString;
import static org.bytedeco.cuda.global.nccl.ncclGetUniqueId;
import static org.bytedeco.cuda.global.nccl.ncclGetVersion;
import static org.bytedeco.cuda.global.nccl.ncclSuccess;
import static org.bytedeco.cuda.global.nccl.ncclSum;

import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.cuda.nccl.ncclUniqueId;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

/**
 * {@link DeviceCollectives} over NCCL (the system's libnccl.so.2, through the org.bytedeco CUDA
 * presets): the baseline. NCCL wants one rank per GPU; it refuses two ranks of one communicator
 * on one GPU, which its error says.
 */
public final class NcclDeviceCollectives implements DeviceCollectives {

  private final ncclComm comm = new ncclComm();
  private final int size;
  private final int rank;

  /**
   * Makes a group's id: one per group, passed to every rank.
   *
   * @return the id
   * @throws IllegalStateException when NCCL cannot be loaded or made an id
   */
  public static ncclUniqueId uniqueId() {
    try {
      Loader.load(org.bytedeco.cuda.global.nccl.class);
    } catch (LinkageError | RuntimeException e) {
      throw new IllegalStateException(
          "NCCL could not be loaded through the org.bytedeco CUDA presets ("
              + e
              + "): it needs libnccl.so.2 on the library path",
          e);
    }
    ncclUniqueId id = new ncclUniqueId();
    check(ncclGetUniqueId(id), "ncclGetUniqueId");
    return id;
  }

  /** NCCL's unique id is 128 bytes (NCCL_UNIQUE_ID_BYTES). */
  static final int ID_BYTES = 128;

  /**
   * @param id a group's id
   * @return its bytes in hex, to pass to a rank process
   */
  public static String toHex(ncclUniqueId id) {
    StringBuilder b = new StringBuilder(2 * ID_BYTES);
    for (int i = 0; i < ID_BYTES; i++) {
      b.append(String.format(java.util.Locale.ROOT, "%02x", id.internal(i) & 0xff));
    }
    return b.toString();
  }

  /**
   * @param hex what {@link #toHex} gave
   * @return the id
   * @throws IllegalArgumentException when {@code hex} is not 256 hex digits
   */
  public static ncclUniqueId fromHex(String hex) {
    if (hex.length() != 2 * ID_BYTES) {
      throw new IllegalArgumentException(
          "an NCCL unique id is " + 2 * ID_BYTES + " hex digits, not " + hex.length());
    }
    ncclUniqueId id = new ncclUniqueId();
    for (int i = 0; i < ID_BYTES; i++) {
      id.internal(i, (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16));
    }
    return id;
  }

  /**
   * Joins rank {@code rank} of a group of {@code size} on the current GPU (blocks until every
   * rank has joined).
   *
   * @param id the group's id ({@link #uniqueId()})
   * @param size the group's size
   * @param rank this rank
   */
  public NcclDeviceCollectives(ncclUniqueId id, int size, int rank) {
    this.size = size;
    this.rank = rank;
    check(
        ncclCommInitRank(comm, size, id, rank),
        "ncclCommInitRank(rank " + rank + " of " + size + ")");
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
    int[] v = new int[1];
    return ncclGetVersion(v) == ncclSuccess
        ? "NCCL " + v[0] / 10000 + "." + v[0] / 100 % 100 + "." + v[0] % 100
        : "NCCL";
  }

  @Override
  public void allReduceSum(Pointer buf, long count, Precision type, CUstream_st stream) {
    check(ncclAllReduce(buf, buf, count, type.ncclType(), ncclSum, comm, stream), "ncclAllReduce");
  }

  @Override
  public void allGather(
      Pointer send, Pointer recv, long count, Precision type, CUstream_st stream) {
    check(ncclAllGather(send, recv, count, type.ncclType(), comm, stream), "ncclAllGather");
  }

  @Override
  public void launchGraph(CUgraphExec_st graph, CUstream_st stream) {
    DeviceCollectives.cudaLaunch(graph, stream);
  }

  @Override
  public void checkHealthy() {
    int[] async = new int[1];
    check(ncclCommGetAsyncError(comm, async), "ncclCommGetAsyncError");
    check(async[0], "an earlier NCCL call (asynchronous error)");
  }

  @Override
  public long ownDeviceBytes() {
    return -1;
  }

  @Override
  public void close() {
    if (!comm.isNull()) {
      ncclCommDestroy(comm);
      comm.setNull();
    }
  }

  private static void check(int rc, String what) {
    if (rc != ncclSuccess) {
      BytePointer text = ncclGetErrorString(rc);
      throw new IllegalStateException(
          what
              + " failed: "
              + (text == null ? "ncclResult " + rc : text.getString())
              + " (NCCL_DEBUG=WARN in the environment says more)");
    }
  }
}
