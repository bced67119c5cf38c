#!/usr/bin/env bash
# Command 2: every test. The native unit tests (GoogleTest, through CTest) on a CMake build of
# src/ in build/native, then `mvn -B verify`, which builds all modules and runs their tests
# (colibri-api, colibri-native against the real native library, the perf tool's smoke tests) and
# packages them with their -sources and -javadoc jars (javadoc warnings fail it), then checks the
# artifacts (scripts/CheckArtifacts.java: those jars, Automatic-Module-Name, the BOM, pom metadata).
# Then scripts/sanitize.sh: the native tests again under ASan+UBSan (build/asan) and, the threaded
# ones, under TSan (build/tsan), and a bounded libFuzzer run over the argument checks of the C ABI
# and the NCCL drop-in (build/fuzz). COLIBRI_SKIP_SANITIZERS=1 skips that step (a quicker local
# run); CI runs it.
# Fails on the first failure; a Maven failure ends with the list of failing tests. Idempotent: a second run rebuilds only what changed.
# Installs missing tools (cmake, g++, GoogleTest, verbs.h for the RDMA emulator's build, OpenSSL 3
# for the TLS tests, a JDK, Maven)
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

log "native unit tests: ctest --test-dir build/native"
ctest --test-dir build/native --output-on-failure --no-tests=error

log "Java modules: mvn -B -ntp verify"
# The tests' own output goes to files (redirectTestOutputToFile): on a failure, the failing tests
# and the end of their output are listed last, where the log is read.
if ! mvn -B -ntp verify; then
  log "Maven failed; the failing tests (scripts/TestFailures.java):"
  java scripts/TestFailures.java
  die "mvn verify failed"
fi

log "artifacts: java scripts/CheckArtifacts.java"
java scripts/CheckArtifacts.java
bash scripts/check-doc-links.sh

if [[ "${COLIBRI_SKIP_SANITIZERS:-0}" == 1 ]]; then
  log "sanitizers: skipped (COLIBRI_SKIP_SANITIZERS=1)"
else
  log "sanitizers: scripts/sanitize.sh"
  bash scripts/sanitize.sh
fi

log "all tests passed"
