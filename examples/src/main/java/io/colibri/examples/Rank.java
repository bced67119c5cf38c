/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.examples;

import static io.colibri.DataType.FLOAT32;
import static io.colibri.DataType.FLOAT64;
import static io.colibri.DataType.INT32;
import static io.colibri.DataType.INT64;

import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.Group;
import io.colibri.LaunchEnvironment;
import io.colibri.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntUnaryOperator;
import java.util.stream.IntStream;

/**
 * One rank, started by {@link Launcher} (or by any torchrun-style launcher): joins the
 * communicator that the environment describes, makes each kind of call Colibri has on host memory,
 * checks every element of every result against a value computed here without Colibri, prints one
 * line per call, and exits 1 at the first wrong element or error.
 *
 * <p>Buffers are direct {@link ByteBuffer}s in the native byte order, as every {@code ByteBuffer}
 * call of {@link Communicator} requires. Every rank makes the same calls in the same order.
 */
public final class Rank {

  /** Elements per call, or per rank's block in the calls that have blocks. */
  private static final int COUNT = 1000;

  private final Communicator comm;
  private final int rank;
  private final int size;

  private Rank(Communicator comm) {
    this.comm = comm;
    this.rank = comm.rank();
    this.size = comm.size();
  }

  /**
   * Runs this rank.
   *
   * @param args none: the rank and the communicator come from the environment
   */
  public static void main(String[] args) {
    // MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (and COLIBRI_BOOTSTRAP_SECRET) from the launcher.
    try (Communicator comm = Communicator.fromEnvironment()) {
      new Rank(comm).run();
    } catch (RuntimeException e) {
      // The communicator is closed by now; the launcher sees the exit code.
      System.err.println("rank " + System.getenv(LaunchEnvironment.RANK) + " failed: " + e);
      System.exit(1);
    }
  }

  private void run() {
    allReduce();
    allGather();
    reduceScatter();
    broadcast();
    reduce();
    gather();
    scatter();
    sendRecvInAGroup();
    allToAll();
    allToAllv();
    barrier();
    split();
    allReduceAsync();
  }

  /**
   * What rank {@code who} puts at element {@code i}: small whole numbers (exact in every type used
   * here, sums included), different from rank to rank and from element to element. {@code who} is
   * a rank, or {@code from * size + to} for data meant for one peer.
   */
  private static int value(int who, int i) {
    return (who * 31 + i * 17) % 1009 - 500;
  }

  // ---- collectives ----

  /** Every rank gets the element-wise sum of every rank's buffer; here in place. */
  private void allReduce() {
    ByteBuffer buf = filled(FLOAT32, COUNT, i -> value(rank, i));
    comm.allReduce(buf, buf, COUNT, FLOAT32, ReduceOp.SUM);
    check("allReduce", "float32 sum, in place", buf, FLOAT32, COUNT, i -> sum(r -> value(r, i)));
  }

  /** Every rank gets every rank's block, rank r's at r * COUNT. */
  private void allGather() {
    ByteBuffer send = filled(INT32, COUNT, i -> value(rank, i));
    ByteBuffer recv = buffer(INT32, size * COUNT);
    comm.allGather(send, recv, COUNT, INT32);
    check("allGather", "int32", recv, INT32, size * COUNT, i -> value(i / COUNT, i % COUNT));
  }

  /** The element-wise maximum of size * COUNT elements; rank r keeps block r of it. */
  private void reduceScatter() {
    ByteBuffer send = filled(FLOAT64, size * COUNT, i -> value(rank, i));
    ByteBuffer recv = buffer(FLOAT64, COUNT);
    comm.reduceScatter(send, recv, COUNT, FLOAT64, ReduceOp.MAX);
    check(
        "reduceScatter",
        "float64 max",
        recv,
        FLOAT64,
        COUNT,
        i -> max(r -> value(r, rank * COUNT + i)));
  }

  /** Every rank gets the root's buffer; send is read on the root only. */
  private void broadcast() {
    int root = size - 1;
    ByteBuffer send = rank == root ? filled(INT32, COUNT, i -> value(root, i)) : null;
    ByteBuffer recv = buffer(INT32, COUNT);
    comm.broadcast(send, recv, COUNT, INT32, root);
    check("broadcast", "int32 from rank " + root, recv, INT32, COUNT, i -> value(root, i));
  }

