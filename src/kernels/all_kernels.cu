// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
// The one translation unit of a kernel image (nvcc -cubin takes a single source).
#include "kernels/reduce.cu"
#include "kernels/collective.cu"
#include "kernels/p2p.cu"
