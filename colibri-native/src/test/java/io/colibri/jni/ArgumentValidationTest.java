/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Wrong arguments are refused in Java, before any native call, with a message that names the
 * argument and says what to do. One rank: no peers needed.
 */
class ArgumentValidationTest {

  private Communicator comm;

  @BeforeEach
  void open() {
    comm = Communicator.init(UniqueId.create(), 0, 1);
  }

  @AfterEach
  void close() {
    comm.close();
  }

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  private static String refused(Executable call, String... fragments) {
    ColibriException e = assertThrows(ColibriException.class, call);
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
    for (String f : fragments) {
      assertTrue(e.getMessage().contains(f), "\"" + f + "\" not in: " + e.getMessage());
    }
    return e.getMessage();
  }

  @Test
  void nullBuffers() {
    ByteBuffer b = direct(64);
    refused(
        () -> comm.allReduce(null, b, 4, DataType.FLOAT32, ReduceOp.SUM),
        "allReduce",
        "send buffer is null",
        "allocateDirect",
        "16 bytes");
    refused(
        () -> comm.allReduce(b, null, 4, DataType.FLOAT32, ReduceOp.SUM), "recv buffer is null");
    refused(() -> comm.allGather(null, b, 4, DataType.FLOAT32), "allGather", "send buffer");
    refused(
        () -> comm.reduceScatter(b, null, 4, DataType.FLOAT32, ReduceOp.SUM),
        "reduceScatter",
        "recv buffer is null");
    refused(
        () -> comm.broadcast(b, null, 4, DataType.FLOAT32, 0), "broadcast", "recv buffer is null");
    // Rank 0 is the root here: its send buffer is read.
    refused(() -> comm.broadcast(null, b, 4, DataType.FLOAT32, 0), "send buffer is null");
  }

  @Test
  void heapBuffersAreRefused() {
    ByteBuffer heap = ByteBuffer.allocate(64);
    ByteBuffer d = direct(64);
    refused(
        () -> comm.allReduce(heap, d, 4, DataType.FLOAT32, ReduceOp.SUM),
        "send buffer is a heap buffer",
        "ByteBuffer.allocateDirect");
    refused(
        () -> comm.allReduce(d, heap, 4, DataType.FLOAT32, ReduceOp.SUM),
        "recv buffer is a heap buffer");
  }

  @Test
  void readOnlyRecvIsRefusedButReadOnlySendIsFine() {
    ByteBuffer d = direct(64);
    // asReadOnlyBuffer() is BIG_ENDIAN whatever d's order: set the native one again.
    ByteBuffer readOnly = d.asReadOnlyBuffer().order(ByteOrder.nativeOrder());
    refused(
        () -> comm.allReduce(d, readOnly, 4, DataType.FLOAT32, ReduceOp.SUM),
        "recv buffer is read-only",
        "writable");
    comm.allReduce(readOnly, direct(64), 4, DataType.FLOAT32, ReduceOp.SUM);
  }

  /** The byte order that is not this machine's: BIG_ENDIAN on x86 and Arm. */
  private static final ByteOrder FOREIGN =
      ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN
          ? ByteOrder.BIG_ENDIAN
          : ByteOrder.LITTLE_ENDIAN;

  @Test
  void buffersNotInNativeOrderAreRefusedForEveryTypeWiderThanOneByte() {
    for (DataType t : DataType.values()) {
      if (t.size() == 1) {
        continue;
      }
      ByteBuffer good = direct(64);
      ByteBuffer bad = direct(64).order(FOREIGN);
      String order = FOREIGN.toString();
      String fix = ".order(ByteOrder.nativeOrder())";
      refused(
          () -> comm.allReduce(bad, good, 4, t, ReduceOp.SUM),
          "allReduce",
          "send buffer",
          order,
          t.toString(),
          fix);
      refused(
          () -> comm.allReduce(good, bad, 4, t, ReduceOp.SUM),
          "allReduce",
          "recv buffer",
          order,
          fix);
      refused(() -> comm.allReduce(bad, bad, 4, t, ReduceOp.SUM), "allReduce", "send buffer");
      refused(() -> comm.allGather(bad, good, 4, t), "allGather", "send buffer", order, fix);
      refused(() -> comm.allGather(good, bad, 4, t), "allGather", "recv buffer", order, fix);
      refused(
          () -> comm.reduceScatter(bad, good, 4, t, ReduceOp.MAX),
          "reduceScatter",
          "send buffer",
          order,
          fix);
      refused(
          () -> comm.reduceScatter(good, bad, 4, t, ReduceOp.MAX),
          "reduceScatter",
          "recv buffer",
          order,
          fix);
      // Rank 0 is the root here: its send buffer is read.
      refused(() -> comm.broadcast(bad, good, 4, t, 0), "broadcast", "send buffer", order, fix);
      refused(() -> comm.broadcast(good, bad, 4, t, 0), "broadcast", "recv buffer", order, fix);
      // A count of 0 moves nothing, but the buffer is wrong all the same.
      refused(() -> comm.allReduce(good, bad, 0, t, ReduceOp.SUM), "recv buffer", order);
    }
  }

