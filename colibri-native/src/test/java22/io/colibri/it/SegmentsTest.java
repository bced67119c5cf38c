/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static io.colibri.it.FaultTest.assertCode;
import static io.colibri.it.FaultTest.catching;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.Segments;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.it.Spec.Coll;
import io.colibri.spi.NativeCalls;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * io.colibri.Segments (issue 14): the collectives on MemorySegments, Java 22+ (this class is
 * compiled with release 22 and runs on the Temurin 25 JVM, against the multi-release jar of
 * colibri-api). Results element by element against the Java reference, in and out of place; every
 * refusal with its code and message; the arena of a segment in use cannot be closed.
 */
class SegmentsTest {
  private static final long TIMEOUT_MS = 20_000;

  private static RankGroup pair(Transport transport) {
    return RankGroup.start(
        2, FaultTest.options(transport, Algorithm.AUTO, TIMEOUT_MS), Duration.ofSeconds(60));
  }

  private static ByteBuffer bytes(MemorySegment s) {
    return s.asByteBuffer().order(ByteOrder.nativeOrder());
  }

  @Test
  void theSegmentCallsComeFromVersion22OfTheMultiReleaseJar() {
    String where = String.valueOf(Segments.class.getResource("Segments.class"));
    assertTrue(
        where.startsWith("jar:") && where.contains("!/META-INF/versions/22/io/colibri/"),
        "io.colibri.Segments was loaded from " + where);
  }

  /** One call of the matrix: both ranks' input and output segments of one shared arena. */
  private record Call(Spec spec, boolean inPlace, MemorySegment[] in, MemorySegment[] out) {}

