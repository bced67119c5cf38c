/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.MemoryStats;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import io.colibri.jni.ColibriLib.ClbConfig;
import io.colibri.jni.ColibriLib.ClbMemStats;
import io.colibri.spi.CallQueue;
import io.colibri.spi.NativeCalls;
import java.lang.System.Logger.Level;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import java.util.function.LongToIntFunction;

/**
 * {@link Communicator} over the C ABI. Every argument is checked here, before the native call, so
 * that a mistake gets a message in Java terms (which argument, which buffer, how many bytes).
 *
 * <p>Lifetime: the native handle lives in an {@link AtomicLong} that {@link #close()} swaps to 0
 * exactly once, so close and a concurrent close or abort never free it twice. Every native call
 * counts itself in {@code inFlight} before it reads the handle; close waits (after aborting) until
 * no call is inside, then destroys. {@link #asyncError()} counts itself in {@code queries} instead:
 * it takes no lock and never waits, so close need not abort for it (which would tell the peers
 * "aborted" instead of closing cleanly): close only waits for it to return. A communicator that
 * becomes unreachable without close is destroyed by a {@link Cleaner}, with a warning.
 *
 * <p>Asynchronous calls: the {@code ...Async} methods hand the synchronous call, with views of its
 * buffers taken at submission, to a {@link CallQueue}, which runs them in order on the thread
 * {@code colibri-comm-<rank>}. Every call that takes a turn asks the queue first
 * ({@link CallQueue#checkTurn}), so a synchronous call does not slip between queued ones.
 */
final class NativeCommunicator implements Communicator, NativeCalls {
  private static final System.Logger LOG = System.getLogger("io.colibri");
  private static final Cleaner CLEANER = Cleaner.create();

  /** Extra time close() grants a call on another thread to return after the abort. */
  private static final long CLOSE_GRACE_NANOS = TimeUnit.SECONDS.toNanos(10);

  private final State state;
  private final Cleaner.Cleanable cleanable;
  private final int rank;
  private final int size;
  private final long closeWaitNanos;
  private final Options options;

  /** What the cleaner needs: never a reference to the communicator itself. */
  private static final class State implements Runnable {
    final AtomicLong handle;
    final AtomicInteger inFlight = new AtomicInteger();

    /** asyncError() calls inside: they return at once, so close waits for them without aborting. */
    final AtomicInteger queries = new AtomicInteger();

    final String name;

    /** The asynchronous calls; holds no reference to the communicator. */
    final CallQueue calls;

    State(long handle, String name, CallQueue calls) {
      this.handle = new AtomicLong(handle);
      this.name = name;
      this.calls = calls;
    }

    /** Runs when the communicator was dropped without close (or after close: then a no-op). */
    @Override
    public void run() {
      calls.close(); // ends the thread (nothing is queued: queued work holds the communicator)
      long h = handle.getAndSet(0);
      if (h != 0) {
        LOG.log(
            Level.WARNING,
            name
                + " was not closed; the garbage collector frees it now."
                + " Close communicators (try-with-resources) so peers are not left waiting");
        ColibriLib.clbCommDestroy(h);
      }
    }
  }

  NativeCommunicator(long handle, int rank, int size, Options options) {
    this.rank = rank;
    this.size = size;
    this.state =
        new State(
            handle,
            "communicator (rank " + rank + " of " + size + ")",
            new CallQueue("colibri-comm-" + rank, "rank " + rank + " of " + size));
    this.cleanable = CLEANER.register(this, state);
    this.closeWaitNanos = options.timeout().toNanos() + CLOSE_GRACE_NANOS;
    this.options = options;
  }

  // ---- collectives on ByteBuffers ----

  @Override
  public void allReduce(ByteBuffer send, ByteBuffer recv, long count, DataType type, ReduceOp op) {
    long h = acquire("allReduce");
    try {
      checkTypeAndOp("allReduce", type, op, true);
      long bytes = bytes("allReduce", "count", count, 1, type);
      checkBuffer("allReduce", "send", send, bytes, type, false);
      checkBuffer("allReduce", "recv", recv, bytes, type, true);
      int rc = ColibriLib.clbAllReduce(send, recv, count, type.code(), op.code(), h, 0L);
      check(rc, "allReduce", count, type);
    } finally {
      release();
    }
  }

  @Override
  public void allGather(ByteBuffer send, ByteBuffer recv, long sendCount, DataType type) {
    long h = acquire("allGather");
    try {
      checkTypeAndOp("allGather", type, null, false);
      long sendBytes = bytes("allGather", "sendCount", sendCount, 1, type);
      long recvBytes = bytes("allGather", "sendCount", sendCount, size, type);
      checkBuffer("allGather", "send", send, sendBytes, type, false);
      checkBuffer("allGather", "recv", recv, recvBytes, type, true);
      int rc = ColibriLib.clbAllGather(send, recv, sendCount, type.code(), h, 0L);
      check(rc, "allGather", sendCount, type);
    } finally {
      release();
    }
  }