  /** Only the root gets the result: the element-wise minimum. */
  private void reduce() {
    int root = 0;
    ByteBuffer send = filled(INT64, COUNT, i -> value(rank, i));
    ByteBuffer recv = rank == root ? buffer(INT64, COUNT) : null;
    comm.reduce(send, recv, COUNT, INT64, ReduceOp.MIN, root);
    if (rank == root) {
      check("reduce", "int64 min to rank 0", recv, INT64, COUNT, i -> min(r -> value(r, i)));
    } else {
      report("reduce", "int64 min to rank 0", "sent");
    }
  }

  /** The root gets every rank's block, rank r's at r * COUNT. */
  private void gather() {
    int root = 0;
    ByteBuffer send = filled(INT32, COUNT, i -> value(rank, i));
    ByteBuffer recv = rank == root ? buffer(INT32, size * COUNT) : null;
    comm.gather(send, recv, COUNT, INT32, root);
    if (rank == root) {
      check(
          "gather", "int32 to rank 0", recv, INT32, size * COUNT, i -> value(i / COUNT, i % COUNT));
    } else {
      report("gather", "int32 to rank 0", "sent");
    }
  }

  /** Rank r gets block r of the root's buffer. */
  private void scatter() {
    int root = 0;
    ByteBuffer send = rank == root ? filled(INT32, size * COUNT, i -> value(root, i)) : null;
    ByteBuffer recv = buffer(INT32, COUNT);
    comm.scatter(send, recv, COUNT, INT32, root);
    check("scatter", "int32 from rank 0", recv, INT32, COUNT, i -> value(root, rank * COUNT + i));
  }

  // ---- point-to-point ----

  /**
   * Each rank sends to the next and receives from the previous one. In a group the sends and
   * receives run together when it closes, so their order inside it does not matter.
   */
  private void sendRecvInAGroup() {
    int next = (rank + 1) % size;
    int prev = (rank + size - 1) % size;
    ByteBuffer out = filled(INT32, COUNT, i -> value(rank, i));
    ByteBuffer in = buffer(INT32, COUNT);
    try (Group group = Communicator.group()) {
      comm.send(out, COUNT, INT32, next);
      comm.recv(in, COUNT, INT32, prev);
    } // both have completed here
    check("send/recv (group)", "int32 from rank " + prev, in, INT32, COUNT, i -> value(prev, i));
  }

  /** Block p of send goes to rank p; block p of recv comes from rank p. */
  private void allToAll() {
    ByteBuffer send = filled(INT32, size * COUNT, j -> value(rank * size + j / COUNT, j % COUNT));
    ByteBuffer recv = buffer(INT32, size * COUNT);
    comm.allToAll(send, recv, COUNT, INT32);
    check(
        "allToAll",
        "int32",
        recv,
        INT32,
        size * COUNT,
        j -> value((j / COUNT) * size + rank, j % COUNT));
  }

