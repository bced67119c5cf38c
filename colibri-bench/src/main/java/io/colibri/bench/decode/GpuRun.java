/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import java.util.Locale;

/**
 * How the decoder runs on GPUs: whose collectives, in which precision, eager or as one CUDA
 * graph per step, where the ranks go, and how many prompt positions a pass takes.
 *
 * @param library whose collectives
 * @param precision the element type of weights, activations, KV cache and collectives
 * @param graph whether the decode step is captured once and replayed
 * @param spread whether rank r runs on GPU r % gpus (else every rank on GPU 0)
 * @param gpus the GPUs seen
 * @param chunk the most prompt positions per sequence one pass takes (the prefill's chunk)
 */
record GpuRun(
    Library library, Precision precision, boolean graph, boolean spread, int gpus, int chunk) {

  /** Whose collectives the decoder calls. */
  enum Library {
    /** Colibri's device collectives. */
    COLIBRI,
    /** The system's NCCL (libnccl.so.2) through the org.bytedeco presets: one rank per GPU. */
    NCCL,
    /** None: each rank's compute alone ({@link NoCollectives}), for the collectives' share of a step. */
    NONE;

    /** @return the name the command line and the CSV use */
    String label() {
      return name().toLowerCase(Locale.ROOT);
    }

    /**
     * @param name colibri, nccl or none (any case)
     * @return the library
     * @throws IllegalArgumentException naming the three there are
     */
    static Library parse(String name) {
      for (Library l : values()) {
        if (l.label().equalsIgnoreCase(name)) {
          return l;
        }
      }
      throw new IllegalArgumentException("--library " + name + ": use colibri, nccl or none");
    }
  }

  /** @return the GPU of {@code rank} */
  int device(int rank) {
    return spread ? rank % gpus : 0;
  }
}