  @Override
  public void reduceScatter(
      ByteBuffer send, ByteBuffer recv, long recvCount, DataType type, ReduceOp op) {
    long h = acquire("reduceScatter");
    try {
      checkTypeAndOp("reduceScatter", type, op, true);
      long sendBytes = bytes("reduceScatter", "recvCount", recvCount, size, type);
      long recvBytes = bytes("reduceScatter", "recvCount", recvCount, 1, type);
      checkBuffer("reduceScatter", "send", send, sendBytes, type, false);
      checkBuffer("reduceScatter", "recv", recv, recvBytes, type, true);
      int rc = ColibriLib.clbReduceScatter(send, recv, recvCount, type.code(), op.code(), h, 0L);
      check(rc, "reduceScatter", recvCount, type);
    } finally {
      release();
    }
  }

  @Override
  public void broadcast(ByteBuffer send, ByteBuffer recv, long count, DataType type, int root) {
    long h = acquire("broadcast");
    try {
      checkTypeAndOp("broadcast", type, null, false);
      checkRoot(root);
      long bytes = bytes("broadcast", "count", count, 1, type);
      if (rank == root) {
        checkBuffer("broadcast", "send", send, bytes, type, false);
      } else if (send == null) {
        send = recv; // not read off the root; the C ABI gets a valid pointer all the same
      }
      checkBuffer("broadcast", "recv", recv, bytes, type, true);
      int rc = ColibriLib.clbBroadcast(send, recv, count, type.code(), root, h, 0L);
      check(rc, "broadcast", count, type);
    } finally {
      release();
    }
  }

  // ---- point-to-point, and the calls made of it ----

  @Override
  public void send(ByteBuffer send, long count, DataType type, int peer) {
    pointToPoint(true, true, send, 0L, count, type, peer, 0L);
  }

  @Override
  public void recv(ByteBuffer recv, long count, DataType type, int peer) {
    pointToPoint(false, true, recv, 0L, count, type, peer, 0L);
  }

  @Override
  public void send(long send, long count, DataType type, int peer, long stream) {
    pointToPoint(true, false, null, send, count, type, peer, stream);
  }

  @Override
  public void recv(long recv, long count, DataType type, int peer, long stream) {
    pointToPoint(false, false, null, recv, count, type, peer, stream);
  }

  /** A send or a receive, of {@code buffer} ({@code viaBuffer}) or of {@code address}. */
  private void pointToPoint(
      boolean isSend,
      boolean viaBuffer,
      ByteBuffer buffer,
      long address,
      long count,
      DataType type,
      int peer,
      long stream) {
    String call = isSend ? "send" : "recv";
    long h = acquire(call);
    try {
      checkTypeAndOp(call, type, null, false);
      checkRank(call, "peer", peer);
      long bytes = bytes(call, "count", count, 1, type);
      int rc;
      if (viaBuffer) {
        checkBuffer(call, call, buffer, bytes, type, !isSend);
        rc =
            isSend
                ? ColibriLib.clbSend(buffer, count, type.code(), peer, h, 0L)
                : ColibriLib.clbRecv(buffer, count, type.code(), peer, h, 0L);
      } else {
        checkAddress(call, call, address, count);
        rc =
            isSend
                ? ColibriLib.clbSend(address, count, type.code(), peer, h, stream)
                : ColibriLib.clbRecv(address, count, type.code(), peer, h, stream);
      }
      check(rc, call, count, type);
    } finally {
      release();
    }
  }

  @Override
  public void allToAll(ByteBuffer send, ByteBuffer recv, long count, DataType type) {
    long h = acquire("allToAll");
    try {
      checkTypeAndOp("allToAll", type, null, false);
      long all = bytes("allToAll", "count", count, size, type);
      checkBuffer("allToAll", "send", send, all, type, false);
      checkBuffer("allToAll", "recv", recv, all, type, true);
      check(ColibriLib.clbAllToAll(send, recv, count, type.code(), h, 0L), "allToAll", count, type);
    } finally {
      release();
    }
  }

  @Override
  public void allToAllv(
      ByteBuffer send,
      long[] sendCounts,
      long[] sendDispls,
      ByteBuffer recv,
      long[] recvCounts,
      long[] recvDispls,
      DataType type) {
    long h = acquire("allToAllv");
    try {
      checkTypeAndOp("allToAllv", type, null, false);
      long sendBytes = extent("sendCounts", sendCounts, "sendDispls", sendDispls, type);
      long recvBytes = extent("recvCounts", recvCounts, "recvDispls", recvDispls, type);
      checkBuffer("allToAllv", "send", send, sendBytes, type, false);
      checkBuffer("allToAllv", "recv", recv, recvBytes, type, true);
      int rc =
          ColibriLib.clbAllToAllv(
              send, sendCounts, sendDispls, recv, recvCounts, recvDispls, type.code(), h, 0L);
      check(rc, "allToAllv");
    } finally {
      release();
    }
  }