  @ParameterizedTest(name = "over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(120)
  void everyCollectiveOnSegmentsMatchesTheReference(Transport transport) {
    int n = 2;
    long seed = Seeds.forCase("SegmentsTest." + transport);
    SplittableRandom rnd = new SplittableRandom(seed);
    List<Call> calls = new ArrayList<>();
    try (Arena arena = Arena.ofShared()) {
      for (Coll coll : Coll.values()) {
        for (DataType t : DataType.values()) {
          for (boolean inPlace : new boolean[] {false, true}) {
            long count = rnd.nextInt(6) == 0 ? 20_000 + rnd.nextInt(10_000) : 1 + rnd.nextInt(500);
            Spec s = new Spec(coll, t, ReduceOp.values()[rnd.nextInt(5)], count, n, rnd.nextInt(n));
            MemorySegment[] in = new MemorySegment[n];
            MemorySegment[] out = new MemorySegment[n];
            long callSeed = rnd.nextLong();
            for (int r = 0; r < n; r++) {
              in[r] = arena.allocate(s.sendElems() * t.size(), 8);
              Elements.fillRandom(
                  bytes(in[r]),
                  t,
                  s.op(),
                  s.sendElems(),
                  new SplittableRandom(Seeds.forRank(callSeed, r)));
              out[r] = arena.allocate(s.recvElems() * t.size(), 8);
            }
            calls.add(new Call(s, inPlace, in, out));
          }
        }
      }
      try (RankGroup g = pair(transport)) {
        g.run(
            calls.size() + " segment calls",
            r -> {
              for (Call c : calls) {
                call(r.comm, c, r.rank);
              }
              return null;
            });
      }
      List<String> problems = new ArrayList<>();
      for (Call c : calls) {
        List<ByteBuffer> inputs = List.of(bytes(c.in()[0]), bytes(c.in()[1]));
        Expected e = Expected.compute(c.spec(), inputs);
        for (int r = 0; r < n; r++) {
          for (String p : e.check(r, bytes(c.out()[r]), 4)) {
            problems.add(c.spec() + (c.inPlace() ? " in place" : "") + ": " + p);
          }
        }
      }
      assertTrue(
          problems.isEmpty(),
          "seed 0x"
              + Long.toHexString(seed)
              + ":\n  "
              + String.join("\n  ", problems.subList(0, Math.min(problems.size(), 20))));
    }
  }

  /**
   * Rank {@code rank}'s part of {@code c}. In place, the input is first copied into the output
   * (reduceScatter: the input is the buffer, the result is read from its rank-th block, copied to
   * the output afterwards), as the Communicator javadoc defines in place.
   */
  private static void call(Communicator comm, Call c, int rank) {
    Spec s = c.spec();
    MemorySegment in = c.in()[rank];
    MemorySegment out = c.out()[rank];
    long esz = s.type().size();
    if (!c.inPlace()) {
      switch (s.coll()) {
        case ALL_REDUCE -> Segments.allReduce(comm, in, out, s.count(), s.type(), s.op());
        case ALL_GATHER -> Segments.allGather(comm, in, out, s.count(), s.type());
        case REDUCE_SCATTER -> Segments.reduceScatter(comm, in, out, s.count(), s.type(), s.op());
        // Off the root, send is not read, not even checked: a heap segment is fine there.
        default ->
            Segments.broadcast(
                comm,
                rank == s.root() ? in.asReadOnly() : MemorySegment.ofArray(new byte[1]),
                out,
                s.count(),
                s.type(),
                s.root());
      }
      return;
    }
    switch (s.coll()) {
      case ALL_REDUCE -> {
        out.copyFrom(in);
        Segments.allReduce(comm, out, out, s.count(), s.type(), s.op());
      }
      case ALL_GATHER -> {
        MemorySegment mine = out.asSlice(rank * s.count() * esz, s.count() * esz);
        mine.copyFrom(in);
        Segments.allGather(comm, mine, out, s.count(), s.type());
      }
      case REDUCE_SCATTER -> {
        MemorySegment work = Arena.ofAuto().allocate(in.byteSize(), 8).copyFrom(in);
        MemorySegment mine = work.asSlice(rank * s.count() * esz, s.count() * esz);
        Segments.reduceScatter(comm, work, mine, s.count(), s.type(), s.op());
        out.copyFrom(mine);
      }
      default -> {
        out.copyFrom(in);
        // Off the root, send is not read: pass null there.
        Segments.broadcast(comm, rank == s.root() ? out : null, out, s.count(), s.type(), s.root());
      }
    }
  }

  private static void refused(Executable call, ErrorCode code, String... fragments) {
    Throwable t = null;
    try {
      call.execute();
    } catch (Throwable x) {
      t = x;
    }
    assertCode(code, t, "the call");
    for (String f : fragments) {
      assertTrue(t.getMessage().contains(f), "\"" + f + "\" not in: " + t.getMessage());
    }
  }

  private static void invalid(Executable call, String... fragments) {
    refused(call, ErrorCode.INVALID_ARGUMENT, fragments);
  }

  @Test
  @Timeout(60)
  void everySegmentColibriCannotUseIsRefusedNamingIt() throws Exception {
    Communicator comm = Communicator.init(UniqueId.create(), 0, 1);
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment good = arena.allocate(64, 8);
      MemorySegment heap = MemorySegment.ofArray(new float[16]);
      invalid(
          () -> Segments.allReduce(comm, heap, good, 16, DataType.FLOAT32, ReduceOp.SUM),
          "allReduce: send segment is a heap segment",
          "allocate it with an Arena");
      invalid(
          () -> Segments.allGather(comm, good, heap, 16, DataType.FLOAT32),
          "allGather: recv segment is a heap segment");
      Arena closed = Arena.ofConfined();
      MemorySegment gone = closed.allocate(64, 8);
      closed.close();
      invalid(
          () -> Segments.allReduce(comm, gone, good, 16, DataType.FLOAT32, ReduceOp.SUM),
          "send segment is not alive: its arena was closed");
      invalid(
          () ->
              Segments.allReduce(
                  comm, good, good.asSlice(0, 60), 16, DataType.FLOAT32, ReduceOp.SUM),
          "recv segment has 60 bytes but 64 bytes are needed");
      invalid(
          () ->
              Segments.reduceScatter(
                  comm, good.asSlice(0, 8), good, 4, DataType.INT32, ReduceOp.MAX),
          "reduceScatter: send segment has 8 bytes but 16 bytes are needed");
      invalid(
          () ->
              Segments.allReduce(comm, good, good.asReadOnly(), 16, DataType.FLOAT32, ReduceOp.SUM),
          "recv segment is read-only",
          "writable");
      invalid(
          () -> Segments.allReduce(comm, null, good, 16, DataType.FLOAT32, ReduceOp.SUM),
          "send segment is null",
          "at least 64 bytes");
      invalid(() -> Segments.allReduce(comm, good, good, 16, null, ReduceOp.SUM), "type is null");
      invalid(() -> Segments.allReduce(comm, good, good, 16, DataType.FLOAT32, null), "op is null");
      invalid(
          () -> Segments.allReduce(comm, good, good, -1, DataType.FLOAT32, ReduceOp.SUM),
          "count is -1",
          "0 or more");
      invalid(
          () ->
              Segments.allReduce(
                  comm, good, good, Long.MAX_VALUE / 4, DataType.FLOAT64, ReduceOp.SUM),
          "does not fit in a long");
      invalid(
          () -> Segments.broadcast(comm, good, good, 16, DataType.FLOAT32, 1),
          "root 1 is out of range for a communicator of 1 rank");
      invalid(() -> Segments.broadcast(null, good, good, 16, DataType.FLOAT32, 0), "comm is null");
      // A confined segment, used from a thread that does not own it.
      Throwable other =
          CompletableFuture.supplyAsync(
                  () ->
                      catching(
                          () ->
                              Segments.allReduce(
                                  comm, good, good, 16, DataType.FLOAT32, ReduceOp.SUM)))
              .get(30, TimeUnit.SECONDS);
      assertCode(ErrorCode.INVALID_ARGUMENT, other, "a confined segment from another thread");
      assertTrue(
          other
              .getMessage()
              .contains("send segment belongs to a confined arena of another" + " thread"),
          other.getMessage());
      // A communicator that is not Colibri's native one.
      Communicator mock =
          (Communicator)
              Proxy.newProxyInstance(
                  getClass().getClassLoader(),
                  new Class<?>[] {Communicator.class},
                  (p, m, a) -> {
                    throw new AssertionError("called " + m);
                  });
      refused(
          () -> Segments.allReduce(mock, good, good, 16, DataType.FLOAT32, ReduceOp.SUM),
          ErrorCode.UNSUPPORTED,
          "does not take MemorySegments");
      // The native side's own refusals come back as the communicator's errors.
      invalid(
          () ->
              Segments.allReduce(
                  comm,
                  good.asSlice(0, 32),
                  good.asSlice(4, 32),
                  8,
                  DataType.FLOAT32,
                  ReduceOp.SUM),
          "allReduce of 8 FLOAT32 on rank 0 of 1 failed: ");

      // What is allowed: a read-only send, and a count of 0 on empty segments.
      for (int i = 0; i < 16; i++) {
        good.setAtIndex(ValueLayout.JAVA_FLOAT, i, i + 0.5f);
      }
      MemorySegment out = arena.allocate(64, 8);
      Segments.allReduce(comm, good.asReadOnly(), out, 16, DataType.FLOAT32, ReduceOp.SUM);
      for (int i = 0; i < 16; i++) {
        assertEquals(i + 0.5f, out.getAtIndex(ValueLayout.JAVA_FLOAT, i), "element " + i);
      }
      Segments.allGather(comm, MemorySegment.NULL, MemorySegment.NULL, 0, DataType.INT8);

      comm.close();
      refused(
          () -> Segments.allReduce(comm, good, out, 16, DataType.FLOAT32, ReduceOp.SUM),
          ErrorCode.INVALID_USAGE,
          "allReduce: communicator is closed");
    } finally {
      comm.close();
    }
  }

