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
   * @param gpu the library, precision, graph, placement and chunk
   * @param seed the model's and the prompt's seed
   * @param prompt prompt tokens per sequence
   * @param newTokens tokens generated per sequence
   * @param keep whether to keep the logits
   * @return the group's result
   */
  static LocalGroup.Result run(
      ModelShape s,
      int n,
      Options options,
      GpuRun gpu,
      long seed,
      int prompt,
      int newTokens,
      boolean keep) {
    UniqueId id = gpu.library() == GpuRun.Library.COLIBRI ? UniqueId.create() : null;
    ncclUniqueId ncclId =
        gpu.library() == GpuRun.Library.NCCL ? NcclDeviceCollectives.uniqueId() : null;
    return LocalGroup.runRanks(
        n,
        rank -> rank(s, n, rank, id, ncclId, options, gpu, seed, prompt, newTokens, keep),
        gpu.library() != GpuRun.Library.NONE);
  }

  /**
   * One rank of {@link #run} (a thread here, or a process of {@link ProcessGroup}).
   *
   * @param s the model's shape
   * @param n the group's size
   * @param rank this rank
   * @param id Colibri's id of the group (null unless the library is Colibri)
   * @param ncclId NCCL's id of the group (null unless the library is NCCL)
   * @param options Colibri's options
   * @param gpu the library, precision, graph, placement and chunk
   * @param seed the model's and the prompt's seed
   * @param prompt prompt tokens per sequence
   * @param newTokens tokens generated per sequence
   * @param keep whether to keep the logits
   * @return the rank's run, with its GPU memory figures
   */
  static LocalGroup.RankRun rank(
      ModelShape s,
      int n,
      int rank,
      UniqueId id,
      ncclUniqueId ncclId,
      Options options,
      GpuRun gpu,
      long seed,
      int prompt,
      int newTokens,
      boolean keep) {
    int dev = gpu.device(rank);
    DeviceDecoder.selectDevice(dev);
    long m0 = DeviceDecoder.usedBytes();
    long t0 = System.nanoTime();
    try (DeviceCollectives c =
        switch (gpu.library()) {
          case NCCL -> new NcclDeviceCollectives(ncclId, n, rank);
          case COLIBRI -> new ColibriDeviceCollectives(Communicator.init(id, rank, n, options));
          case NONE -> new NoCollectives(n, rank);
        }) {
      long init = System.nanoTime() - t0;
      long m1 = DeviceDecoder.usedBytes();
      try (DeviceDecoder dec =
          new DeviceDecoder(
              new Shard(s, n, rank),
              new SeededWeights(seed),
              c,
              dev,
              gpu.precision(),
              Math.min(gpu.chunk(), prompt))) {
        long m2 = DeviceDecoder.usedBytes();
        Generation g = dec.generate(seed, prompt, newTokens, keep, gpu.graph());
        long m3 = DeviceDecoder.usedBytes();
        return new LocalGroup.RankRun(
            g,
            init,
            new LocalGroup.Memory(m0, m1, m2, m3, c.ownDeviceBytes(), dec.kvBytesPerToken()));
      }
    }
  }
}
