/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * The {@code decode} command: a tensor-parallel Llama-shaped decoder on Colibri. The model code
 * ({@link io.colibri.bench.decode.ModelShape}, {@link io.colibri.bench.decode.Shard},
 * {@link io.colibri.bench.decode.SeededWeights}, {@link io.colibri.bench.decode.HostDecoder} on
 * the CPU, {@link io.colibri.bench.decode.DeviceDecoder} on a GPU with the kernels of
 * src/tools/decode_kernels.cu, {@link io.colibri.bench.decode.TpCollectives}) is kept apart from
 * the harness
 * ({@link io.colibri.bench.decode.Generation}, {@link io.colibri.bench.decode.LocalGroup},
 * {@link io.colibri.bench.decode.DecodeCommand}); docs/end-to-end.md says what it shows.
 */
package io.colibri.bench.decode;
