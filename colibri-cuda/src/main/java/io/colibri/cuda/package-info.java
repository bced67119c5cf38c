/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
/**
 * Device memory and streams for code without a CUDA binding of its own, and the CUDA kernel images
 * as resources. Device buffers from any allocator (JavaCPP's cudaMalloc, for example) work with the
 * collectives through their addresses; these classes are a convenience.
 */
package io.colibri.cuda;