  @Override
  public void reduce(
      ByteBuffer send, ByteBuffer recv, long count, DataType type, ReduceOp op, int root) {
    long h = acquire("reduce");
    try {
      checkTypeAndOp("reduce", type, op, true);
      checkRank("reduce", "root", root);
      long bytes = bytes("reduce", "count", count, 1, type);
      checkBuffer("reduce", "send", send, bytes, type, false);
      if (rank == root) {
        checkBuffer("reduce", "recv", recv, bytes, type, true);
      } else if (recv == null) {
        recv = send; // not written off the root; the C ABI gets a valid pointer all the same
      }
      check(
          ColibriLib.clbReduce(send, recv, count, type.code(), op.code(), root, h, 0L),
          "reduce",
          count,
          type);
    } finally {
      release();
    }
  }

  @Override
  public void gather(ByteBuffer send, ByteBuffer recv, long count, DataType type, int root) {
    long h = acquire("gather");
    try {
      checkTypeAndOp("gather", type, null, false);
      checkRank("gather", "root", root);
      checkBuffer("gather", "send", send, bytes("gather", "count", count, 1, type), type, false);
      if (rank == root) {
        checkBuffer(
            "gather", "recv", recv, bytes("gather", "count", count, size, type), type, true);
      } else if (recv == null) {
        recv = send; // not written off the root
      }
      check(
          ColibriLib.clbGather(send, recv, count, type.code(), root, h, 0L), "gather", count, type);
    } finally {
      release();
    }
  }

  @Override
  public void scatter(ByteBuffer send, ByteBuffer recv, long count, DataType type, int root) {
    long h = acquire("scatter");
    try {
      checkTypeAndOp("scatter", type, null, false);
      checkRank("scatter", "root", root);
      checkBuffer("scatter", "recv", recv, bytes("scatter", "count", count, 1, type), type, true);
      if (rank == root) {
        checkBuffer(
            "scatter", "send", send, bytes("scatter", "count", count, size, type), type, false);
      } else if (send == null) {
        send = recv; // not read off the root
      }
      check(
          ColibriLib.clbScatter(send, recv, count, type.code(), root, h, 0L),
          "scatter",
          count,
          type);
    } finally {
      release();
    }
  }

  // ---- asynchronous collectives on ByteBuffers (the calls above, on the queue's thread) ----

  @Override
  public CompletableFuture<Void> allReduceAsync(
      ByteBuffer send, ByteBuffer recv, long count, DataType type, ReduceOp op) {
    return async("allReduce", send, recv, (s, r) -> allReduce(s, r, count, type, op));
  }

  @Override
  public CompletableFuture<Void> allGatherAsync(
      ByteBuffer send, ByteBuffer recv, long sendCount, DataType type) {
    return async("allGather", send, recv, (s, r) -> allGather(s, r, sendCount, type));
  }

  @Override
  public CompletableFuture<Void> reduceScatterAsync(
      ByteBuffer send, ByteBuffer recv, long recvCount, DataType type, ReduceOp op) {
    return async("reduceScatter", send, recv, (s, r) -> reduceScatter(s, r, recvCount, type, op));
  }

  @Override
  public CompletableFuture<Void> broadcastAsync(
      ByteBuffer send, ByteBuffer recv, long count, DataType type, int root) {
    return async("broadcast", send, recv, (s, r) -> broadcast(s, r, count, type, root));
  }

  /** Queues {@code call} on views of the buffers taken now. */
  private CompletableFuture<Void> async(
      String name, ByteBuffer send, ByteBuffer recv, BiConsumer<ByteBuffer, ByteBuffer> call) {
    ByteBuffer s = view(send);
    ByteBuffer r = view(recv);
    return state.calls.submit(name, () -> call.accept(s, r));
  }

  /**
   * The region and byte order of {@code buffer} now, for a call that runs later (the caller may
   * move the buffer's position meanwhile); it keeps the memory reachable. Null stays null.
   */
  private static ByteBuffer view(ByteBuffer buffer) {
    return buffer == null ? null : buffer.duplicate().order(buffer.order());
  }

  // ---- calls made through the C ABI directly (io.colibri.Segments on Java 22+) ----

  @Override
  public String nativeLibrary() {
    return NativeLibrary.path();
  }

  @Override
  public void callNative(String call, String what, LongToIntFunction nativeCall) {
    long h = acquire(call);
    try {
      int rc = nativeCall.applyAsInt(h);
      if (rc != 0) {
        throw NativeLibrary.error(rc, what + " on rank " + rank + " of " + size);
      }
    } finally {
      release();
    }
  }

