/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import io.colibri.spi.NativeCalls;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

/**
 * The collectives of {@link Communicator} on {@link MemorySegment}s (Java 22 and later), next to
 * its {@code ByteBuffer} and address overloads:
 *
 * <pre>{@code
 * try (Arena arena = Arena.ofConfined()) {
 *   MemorySegment buf = arena.allocate(ValueLayout.JAVA_FLOAT, count);
 *   ...
 *   Segments.allReduce(comm, buf, buf, count, DataType.FLOAT32, ReduceOp.SUM);   // in place
 * }
 * }</pre>
 *
 * <p>Counts, in-place use and results are those of the {@code ByteBuffer} calls; the data of a
 * segment is its first {@code count x type.size()} bytes (or {@code size() x} that, see the
 * {@code ByteBuffer} calls), in the native byte order. A segment must be:
 *
 * <ul>
 *   <li><b>native</b> ({@link MemorySegment#isNative()}): allocated with an {@link Arena}, or
 *       memory you manage ({@link MemorySegment#ofAddress} with {@code reinterpret}); a heap
 *       segment ({@code MemorySegment.ofArray}) is refused;
 *   <li><b>alive</b> and accessible by the calling thread (a segment of a confined arena, from
 *       its owner thread only);
 *   <li><b>large enough</b>: {@link MemorySegment#byteSize()} at least the bytes the call reads or
 *       writes;
 *   <li>for {@code recv}, <b>writable</b> (not {@link MemorySegment#asReadOnly() read-only}).
 * </ul>
 *
 * <p>Any other segment is refused with {@link ErrorCode#INVALID_ARGUMENT} and a message naming
 * it, before anything is sent. The memory of each segment stays alive while the call runs: the
 * call goes through the FFM {@link Linker}, which holds the segments' scopes, so closing their
 * arena from another thread meanwhile fails with {@code IllegalStateException} instead of freeing
 * memory under the call. The calls are synchronous and take a turn like the communicator's own
 * (refused while its asynchronous calls are pending, one call at a time), with the same errors.
 *
 * <p>The FFM linker is a restricted part of Java: run with
 * {@code --enable-native-access=ALL-UNNAMED} (or the name of your module), as for the JNI library
 * that Colibri loads, to avoid the JVM's warning. These calls need a communicator made by
 * {@code io.colibri:colibri-native}.
 */
public final class Segments {
  private Segments() {}

  /**
   * {@link Communicator#allReduce(java.nio.ByteBuffer, java.nio.ByteBuffer, long, DataType,
   * ReduceOp)} on segments.
   *
   * @param comm a communicator made by colibri-native
   * @param send this rank's input, {@code count} elements (native segment)
   * @param recv where the result goes, {@code count} elements (native, writable segment); may be
   *     {@code send} (in place)
   * @param count number of elements on every rank, 0 or more
   * @param type element type of both segments
   * @param op how elements are combined
   */
  public static void allReduce(
      Communicator comm,
      MemorySegment send,
      MemorySegment recv,
      long count,
      DataType type,
      ReduceOp op) {
    Call c = new Call("allReduce", comm, type, op, true);
    long bytes = c.bytes("count", count, 1);
    c.segment("send", send, bytes, false);
    c.segment("recv", recv, bytes, true);
    c.run(
        count,
        (d, h) ->
            (int)
                d.allReduce.invokeExact(
                    send, recv, count, type.code(), op.code(), h, MemorySegment.NULL));
  }

  /**
   * {@link Communicator#allGather(java.nio.ByteBuffer, java.nio.ByteBuffer, long, DataType)} on
   * segments.
   *
   * @param comm a communicator made by colibri-native
   * @param send this rank's input, {@code sendCount} elements (native segment)
   * @param recv where the result goes, {@code comm.size() * sendCount} elements (native, writable
   *     segment)
   * @param sendCount number of elements each rank contributes, 0 or more
   * @param type element type of both segments
   */
  public static void allGather(
      Communicator comm, MemorySegment send, MemorySegment recv, long sendCount, DataType type) {
    Call c = new Call("allGather", comm, type, null, false);
    c.segment("send", send, c.bytes("sendCount", sendCount, 1), false);
    c.segment("recv", recv, c.bytes("sendCount", sendCount, comm.size()), true);
    c.run(
        sendCount,
        (d, h) ->
            (int)
                d.allGather.invokeExact(send, recv, sendCount, type.code(), h, MemorySegment.NULL));
  }