  @Test
  void viewsThatForgetTheOrderAreRefused() {
    // slice(), duplicate() and asReadOnlyBuffer() are BIG_ENDIAN, whatever the order of the
    // buffer they view: the message says so.
    ByteBuffer whole = direct(64);
    if (ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN) {
      return; // the views are in the native order there
    }
    refused(
        () -> comm.allReduce(whole.slice(), whole, 4, DataType.FLOAT32, ReduceOp.SUM),
        "send buffer",
        "BIG_ENDIAN",
        "slice()");
    refused(
        () -> comm.allReduce(whole, whole.duplicate(), 4, DataType.INT64, ReduceOp.SUM),
        "recv buffer",
        "BIG_ENDIAN",
        "duplicate()");
    refused(
        () -> comm.allReduce(whole.asReadOnlyBuffer(), whole, 4, DataType.FLOAT16, ReduceOp.SUM),
        "send buffer",
        "BIG_ENDIAN",
        "asReadOnlyBuffer()");
  }

  @Test
  void oneByteTypesTakeEitherOrder() {
    for (DataType t : new DataType[] {DataType.INT8, DataType.UINT8}) {
      ByteBuffer send = direct(64).order(FOREIGN);
      ByteBuffer recv = direct(64).order(FOREIGN);
      for (int i = 0; i < 16; i++) {
        send.put(i, (byte) (i + 1));
      }
      comm.allReduce(send, recv, 16, t, ReduceOp.SUM);
      comm.allGather(send, recv, 16, t);
      comm.reduceScatter(send, recv, 16, t, ReduceOp.SUM);
      comm.broadcast(send, recv, 16, t, 0);
      for (int i = 0; i < 16; i++) {
        assertEquals((byte) (i + 1), recv.get(i), t + " byte " + i);
      }
    }
  }

  @Test
  void negativeCount() {
    ByteBuffer d = direct(64);
    refused(
        () -> comm.allReduce(d, d, -1, DataType.INT8, ReduceOp.SUM), "count is -1", "0 or more");
    refused(() -> comm.allGather(d, d, -2, DataType.INT8), "sendCount is -2");
    refused(() -> comm.reduceScatter(d, d, -3, DataType.INT8, ReduceOp.MAX), "recvCount is -3");
    refused(() -> comm.broadcast(d, d, -4, DataType.INT8, 0), "count is -4");
    refused(() -> comm.allReduce(0L, 0L, -5, DataType.INT8, ReduceOp.SUM, 0L), "count is -5");
  }

  @Test
  void countTimesTypeSizeOverflow() {
    ByteBuffer d = direct(64);
    refused(
        () -> comm.allReduce(d, d, Long.MAX_VALUE / 4, DataType.FLOAT64, ReduceOp.SUM),
        "does not fit in a long",
        "FLOAT64");
    refused(
        () -> comm.allReduce(1L, 1L, Long.MAX_VALUE / 2, DataType.INT32, ReduceOp.SUM, 0L),
        "does not fit in a long");
  }

  @Test
  void bufferTooSmallSaysNeededAndRemaining() {
    ByteBuffer small = direct(64);
    ByteBuffer big = direct(1024);
    refused(
        () -> comm.allReduce(big, small, 17, DataType.FLOAT32, ReduceOp.SUM),
        "recv buffer has 64 bytes remaining",
        "68 bytes are needed");
    small.position(8);
    refused(
        () -> comm.allReduce(small, big, 16, DataType.FLOAT32, ReduceOp.SUM),
        "send buffer has 56 bytes remaining (position 8, limit 64)",
        "64 bytes are needed");
    small.position(0).limit(10);
    refused(
        () -> comm.broadcast(small, big, 3, DataType.FLOAT32, 0),
        "send buffer has 10 bytes remaining",
        "12 bytes are needed");
  }