  // ---- collectives on raw addresses ----

  @Override
  public void allReduce(long send, long recv, long count, DataType type, ReduceOp op, long stream) {
    long h = acquire("allReduce");
    try {
      checkTypeAndOp("allReduce", type, op, true);
      bytes("allReduce", "count", count, 1, type);
      checkAddress("allReduce", "send", send, count);
      checkAddress("allReduce", "recv", recv, count);
      int rc = ColibriLib.clbAllReduce(send, recv, count, type.code(), op.code(), h, stream);
      check(rc, "allReduce", count, type);
    } finally {
      release();
    }
  }

  @Override
  public void barrier(long stream) {
    long h = acquire("barrier");
    try {
      check(ColibriLib.clbBarrier(h, stream), "barrier");
    } finally {
      release();
    }
  }

  @Override
  public void allGather(long send, long recv, long sendCount, DataType type, long stream) {
    long h = acquire("allGather");
    try {
      checkTypeAndOp("allGather", type, null, false);
      bytes("allGather", "sendCount", sendCount, size, type);
      checkAddress("allGather", "send", send, sendCount);
      checkAddress("allGather", "recv", recv, sendCount);
      int rc = ColibriLib.clbAllGather(send, recv, sendCount, type.code(), h, stream);
      check(rc, "allGather", sendCount, type);
    } finally {
      release();
    }
  }

  @Override
  public void reduceScatter(
      long send, long recv, long recvCount, DataType type, ReduceOp op, long stream) {
    long h = acquire("reduceScatter");
    try {
      checkTypeAndOp("reduceScatter", type, op, true);
      bytes("reduceScatter", "recvCount", recvCount, size, type);
      checkAddress("reduceScatter", "send", send, recvCount);
      checkAddress("reduceScatter", "recv", recv, recvCount);
      int rc =
          ColibriLib.clbReduceScatter(send, recv, recvCount, type.code(), op.code(), h, stream);
      check(rc, "reduceScatter", recvCount, type);
    } finally {
      release();
    }
  }

  @Override
  public void broadcast(long send, long recv, long count, DataType type, int root, long stream) {
    long h = acquire("broadcast");
    try {
      checkTypeAndOp("broadcast", type, null, false);
      checkRoot(root);
      bytes("broadcast", "count", count, 1, type);
      if (rank == root) {
        checkAddress("broadcast", "send", send, count);
      } else if (send == 0) {
        send = recv;
      }
      checkAddress("broadcast", "recv", recv, count);
      int rc = ColibriLib.clbBroadcast(send, recv, count, type.code(), root, h, stream);
      check(rc, "broadcast", count, type);
    } finally {
      release();
    }
  }

  // ---- queries ----

  /** Known without the native side: answers after close too. */
  @Override
  public int rank() {
    return rank;
  }

  /** Known without the native side: answers after close too. */
  @Override
  public int size() {
    return size;
  }

  @Override
  public MemoryStats memoryStats() {
    long h = acquireAnyTime("memoryStats");
    try (ClbMemStats stats = new ClbMemStats()) {
      int rc = ColibriLib.clbCommMemStats(h, stats);
      check(rc, "memoryStats");
      return new MemoryStats(
          stats.hostBytes(), stats.hostPeakBytes(), stats.deviceBytes(), stats.devicePeakBytes());
    } finally {
      release();
    }
  }

  @Override
  public Options options() {
    return options;
  }

  @Override
  public Communicator split(int color, int key, Options newOptions) {
    // No local refusal: a rank that refused here would leave the others waiting in the split;
    // clbCommSplit refuses a bad color on every rank at once. Null options: this one's.
    Options use = newOptions != null ? newOptions : options;
    long h = acquire("split");
    long child;
    try (ClbConfig config = NativeProvider.toConfig(use)) {
      config.logLevel(NativeLog.levelForInit(use));
      long[] out = new long[1];
      check(ColibriLib.clbCommSplit(h, color, key, config, out), "split");
      child = out[0];
    } finally {
      release();
    }
    if (child == 0) {
      return null; // NO_COLOR
    }
    return adopt(child, use, "split");
  }

  /** A communicator made by split, shrink or grow, with its rank and size; destroyed if they fail. */
  private static NativeCommunicator adopt(long child, Options use, String call) {
    int[] r = new int[1];
    int[] n = new int[1];
    int rc = ColibriLib.clbCommRank(child, r);
    if (rc == 0) {
      rc = ColibriLib.clbCommCount(child, n);
    }
    if (rc != 0) {
      ColibriException e = NativeLibrary.error(rc, call);
      ColibriLib.clbCommDestroy(child);
      throw e;
    }
    try {
      return new NativeCommunicator(child, r[0], n[0], use);
    } catch (RuntimeException | Error e) {
      ColibriLib.clbCommDestroy(child); // nobody else holds the handle
      throw e;
    }
  }