  /**
   * {@link Communicator#reduceScatter(java.nio.ByteBuffer, java.nio.ByteBuffer, long, DataType,
   * ReduceOp)} on segments.
   *
   * @param comm a communicator made by colibri-native
   * @param send this rank's input, {@code comm.size() * recvCount} elements (native segment)
   * @param recv where this rank's block of the result goes, {@code recvCount} elements (native,
   *     writable segment)
   * @param recvCount number of elements of each rank's block, 0 or more
   * @param type element type of both segments
   * @param op how elements are combined
   */
  public static void reduceScatter(
      Communicator comm,
      MemorySegment send,
      MemorySegment recv,
      long recvCount,
      DataType type,
      ReduceOp op) {
    Call c = new Call("reduceScatter", comm, type, op, true);
    c.segment("send", send, c.bytes("recvCount", recvCount, comm.size()), false);
    c.segment("recv", recv, c.bytes("recvCount", recvCount, 1), true);
    c.run(
        recvCount,
        (d, h) ->
            (int)
                d.reduceScatter.invokeExact(
                    send, recv, recvCount, type.code(), op.code(), h, MemorySegment.NULL));
  }

  /**
   * {@link Communicator#broadcast(java.nio.ByteBuffer, java.nio.ByteBuffer, long, DataType, int)}
   * on segments; {@code send} is read on the root only (other ranks may pass null).
   *
   * @param comm a communicator made by colibri-native
   * @param send the data to broadcast, {@code count} elements (native segment), read on the root
   *     only; may be null on the other ranks
   * @param recv where the data goes, {@code count} elements (native, writable segment), on every
   *     rank
   * @param count number of elements, 0 or more
   * @param type element type of both segments
   * @param root rank whose {@code send} is broadcast, 0..comm.size()-1, the same on every rank
   */
  public static void broadcast(
      Communicator comm,
      MemorySegment send,
      MemorySegment recv,
      long count,
      DataType type,
      int root) {
    Call c = new Call("broadcast", comm, type, null, false);
    if (root < 0 || root >= comm.size()) {
      throw c.invalid(
          "root "
              + root
              + " is out of range for a communicator of "
              + comm.size()
              + " rank"
              + (comm.size() == 1 ? "" : "s")
              + ": pass a root in 0.."
              + (comm.size() - 1));
    }
    long bytes = c.bytes("count", count, 1);
    c.segment("recv", recv, bytes, true);
    // Not read off the root, so not checked there: the C function gets recv in its place.
    MemorySegment s = comm.rank() == root ? c.segment("send", send, bytes, false) : recv;
    c.run(
        count,
        (d, h) ->
            (int)
                d.broadcast.invokeExact(s, recv, count, type.code(), root, h, MemorySegment.NULL));
  }

  // ---- checks and the call ----

  @FunctionalInterface
  private interface Downcall {
    int call(Downcalls d, MemorySegment comm) throws Throwable;
  }

  /** One call: its name in messages, the communicator, the element type. */
  private static final class Call {
    final String name;
    final NativeCalls comm;
    final DataType type;

    Call(String name, Communicator comm, DataType type, ReduceOp op, boolean needsOp) {
      this.name = name;
      if (comm == null) {
        throw invalid("comm is null: pass the communicator to run the call on");
      }
      if (!(comm instanceof NativeCalls)) {
        throw new ColibriException(
            ErrorCode.UNSUPPORTED,
            name
                + ": "
                + comm.getClass().getName()
                + " does not take MemorySegments (it does not run on libcolibri's C ABI): use a"
                + " communicator of io.colibri:colibri-native, or its ByteBuffer calls");
      }
      if (type == null) {
        throw invalid("type is null: pass a DataType such as DataType.FLOAT32");
      }
      if (needsOp && op == null) {
        throw invalid("op is null: pass a ReduceOp such as ReduceOp.SUM");
      }
      this.comm = (NativeCalls) comm;
      this.type = type;
    }

    ColibriException invalid(String message) {
      return new ColibriException(ErrorCode.INVALID_ARGUMENT, name + ": " + message);
    }

