/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.Group;
import io.colibri.ReduceOp;
import java.nio.ByteBuffer;
import java.util.Locale;

/**
 * The collectives as the perf tool sees them (the four, and sendRecv, allToAll and allToAllv): how a size in bytes maps to counts, how to run
 * one, the bus bandwidth factor, and how to check a result.
 *
 * <p>Sizes follow nccl-tests: for allReduce and broadcast the size is the message; for allGather
 * and reduceScatter it is the whole buffer of all ranks ({@code nranks x} the per-rank part).
 * The chart command reads the names ({@link #byName}, {@link #displayName}) of result files.
 */
public enum Collective {
  /** allReduce: every rank gets the reduction of all ranks' buffers. */
  ALL_REDUCE("allReduce", "allreduce", false) {
    @Override
    double busFactor(int n) {
      return 2.0 * (n - 1) / n;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      comm.allReduce(send, recv, count, c.type, c.op);
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      DataCheck.fill(send, type, rank, 0, count);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      return DataCheck.countWrongReduced(recv, c.type, c.op, nranks, 0, count);
    }
  },

  /** allGather: every rank gets all ranks' parts, in rank order. */
  ALL_GATHER("allGather", "allgather", true) {
    @Override
    double busFactor(int n) {
      return (n - 1.0) / n;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      comm.allGather(send, recv, count, c.type);
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      DataCheck.fill(send, type, rank, 0, count);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      long wrong = 0;
      for (int p = 0; p < nranks; p++) {
        wrong += DataCheck.countWrongCopy(recv, c.type, p, p * count, 0, count);
      }
      return wrong;
    }
  },

  /** reduceScatter: every rank gets its part of the reduction of all ranks' buffers. */
  REDUCE_SCATTER("reduceScatter", "reducescatter", true) {
    @Override
    double busFactor(int n) {
      return (n - 1.0) / n;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      comm.reduceScatter(send, recv, count, c.type, c.op);
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      DataCheck.fill(send, type, rank, 0, count * nranks);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      return DataCheck.countWrongReduced(recv, c.type, c.op, nranks, rank * count, count);
    }
  },

  /** broadcast: every rank gets the root's buffer. */
  BROADCAST("broadcast", "broadcast", false) {
    @Override
    double busFactor(int n) {
      return 1.0;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      comm.broadcast(send, recv, count, c.type, c.root);
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      DataCheck.fill(send, type, rank, 0, count);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      return DataCheck.countWrongCopy(recv, c.type, c.root, 0, 0, count);
    }
  },

  /**
   * sendRecv: a ring exchange (nccl-tests' sendrecv): every rank sends its buffer to the next rank
   * and receives the previous rank's, in one group.
   */
  SEND_RECV("sendRecv", "sendrecv", false) {
    @Override
    double busFactor(int n) {
      return 1.0;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      int n = comm.size();
      int r = comm.rank();
      try (Group g = Communicator.group()) {
        comm.send(send, count, c.type, (r + 1) % n);
        comm.recv(recv, count, c.type, (r + n - 1) % n);
      }
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      DataCheck.fill(send, type, rank, 0, count);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      return DataCheck.countWrongCopy(recv, c.type, (rank + nranks - 1) % nranks, 0, 0, count);
    }
  },

  /**
   * allToAll: block p of every rank's buffer goes to rank p; the size is one rank's whole buffer
   * ({@code nranks x} the count per peer), as nccl-tests' alltoall counts it.
   */
  ALL_TO_ALL("allToAll", "alltoall", true) {
    @Override
    double busFactor(int n) {
      return (n - 1.0) / n;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      comm.allToAll(send, recv, count, c.type);
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      fillBlocks(send, rank, nranks, count, type);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      return countWrongBlocks(recv, rank, nranks, count, c, false);
    }
  },

  /**
   * allToAllv, uneven as MoE dispatch: rank r sends {@code count x w / 3} elements to rank p
   * ({@code w = 1 + (r + p) mod 3}), block p of its buffer's first part; the size is one rank's
   * whole buffer, as for allToAll, and busbw counts the data that moves (on average over ranks).
   */
  ALL_TO_ALLV("allToAllv", "alltoallv", true) {
    @Override
    double busFactor(int n) {
      double moved = 0;
      for (int r = 0; r < n; r++) {
        for (int p = 0; p < n; p++) {
          moved += p == r ? 0 : (1 + (r + p) % 3) / 3.0;
        }
      }
      return moved / n / n;
    }

    @Override
    void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c) {
      int n = comm.size();
      int r = comm.rank();
      long[] sc = new long[n];
      long[] rc = new long[n];
      long[] displs = new long[n];
      for (int p = 0; p < n; p++) {
        sc[p] = uneven(count, r, p);
        rc[p] = uneven(count, p, r);
        displs[p] = p * count;
      }
      comm.allToAllv(send, sc, displs, recv, rc, displs, c.type);
    }