  @Override
  public Communicator shrink(int... excluded) {
    // No local refusal of the list: clbCommShrink refuses what is wrong with it, on every survivor
    // where the survivors would otherwise wait.
    int[] list = excluded != null ? excluded : new int[0];
    long h = acquire("shrink");
    long child;
    try (ClbConfig config = NativeProvider.toConfig(options)) {
      config.logLevel(NativeLog.levelForInit(options));
      long[] out = new long[1];
      check(ColibriLib.clbCommShrink(h, list, list.length, config, out, 0), "shrink");
      child = out[0];
    } finally {
      release();
    }
    return adopt(child, options, "shrink");
  }

  @Override
  public UniqueId growId() {
    long h = acquire("growId");
    try {
      byte[] id = new byte[UniqueId.BYTES];
      check(ColibriLib.clbCommGetUniqueId(h, id), "growId");
      return UniqueId.fromBytes(id);
    } finally {
      release();
    }
  }

  @Override
  public Communicator grow(int nranks, UniqueId idOrNull) {
    // No local refusal: clbCommGrow refuses a bad size or id on every rank of this communicator at
    // once, where the others would otherwise wait.
    long h = acquire("grow");
    long child;
    try (ClbConfig config = NativeProvider.toConfig(options)) {
      config.logLevel(NativeLog.levelForInit(options));
      long[] out = new long[1];
      check(
          ColibriLib.clbCommGrow(
              h, nranks, idOrNull != null ? idOrNull.toBytes() : null, -1, config, out),
          "grow");
      child = out[0];
    } finally {
      release();
    }
    return adopt(child, options, "grow");
  }

  /**
   * A new rank's part of a grow ({@link NativeProvider#join}).
   *
   * @param id the coordinator's grow id
   * @param rank this rank, from the grown communicator's old size up
   * @param nranks the grown communicator's size
   * @param use its options
   * @return the grown communicator
   */
  static Communicator join(UniqueId id, int rank, int nranks, Options use) {
    long child;
    try (ClbConfig config = NativeProvider.toConfig(use)) {
      config.logLevel(NativeLog.levelForInit(use));
      long[] out = new long[1];
      int rc = ColibriLib.clbCommGrow(0, nranks, id.toBytes(), rank, config, out);
      if (rc != 0) {
        throw NativeLibrary.error(rc, "join as rank " + rank + " of " + nranks);
      }
      child = out[0];
    }
    return adopt(child, use, "join");
  }

  @Override
  public void trim() {
    long h = acquire("trim");
    try {
      check(ColibriLib.clbCommTrim(h), "trim");
    } finally {
      release();
    }
  }

  @Override
  public void suspend() {
    long h = acquire("suspend");
    try {
      check(ColibriLib.clbCommSuspend(h), "suspend");
    } finally {
      release();
    }
  }

  @Override
  public void resume() {
    long h = acquire("resume");
    try {
      check(ColibriLib.clbCommResume(h), "resume");
    } finally {
      release();
    }
  }

  @Override
  public boolean isSuspended() {
    long h = acquireAnyTime("isSuspended");
    try {
      int[] s = new int[1];
      check(ColibriLib.clbCommSuspended(h, s), "isSuspended");
      return s[0] != 0;
    } finally {
      release();
    }
  }

  @Override
  public void launchGraph(long graphExec, long stream) {
    long h = acquire("launchGraph");
    try {
      check(ColibriLib.clbGraphLaunch(graphExec, stream, new long[] {h}, 1), "launchGraph");
    } finally {
      release();
    }
  }

  @Override
  public Algorithm lastAlgorithm() {
    long h = acquireAnyTime("lastAlgorithm");
    try {
      int[] algorithm = new int[1];
      check(ColibriLib.clbCommLastAlgorithm(h, algorithm), "lastAlgorithm");
      return Algorithm.fromCode(algorithm[0]);
    } finally {
      release();
    }
  }

  @Override
  public String transportInfo() {
    long h = acquireAnyTime("transportInfo");
    try {
      for (int capacity = 16 << 10; ; capacity *= 4) {
        byte[] buf = new byte[capacity];
        check(ColibriLib.clbCommInfo(h, buf, buf.length), "transportInfo");
        int end = 0;
        while (end < buf.length && buf[end] != 0) {
          end++;
        }
        // A text that reaches the last byte may have been cut: ask again with more room.
        if (end < buf.length - 1 || capacity >= (4 << 20)) {
          return new String(buf, 0, end, StandardCharsets.UTF_8);
        }
      }
    } finally {
      release();
    }
  }

