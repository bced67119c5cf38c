/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.nio.ByteBuffer;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A group of ranks (processes, or threads acting as ranks) that run collectives together.
 *
 * <h2>Creating one</h2>
 *
 * <pre>{@code
 * // one process creates the id and hands its text to every rank
 * UniqueId id = UniqueId.create();
 * // every rank, with the same id:
 * try (Communicator comm = Communicator.init(UniqueId.parse(text), rank, nranks)) {
 *   comm.allReduce(buf, buf, count, DataType.FLOAT32, ReduceOp.SUM);   // in place
 * }
 * }</pre>
 *
 * or, under a torchrun-style launcher, {@link #fromEnvironment()}.
 *
 * <h2>Buffers</h2>
 *
 * <p>The {@link ByteBuffer} methods take <b>direct</b> buffers only (heap buffers are refused).
 * The data of each buffer is the region from its position to its limit; positions, limits and byte
 * orders are not changed. Elements are read and written in the native byte order, so a buffer of
 * a type wider than one byte must be in it ({@code buffer.order() == ByteOrder.nativeOrder()}), or
 * the call is refused with {@link ErrorCode#INVALID_ARGUMENT}: {@code ByteBuffer.allocateDirect}
 * and the views {@code slice()}, {@code duplicate()} and {@code asReadOnlyBuffer()} are
 * {@code BIG_ENDIAN}, whatever the buffer they view, so call
 * {@code .order(ByteOrder.nativeOrder())} on each. {@link DataType#INT8} and {@link DataType#UINT8}
 * buffers may be in either order. A recv buffer must be writable. Counts are in elements of
 * {@code type}:
 *
 * <ul>
 *   <li>allReduce, broadcast: send and recv hold {@code count} elements;
 *   <li>allGather: send holds {@code sendCount}, recv holds {@code size() * sendCount};
 *   <li>reduceScatter: send holds {@code size() * recvCount}, recv holds {@code recvCount}.
 * </ul>
 *
 * <p>A buffer may be larger than needed: the first elements of its region are used. <b>In
 * place</b> means that send and recv are the same memory: pass the same buffer with the same
 * position for allReduce and broadcast; for allGather pass as send the slice of recv at
 * {@code rank() * sendCount} elements (e.g. {@code recv.slice(rank * sendCount * size, sendCount *
 * size).order(ByteOrder.nativeOrder())}); for reduceScatter pass as recv the slice of send at
 * {@code rank() * recvCount}. Other overlaps of send and recv are not allowed.
 *
 * <p>The {@code long} overloads take raw addresses (device memory, or host memory you manage) and
 * a CUDA stream handle (0 for host memory); the caller keeps the memory valid and large enough.
 *
 * <h2>Threads</h2>
 *
 * <p>A communicator takes one call at a time: run its collectives (and {@link #register},
 * {@link Registration#close()}, {@link #trim()}) from one thread at a time, in the same order on
 * every rank. Give each thread its own communicator, or serialize the calls. A call made while
 * another thread is in one on the same communicator is refused at once with a
 * {@link ColibriException} of {@link ErrorCode#INVALID_USAGE} whose message names the call in
 * progress ("another thread is in allReduce #5"); it changes nothing, so the call in progress
 * completes normally and the communicator stays usable. The exceptions are {@link #abort()}, which
 * any thread may call at any time, e.g. from a watchdog, to make a blocked collective return, and
 * {@link #asyncError()} (and {@link #checkHealthy()}), which any thread may call at any time to see
 * whether something went wrong; {@link #rank()}, {@link #size()}, {@link #memoryStats()} and
 * {@link #lastAlgorithm()} answer at any time too. {@link #close()} may also be called from
 * another thread: it aborts a collective still running and waits for it to return.
 *
 * <p><b>Interrupts.</b> A thread blocked in a call ({@link #init init}, a collective, a
 * point-to-point call, a split) waits in native code and does not respond to
 * {@link Thread#interrupt()}: the call returns when it completes, fails, or its timeout passes, and
 * the thread's interrupt status stays set for its next interruptible operation. To stop a blocked
 * call, have another thread call {@link #abort()}: the call then fails with
 * {@link ErrorCode#ABORTED}, here and on the peers, and the communicator must be closed. An
 * interrupt is not turned into an abort because an abort ends the communicator on every rank,
 * which an interrupt meant for something else (an executor's {@code shutdownNow}, a task's
 * {@code cancel(true)}) must not do. For {@link #init init} there is no handle to abort yet: it
 * waits at most the timeout. Waiting for an asynchronous call's future with {@code get()} is
 * interruptible, but the call itself goes on.
 *
 * <h2>Asynchronous calls</h2>
 *
 * <p>{@link #allReduceAsync allReduceAsync}, {@link #allGatherAsync allGatherAsync},
 * {@link #reduceScatterAsync reduceScatterAsync} and {@link #broadcastAsync broadcastAsync} are
 * the {@link ByteBuffer} collectives without the wait: each returns at once a
 * {@link CompletableFuture} that completes when the call has returned, so a thread can overlap
 * the collective with its own work, e.g.
 *
 * <pre>{@code
 * CompletableFuture<Void> done =
 *     comm.allReduceAsync(grad, grad, n, DataType.FLOAT32, ReduceOp.SUM);
 * prepareNextBatch();   // runs while the all-reduce moves data
 * done.join();          // grad now holds the sum
 * }</pre>
 *
 * <ul>
 *   <li><b>Order.</b> The calls run one at a time, in the order they were submitted, on one daemon
 *       thread of the communicator ({@code colibri-comm-<rank>}), started by the first of them and
 *       ended by {@link #close()}. As for synchronous calls, every rank submits the same calls in
 *       the same order.
 *   <li><b>Buffers.</b> The region (position to limit) and byte order of each buffer are taken when
 *       the call is submitted; later changes to the buffer object do not matter. The memory is
 *       read and written until the future completes: do not write {@code send} or read
 *       {@code recv} before. The call keeps its buffers reachable until then.
 *   <li><b>Errors.</b> These methods never throw: every failure, a wrong argument included
 *       (INVALID_ARGUMENT, checked when the call's turn comes, with the message of the
 *       synchronous call), completes the future exceptionally with a {@link ColibriException}
 *       ({@code join()} wraps it in a {@code CompletionException}, {@code get()} in an
 *       {@code ExecutionException}: see {@code getCause()}).
 *   <li><b>A failure ends the sequence.</b> Once a call fails, this rank's sequence of calls no
 *       longer matches its peers', so the calls queued behind it, and every later call on the
 *       communicator, asynchronous or not, fail at once with the same {@link ErrorCode}, naming
 *       the call that failed (it is their cause). Close the communicator.
 *   <li><b>Mixing.</b> While asynchronous calls are queued or running, a synchronous collective,
 *       {@link #register}, {@link Registration#close()} or {@link #trim()} is refused with
 *       INVALID_USAGE saying how many are pending: join their futures first (or make the call
 *       asynchronous too). {@link #rank()}, {@link #size()}, {@link #memoryStats()},
 *       {@link #lastAlgorithm()}, {@link #transportInfo()}, {@link #asyncError()} and
 *       {@link #abort()} answer at any time.
 *   <li><b>No cancel.</b> A submitted call cannot be taken back, not even one still queued: the
 *       peers would wait for it. {@code cancel}, {@code complete} and
 *       {@code completeExceptionally} on the future do nothing and return false ({@code obtrude*},
 *       {@code completeAsync}, {@code orTimeout} and {@code completeOnTimeout} are refused with
 *       INVALID_USAGE; wait with {@code get(timeout, unit)}). To stop the calls, call
 *       {@link #abort()}: the running call returns ABORTED, every queued call's future completes
 *       at once with ABORTED, and so do later calls.
 *   <li><b>Close.</b> {@link #close()} waits until the queued calls have run (a call waits for a
 *       silent peer at most the timeout, and after a failure the rest fail at once), then frees
 *       the communicator; later asynchronous calls fail with INVALID_USAGE. To stop them instead,
 *       call {@link #abort()} before {@link #close()}.
 *   <li><b>Callbacks.</b> Stages attached with the non-async methods ({@code thenRun},
 *       {@code whenComplete}, ...) may run on the communicator's thread and hold up its later
 *       calls: attach long work with the {@code ...Async} variants.
 * </ul>
 *
 * <h2>Errors</h2>
 *
 * <p>Arguments are checked before anything is sent: a wrong one throws
 * {@link ColibriException} with {@link ErrorCode#INVALID_ARGUMENT} and a message that names it.
 * With peers, such a refusal also fails the communicator and tells them at once: their matching
 * calls, which would otherwise wait for this rank's until the timeout, throw
 * {@link ErrorCode#REMOTE_ERROR} naming this rank and the message, and this rank's next call
 * throws {@link ErrorCode#INVALID_USAGE}. (A refusal of usage, such as a call while another thread
 * is in one, changes nothing.) A failure of the collective itself (peer died, timeout, abort) throws {@link ColibriException}
 * with the matching {@link ErrorCode}; the communicator is then unusable: close it. A failure
 * that no call of this rank has met yet (a peer that aborted or died, a device wait of an earlier
 * asynchronous call that timed out) shows in {@link #asyncError()}.
 */
public interface Communicator extends AutoCloseable {

  /**
   * Joins the communicator of {@code id} as {@code rank} of {@code nranks}, with
   * {@link Options#defaults()}. Blocks until every rank has joined (or the timeout passes).
   *
   * @param id the communicator's id, the same on every rank (made by {@link UniqueId#create()} on
   *     one process); not null
   * @param rank this process's rank, 0..nranks-1, different on every rank
   * @param nranks number of ranks, 1 or more, the same on every rank
   * @return the joined communicator, to {@link #close()} when done
   * @throws ColibriException INVALID_ARGUMENT for a rank out of range, UNSUPPORTED without a
   *     native implementation on the class path, TIMEOUT / AUTH_ERROR / REMOTE_ERROR when the
   *     ranks cannot meet
   */
  static Communicator init(UniqueId id, int rank, int nranks) {
    return init(id, rank, nranks, Options.defaults());
  }

  /**
   * {@link #init(UniqueId, int, int)} with the given options.
   *
   * @param id the communicator's id, the same on every rank; not null
   * @param rank this process's rank, 0..nranks-1
   * @param nranks number of ranks, 1 or more
   * @param options settings of the communicator; not null
   * @return the joined communicator
   * @throws ColibriException as {@link #init(UniqueId, int, int)}, and INVALID_ARGUMENT for a
   *     null id or options
   */
  static Communicator init(UniqueId id, int rank, int nranks, Options options) {
    if (id == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "unique id is null: create one with"
              + " UniqueId.create() on one process and pass it to every rank");
    }
    if (options == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "options are null: pass Options.defaults() or an Options built with Options.builder()");
    }
    return ProviderLookup.provider().init(id, rank, nranks, options);
  }

  /**
   * Joins the communicator that a torchrun-style launcher describes in the environment:
   * {@code MASTER_ADDR} and {@code MASTER_PORT} (where rank 0 opens the bootstrap root),
   * {@code RANK}, {@code WORLD_SIZE}, and optionally {@code COLIBRI_BOOTSTRAP_SECRET}.
   * {@code LOCAL_RANK} is read but not needed: get it from {@link LaunchEnvironment#fromSystem()}.
   *
   * @return the joined communicator, with {@link Options#defaults()}
   * @throws ColibriException INVALID_ARGUMENT naming a variable that is missing or invalid
   */
  static Communicator fromEnvironment() {
    return fromEnvironment(Options.defaults());
  }

  /**
   * {@link #fromEnvironment()} with the given options.
   *
   * @param options settings of the communicator; not null
   * @return the joined communicator
   * @throws ColibriException INVALID_ARGUMENT naming a variable that is missing or invalid, or
   *     for null options
   */
  static Communicator fromEnvironment(Options options) {
    if (options == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "options are null: pass Options.defaults() or an Options built with Options.builder()");
    }
    LaunchEnvironment env = LaunchEnvironment.fromSystem();
    UniqueId id =
        ProviderLookup.provider()
            .uniqueIdFromAddress(env.masterAddress(), env.masterPort(), env.secret());
    return init(id, env.rank(), env.worldSize(), options);
  }

  /**
   * Every rank ends with the reduction of all ranks' {@code send} in {@code recv}.
   *
   * @param send this rank's input, {@code count} elements (direct buffer)
   * @param recv where the result goes, {@code count} elements (direct, writable buffer); may be
   *     {@code send} (in place)
   * @param count number of elements on every rank, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   */
  void allReduce(ByteBuffer send, ByteBuffer recv, long count, DataType type, ReduceOp op);

  /**
   * Every rank ends with all ranks' {@code send}, in rank order, in {@code recv}.
   *
   * @param send this rank's input, {@code sendCount} elements (direct buffer)
   * @param recv where the result goes, {@code size() * sendCount} elements (direct, writable
   *     buffer)
   * @param sendCount number of elements each rank contributes, 0 or more
   * @param type element type of both buffers
   */
  void allGather(ByteBuffer send, ByteBuffer recv, long sendCount, DataType type);

  /**
   * Reduces all ranks' {@code send} ({@code size() * recvCount} elements) and leaves block
   * {@code rank()} of the result in {@code recv}.
   *
   * @param send this rank's input, {@code size() * recvCount} elements (direct buffer)
   * @param recv where this rank's block of the result goes, {@code recvCount} elements (direct,
   *     writable buffer)
   * @param recvCount number of elements of each rank's block, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   */
  void reduceScatter(ByteBuffer send, ByteBuffer recv, long recvCount, DataType type, ReduceOp op);

  /**
   * Every rank ends with {@code root}'s {@code send} in {@code recv}; {@code send} is read on the
   * root only (other ranks may pass null or any buffer).
   *
   * @param send the data to broadcast, {@code count} elements (direct buffer), read on the root
   *     only; may be null on the other ranks
   * @param recv where the data goes, {@code count} elements (direct, writable buffer), on every
   *     rank, the root included
   * @param count number of elements, 0 or more
   * @param type element type of both buffers
   * @param root rank whose {@code send} is broadcast, 0..size()-1, the same on every rank
   */
  void broadcast(ByteBuffer send, ByteBuffer recv, long count, DataType type, int root);

  /**
   * {@link #allReduce(ByteBuffer, ByteBuffer, long, DataType, ReduceOp)} on the communicator's
   * thread, after the asynchronous calls submitted before it (see "Asynchronous calls" above).
   * Never throws.
   *
   * @param send this rank's input, {@code count} elements (direct buffer)
   * @param recv where the result goes, {@code count} elements (direct, writable buffer); may be
   *     {@code send} (in place)
   * @param count number of elements on every rank, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   * @return completes when the call has returned; exceptionally with the call's
   *     {@link ColibriException}
   */
  CompletableFuture<Void> allReduceAsync(
      ByteBuffer send, ByteBuffer recv, long count, DataType type, ReduceOp op);

  /**
   * {@link #allGather(ByteBuffer, ByteBuffer, long, DataType)} on the communicator's thread, after
   * the asynchronous calls submitted before it (see "Asynchronous calls" above). Never throws.
   *
   * @param send this rank's input, {@code sendCount} elements (direct buffer)
   * @param recv where the result goes, {@code size() * sendCount} elements (direct, writable
   *     buffer)
   * @param sendCount number of elements each rank contributes, 0 or more
   * @param type element type of both buffers
   * @return completes when the call has returned; exceptionally with the call's
   *     {@link ColibriException}
   */
  CompletableFuture<Void> allGatherAsync(
      ByteBuffer send, ByteBuffer recv, long sendCount, DataType type);

  /**
   * {@link #reduceScatter(ByteBuffer, ByteBuffer, long, DataType, ReduceOp)} on the communicator's
   * thread, after the asynchronous calls submitted before it (see "Asynchronous calls" above).
   * Never throws.
   *
   * @param send this rank's input, {@code size() * recvCount} elements (direct buffer)
   * @param recv where this rank's block of the result goes, {@code recvCount} elements (direct,
   *     writable buffer)
   * @param recvCount number of elements of each rank's block, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   * @return completes when the call has returned; exceptionally with the call's
   *     {@link ColibriException}
   */
  CompletableFuture<Void> reduceScatterAsync(
      ByteBuffer send, ByteBuffer recv, long recvCount, DataType type, ReduceOp op);

  /**
   * {@link #broadcast(ByteBuffer, ByteBuffer, long, DataType, int)} on the communicator's thread,
   * after the asynchronous calls submitted before it (see "Asynchronous calls" above). Never
   * throws.
   *
   * @param send the data to broadcast, {@code count} elements (direct buffer), read on the root
   *     only; may be null on the other ranks
   * @param recv where the data goes, {@code count} elements (direct, writable buffer), on every
   *     rank
   * @param count number of elements, 0 or more
   * @param type element type of both buffers
   * @param root rank whose {@code send} is broadcast, 0..size()-1, the same on every rank
   * @return completes when the call has returned; exceptionally with the call's
   *     {@link ColibriException}
   */
  CompletableFuture<Void> broadcastAsync(
      ByteBuffer send, ByteBuffer recv, long count, DataType type, int root);

  /**
   * {@link #allReduce(ByteBuffer, ByteBuffer, long, DataType, ReduceOp)} on raw addresses.
   *
   * @param send address of this rank's input, {@code count} elements (device or host memory)
   * @param recv address of the result, {@code count} elements; may equal {@code send} (in place)
   * @param count number of elements on every rank, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   * @param stream CUDA stream handle ({@code cudaStream_t}) the device work is enqueued on;
   *     ignored for host memory (pass 0)
   */
  void allReduce(long send, long recv, long count, DataType type, ReduceOp op, long stream);

  /**
   * Waits until every rank of this communicator has called {@code barrier()} (collective, like a
   * collective call: in the same order among the other calls on every rank).
   */
  default void barrier() {
    barrier(0L);
  }

  /**
   * A barrier on a CUDA stream: work queued on {@code stream} after it starts once every rank's
   * stream has reached it; returns at once, and can be captured into a CUDA graph. The first one,
   * outside any capture, allocates 4 bytes of device memory in the stream's context.
   *
   * @param stream CUDA stream handle ({@code cudaStream_t}), or 0 for {@link #barrier()}
   */
  void barrier(long stream);

  /**
   * {@link #allGather(ByteBuffer, ByteBuffer, long, DataType)} on raw addresses.
   *
   * @param send address of this rank's input, {@code sendCount} elements (device or host memory)
   * @param recv address of the result, {@code size() * sendCount} elements
   * @param sendCount number of elements each rank contributes, 0 or more
   * @param type element type of both buffers
   * @param stream CUDA stream handle ({@code cudaStream_t}) the device work is enqueued on;
   *     ignored for host memory (pass 0)
   */
  void allGather(long send, long recv, long sendCount, DataType type, long stream);

  /**
   * {@link #reduceScatter(ByteBuffer, ByteBuffer, long, DataType, ReduceOp)} on raw addresses.
   *
   * @param send address of this rank's input, {@code size() * recvCount} elements (device or host
   *     memory)
   * @param recv address of this rank's block of the result, {@code recvCount} elements
   * @param recvCount number of elements of each rank's block, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   * @param stream CUDA stream handle ({@code cudaStream_t}) the device work is enqueued on;
   *     ignored for host memory (pass 0)
   */
  void reduceScatter(long send, long recv, long recvCount, DataType type, ReduceOp op, long stream);

  /**
   * {@link #broadcast(ByteBuffer, ByteBuffer, long, DataType, int)} on raw addresses.
   *
   * @param send address of the data to broadcast, {@code count} elements, read on the root only
   *     (other ranks may pass 0)
   * @param recv address where the data goes, {@code count} elements, on every rank
   * @param count number of elements, 0 or more
   * @param type element type of both buffers
   * @param root rank whose {@code send} is broadcast, 0..size()-1, the same on every rank
   * @param stream CUDA stream handle ({@code cudaStream_t}) the device work is enqueued on;
   *     ignored for host memory (pass 0)
   */
  void broadcast(long send, long recv, long count, DataType type, int root, long stream);

  // ---- point-to-point, and the calls made of it ----

  /**
   * Sends {@code count} elements of {@code send} to rank {@code peer}, which receives them with
   * {@link #recv(ByteBuffer, long, DataType, int)}. The two ranks match their sends and receives
   * to each other in the order they post them, and must agree on count and type (a difference
   * fails the receive with REMOTE_ERROR, naming both calls). Returns once {@code send} may be
   * reused; a send larger than the staging waits for its receive. Inside a {@link #group()} it is
   * recorded and runs when the group closes (any order of sends and receives then completes). A
   * send to this rank itself goes to its receive, which must be in the same group.
   *
   * @param send the data, {@code count} elements (direct buffer, from its position)
   * @param count number of elements, 0 or more (0 moves nothing, on both sides)
   * @param type element type
   * @param peer the receiving rank, 0..size()-1
   * @throws ColibriException INVALID_ARGUMENT for a peer out of range or a bad buffer; TIMEOUT
   *     when the peer never takes it; REMOTE_ERROR when it fails or leaves
   */
  void send(ByteBuffer send, long count, DataType type, int peer);

  /**
   * Receives {@code count} elements from rank {@code peer} into {@code recv}: the counterpart of
   * {@link #send(ByteBuffer, long, DataType, int)}. A receive whose send never comes ends in
   * TIMEOUT naming the peer.
   *
   * @param recv where the data goes, {@code count} elements (writable direct buffer)
   * @param count number of elements, 0 or more
   * @param type element type
   * @param peer the sending rank, 0..size()-1
   */
  void recv(ByteBuffer recv, long count, DataType type, int peer);

  /**
   * {@link #send(ByteBuffer, long, DataType, int)} on a raw address: host memory you manage, or
   * device memory. Between ranks on one GPU (threads of one process, or processes of one host)
   * device memory moves on the GPU: the call is enqueued on the stream, returns without waiting for
   * the data, and can be captured in a CUDA graph once the pair made one call outside a capture.
   * Between processes a message above 16 KiB whose receive buffer is {@link #register registered}
   * is written in place (hundreds of GB/s); otherwise it moves in small lines (a few GB/s).
   * Between GPUs or hosts it goes through host memory in this version (the stream is synchronized
   * and the call returns once the data moved; not capturable). docs/device.md has the details.
   *
   * @param send address of the data, {@code count} elements
   * @param count number of elements, 0 or more
   * @param type element type
   * @param peer the receiving rank, 0..size()-1
   * @param stream CUDA stream of device memory, 0 for host memory
   */
  void send(long send, long count, DataType type, int peer, long stream);

  /**
   * {@link #recv(ByteBuffer, long, DataType, int)} on a raw address: host memory you manage, or
   * device memory (on the GPU or through host memory, as for
   * {@link #send(long, long, DataType, int, long)}).
   *
   * @param recv address where the data goes, {@code count} elements
   * @param count number of elements, 0 or more
   * @param type element type
   * @param peer the sending rank, 0..size()-1
   * @param stream CUDA stream of device memory, 0 for host memory
   */
  void recv(long recv, long count, DataType type, int peer, long stream);

  /**
   * Every rank sends {@code count} elements to every rank: block {@code p} of {@code send}
   * ({@code count} elements at {@code p * count}) goes to rank {@code p}, and block {@code p} of
   * {@code recv} comes from rank {@code p}. Collective. In place when {@code send} and
   * {@code recv} are the same memory (the input is first copied into the communicator's scratch);
   * otherwise they must not overlap.
   *
   * @param send {@code size() * count} elements (direct buffer)
   * @param recv {@code size() * count} elements (writable direct buffer)
   * @param count elements per peer, 0 or more
   * @param type element type
   */
  void allToAll(ByteBuffer send, ByteBuffer recv, long count, DataType type);

  /**
   * {@link #allToAll(ByteBuffer, ByteBuffer, long, DataType)} with a count and a displacement (in
   * elements, from the buffer's position) per peer, as MoE dispatch with uneven tokens needs:
   * {@code sendCounts[p]} elements at {@code sendDispls[p]} go to rank {@code p}, and
   * {@code recvCounts[p]} elements from rank {@code p} land at {@code recvDispls[p]}. A count may
   * be 0; {@code sendCounts[p]} here must equal {@code recvCounts[rank()]} on rank {@code p}. In
   * place when {@code send} and {@code recv} are the same memory and the counts and displacements
   * are the same both ways; otherwise the two must not overlap.
   *
   * @param send the data to send (direct buffer)
   * @param sendCounts elements to each rank, {@code size()} entries
   * @param sendDispls where each rank's elements start in {@code send}, {@code size()} entries
   * @param recv where the data goes (writable direct buffer)
   * @param recvCounts elements from each rank, {@code size()} entries
   * @param recvDispls where each rank's elements go in {@code recv}, {@code size()} entries
   * @param type element type
   */
  void allToAllv(
      ByteBuffer send,
      long[] sendCounts,
      long[] sendDispls,
      ByteBuffer recv,
      long[] recvCounts,
      long[] recvDispls,
      DataType type);

  /**
   * Rank {@code root} gets the element-wise reduction of every rank's {@code send} in
   * {@code recv}, combined in rank order whatever the timing. Collective.
   *
   * @param send this rank's {@code count} elements (direct buffer)
   * @param recv the result on the root ({@code count} elements); ignored elsewhere (may be null);
   *     in place at the root: the same buffer as {@code send}
   * @param count number of elements, 0 or more
   * @param type element type
   * @param op how elements are combined
   * @param root the rank that gets the result, 0..size()-1
   */
  void reduce(ByteBuffer send, ByteBuffer recv, long count, DataType type, ReduceOp op, int root);

  /**
   * Rank {@code root} gets every rank's {@code count} elements, rank {@code p}'s at
   * {@code p * count} of {@code recv}. Collective.
   *
   * @param send this rank's {@code count} elements (direct buffer)
   * @param recv {@code size() * count} elements on the root; ignored elsewhere (may be null)
   * @param count elements per rank, 0 or more
   * @param type element type
   * @param root the rank that gathers, 0..size()-1
   */
  void gather(ByteBuffer send, ByteBuffer recv, long count, DataType type, int root);

  /**
   * Rank {@code p} gets the {@code count} elements at {@code p * count} of the root's
   * {@code send}. Collective.
   *
   * @param send {@code size() * count} elements on the root; ignored elsewhere (may be null)
   * @param recv this rank's {@code count} elements (writable direct buffer)
   * @param count elements per rank, 0 or more
   * @param type element type
   * @param root the rank that scatters, 0..size()-1
   */
  void scatter(ByteBuffer send, ByteBuffer recv, long count, DataType type, int root);

  /**
   * Starts a group on this thread: the calls it makes until the group is closed (sends,
   * receives, the calls made of them, collectives; on this communicator or others) are checked
   * and recorded, and run together when it closes, so any order of sends and receives inside it
   * completes and one thread can drive several communicators at once:
   *
   * <pre>{@code
   * try (Group g = Communicator.group()) {
   *   comm.send(out, n, DataType.FLOAT32, next);
   *   comm.recv(in, n, DataType.FLOAT32, prev);
   * } // both done here
   * }</pre>
   *
   * <p>Groups nest (only the outermost close runs anything). Buffers must stay valid and
   * untouched until the close. A call refused inside the group throws; the close then runs nothing
   * and throws that error again. Close it on the thread that started it.
   *
   * @return the group, to close (try-with-resources)
   */
  static Group group() {
    return Group.start(ProviderLookup.provider());
  }

  /**
   * Registers {@code bytes} of device memory at {@code address} so that ranks in other processes
   * read it in place (CUDA IPC, zero copy) instead of copying through staging, and so that
   * point-to-point messages above 16 KiB from ranks in other processes on the same GPU are
   * written straight into it.
   * <b>Collective</b>: every rank calls it at the same point of its sequence of calls, each with
   * its own buffer of any size. A device collective uses zero copy when, on every rank, each of
   * its buffers lies inside a live registration; otherwise it is staged as before, so a missing
   * registration costs speed, never correctness.
   *
   * <ul>
   *   <li>The memory must come from {@code cudaMalloc}, {@code cuMemAlloc} or
   *       {@code io.colibri.cuda.DeviceBuffer} (CUDA IPC cannot export {@code cudaMallocAsync}
   *       pools or {@code cuMemCreate}); host memory is refused.
   *   <li>Register before capturing a CUDA graph that uses the buffer: registering sets up what
   *       the captured calls need.
   *   <li>Freeing the memory turns its registration off (later calls are staged); close the
   *       registration before freeing to give the memory back at once.
   *   <li>If any rank's buffer cannot be registered, every rank gets an error and nothing is
   *       registered.
   * </ul>
   *
   * @param address start of the buffer (device memory)
   * @param bytes size of the buffer, 1 or more
   * @return the registration; {@link Registration#close() close} it (collectively) before freeing
   *     the memory, or leave it to {@link #close()}
   * @throws ColibriException INVALID_ARGUMENT for address 0, bytes &lt;= 0 or memory that is not
   *     device memory; UNSUPPORTED without a CUDA driver; INVALID_USAGE after {@link #close()};
   *     another code when a rank failed
   */
  Registration register(long address, long bytes);

  /**
   * A device buffer registered with {@link #register(long, long)}. {@link #close()} is collective
   * like {@code register}, and idempotent: a second close does nothing. Closing the communicator
   * frees its registrations: a registration closed after its communicator does nothing. Like the
   * communicator, not for concurrent use: do not close a registration while another thread runs a
   * collective on the same communicator.
   */
  interface Registration extends AutoCloseable {
    /**
     * Start of the registered buffer, as passed to {@link Communicator#register(long, long)}.
     *
     * @return the device address
     */
    long address();

    /**
     * Size of the registered buffer in bytes.
     *
     * @return the size in bytes, 1 or more
     */
    long bytes();

    /**
     * Deregisters the buffer: collective, at the same point of every rank's sequence of calls.
     * Waits for this rank's device work on the communicator to finish. Idempotent; does nothing
     * after the communicator was closed.
     *
     * @throws ColibriException when the native deregistration fails (the registration counts as
     *     closed all the same)
     */
    @Override
    void close();
  }

  /**
   * This process's rank, 0..size()-1.
   *
   * @return the rank passed at init
   */
  int rank();

  /**
   * Number of ranks.
   *
   * @return the number of ranks, 1 or more
   */
  int size();

  /**
   * Memory the communicator holds now and at its peak.
   *
   * @return host and device bytes, now and at the peak
   */
  MemoryStats memoryStats();

  /**
   * Gives back host staging memory not in use. Local: peers need not call it at the same time.
   * Device buffers (peers write into them) stay until {@link #close()}.
   */
  void trim();

  /**
   * Gives back the memory the communicator's calls set up (NCCL's {@code ncclCommSuspend}): its
   * device memory and host staging, keeping its connections, so that the GPU's memory can serve
   * other work meanwhile. Collective: every rank calls it at the same point of its calls; it
   * returns once every rank has given its memory back. Until {@link #resume()} every call but the
   * queries, {@link #trim()} and {@link #close()} is refused with {@link
   * ErrorCode#INVALID_USAGE}, changing nothing.
   *
   * @throws ColibriException {@link ErrorCode#INVALID_USAGE} on every rank, nothing given back,
   *     where a rank's calls were captured in CUDA graphs that still exist (their replays use
   *     that memory: destroy the graphs and their instantiations, suspend, and capture again after
   *     the resume; the suspend waits up to 0.5 s for the driver to release graphs just
   *     destroyed), a rank holds registrations, or the communicator is suspended already
   */
  void suspend();

  /**
   * Ends {@link #suspend()} on this rank: the next calls set up what they need again, as the first
   * calls did. Call it on every rank.
   *
   * @throws ColibriException {@link ErrorCode#INVALID_USAGE} where the communicator is not
   *     suspended
   */
  void resume();

  /**
   * Whether the communicator is suspended ({@link #suspend()} without {@link #resume()} yet).
   *
   * @return true between suspend and resume
   */
  boolean isSuspended();

  /**
   * Replays an instantiated CUDA graph ({@code cudaGraphExec_t} / {@code CUgraphExec}) that holds
   * device calls of this communicator, on {@code stream}. Where other ranks of this communicator
   * share this GPU in this process (rank threads), they meet first, as their eager calls do: each
   * launches once every one of them has arrived here, and returns once every one has launched. A
   * rank thread that captures lazily (a graph per batch size) or whose allocator frees device
   * memory between replays then never holds a peer's replayed kernels. Replay such graphs through
   * this method on every rank thread; with one rank per GPU it is a plain graph launch. Like a
   * collective, it takes the communicator for its duration.
   *
   * @param graphExec the instantiated graph's handle
   * @param stream the stream to launch it on (its handle; 0 for the legacy default stream)
   * @throws ColibriException INVALID_ARGUMENT for a null graph, INVALID_USAGE when a rank thread
   *     sharing the GPU makes an eager call meanwhile (both are refused, and the communicator
   *     cannot go on), UNSUPPORTED without a GPU, the communicator's failure if it failed
   */
  void launchGraph(long graphExec, long stream);

  /** The color of a rank that takes part in {@link #split} but joins no new communicator. */
  int NO_COLOR = -1;

  /**
   * Splits this communicator: the ranks that pass the same {@code color} form a new communicator
   * with this one's {@link Options} (NCCL's {@code ncclCommSplit}, e.g. tensor-parallel groups
   * {@code split(rank / tp, rank)} and data-parallel groups {@code split(rank % tp, rank)}).
   * Collective: every rank of this communicator calls it, as it would a collective.
   *
   * @param color the group to join, {@code >= 0}, or {@link #NO_COLOR} to join none
   * @param key the order within the group (ties: by rank in this communicator)
   * @return the new communicator (close it as well; this one stays usable), or {@code null} for
   *     {@link #NO_COLOR}
   * @throws ColibriException INVALID_ARGUMENT on every rank when any rank passed a negative color
   *     other than {@code NO_COLOR} (the message names that rank); this communicator stays usable
   */
  default Communicator split(int color, int key) {
    return split(color, key, options());
  }

  /**
   * {@link #split(int, int)} with options of its own for the new communicator (its transport,
   * timeouts, chunk size and so on; the settings that must agree across ranks must agree among its
   * ranks).
   *
   * @param color the group to join, {@code >= 0}, or {@link #NO_COLOR} to join none
   * @param key the order within the group (ties: by rank in this communicator)
   * @param options the new communicator's options ({@code null}: this communicator's, as
   *     {@link #split(int, int)}; never refused on one rank alone, which would leave the others
   *     waiting)
   * @return the new communicator, or {@code null} for {@link #NO_COLOR}
   */
  Communicator split(int color, int key, Options options);

  /**
   * A new communicator of this one's ranks without {@code excluded}, with this one's {@link
   * Options} (NCCL's {@code ncclCommShrink}): to go on after ranks died, or without ranks that
   * leave. Every rank not excluded calls it with the same ranks; the excluded ranks do not, and
   * need not be alive. The ranks keep their order (renumbered from 0). The survivors meet without
   * the excluded ranks and without this communicator's ring, so it works on a communicator that
   * failed (a peer died) or was aborted: call {@link #abort()} first where another thread is in a
   * call on it.
   *
   * @param excluded the ranks left out (any order, repeats allowed)
   * @return the new communicator (close it as well)
   * @throws ColibriException INVALID_ARGUMENT at once when this rank is in {@code excluded} or a
   *     rank is out of range; INVALID_ARGUMENT on every survivor when their lists differ; TIMEOUT,
   *     naming it, when a survivor does not call within the timeout. This communicator is unchanged
   *     in every case.
   */
  Communicator shrink(int... excluded);

  /**
   * On one rank of this communicator (the coordinator), an id for {@link #grow}: hand it to the new
   * ranks, which {@link #join} with it; its root runs in this process, and it serves one grow
   * (NCCL's {@code ncclCommGetUniqueId}). The other ranks of this communicator need not have it:
   * they derive its secret from this communicator's.
   *
   * @return the grow id (close it to stop its root if the grow is abandoned)
   * @throws ColibriException INVALID_USAGE on a revoked or failed communicator
   */
  UniqueId growId();

  /**
   * A communicator of this one's ranks and new ones, {@code nranks} in all (NCCL's {@code
   * ncclCommGrow}): for a replacement or added process, without this communicator's ranks
   * initialising again. Every rank of this communicator calls it, the coordinator with its {@link
   * #growId()}, the others with null (or the same id); each new rank calls {@link #join}. Ranks keep
   * their numbers, new ranks take this communicator's size and up. The grown communicator has this
   * one's {@link Options}; this one is unchanged (close each).
   *
   * @param nranks the grown communicator's size, more than this one's
   * @param idOrNull the grow id on the coordinator, else null
   * @return the grown communicator
   * @throws ColibriException INVALID_ARGUMENT on every rank of this communicator at once, naming
   *     the rank, for a size that is not larger or differs, an id not of this communicator, none or
   *     differing ids; TIMEOUT, naming them, when new ranks do not join within the timeout
   */
  Communicator grow(int nranks, UniqueId idOrNull);

  /**
   * A new rank's part of a {@link #grow}: joins the grown communicator as {@code rank}.
   *
   * @param growId the id from {@link #growId()} on a rank of the communicator being grown
   * @param rank this rank, from that communicator's size to {@code nranks - 1}
   * @param nranks the grown communicator's size, as its ranks pass to {@link #grow}
   * @param options settings of the grown communicator on this rank
   * @return the grown communicator
   * @throws ColibriException INVALID_ARGUMENT for a null or wrong id, a size or rank out of range,
   *     before anything is connected; TIMEOUT when the others do not come
   */
  static Communicator join(UniqueId growId, int rank, int nranks, Options options) {
    if (growId == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "grow id is null: make it with growId() on a rank of the communicator being grown");
    }
    if (options == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "options are null: pass Options.defaults() or an Options built with Options.builder()");
    }
    return ProviderLookup.provider().join(growId, rank, nranks, options);
  }

  /**
   * The options this communicator was made with.
   *
   * @return its options
   */
  Options options();

  /**
   * Algorithm of this rank's last collective on this communicator.
   *
   * @return the algorithm; {@link Algorithm#NONE} when nothing moved (one rank, count 0)
   */
  Algorithm lastAlgorithm();

  /**
   * What the communicator runs on, one fact per line: transport per link, thresholds, libraries.
   *
   * @return the lines, separated by {@code '\n'}
   */
  String transportInfo();

  /**
   * What has gone wrong on this communicator, found without making a collective call: empty while
   * it is healthy; otherwise the error, with the {@link ErrorCode} and a message that says what
   * happened and which call and ranks it concerns:
   *
   * <ul>
   *   <li>{@link ErrorCode#ABORTED}: {@link #abort()} was called here or on a peer;
   *   <li>{@link ErrorCode#TIMEOUT}: a device wait of an earlier, asynchronous call (one enqueued
   *       on a CUDA stream, or replayed in a CUDA graph) ran out of time: its output is undefined;
   *   <li>{@link ErrorCode#REMOTE_ERROR}: a peer failed, or its process died;
   *   <li>another code: the code of an earlier failure of a call on this rank.
   * </ul>
   *
   * <p>Any thread, any time, also while another thread is inside a collective (it does not wait
   * for it). Cheap: it sends nothing and waits for nothing (a few memory loads, one liveness check
   * per peer process on this host). Poll it after replaying a CUDA graph, whose collectives report
   * nothing by themselves, or from a health check. Once an error is present the communicator
   * cannot go on: {@link #close() close} it.
   *
   * @return the error, or empty while the communicator is healthy
   * @throws ColibriException INVALID_USAGE after {@link #close()} (like the other queries: a
   *     closed communicator has no state left to look at)
   */
  Optional<ColibriException> asyncError();

  /**
   * Throws the error of {@link #asyncError()} if there is one; returns normally while the
   * communicator is healthy. Any thread, any time, like {@code asyncError()}.
   *
   * @throws ColibriException the error {@link #asyncError()} reports (the communicator must then
   *     be closed), or INVALID_USAGE after {@link #close()}
   */
  default void checkHealthy() {
    Optional<ColibriException> error = asyncError();
    if (error.isPresent()) {
      throw error.get();
    }
  }

  /**
   * Makes a blocked collective, and every later call, fail with {@link ErrorCode#ABORTED}, and
   * tells the peers. The futures of queued asynchronous calls complete at once with ABORTED. Any
   * thread, any time; does nothing after {@link #close()}. Close still needed. This is the way to
   * stop a blocked call: {@link Thread#interrupt()} of the blocked thread does not (see
   * <i>Interrupts</i> above).
   */
  void abort();

  /**
   * Stops every call on this communicator, as {@link #abort()} does (a blocked call returns, the
   * peers are told, queued asynchronous calls fail), but leaves it for {@link #shrink}: every later
   * call but {@code shrink}, {@link #close()} and the queries fails with INVALID_USAGE saying it was
   * revoked (NCCL's {@code ncclCommRevoke}). What a survivor does when a peer died or stalls. Any
   * thread, any time.
   *
   * @throws ColibriException INVALID_USAGE when it was revoked already, or is closed
   */
  void revoke();

  /**
   * Frees everything the communicator holds, after the queued asynchronous calls have run.
   * Idempotent; safe after an error or abort.
   */
  @Override
  void close();
}
