/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Communicator#shrink}: 4 ranks (threads, shm and socket), rank 2 aborts in the middle of
 * the stream, the others revoke ({@link Communicator#revoke}: later calls refused) and go on in a
 * communicator of 3, renumbered in order, their all-reduces checked element by element; an
 * excluded rank that calls is refused at once.
 */
class ShrinkTest {

  private static void checkSum(Communicator c, int parentRank, List<Integer> members) {
    int count = 257;
    ByteBuffer in = ByteBuffer.allocateDirect(count * 8).order(ByteOrder.nativeOrder());
    ByteBuffer out = ByteBuffer.allocateDirect(count * 8).order(ByteOrder.nativeOrder());
    for (int i = 0; i < count; i++) {
      in.putLong(i * 8, (parentRank + 1) * 1000L + i);
    }
    c.allReduce(in, out, count, DataType.INT64, ReduceOp.SUM);
    for (int i = 0; i < count; i++) {
      long want = 0;
      for (int p : members) {
        want += (p + 1) * 1000L + i;
      }
      assertEquals(want, out.getLong(i * 8), "parent rank " + parentRank + ", element " + i);
    }
  }

  private static void survivorsGoOn(Transport transport) {
    Options options =
        Options.builder().transport(transport).timeout(Duration.ofSeconds(20)).build();
    try (RankGroup g = RankGroup.start(4, options, Duration.ofSeconds(60))) {
      g.run(
          "shrink",
          r -> {
            if (r.rank == 2) {
              ColibriException e = assertThrows(ColibriException.class, () -> r.comm.shrink(2));
              assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
              assertTrue(e.getMessage().contains("is in the exclusion list"), e.getMessage());
              r.comm.abort(); // gone: the others' calls fail
              return null;
            }
            // Calls until one fails without rank 2 (it may take part in none).
            for (int i = 0; i < 50; i++) {
              try {
                checkSum(r.comm, r.rank, List.of(0, 1, 2, 3));
              } catch (ColibriException e) {
                break;
              }
            }
            r.comm.revoke(); // this rank's calls end too; the communicator stays for the shrink
            ColibriException refused =
                assertThrows(ColibriException.class, () -> checkSum(r.comm, r.rank, List.of()));
            assertEquals(ErrorCode.INVALID_USAGE, refused.code());
            assertTrue(refused.getMessage().contains("revoked"), refused.getMessage());
            try (Communicator smaller = r.comm.shrink(2, 2)) {
              assertEquals(3, smaller.size());
              assertEquals(r.rank < 2 ? r.rank : r.rank - 1, smaller.rank());
              assertEquals(options, smaller.options());
              checkSum(smaller, r.rank, List.of(0, 1, 3));
            }
            return null;
          });
    }
  }

  @Test
  void survivorsGoOnOverShm() {
    survivorsGoOn(Transport.SHM);
  }

  @Test
  void survivorsGoOnOverSocket() {
    survivorsGoOn(Transport.SOCKET);
  }
}
