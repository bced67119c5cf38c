/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static io.colibri.it.FaultTest.assertCode;
import static io.colibri.it.FaultTest.catching;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@code suspend()} / {@code resume()} (NCCL's {@code ncclCommSuspend} / {@code ncclCommResume},
 * issue 43): between them every call is refused with INVALID_USAGE and the communicator goes on;
 * after the resume an allReduce adds up, cycle after cycle.
 */
class SuspendTest {

  @ParameterizedTest(name = "suspend and resume over {0}")
  @EnumSource(
      value = Transport.class,
      names = {"SHM", "SOCKET"})
  @Timeout(60)
  void callsBetweenSuspendAndResumeAreRefusedAndTheCommunicatorGoesOn(Transport transport) {
    try (RankGroup g =
        RankGroup.start(
            2, FaultTest.options(transport, Algorithm.AUTO, 20_000), Duration.ofSeconds(30))) {
      for (int cycle = 0; cycle < 2; cycle++) {
        final int c = cycle;
        List<Throwable> out =
            g.run(
                "cycle " + cycle,
                r -> {
                  ByteBuffer b = ByteBuffer.allocateDirect(4 * 64).order(ByteOrder.nativeOrder());
                  for (int i = 0; i < 64; i++) {
                    b.putInt(4 * i, (r.rank + 1) * i + c);
                  }
                  r.comm.allReduce(b, b, 64, DataType.INT32, ReduceOp.SUM);
                  for (int i = 0; i < 64; i++) {
                    assertEquals(3 * i + 2 * c, b.getInt(4 * i), "element " + i);
                  }
                  assertFalse(r.comm.isSuspended());
                  r.comm.suspend();
                  assertTrue(r.comm.isSuspended());
                  Throwable refused =
                      catching(() -> r.comm.allReduce(b, b, 64, DataType.INT32, ReduceOp.SUM));
                  assertCode(ErrorCode.INVALID_USAGE, refused, "rank " + r.rank + " suspended");
                  assertTrue(refused.getMessage().contains("suspended"), refused.getMessage());
                  assertCode(
                      ErrorCode.INVALID_USAGE,
                      catching(() -> r.comm.suspend()),
                      "a second suspend on rank " + r.rank);
                  assertTrue(r.comm.asyncError().isEmpty(), "the refusals failed nothing");
                  r.comm.resume();
                  assertFalse(r.comm.isSuspended());
                  return catching(() -> r.comm.resume());
                });
        for (int r = 0; r < 2; r++) {
          assertCode(ErrorCode.INVALID_USAGE, out.get(r), "rank " + r + ": a resume not suspended");
        }
      }
    }
  }
}
