#!/usr/bin/env bash
# The GPU check, run on a GPU host with what it is given (no build, no network there):
#   bash scripts/gpu-check.sh DIR
# DIR holds colibri_tests, colibri_device_bench and the kernel images (make it here with
# `bash scripts/gpu-bundle.sh DIR`). Runs the native suite (device tests: 1-8 ranks as threads,
# 2 and 4 as processes, CUDA graph capture/replay, footprint) and bandwidth tables for 2 and 4 ranks
# (and one per GPU where there are more than 4), eager and graph mode. Logs go to $OUT when set (the device tool), else to DIR.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -uo pipefail
dir=${1:?usage: gpu-check.sh DIR}
out=${OUT:-$dir}
export COLIBRI_KERNEL_DIR=$(cd "$dir" && pwd)
export CUDA_DEVICE_MAX_CONNECTIONS=32
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
status=0
"$dir/colibri_tests" >"$out/native-suite.log" 2>&1 || status=1
grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests|FOOTPRINT|^\[  FAILED' "$out/native-suite.log"
if [[ -f $dir/jre.txz ]]; then  # Java on device memory: the gpu-tagged JUnit tests
  tar xJf "$dir/jre.txz" -C /tmp
  # Transport verbs over the verbs emulator: the stand-in libibverbs.so.1 and the plugin of the bundle.
  LD_LIBRARY_PATH=$COLIBRI_KERNEL_DIR/verbs-emu COLIBRI_PLUGIN_DIR=$COLIBRI_KERNEL_DIR \
    /tmp/jre/bin/java -Dcolibri.test.verbsEmulator=true -jar "$dir"/lib/junit-platform-console-standalone-*.jar execute \
    -cp "$(ls "$dir"/lib/*.jar | grep -E 'colibri|javacpp' | tr '\n' ':')" \
    --select-class io.colibri.cuda.DeviceCollectivesGpuTest --select-class io.colibri.cuda.DeviceCollectivesProcessGpuTest --include-tag gpu --details=tree >"$out/java-gpu.log" 2>&1 || status=1
  grep -E 'tests (successful|failed|found)|✘' "$out/java-gpu.log"
fi
ng=$(nvidia-smi -L | wc -l)
sizes="2 4"; ((ng > 4)) && sizes="2 4 $ng"  # one rank per GPU on machines with more than 4
for n in $sizes; do
  for mode in "" --graph; do
    name="bench-n$n${mode:+-graph}.txt"
    timeout 300 "$dir/colibri_device_bench" --ranks "$n" $mode >"$out/$name" 2>&1 || status=1
    echo "== $name"; grep -E '^#|^ +(8|8192|65536|67108864) ' "$out/$name"
  done
done
exit $status