  /**
   * {@code clbCommGetAsyncError}. Counted in {@code queries}, not {@code inFlight}: a health check
   * polling from another thread neither waits for a collective running there nor makes a
   * concurrent close abort. Like the other queries, throws INVALID_USAGE after close.
   */
  @Override
  public Optional<ColibriException> asyncError() {
    state.queries.incrementAndGet();
    try {
      long h = state.handle.get();
      if (h == 0) {
        throw closed("asyncError");
      }
      int[] asyncError = new int[1];
      check(ColibriLib.clbCommGetAsyncError(h, asyncError), "asyncError");
      return asyncError[0] == 0
          ? Optional.empty()
          : Optional.of(NativeLibrary.error(asyncError[0], state.name));
    } finally {
      state.queries.decrementAndGet();
      Reference.reachabilityFence(this); // the cleaner must not run while the call is inside
    }
  }

  // ---- registered device buffers ----

  @Override
  public Registration register(long address, long bytes) {
    long h = acquire("register");
    try {
      if (address == 0 || bytes <= 0) {
        // Collective even when refused: the core tells the other ranks this rank failed, so
        // they get an error too instead of waiting for it.
        ColibriLib.clbCommRegister(h, 0, 0, new long[1]);
      }
      if (address == 0) {
        throw invalidHere(
            "register",
            "address is 0 (null): pass the address of device memory"
                + " (cudaMalloc, cuMemAlloc or DeviceBuffer)");
      }
      if (bytes <= 0) {
        throw invalidHere(
            "register", "bytes is " + bytes + ": pass the size of the buffer, 1 or" + " more");
      }
      long[] handle = new long[1];
      check(
          ColibriLib.clbCommRegister(h, address, bytes, handle),
          describe("register", address, bytes));
      return new NativeRegistration(handle[0], address, bytes);
    } finally {
      release();
    }
  }

  /**
   * A registration of this communicator. Its handle is swapped to 0 exactly once, so close is
   * idempotent; after the communicator's close (which frees every registration) it does nothing.
   */
  private final class NativeRegistration implements Registration {
    private final AtomicLong handle;
    private final long address;
    private final long bytes;

    NativeRegistration(long handle, long address, long bytes) {
      this.handle = new AtomicLong(handle);
      this.address = address;
      this.bytes = bytes;
    }

    @Override
    public long address() {
      return address;
    }

    @Override
    public long bytes() {
      return bytes;
    }

    @Override
    public void close() {
      long h = acquireIfOpen();
      try {
        if (h != 0 && handle.get() != 0) {
          // Before the handle is taken: a close refused while asynchronous calls are pending
          // leaves the registration open, to be closed again once they are done.
          state.calls.checkTurn("deregister");
        }
        long r = handle.getAndSet(0);
        if (r != 0 && h != 0) {
          check(ColibriLib.clbCommDeregister(h, r), describe("deregister", address, bytes));
        }
      } finally {
        release();
      }
    }

    @Override
    public String toString() {
      return describe("Registration", address, bytes)
          + " on "
          + NativeCommunicator.this
          + (handle.get() == 0 ? " (closed)" : "");
    }
  }

  // ---- lifetime ----

  @Override
  public void abort() {
    stop(false);
  }

  @Override
  public void revoke() {
    stop(true);
  }

  /** abort() and revoke(): the queued calls stopped, then the running one. */
  private void stop(boolean revoke) {
    Runnable failQueued = () -> {};
    long h = acquireIfOpen();
    try {
      if (h != 0) { // 0: closed, nothing left to abort
        failQueued = state.calls.stop(); // the queued calls will not run
        // The running one returns ABORTED.
        if (revoke) {
          check(ColibriLib.clbCommRevoke(h), "revoke");
        } else {
          check(ColibriLib.clbCommAbort(h), "abort");
        }
      } else if (revoke) {
        throw closed("revoke");
      }
    } finally {
      release();
      // Their futures fail last: the running call is aborted and this thread holds no call, so a
      // callback of theirs may join, or close the communicator, without waiting for either.
      failQueued.run();
    }
  }

  @Override
  public void close() {
    state.calls.close(); // the queued asynchronous calls run first; later ones are refused
    long h = state.handle.getAndSet(0);
    if (h == 0) {
      return;
    }
    try {
      if (state.inFlight.get() > 0) {
        // Another thread is inside a call: make it return before the memory goes away.
        ColibriLib.clbCommAbort(h);
        awaitNone(
            state.inFlight,
            "a call on another thread did not return within "
                + TimeUnit.NANOSECONDS.toSeconds(closeWaitNanos)
                + " s of the abort");
      }
      // An asyncError() on another thread returns at once, with no abort: just let it finish.
      awaitNone(
          state.queries,
          "asyncError() on another thread did not return within "
              + TimeUnit.NANOSECONDS.toSeconds(closeWaitNanos)
              + " s");
      check(ColibriLib.clbCommDestroy(h), "close");
    } finally {
      cleanable.clean(); // handle is 0 now: only unregisters
    }
  }