    /** Bytes of {@code count * ranks} elements; checks sign and overflow. */
    long bytes(String countName, long count, int ranks) {
      if (count < 0) {
        throw invalid(countName + " is " + count + ": pass the number of elements, 0 or more");
      }
      try {
        return Math.multiplyExact(Math.multiplyExact(count, (long) ranks), (long) type.size());
      } catch (ArithmeticException e) {
        throw invalid(
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

    /** Checks a segment the call reads ({@code written}: writes) {@code bytes} of. */
    MemorySegment segment(String role, MemorySegment s, long bytes, boolean written) {
      String what = role + " segment";
      if (s == null) {
        throw invalid(
            what
                + " is null: pass a native segment of at least "
                + bytes
                + " bytes"
                + " (Arena.allocate)");
      }
      if (!s.isNative()) {
        throw invalid(
            what
                + " is a heap segment ("
                + s
                + "): Colibri needs native memory;"
                + " allocate it with an Arena (arena.allocate(bytes)), or copy the data into one");
      }
      if (!s.scope().isAlive()) {
        throw invalid(
            what
                + " is not alive: its arena was closed (or, for Arena.ofAuto(),"
                + " collected); pass a segment of an arena that is still open");
      }
      if (!s.isAccessibleBy(Thread.currentThread())) {
        throw invalid(
            what
                + " belongs to a confined arena of another thread: call from that"
                + " thread, or allocate the segment with Arena.ofShared()");
      }
      if (written && s.isReadOnly()) {
        throw invalid(what + " is read-only: pass a writable segment for the result");
      }
      if (s.byteSize() < bytes) {
        throw invalid(
            what
                + " has "
                + s.byteSize()
                + " bytes but "
                + bytes
                + " bytes are needed:"
                + " pass a larger segment or a smaller count");
      }
      return s;
    }

    /** Makes the C call as one of the communicator's calls. */
    void run(long count, Downcall call) {
      Downcalls d = Downcalls.of(comm.nativeLibrary());
      comm.callNative(
          name,
          name + " of " + count + " " + type,
          h -> {
            try {
              return call.call(d, MemorySegment.ofAddress(h));
            } catch (IllegalStateException | WrongThreadException | IllegalArgumentException e) {
              // The linker's own check of a segment, which passed ours a moment before.
              throw invalid(
                  "a segment could not be passed to the C function ("
                      + e.getMessage()
                      + "): did another thread close its arena meanwhile? Keep the arena open until"
                      + " the call returns");
            } catch (RuntimeException | Error e) {
              throw e;
            } catch (Throwable t) {
              throw new ColibriException(
                  ErrorCode.INTERNAL_ERROR,
                  name + ": the native call threw " + t + ": please report this as a Colibri bug",
                  t);
            }
          });
    }
  }

  /**
   * The four collectives of {@code colibri.h} as FFM downcalls into the library the communicator
   * runs on. Segments are passed by reference, so the linker keeps their scopes alive during the
   * call. {@code size_t} is {@code long} and the enums {@code int} (Linux x86-64 and AArch64).
   * Looking the library up and linking to it are restricted methods of the FFM API.
   */
  @SuppressWarnings("restricted")
  private static final class Downcalls {
    private static volatile Downcalls cached;

    final String library;
    final MethodHandle allReduce;
    final MethodHandle allGather;
    final MethodHandle reduceScatter;
    final MethodHandle broadcast;

    private Downcalls(String library) {
      this.library = library;
      SymbolLookup lookup =
          library.indexOf('/') >= 0
              ? SymbolLookup.libraryLookup(Path.of(library), Arena.global())
              : SymbolLookup.libraryLookup(library, Arena.global());
      ValueLayout a = ValueLayout.ADDRESS;
      ValueLayout i = ValueLayout.JAVA_INT;
      ValueLayout n = ValueLayout.JAVA_LONG;
      // (send, recv, count, type, op, comm, stream) and (send, recv, count, type, comm, stream)
      allReduce = handle(lookup, "clbAllReduce", a, a, n, i, i, a, a);
      allGather = handle(lookup, "clbAllGather", a, a, n, i, a, a);
      reduceScatter = handle(lookup, "clbReduceScatter", a, a, n, i, i, a, a);
      broadcast = handle(lookup, "clbBroadcast", a, a, n, i, i, a, a);
    }

    static Downcalls of(String library) {
      Downcalls d = cached;
      if (d == null || !d.library.equals(library)) {
        d = new Downcalls(library);
        cached = d;
      }
      return d;
    }

    private static MethodHandle handle(SymbolLookup lookup, String function, ValueLayout... args) {
      MemorySegment address =
          lookup
              .find(function)
              .orElseThrow(
                  () ->
                      new ColibriException(
                          ErrorCode.UNSUPPORTED,
                          function
                              + " is not in the loaded Colibri library: its colibri-native and"
                              + " colibri-api differ in version; use the same version of both"));
      return Linker.nativeLinker()
          .downcallHandle(address, FunctionDescriptor.of(ValueLayout.JAVA_INT, args));
    }
  }
}
