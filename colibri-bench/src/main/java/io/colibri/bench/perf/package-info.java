/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * The perf tool ({@code java -jar colibri-bench.jar perf}): nccl-tests-style tables of the four
 * collectives ({@link io.colibri.bench.perf.Collective}) over a sweep of sizes on N local ranks,
 * processes or threads, with a data check; its options are {@link
 * io.colibri.bench.perf.PerfConfig}, the run {@link io.colibri.bench.perf.Perf}. Its CSV and JSON
 * result files are written here and read back by {@link io.colibri.bench.perf.ResultFile} (for
 * the chart command). See docs/perf-tool.md.
 */
package io.colibri.bench.perf;
