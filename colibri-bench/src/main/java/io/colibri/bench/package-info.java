/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * colibri-bench.jar's command line: {@link io.colibri.bench.Main} (the jar's Main-Class) runs
 * one of the tools, each in its own package: {@code perf} ({@link io.colibri.bench.perf}:
 * nccl-tests-style tables of the four collectives over a sweep of sizes, with a data check),
 * {@code doctor} ({@link io.colibri.bench.doctor}: checks of the machine, with the fix for each
 * problem) and {@code chart} ({@link io.colibri.bench.chart}: PNG charts of result files).
 * What they share is {@link io.colibri.bench.common}; the JMH benchmarks are {@link
 * io.colibri.bench.jmh}, in colibri-jmh.jar. See docs/perf-tool.md and docs/troubleshooting.md.
 */
package io.colibri.bench;
