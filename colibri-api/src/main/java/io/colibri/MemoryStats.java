/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Memory a communicator holds, as counted by the native core (every byte it allocates).
 *
 * @param hostBytes host memory held now (staging buffers, control blocks)
 * @param hostPeakBytes the most host memory held at once since init
 * @param deviceBytes device memory held now
 * @param devicePeakBytes the most device memory held at once since init
 */
public record MemoryStats(
    long hostBytes, long hostPeakBytes, long deviceBytes, long devicePeakBytes) {}