  /** As allToAll with a count per pair of ranks, some of them 0 (MoE dispatch: tokens per expert). */
  private void allToAllv() {
    long[] sendCounts = new long[size];
    long[] recvCounts = new long[size];
    for (int p = 0; p < size; p++) {
      sendCounts[p] = tokens(rank, p);
      recvCounts[p] = tokens(p, rank);
    }
    long[] sendDispls = displacements(sendCounts);
    long[] recvDispls = displacements(recvCounts);
    int sendTotal = (int) Arrays.stream(sendCounts).sum();
    int recvTotal = (int) Arrays.stream(recvCounts).sum();

    // Element k of the block for rank p, and the value expected at each element of recv.
    ByteBuffer send = buffer(INT32, sendTotal);
    int[] expected = new int[recvTotal];
    for (int p = 0; p < size; p++) {
      for (int k = 0; k < sendCounts[p]; k++) {
        put(send, INT32, (int) sendDispls[p] + k, value(rank * size + p, k));
      }
      for (int k = 0; k < recvCounts[p]; k++) {
        expected[(int) recvDispls[p] + k] = value(p * size + rank, k);
      }
    }
    ByteBuffer recv = buffer(INT32, recvTotal);
    comm.allToAllv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, INT32);
    check("allToAllv", "int32, uneven counts", recv, INT32, recvTotal, i -> expected[i]);
  }

  /** How many elements rank {@code from} sends to rank {@code to} in allToAllv: 0, 10 or 20. */
  private static int tokens(int from, int to) {
    return 10 * ((from + 2 * to) % 3);
  }

  // ---- barrier, split, asynchronous calls ----

  /** Returns once every rank has entered it. */
  private void barrier() {
    comm.barrier();
    report("barrier", "", "every rank arrived");
  }

  /**
   * Ranks of the same parity form a communicator of their own, numbered by rank (tensor-parallel
   * groups would be {@code split(rank / tp, rank)}); an all-reduce on it sums over those ranks.
   */
  private void split() {
    int color = rank % 2;
    try (Communicator half = comm.split(color, rank)) {
      int expectedSize = (size + 1 - color) / 2;
      if (half.size() != expectedSize || half.rank() != rank / 2) {
        throw new IllegalStateException(
            String.format(
                "split: rank %d of %d in the new communicator, expected %d of %d",
                half.rank(), half.size(), rank / 2, expectedSize));
      }
      ByteBuffer buf = filled(INT32, COUNT, i -> value(rank, i));
      half.allReduce(buf, buf, COUNT, INT32, ReduceOp.SUM);
      IntUnaryOperator sumOfSameParity =
          i -> IntStream.range(0, size).filter(r -> r % 2 == color).map(r -> value(r, i)).sum();
      check(
          "split",
          String.format("color %d: rank %d of %d, int32 sum", color, half.rank(), half.size()),
          buf,
          INT32,
          COUNT,
          sumOfSameParity);
    }
  }

  /** The call runs on the communicator's thread while this one computes what to expect. */
  private void allReduceAsync() {
    ByteBuffer buf = filled(FLOAT32, COUNT, i -> value(rank, i));
    CompletableFuture<Void> done = comm.allReduceAsync(buf, buf, COUNT, FLOAT32, ReduceOp.SUM);
    int[] expected = IntStream.range(0, COUNT).map(i -> sum(r -> value(r, i))).toArray();
    done.join(); // buf holds the sum from here on
    check("allReduceAsync", "float32 sum, in place", buf, FLOAT32, COUNT, i -> expected[i]);
  }

  // ---- expected values, buffers, checks ----

  private int sum(IntUnaryOperator ofRank) {
    return IntStream.range(0, size).map(ofRank).sum();
  }

  private int min(IntUnaryOperator ofRank) {
    return IntStream.range(0, size).map(ofRank).min().getAsInt();
  }

  private int max(IntUnaryOperator ofRank) {
    return IntStream.range(0, size).map(ofRank).max().getAsInt();
  }

  private static long[] displacements(long[] counts) {
    long[] displs = new long[counts.length];
    for (int p = 1; p < counts.length; p++) {
      displs[p] = displs[p - 1] + counts[p - 1];
    }
    return displs;
  }

  /** A direct buffer of {@code count} elements, in the native byte order. */
  private static ByteBuffer buffer(DataType type, int count) {
    return ByteBuffer.allocateDirect(count * type.size()).order(ByteOrder.nativeOrder());
  }

  private static ByteBuffer filled(DataType type, int count, IntUnaryOperator values) {
    ByteBuffer buf = buffer(type, count);
    for (int i = 0; i < count; i++) {
      put(buf, type, i, values.applyAsInt(i));
    }
    return buf;
  }

  private static void put(ByteBuffer buf, DataType type, int i, int v) {
    int at = i * type.size();
    switch (type) {
      case INT32 -> buf.putInt(at, v);
      case INT64 -> buf.putLong(at, v);
      case FLOAT32 -> buf.putFloat(at, v);
      case FLOAT64 -> buf.putDouble(at, v);
      default -> throw new IllegalArgumentException("type not used here: " + type);
    }
  }

  private static double get(ByteBuffer buf, DataType type, int i) {
    int at = i * type.size();
    return switch (type) {
      case INT32 -> buf.getInt(at);
      case INT64 -> buf.getLong(at);
      case FLOAT32 -> buf.getFloat(at);
      case FLOAT64 -> buf.getDouble(at);
      default -> throw new IllegalArgumentException("type not used here: " + type);
    };
  }

  /** Compares each of the {@code count} elements of {@code buf} with {@code expected}. */
  private void check(
      String call,
      String what,
      ByteBuffer buf,
      DataType type,
      int count,
      IntUnaryOperator expected) {
    for (int i = 0; i < count; i++) {
      double got = get(buf, type, i);
      int want = expected.applyAsInt(i);
      if (got != want) {
        throw new IllegalStateException(
            String.format(
                "%s (%s): element %d is %s, expected %s", call, what, i, got, (double) want));
      }
    }
    report(call, what, count + " elements ok");
  }

  private void report(String call, String what, String result) {
    // One println per line, so that the lines of different ranks do not mix.
    System.out.println(String.format("rank %d/%d  %-18s %-32s %s", rank, size, call, what, result));
  }
}
