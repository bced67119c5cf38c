#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh needs into DIR (default .gpun): the native test binary, the
# device benchmark and the kernel images. Run here; carry DIR to the GPU host.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:-.gpun}
cmake -S src -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j "$(nproc)"
rm -rf "$dir" && mkdir -p "$dir"
cp build/native/colibri_tests build/native/colibri_device_bench build/native/colibri_kernels* "$dir/"
du -sh "$dir"
