#!/usr/bin/env bash
# Command 1: build Colibri and run the perf tool on 4 local ranks (one JVM each) over all four
# collectives; prints one nccl-tests-style table per collective. Extra arguments go to the perf
# tool (see `bash scripts/run.sh perf --help` and docs/perf-tool.md), e.g.
#   bash scripts/run.sh --ranks 2 -e 1M -t bfloat16
# or name another command of colibri-bench.jar (`bash scripts/run.sh --help` lists them), e.g.
#   bash scripts/run.sh doctor
# Installs missing tools (cmake, g++, a JDK, Maven, libibverbs-dev) with apt-get when run as root on
# Debian/Ubuntu; stops, saying what to install, without the CUDA toolkit (nvcc and cuda.h), which
# the kernel images in colibri-cuda need.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"

ensure_build_tools
# What the jars' native parts need (the build stops rather than install a jar without them):
# verbs.h for the verbs plugin of colibri-verbs, nvcc and cuda.h for colibri-cuda's kernel images.
ensure_tools /usr/include/infiniband/verbs.h:libibverbs-dev
ensure_cuda_toolkit

log "building (mvn -B -q -ntp install -DskipTests)"
mvn -B -q -ntp install -DskipTests

jar=colibri-bench/target/colibri-bench.jar
[[ -f "$jar" ]] || die "the build did not produce $jar"

log "running the perf tool: java -jar $jar $*"
set +e
java -jar "$jar" "$@"
rc=$?
set -e
log "done (perf tool exit code $rc)"
exit $rc