    @Override
    void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type) {
      fillBlocks(send, rank, nranks, count, type);
    }

    @Override
    long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c) {
      return countWrongBlocks(recv, rank, nranks, count, c, true);
    }
  };

  /** allToAll(v): this rank's whole buffer, {@code nranks} blocks of {@code count}. */
  static void fillBlocks(ByteBuffer send, int rank, int nranks, long count, DataType type) {
    DataCheck.fill(send, type, rank, 0, count * nranks);
  }

  /**
   * allToAll(v): block p of the result is rank p's block for this rank, all {@code count} of it
   * or ({@code uneven}) the part allToAllv sends.
   */
  static long countWrongBlocks(
      ByteBuffer recv, int rank, int nranks, long count, PerfConfig c, boolean uneven) {
    long wrong = 0;
    for (int p = 0; p < nranks; p++) {
      long n = uneven ? uneven(count, p, rank) : count;
      wrong += DataCheck.countWrongCopy(recv, c.type, p, p * count, rank * count, n);
    }
    return wrong;
  }

  /** allToAllv: the elements rank {@code from} sends to rank {@code to}. */
  static long uneven(long count, int from, int to) {
    return count * (1 + (from + to) % 3) / 3;
  }

  private final String displayName;
  private final String optionName;

  /** allGather / reduceScatter: the size column is all ranks' data (nccl-tests convention). */
  private final boolean sizeIsAllRanks;

  Collective(String displayName, String optionName, boolean sizeIsAllRanks) {
    this.displayName = displayName;
    this.optionName = optionName;
    this.sizeIsAllRanks = sizeIsAllRanks;
  }

  /**
   * The name in tables and files.
   *
   * @return allReduce, allGather, reduceScatter, broadcast, sendRecv, allToAll or allToAllv
   */
  public String displayName() {
    return displayName;
  }

  /** The name on the command line: allreduce, allgather, reducescatter, broadcast, sendrecv, alltoall, alltoallv. */
  String optionName() {
    return optionName;
  }

  /**
   * The collective of a name on a command line or in a file (case, '_' and '-' ignored).
   *
   * @param name "allreduce", "allReduce", "all_reduce", ...
   * @return the collective, or null if {@code name} names none
   */
  public static Collective byName(String name) {
    String n = name.toLowerCase(Locale.ROOT).replace("_", "").replace("-", "");
    for (Collective c : values()) {
      if (c.optionName.equals(n)) {
        return c;
      }
    }
    return null;
  }

  /** The count argument of the call for a size of {@code bytes} (rounded down; may be 0). */
  long perRankCount(long bytes, int nranks, DataType type) {
    return bytes / ((sizeIsAllRanks ? (long) nranks : 1L) * type.size());
  }

  /** Elements in the buffer that the size column describes. */
  long totalCount(long perRankCount, int nranks) {
    return sizeIsAllRanks ? perRankCount * nranks : perRankCount;
  }

  /** busbw = algbw x this (nccl-tests' factors). */
  abstract double busFactor(int nranks);

  /** Whether the collective reduces (the table shows the op) or copies (broadcast: the root). */
  boolean reduces() {
    return this == ALL_REDUCE || this == REDUCE_SCATTER;
  }

  abstract void run(Communicator comm, ByteBuffer send, ByteBuffer recv, long count, PerfConfig c);

  /** Writes this rank's input for a call with {@code count}. */
  abstract void fillInput(ByteBuffer send, int rank, int nranks, long count, DataType type);

  /** Elements of this rank's result that differ from the reference. */
  abstract long countWrong(ByteBuffer recv, int rank, int nranks, long count, PerfConfig c);

  /** Elements that the recv buffer of a call with {@code count} holds. */
  long recvCount(long count, int nranks) {
    return this == ALL_GATHER || this == ALL_TO_ALL || this == ALL_TO_ALLV ? count * nranks : count;
  }

  static String opColumn(Collective c, ReduceOp op, int root) {
    return c == BROADCAST ? Integer.toString(root) : (c.reduces() ? Perf.opName(op) : "-");
  }
}