  @Override
  public String toString() {
    return "NativeCommunicator[rank "
        + rank
        + " of "
        + size
        + (state.handle.get() == 0 ? ", closed]" : "]");
  }

  // ---- helpers ----

  /** close(): waits, up to closeWaitNanos, until {@code calls} is 0; {@code what} if it is not. */
  private void awaitNone(AtomicInteger calls, String what) {
    long deadline = System.nanoTime() + closeWaitNanos;
    while (calls.get() > 0) {
      if (System.nanoTime() - deadline > 0) {
        throw new ColibriException(
            ErrorCode.INTERNAL_ERROR,
            "close of "
                + state.name
                + ": "
                + what
                + "; the native communicator is left allocated rather than freed under it."
                + " Please report this as a Colibri bug, with the thread dump");
      }
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
    }
  }

  /** Counts a call in and returns the handle, or 0 when closed; release() in any case. */
  private long acquireIfOpen() {
    state.inFlight.incrementAndGet();
    return state.handle.get();
  }

  /** For a call that takes a turn: refused while asynchronous calls are pending (checkTurn). */
  private long acquire(String call) {
    long h = acquireAnyTime(call);
    try {
      state.calls.checkTurn(call);
    } catch (RuntimeException e) {
      state.inFlight.decrementAndGet();
      throw e;
    }
    return h;
  }

  /** For a query, which answers whatever else runs. */
  private long acquireAnyTime(String call) {
    long h = acquireIfOpen();
    if (h == 0) {
      state.inFlight.decrementAndGet();
      throw closed(call);
    }
    return h;
  }

  private static ColibriException closed(String call) {
    return new ColibriException(
        ErrorCode.INVALID_USAGE,
        call + ": communicator is closed;" + " create a new one with Communicator.init");
  }

  private void release() {
    state.inFlight.decrementAndGet();
    Reference.reachabilityFence(this); // the cleaner must not run while a call is inside
  }

  private void check(int rc, String call) {
    if (rc != 0) {
      throw NativeLibrary.error(rc, call + " on rank " + rank + " of " + size);
    }
  }

  private void check(int rc, String call, long count, DataType type) {
    if (rc != 0) {
      throw NativeLibrary.error(
          rc, call + " of " + count + " " + type + " on rank " + rank + " of " + size);
    }
  }

  /** "register of 4096 bytes at 0x7f0000000000": a registration in messages. */
  private static String describe(String call, long address, long bytes) {
    return call + " of " + bytes + " bytes at 0x" + Long.toHexString(address);
  }

  /**
   * A refusal that fails nothing: a registration refused on one rank is refused on every rank by
   * the native side (which the call above made), and the communicator goes on.
   */
  private static ColibriException invalidHere(String call, String message) {
    return new ColibriException(ErrorCode.INVALID_ARGUMENT, call + ": " + message);
  }

  /** The calls numbered among the collectives ({@code clbCommRefuse}'s {@code collective}). */
  private static final Set<String> COLLECTIVES =
      Set.of("allReduce", "broadcast", "reduce", "reduceScatter", "allGather", "barrier");

  /**
   * A call this rank refuses for its arguments. It is a call the peers make too, and they would
   * wait for this rank's until their timeout: as the native library does for the arguments it
   * refuses, {@code clbCommRefuse} fails the communicator and tells them at once, naming this rank
   * and the message (a communicator of one rank goes on). While another thread is in a call on
   * this communicator, this one is refused for that ({@code INVALID_USAGE}) and nothing changes.
   */
  private ColibriException invalid(String call, String message) {
    long h = acquireIfOpen();
    try {
      if (h == 0) {
        return new ColibriException(ErrorCode.INVALID_ARGUMENT, call + ": " + message);
      }
      int rc = ColibriLib.clbCommRefuse(h, call, COLLECTIVES.contains(call) ? 1 : 0, message);
      return new ColibriException(ErrorCode.fromCode(rc), ColibriLib.clbGetLastError());
    } finally {
      release();
    }
  }

  private void checkTypeAndOp(String call, DataType type, ReduceOp op, boolean needsOp) {
    if (type == null) {
      throw invalid(call, "type is null: pass a DataType such as DataType.FLOAT32");
    }
    if (needsOp && op == null) {
      throw invalid(call, "op is null: pass a ReduceOp such as ReduceOp.SUM");
    }
  }

  private void checkRank(String call, String what, int r) {
    if (r < 0 || r >= size) {
      throw invalid(
          call,
          what
              + " "
              + r
              + " is out of range for a communicator of "
              + size
              + " rank"
              + (size == 1 ? "" : "s")
              + ": pass a "
              + what
              + " in 0.."
              + (size - 1));
    }
  }

