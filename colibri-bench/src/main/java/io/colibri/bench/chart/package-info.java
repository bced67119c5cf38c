/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * The chart tool ({@code java -jar colibri-bench.jar chart}, {@link
 * io.colibri.bench.chart.ChartCommand}): PNG charts of result files (the perf tool's CSV and
 * JSON, mpi_coll_bench's CSV), bus bandwidth, time and memory against message size, one series
 * per file. Only its drawing touches AWT. See docs/perf-tool.md.
 */
package io.colibri.bench.chart;