  @Test
  void allGatherRecvMustHoldEveryRank() {
    // size() ranks x sendCount: with 1 rank, recv equals send.
    ByteBuffer send = direct(40);
    refused(
        () -> comm.allGather(send, direct(36), 10, DataType.FLOAT32),
        "recv buffer has 36 bytes remaining",
        "40 bytes are needed");
  }

  @Test
  void nullTypeAndOp() {
    ByteBuffer d = direct(64);
    refused(() -> comm.allReduce(d, d, 4, null, ReduceOp.SUM), "type is null", "DataType");
    refused(() -> comm.allReduce(d, d, 4, DataType.FLOAT32, null), "op is null", "ReduceOp");
    refused(() -> comm.reduceScatter(d, d, 4, DataType.FLOAT32, null), "op is null");
    refused(() -> comm.allGather(d, d, 4, null), "type is null");
    refused(() -> comm.broadcast(d, d, 4, null, 0), "type is null");
  }

  @Test
  void rootOutOfRange() {
    ByteBuffer d = direct(64);
    refused(
        () -> comm.broadcast(d, d, 4, DataType.FLOAT32, 1),
        "root 1 is out of range for a communicator of 1 rank",
        "0..0");
    refused(() -> comm.broadcast(d, d, 4, DataType.FLOAT32, -1), "root -1");
    refused(() -> comm.broadcast(0L, 0L, 0, DataType.FLOAT32, 5, 0L), "root 5");
  }

  @Test
  void nullAddressWithElements() {
    refused(
        () -> comm.allReduce(0L, 4096L, 1, DataType.INT8, ReduceOp.SUM, 0L), "send address is 0");
  }

  @Test
  void registerNeedsAnAddressAndBytes() {
    refused(() -> comm.register(0L, 64), "register", "address is 0", "cudaMalloc");
    refused(() -> comm.register(4096L, 0), "register", "bytes is 0", "1 or more");
    refused(() -> comm.register(4096L, -8), "bytes is -8");
  }

  @Test
  void initRefusesRanksOutOfRange() {
    UniqueId id = UniqueId.fromBytes(new byte[UniqueId.BYTES]);
    refused(() -> Communicator.init(id, 0, 0), "nranks is 0", "at least 1 rank");
    refused(() -> Communicator.init(id, 2, 2), "rank 2 is out of range for 2 ranks", "0..1");
    refused(() -> Communicator.init(id, -1, 4), "rank -1");
  }

  @Test
  void uniqueIdFromBadAddress() {
    NativeProvider p = new NativeProvider();
    refused(() -> p.uniqueIdFromAddress(null, 29500, null), "bootstrap host is null");
    refused(() -> p.uniqueIdFromAddress(" ", 29500, null), "bootstrap host is empty");
    refused(() -> p.uniqueIdFromAddress("localhost", 0, null), "port 0 is out of range");
    refused(() -> p.uniqueIdFromAddress("localhost", 65536, null), "port 65536");
  }

  @Test
  void callsAfterCloseAreInvalidUsage() {
    ByteBuffer d = direct(64);
    comm.close();
    ColibriException e =
        assertThrows(
            ColibriException.class, () -> comm.allReduce(d, d, 4, DataType.FLOAT32, ReduceOp.SUM));
    assertEquals(ErrorCode.INVALID_USAGE, e.code());
    assertTrue(e.getMessage().contains("communicator is closed"), e.getMessage());
    for (Executable call :
        new Executable[] {
          () -> comm.allGather(d, d, 1, DataType.INT8),
          () -> comm.reduceScatter(d, d, 1, DataType.INT8, ReduceOp.SUM),
          () -> comm.broadcast(d, d, 1, DataType.INT8, 0),
          () -> comm.allReduce(0L, 0L, 0, DataType.INT8, ReduceOp.SUM, 0L),
          () -> comm.register(4096L, 64),
          comm::memoryStats,
          comm::trim,
          comm::lastAlgorithm,
          comm::transportInfo
        }) {
      ColibriException x = assertThrows(ColibriException.class, call);
      assertEquals(ErrorCode.INVALID_USAGE, x.code());
      assertTrue(x.getMessage().contains("communicator is closed"), x.getMessage());
    }
    // Still answered: known without the native side; abort is a no-op; close is idempotent.
    assertEquals(0, comm.rank());
    assertEquals(1, comm.size());
    comm.abort();
    comm.close();
  }
}
