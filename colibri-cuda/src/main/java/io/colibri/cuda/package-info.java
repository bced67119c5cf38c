/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * CUDA support for Colibri: will hold the per-compute-capability kernel libraries and helpers for
 * device memory. Empty until the GPU path lands.
 */
package io.colibri.cuda;
