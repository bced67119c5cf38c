/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * The perf tool ({@link io.colibri.bench.Perf}): nccl-tests-style tables of the four collectives
 * over a sweep of sizes, with a data check. See docs/perf-tool.md. JMH benchmarks come later.
 */
package io.colibri.bench;
