/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Communicator;
import io.colibri.Options;
import io.colibri.UniqueId;
import java.time.Duration;
import java.util.function.Function;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The GPU decoder against the CPU reference: TP=1, 2 and 4 rank threads on GPU 0, eager and with
 * the step replayed as a CUDA graph, generate the CPU's TP=1 tokens with logits within 1e-3.
 * Tagged gpu; skipped, saying why, where no GPU is visible.
 */
@Tag("gpu")
class DeviceDecoderGpuTest {

  private static final ModelShape S = DecodeCommand.SMALL;

  @BeforeAll
  static void assumeAGpu() {
    String why = null;
    try {
      if (DeviceDecoder.gpuCount() == 0) {
        why = "no GPU is visible";
      }
    } catch (IllegalStateException e) {
      why = e.getMessage();
    }
    Assumptions.assumeTrue(why == null, "skipped, no GPU here: " + why);
  }

  @ParameterizedTest
  @CsvSource({"1,false", "1,true", "2,false", "2,true", "4,false", "4,true"})
  void theGpuGeneratesWhatTheCpuGenerates(int tp, boolean graph) {
    Options options = Options.builder().timeout(Duration.ofSeconds(60)).build();
    LocalGroup.Result cpu = LocalGroup.run(S, 1, options, 11, 4, 8, true, Function.identity());
    UniqueId id = UniqueId.create();
    LocalGroup.Result gpu = LocalGroup.runRanks(tp, rank -> {
      DeviceDecoder.selectDevice(0);
      try (DeviceCollectives c = new ColibriDeviceCollectives(Communicator.init(id, rank, tp, options));
          DeviceDecoder dec = new DeviceDecoder(new Shard(S, tp, rank), new SeededWeights(11), c, 0)) {
        return new LocalGroup.RankRun(dec.generate(11, 4, 8, true, graph), 0, null);
      }
    });
    assertArrayEquals(cpu.rank0().tokens(), gpu.rank0().tokens(), "TP=" + tp + (graph ? " graph" : " eager"));
    double diff = LocalGroup.compare(cpu.rank0(), gpu.rank0());
    assertTrue(diff < 1e-3, "TP=" + tp + ": logits differ from the CPU's by " + diff);
  }
}
