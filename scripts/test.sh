#!/usr/bin/env bash
# Command 2: every test. The native unit tests (GoogleTest, through CTest) on a CMake build of
# src/ in build/native, then `mvn -B install`, which builds all modules and runs their tests
# (colibri-api, colibri-native against the real native library, the perf tool's smoke tests),
# packages them with their -sources and -javadoc jars (javadoc warnings fail it) and installs them
# in the local Maven repository (~/.m2), then checks the artifacts (scripts/CheckArtifacts.java:
# those jars, Automatic-Module-Name, the BOM, pom metadata). Then examples/, a Maven project of its
# own as a user would write it, is built against those installed artifacts and run with 3 ranks
# (every kind of host call, every element checked), within a time limit.
# Before the Java modules, scripts/test-arm64.sh: the native library, the drop-in and the tests
# cross-built for linux-arm64, and the host collectives, bootstrap, split, shrink,
# point-to-point and the drop-in's host tests run under qemu-aarch64; Maven then packages the
# linux-arm64 jars too (-Plinux-arm64), the artifacts check verifies both platforms' jars, and
# after the example scripts/test-arm64-java.sh runs it on an aarch64 JVM under qemu against them
# (COLIBRI_SKIP_ARM64=1 skips all three).
# Then scripts/sanitize.sh: the native tests again under ASan+UBSan (build/asan) and, the threaded
# ones, under TSan (build/tsan), and a bounded libFuzzer run over the argument checks of the C ABI
# and the NCCL drop-in (build/fuzz). COLIBRI_SKIP_SANITIZERS=1 skips that step (a quicker local
# run); CI runs it.
# Fails on the first failure; a Maven failure ends with the list of failing tests. Idempotent: a second run rebuilds only what changed.
# Installs missing tools (cmake, g++, GoogleTest, verbs.h for the RDMA emulator's build, OpenSSL 3
# for the TLS tests, a JDK, Maven; test-arm64.sh: the aarch64 cross toolchain and qemu-user)
# with apt-get when run as root on Debian/Ubuntu.
# First, scripts/check-layers.sh: no native file includes a header of a layer above its own;
# scripts/check-format.sh: the C++ and CUDA sources are as clang-format writes them; and
# scripts/check-java-format.sh: the Java sources are as google-java-format writes them.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"

ensure_build_tools
ensure_tools /usr/include/gtest/gtest.h:libgtest-dev /usr/include/infiniband/verbs.h:libibverbs-dev
ensure_cuda_toolkit  # the kernel images (no GPU needed): stops, saying what to install, without it
# OpenSSL 3 (the openssl command, which brings libssl.so.3) for the COLIBRI_TLS tests, which must
# run here rather than skip.
ensure_tools openssl:openssl
export COLIBRI_REQUIRE_TLS_TESTS=1

jobs=$(nproc 2>/dev/null || echo 2)

log "layers: scripts/check-layers.sh (every native include points down)"
bash scripts/check-layers.sh
log "format: scripts/check-format.sh (src/ as clang-format writes it)"
bash scripts/check-format.sh
log "format: scripts/check-java-format.sh (the Java sources as google-java-format writes them)"
bash scripts/check-java-format.sh

log "native core: cmake -S src -B build/native"
cmake -S src -B build/native -DCMAKE_BUILD_TYPE=Release -DCOLIBRI_BUILD_TESTS=ON >/dev/null
cmake --build build/native -j "$jobs"

log "glibc: scripts/check-glibc.sh (the shipped libraries load on glibc 2.34 and later)"
bash scripts/check-glibc.sh build/native/libcolibri.so.0 build/native/libnccl.so.2 build/native/libcolibri_verbs.so
log "native unit tests: ctest --test-dir build/native"
ctest --test-dir build/native --output-on-failure --no-tests=error

if [[ "${COLIBRI_SKIP_ARM64:-0}" == 1 ]]; then
  log "linux-arm64: skipped (COLIBRI_SKIP_ARM64=1)"
else
  log "linux-arm64: scripts/test-arm64.sh (cross-built, part of the native suite under qemu-aarch64)"
  bash scripts/test-arm64.sh
fi

# With the linux-arm64 step, Maven builds that platform's natives jars too (-Plinux-arm64, from
# build/arm64), and the artifacts check wants them.
if [[ "${COLIBRI_SKIP_ARM64:-0}" == 1 ]]; then
  profiles=() platforms=(--platforms linux-x86_64)
else
  profiles=(-Plinux-arm64) platforms=()
fi
log "Java modules: mvn -B -ntp install ${profiles[*]}"
# The tests' own output goes to files (redirectTestOutputToFile): on a failure, the failing tests
# and the end of their output are listed last, where the log is read.
if ! mvn -B -ntp install "${profiles[@]}"; then
  log "Maven failed; the failing tests (scripts/TestFailures.java):"
  java scripts/TestFailures.java
  die "mvn install failed"
fi

bash scripts/check-glibc.sh colibri-native/target/classes/io/colibri/jni/linux-*/libjniColibriLib.so
log "artifacts: java scripts/CheckArtifacts.java ${platforms[*]}"
java scripts/CheckArtifacts.java "${platforms[@]}"
bash scripts/check-doc-links.sh

# examples/ is not a module of this build: it resolves Colibri from ~/.m2, where the install above
# put this version, so its pom must name this version (another one there would be stale).
version=$(sed -n 's:^  <version>\(.*\)</version>$:\1:p' pom.xml | head -1)
example_version=$(sed -n 's:.*<colibri.version>\(.*\)</colibri.version>.*:\1:p' examples/pom.xml)
[[ -n $version && $example_version == "$version" ]] \
  || die "examples/pom.xml builds against Colibri ${example_version:-?}, the root pom.xml is ${version:-?}: set <colibri.version> in examples/pom.xml"
log "example: examples/ against the installed artifacts, 3 ranks (mvn compile exec:exec)"
(cd examples && timeout -k 10 120 mvn -B -q -ntp compile exec:exec -Dranks=3) \
  || die "the example failed (exit code $?; 124: it ran past 120 s)"
if [[ "${COLIBRI_SKIP_ARM64:-0}" != 1 ]]; then
  log "linux-arm64 Java: scripts/test-arm64-java.sh (the example on an aarch64 JVM under qemu)"
  bash scripts/test-arm64-java.sh
fi

if [[ "${COLIBRI_SKIP_SANITIZERS:-0}" == 1 ]]; then
  log "sanitizers: skipped (COLIBRI_SKIP_SANITIZERS=1)"
else
  log "sanitizers: scripts/sanitize.sh"
  bash scripts/sanitize.sh
fi

log "all tests passed"
