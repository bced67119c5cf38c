/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * What the tools of colibri-bench.jar share: their command line's conventions, exit codes and
 * {@code --version} ({@link io.colibri.bench.common.Commands}), Colibri's version ({@link
 * io.colibri.bench.common.Version}, also used by colibri-jmh.jar), the Jackson mappers of their
 * JSON and CSV ({@link io.colibri.bench.common.Mappers}) and sizes as people read them ({@link
 * io.colibri.bench.common.SizeFormat}).
 */
package io.colibri.bench.common;