  /**
   * Bytes that counts and displacements (elements, one entry per rank) reach into a buffer;
   * checks their lengths and signs.
   */
  private long extent(
      String countsName, long[] counts, String displsName, long[] displs, DataType type) {
    for (Object[] a : new Object[][] {{countsName, counts}, {displsName, displs}}) {
      long[] v = (long[]) a[1];
      if (v == null || v.length != size) {
        throw invalid(
            "allToAllv",
            a[0]
                + " is "
                + (v == null ? "null" : "of length " + v.length)
                + ": pass one entry per rank ("
                + size
                + ")");
      }
    }
    long end = 0;
    for (int p = 0; p < size; p++) {
      if (counts[p] < 0 || displs[p] < 0) {
        throw invalid(
            "allToAllv",
            countsName
                + "["
                + p
                + "] = "
                + counts[p]
                + ", "
                + displsName
                + "["
                + p
                + "] = "
                + displs[p]
                + ": counts and displacements are 0 or more");
      }
      if (counts[p] > Long.MAX_VALUE - displs[p]) {
        throw invalid(
            "allToAllv",
            countsName + "[" + p + "] + " + displsName + "[" + p + "] does not fit in a long");
      }
      if (counts[p] > 0) {
        end =
            Math.max(
                end,
                bytes(
                    "allToAllv",
                    countsName + "[" + p + "] + " + displsName + "[" + p + "]",
                    counts[p] + displs[p],
                    1,
                    type));
      }
    }
    return end;
  }

  private void checkRoot(int root) {
    if (root < 0 || root >= size) {
      throw invalid(
          "broadcast",
          "root "
              + root
              + " is out of range for a communicator of "
              + size
              + " rank"
              + (size == 1 ? "" : "s")
              + ": pass a root in 0.."
              + (size - 1));
    }
  }

  /** Bytes of {@code count * ranks} elements of {@code type}; checks sign and overflow. */
  private long bytes(String call, String countName, long count, int ranks, DataType type) {
    if (count < 0) {
      throw invalid(call, countName + " is " + count + ": pass the number of elements, 0 or more");
    }
    try {
      return Math.multiplyExact(Math.multiplyExact(count, (long) ranks), (long) type.size());
    } catch (ArithmeticException e) {
      throw invalid(
          call,
          countName
              + " "
              + count
              + (ranks > 1 ? " x " + ranks + " ranks" : "")
              + " x "
              + type.size()
              + " bytes ("
              + type
              + ") does not fit in a long: pass a smaller "
              + countName);
    }
  }

  private void checkBuffer(
      String call,
      String name,
      ByteBuffer buffer,
      long neededBytes,
      DataType type,
      boolean written) {
    if (buffer == null) {
      throw invalid(
          call,
          name
              + " buffer is null: pass a direct ByteBuffer"
              + " (ByteBuffer.allocateDirect) with at least "
              + neededBytes
              + " bytes from position to limit");
    }
    if (!buffer.isDirect()) {
      throw invalid(
          call,
          name
              + " buffer is a heap buffer: Colibri needs direct buffers;"
              + " allocate it with ByteBuffer.allocateDirect (or copy the data into one)");
    }
    // The native side reads and writes elements in the native byte order; a buffer in the other
    // order would give every multi-byte element with its bytes reversed, silently.
    if (type.size() > 1 && buffer.order() != ByteOrder.nativeOrder()) {
      throw invalid(
          call,
          name
              + " buffer is in "
              + buffer.order()
              + " byte order, but "
              + type
              + " elements are "
              + (written ? "written" : "read")
              + " in the native order ("
              + ByteOrder.nativeOrder()
              + "): call .order(ByteOrder.nativeOrder()) on it"
              + " (ByteBuffer.allocateDirect and the views slice(), duplicate() and"
              + " asReadOnlyBuffer() are BIG_ENDIAN whatever the order of the buffer they view)");
    }
    if (written && buffer.isReadOnly()) {
      throw invalid(
          call, name + " buffer is read-only: pass a writable direct buffer for the" + " result");
    }
    if (buffer.remaining() < neededBytes) {
      throw invalid(
          call,
          name
              + " buffer has "
              + buffer.remaining()
              + " bytes remaining"
              + " (position "
              + buffer.position()
              + ", limit "
              + buffer.limit()
              + ") but "
              + neededBytes
              + " bytes are needed: pass a larger buffer, move its position or limit,"
              + " or a smaller count");
    }
  }

  private void checkAddress(String call, String name, long address, long count) {
    if (address == 0 && count > 0) {
      throw invalid(
          call,
          name
              + " address is 0 (null) with a count of "
              + count
              + ": pass the address of the memory");
    }
  }
}
