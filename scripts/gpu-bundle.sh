#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh needs into DIR (default .gpun): the native test binary, the
# device benchmark, the kernel images and their list (kernel-images.txt), the verbs plugin, the
# verbs emulator as verbs-emu/libibverbs.so.1, the test plugins, the NCCL drop-in as it ships
# (nccl/lib: libnccl.so.2, libcolibri.so.0 and the kernel images in one folder; nccl/include:
# its nccl.h) with nccl-tests' source beside it (for scripts/gpu-nccl.sh), and — for the Java GPU
# tests — a trimmed JRE plus the jars (made with shared/gpu/pack.sh when it is there). Run here;
# carry DIR to the GPU host (.gpun and .gpuj are git-ignored: the device tool takes them in `carry`).
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:-.gpun}
cmake -S src -B build/native -DCMAKE_BUILD_TYPE=Release -DCOLIBRI_BUILD_TESTS=ON >/dev/null
cmake --build build/native -j "$(nproc)"
rm -rf "$dir" && mkdir -p "$dir"
cp build/native/colibri_tests build/native/colibri_device_bench build/native/colibri_host_bench build/native/colibri_kernels* \
  build/native/kernel-images.txt build/native/libcolibri_verbs.so "$dir/"
# The verbs emulator as the tests' libibverbs.so.1: colibri_tests finds it through its RPATH
# ($ORIGIN/verbs-emu), the Java GPU tests through LD_LIBRARY_PATH (gpu-check.sh).
mkdir -p "$dir/verbs-emu" && cp -L build/native/verbs-emu/libibverbs.so.1 "$dir/verbs-emu/"
# Plugins the loader must refuse (net_plugin_test.cc), beside the tests as in the build.
cp -r build/native/test-plugins "$dir/"
# The drop-in: libnccl.so.2 finds libcolibri.so.0 beside itself ($ORIGIN), which finds its kernel
# images beside itself. nccl-tests (third-party test material, built on the GPU host) travels only
# inside DIR: ../shared stays here.
mkdir -p "$dir/nccl/lib" "$dir/nccl/include"
cp -L build/native/libnccl.so.2 build/native/libcolibri.so.0 build/native/colibri_kernels* "$dir/nccl/lib/"
cp src/nccl/nccl.h "$dir/nccl/include/"
if [[ -d ../shared/third_party/nccl-tests ]]; then cp -r ../shared/third_party/nccl-tests "$dir/"; fi
pack=${PACK_SH:-../shared/gpu/pack.sh}
if [[ -x $pack || -f $pack ]]; then
  mvn -B -ntp -q install -DskipTests
  mvn -B -ntp -q dependency:get -Dartifact=org.junit.platform:junit-platform-console-standalone:1.14.1
  (cd colibri-cuda && mvn -B -ntp -q test-compile && cd target/test-classes && jar cf ../colibri-cuda-tests.jar .)
  cp="$(cd colibri-cuda && mvn -B -ntp -q dependency:build-classpath -Dmdep.outputFile=/dev/stdout -Dmdep.includeScope=test)"
  bash "$pack" "$dir" "$cp" colibri-api/target/colibri-api-0.1.0-SNAPSHOT.jar colibri-native/target/colibri-native-0.1.0-SNAPSHOT.jar colibri-cuda/target/colibri-cuda-0.1.0-SNAPSHOT.jar colibri-cuda/target/colibri-cuda-tests.jar \
    ~/.m2/repository/org/junit/platform/junit-platform-console-standalone/1.14.1/junit-platform-console-standalone-1.14.1.jar
fi
du -sh "$dir"
