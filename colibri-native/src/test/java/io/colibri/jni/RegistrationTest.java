/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.UniqueId;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link Communicator#register} (clbCommRegister) where it cannot work: without a CUDA driver (CI)
 * every rank gets UNSUPPORTED with the reason; with a driver, host memory is refused. Zero copy
 * itself runs in colibri-cuda's DeviceCollectivesProcessGpuTest.
 */
class RegistrationTest {
  private static final int BYTES = 64;

  /** True where {@link Device#count()} says there is no CUDA driver. */
  private static boolean noDriver() {
    try {
      Device.count();
      return false;
    } catch (ColibriException e) {
      assertEquals(ErrorCode.UNSUPPORTED, e.code(), e.getMessage());
      return true;
    }
  }

  /** Registers a host buffer on {@code comm}; returns the failure, checked for its message. */
  private static ColibriException registerFails(Communicator comm) {
    long address = Device.address(ByteBuffer.allocateDirect(BYTES));
    ColibriException e = assertThrows(ColibriException.class, () -> comm.register(address, BYTES));
    String prefix =
        "register of "
            + BYTES
            + " bytes at 0x"
            + Long.toHexString(address)
            + " on rank "
            + comm.rank()
            + " of "
            + comm.size()
            + " failed: ";
    assertTrue(e.getMessage().startsWith(prefix), e.getMessage());
    assertTrue(e.getMessage().length() > prefix.length(), "no reason given: " + e.getMessage());
    return e;
  }

  @Test
  void oneRankWithoutADriverIsUnsupportedAndHostMemoryIsRefused() {
    ErrorCode want = noDriver() ? ErrorCode.UNSUPPORTED : ErrorCode.INVALID_ARGUMENT;
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      ColibriException e = registerFails(comm);
      assertEquals(want, e.code(), e.getMessage());
    }
  }

  /** Two ranks as threads, both registering: both fail, neither hangs. */
  @Test
  void everyRankFails() throws Exception {
    boolean noDriver = noDriver();
    UniqueId id = UniqueId.create();
    Options options = Options.builder().timeout(Duration.ofSeconds(30)).build();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<ColibriException>> ranks = new ArrayList<>();
      for (int r = 0; r < 2; r++) {
        int rank = r;
        ranks.add(
            pool.submit(
                () -> {
                  try (Communicator comm = Communicator.init(id, rank, 2, options)) {
                    return registerFails(comm);
                  }
                }));
      }
      for (Future<ColibriException> f : ranks) {
        ColibriException e = f.get(60, TimeUnit.SECONDS);
        if (noDriver) {
          assertEquals(ErrorCode.UNSUPPORTED, e.code(), e.getMessage());
        } else { // host memory: refused here, or reported by the peer that refused it
          assertTrue(
              Set.of(ErrorCode.INVALID_ARGUMENT, ErrorCode.REMOTE_ERROR).contains(e.code()),
              e.toString());
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