  @Test
  @Timeout(60)
  void theArenaOfASegmentInUseCannotBeClosedUntilTheCallReturns() throws Exception {
    int count = 1 << 16;
    try (RankGroup g = pair(Transport.SHM)) {
      warmUp(g);
      Arena shared = Arena.ofShared();
      MemorySegment seg = shared.allocate(4L * count, 8);
      for (int i = 0; i < count; i++) {
        seg.setAtIndex(ValueLayout.JAVA_INT, i, i);
      }
      CountDownLatch calling = new CountDownLatch(1);
      CompletableFuture<List<Object>> done =
          CompletableFuture.supplyAsync(
              () ->
                  g.run(
                      "allReduce on a segment of a shared arena",
                      r -> {
                        if (r.rank == 0) {
                          calling.countDown();
                          Segments.allReduce(r.comm, seg, seg, count, DataType.INT32, ReduceOp.SUM);
                        } else {
                          assertTrue(calling.await(30, TimeUnit.SECONDS));
                          Thread.sleep(500); // rank 0 is in the call, waiting for this rank
                          try (Arena mine = Arena.ofConfined()) {
                            MemorySegment b = mine.allocate(4L * count, 8);
                            for (int i = 0; i < count; i++) {
                              b.setAtIndex(ValueLayout.JAVA_INT, i, 7 * i);
                            }
                            Segments.allReduce(r.comm, b, b, count, DataType.INT32, ReduceOp.SUM);
                            for (int i = 0; i < count; i++) {
                              assertEquals(
                                  8 * i, b.getAtIndex(ValueLayout.JAVA_INT, i), "rank 1, " + i);
                            }
                          }
                        }
                        return null;
                      }));
      assertTrue(calling.await(30, TimeUnit.SECONDS));
      awaitInTheDowncall("rank-0-of-2");
      assertFalse(done.isDone(), "rank 0's call ended before rank 1 joined it");
      // The linker holds the segment's scope: the memory cannot go away under the call.
      IllegalStateException e = assertThrows(IllegalStateException.class, shared::close);
      assertTrue(seg.scope().isAlive(), "close() freed the segment during the call: " + e);
      done.get(60, TimeUnit.SECONDS);
      for (int i = 0; i < count; i++) {
        assertEquals(8 * i, seg.getAtIndex(ValueLayout.JAVA_INT, i), "rank 0, element " + i);
      }
      shared.close(); // the call returned: now it closes
      assertFalse(seg.scope().isAlive());
    }
  }

