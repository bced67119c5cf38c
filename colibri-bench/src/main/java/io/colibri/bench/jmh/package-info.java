/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * JMH benchmarks: Colibri against NCCL on device memory ({@link
 * io.colibri.bench.jmh.ColibriCollectives}, {@link io.colibri.bench.jmh.NcclCollectives}), the cost
 * of one call from Java ({@link io.colibri.bench.jmh.CallOverhead}), a load probe for GPU hosts
 * ({@link io.colibri.bench.jmh.Probe}) and a side-by-side table of the JSON results ({@link
 * io.colibri.bench.jmh.Compare}). Runnable as {@code java -jar colibri-jmh.jar}; see
 * docs/jmh.md. NCCL and the CUDA runtime come through the org.bytedeco CUDA presets, which load
 * only where the NVIDIA driver, libcudart.so.13 and libnccl.so.2 are installed: every class that
 * touches them says so with a clear message elsewhere.
 */
package io.colibri.bench.jmh;
