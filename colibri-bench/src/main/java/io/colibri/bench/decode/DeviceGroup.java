/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.Communicator;
import io.colibri.Options;
import io.colibri.UniqueId;
import org.bytedeco.cuda.nccl.ncclUniqueId;

/**
 * A group of rank threads running the GPU decoder over Colibri or NCCL, with each rank's init
 * time and GPU memory figures. Kept apart from {@link DecodeCommand} so that the CPU decoder
 * runs from a jar without the CUDA presets (this class needs them).
 */
final class DeviceGroup {

  private DeviceGroup() {}

  /**
   * Runs the group.
   *
   * @param s the model's shape
   * @param n the group's size
   * @param options Colibri's options
   * @param nccl whether the collectives are NCCL's (else Colibri's)
   * @param spread whether rank r runs on GPU r % gpus (else every rank on GPU 0)
   * @param gpus the GPUs seen
   * @param seed the model's and the prompt's seed
   * @param prompt prompt tokens per sequence
   * @param newTokens tokens generated per sequence
   * @param keep whether to keep every step's logits
   * @param graph whether to replay the step as one CUDA graph
   * @return the group's result
   */
  static LocalGroup.Result run(ModelShape s, int n, Options options, boolean nccl, boolean spread,
      int gpus, long seed, int prompt, int newTokens, boolean keep, boolean graph) {
    UniqueId id = nccl ? null : UniqueId.create();
    ncclUniqueId ncclId = nccl ? NcclDeviceCollectives.uniqueId() : null;
    return LocalGroup.runRanks(n, rank -> rank(s, n, rank, id, ncclId, options, spread, gpus, seed, prompt,
        newTokens, keep, graph));
  }

  /**
   * One rank of {@link #run} (a thread here, or a process of {@link ProcessGroup}).
   *
   * @param s the model's shape
   * @param n the group's size
   * @param rank this rank
   * @param id Colibri's id of the group (null for NCCL)
   * @param ncclId NCCL's id of the group (null for Colibri)
   * @param options Colibri's options
   * @param spread whether rank r runs on GPU r % gpus (else on GPU 0)
   * @param gpus the GPUs seen
   * @param seed the model's and the prompt's seed
   * @param prompt prompt tokens per sequence
   * @param newTokens tokens generated per sequence
   * @param keep whether to keep every step's logits
   * @param graph whether to replay the step as one CUDA graph
   * @return the rank's run, with its GPU memory figures
   */
  static LocalGroup.RankRun rank(ModelShape s, int n, int rank, UniqueId id, ncclUniqueId ncclId, Options options,
      boolean spread, int gpus, long seed, int prompt, int newTokens, boolean keep, boolean graph) {
    int dev = spread ? rank % gpus : 0;
    DeviceDecoder.selectDevice(dev);
    long m0 = DeviceDecoder.usedBytes();
    long t0 = System.nanoTime();
    try (DeviceCollectives c = ncclId != null ? new NcclDeviceCollectives(ncclId, n, rank)
        : new ColibriDeviceCollectives(Communicator.init(id, rank, n, options))) {
      long init = System.nanoTime() - t0;
      long m1 = DeviceDecoder.usedBytes();
      try (DeviceDecoder dec = new DeviceDecoder(new Shard(s, n, rank), new SeededWeights(seed), c, dev)) {
        long m2 = DeviceDecoder.usedBytes();
        Generation g = dec.generate(seed, prompt, newTokens, keep, graph);
        long m3 = DeviceDecoder.usedBytes();
        return new LocalGroup.RankRun(g, init, new LocalGroup.Memory(m0, m1, m2, m3, c.ownDeviceBytes()));
      }
    }
  }
}