  /**
   * An arena that another thread closes between the checks and the C call: the linker refuses the
   * segment, and the refusal is a ColibriException like the others. A communicator whose call
   * hook closes the arena first stands in for the other thread (the C function is never called).
   */
  @Test
  @Timeout(60)
  void anArenaClosedJustBeforeTheCCallIsAnInvalidArgumentToo() {
    Arena shared = Arena.ofShared();
    MemorySegment seg = shared.allocate(64, 8);
    String library;
    try (Communicator real = Communicator.init(UniqueId.create(), 0, 1)) {
      library = ((NativeCalls) real).nativeLibrary();
    }
    Object comm =
        Proxy.newProxyInstance(
            getClass().getClassLoader(),
            new Class<?>[] {Communicator.class, NativeCalls.class},
            (p, m, a) -> {
              switch (m.getName()) {
                case "size":
                  return 1;
                case "rank":
                  return 0;
                case "nativeLibrary":
                  return library;
                case "callNative":
                  shared.close();
                  int rc = ((LongToIntFunction) a[2]).applyAsInt(0L);
                  throw new AssertionError("the C function ran, rc " + rc);
                default:
                  throw new AssertionError("called " + m);
              }
            });
    invalid(
        () -> Segments.allReduce((Communicator) comm, seg, seg, 16, DataType.FLOAT32, ReduceOp.SUM),
        "allReduce: a segment could not be passed to the C function",
        "did another thread close its arena meanwhile?");
    assertFalse(seg.scope().isAlive());
  }

  /** One segment call on every rank: the downcalls are linked before the timed part. */
  private static void warmUp(RankGroup g) {
    g.run(
        "warm-up",
        r -> {
          try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(4, 4);
            Segments.allReduce(r.comm, s, s, 1, DataType.INT32, ReduceOp.SUM);
          }
          return null;
        });
  }

  /** Waits until the thread is inside the lambda of Segments that makes the C call. */
  private static void awaitInTheDowncall(String threadName) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      for (var e : Thread.getAllStackTraces().entrySet()) {
        if (!e.getKey().getName().equals(threadName)) {
          continue;
        }
        for (StackTraceElement f : e.getValue()) {
          if (f.getClassName().startsWith("io.colibri.Segments")
              && f.getMethodName().startsWith("lambda$allReduce")) {
            Thread.sleep(100); // from the lambda's first line into the C function
            return;
          }
        }
      }
      Thread.sleep(10);
    }
    throw new AssertionError(threadName + " never entered the native call");
  }

  @Test
  @Timeout(60)
  void aSegmentCallWhileAsynchronousCallsArePendingIsRefused() throws Exception {
    try (RankGroup g = pair(Transport.SHM);
        Arena arena = Arena.ofShared()) {
      Communicator c0 = g.comm(0);
      ByteBuffer b0 = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder()).putInt(0, 2);
      CompletableFuture<Void> pending = c0.allReduceAsync(b0, b0, 1, DataType.INT32, ReduceOp.SUM);
      MemorySegment seg = arena.allocate(4, 4);
      refused(
          () -> Segments.allReduce(c0, seg, seg, 1, DataType.INT32, ReduceOp.SUM),
          ErrorCode.INVALID_USAGE,
          "allReduce on rank 0 of 2 was refused: 1 asynchronous call is"
              + " queued or running on this communicator");
      g.runOn(
          "rank 1's call",
          new int[] {1},
          r -> {
            MemorySegment s = arena.allocate(4, 4);
            s.set(ValueLayout.JAVA_INT, 0, 3);
            Segments.allReduce(r.comm, s, s, 1, DataType.INT32, ReduceOp.SUM);
            assertEquals(5, s.get(ValueLayout.JAVA_INT, 0));
            return null;
          });
      pending.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
      assertEquals(5, b0.getInt(0));
    }
  }
}
