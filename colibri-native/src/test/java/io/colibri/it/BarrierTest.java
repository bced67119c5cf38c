/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.colibri.Options;
import io.colibri.Transport;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

/**
 * {@link io.colibri.Communicator#barrier()}: no rank leaves a barrier before every rank entered
 * it (a counter each rank bumps before entering, a different rank late in each round).
 */
class BarrierTest {

  @Test
  void noRankLeavesBeforeEveryRankEntered() {
    int n = 4;
    int rounds = 10;
    AtomicIntegerArray entered = new AtomicIntegerArray(rounds);
    Options options =
        Options.builder().transport(Transport.SHM).timeout(Duration.ofSeconds(20)).build();
    try (RankGroup g = RankGroup.start(n, options, Duration.ofSeconds(60))) {
      g.run(
          "barrier",
          r -> {
            for (int round = 0; round < rounds; round++) {
              if (r.rank == round % n) {
                Thread.sleep(3);
              }
              entered.incrementAndGet(round);
              r.comm.barrier();
              assertEquals(
                  n, entered.get(round), "rank " + r.rank + " left barrier " + round + " early");
            }
            return null;
          });
    }
  }
}
