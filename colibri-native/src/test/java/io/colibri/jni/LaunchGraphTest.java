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
import io.colibri.UniqueId;
import org.junit.jupiter.api.Test;

/**
 * {@link Communicator#launchGraph} (clbGraphLaunch) where no graph can run: a null graph is
 * refused naming it, a closed communicator is refused, and without a CUDA driver (CI) a call is
 * UNSUPPORTED with the reason. Replays themselves run on the GPU (the native DeviceSharedGpu suite).
 */
class LaunchGraphTest {
  @Test
  void aNullGraphIsRefusedAndTheCommunicatorStaysUsable() {
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      ColibriException e = assertThrows(ColibriException.class, () -> comm.launchGraph(0, 0));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e.getMessage());
      assertTrue(e.getMessage().startsWith("launchGraph on rank 0 of 1"), e.getMessage());
      assertTrue(e.getMessage().contains("graphExec is NULL"), e.getMessage());
      comm.barrier();
    }
  }

  @Test
  void withoutADriverItIsUnsupported() {
    try {
      Device.count();
      return; // a driver is here: a made-up graph handle must not be launched
    } catch (ColibriException e) {
      assertEquals(ErrorCode.UNSUPPORTED, e.code(), e.getMessage());
    }
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      ColibriException e = assertThrows(ColibriException.class, () -> comm.launchGraph(0x1000, 0));
      assertEquals(ErrorCode.UNSUPPORTED, e.code(), e.getMessage());
    }
  }

  @Test
  void aClosedCommunicatorIsRefused() {
    Communicator comm = Communicator.init(UniqueId.create(), 0, 1);
    comm.close();
    ColibriException e = assertThrows(ColibriException.class, () -> comm.launchGraph(0x1000, 0));
    assertEquals(ErrorCode.INVALID_USAGE, e.code(), e.getMessage());
    assertTrue(e.getMessage().contains("communicator is closed"), e.getMessage());
  }
}
