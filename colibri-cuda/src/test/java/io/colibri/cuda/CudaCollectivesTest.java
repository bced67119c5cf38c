/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.Test;

/** JavaCPP pointers become the right raw addresses (no GPU needed: a recording Communicator). */
class CudaCollectivesTest {
  private final List<Object[]> calls = new ArrayList<>();
  private final Communicator recording =
      (Communicator)
          Proxy.newProxyInstance(
              getClass().getClassLoader(),
              new Class<?>[] {Communicator.class},
              (proxy, method, args) -> {
                calls.add(new Object[] {method.getName(), args});
                return null;
              });

  // (The parameter is not called "address": inside the anonymous class that name is the field.)
  private static FloatPointer floatsAt(long at) {
    return new FloatPointer((Pointer) null) {
      {
        this.address = at;
      }
    };
  }

  private static Pointer streamAt(long at) {
    return new Pointer() {
      {
        this.address = at;
      }
    };
  }

  @Test
  void positionCountsElementsOfThePointersType() {
    FloatPointer f = floatsAt(4096);
    f.position(3);
    assertEquals(4096 + 12, CudaCollectives.address(f, "send"));
    assertEquals(8192, CudaCollectives.address(streamAt(8192), "stream"));
  }

  @Test
  void collectivesPassAddressesAndStream() {
    FloatPointer send = floatsAt(1 << 20);
    FloatPointer recv = floatsAt(2 << 20);
    recv.position(16);
    CudaCollectives.allReduce(
        recording, send, recv, 100, DataType.FLOAT32, ReduceOp.SUM, streamAt(0x7000));
    CudaCollectives.broadcast(recording, null, recv, 5, DataType.FLOAT32, 1, null);
    assertEquals("allReduce", calls.get(0)[0]);
    assertArrayEquals(
        new Object[] {1L << 20, (2L << 20) + 64, 100L, DataType.FLOAT32, ReduceOp.SUM, 0x7000L},
        (Object[]) calls.get(0)[1]);
    assertArrayEquals(
        new Object[] {(2L << 20) + 64, (2L << 20) + 64, 5L, DataType.FLOAT32, 1, 0L},
        (Object[]) calls.get(1)[1],
        "broadcast off the root: send falls back to recv; null stream is 0");
  }

  @Test
  void registerPassesTheAddressAtThePosition() {
    FloatPointer buffer = floatsAt(1 << 20);
    buffer.position(4);
    CudaCollectives.register(recording, buffer, 1024);
    assertEquals("register", calls.get(0)[0]);
    assertArrayEquals(new Object[] {(1L << 20) + 16, 1024L}, (Object[]) calls.get(0)[1]);
  }

  @Test
  void nullPointersAreRefusedWithTheArgumentsName() {
    ColibriException e =
        assertThrows(
            ColibriException.class,
            () ->
                CudaCollectives.allGather(
                    recording, floatsAt(4096), null, 1, DataType.FLOAT32, null));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().startsWith("recv pointer is null"), e.getMessage());
    assertTrue(calls.isEmpty(), "nothing reached the communicator");
  }
}
