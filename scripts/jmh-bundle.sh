#!/usr/bin/env bash
# Builds what scripts/jmh-gpu.sh needs into DIR (default .gpuj), for a GPU host without Java or
# network: lib/colibri-jmh.jar (the JMH benchmarks with Colibri, its native library and kernel
# images, JMH, and the org.bytedeco CUDA presets' JNI bindings: CUDA and NCCL themselves come from
# the host) and jre.txz (a trimmed Java 17, made by shared/gpu/pack.sh; by jlink here when pack.sh
# is not there). Run here, then on the GPU host: bash scripts/jmh-gpu.sh DIR
#   bash scripts/jmh-bundle.sh [DIR]        PACK_SH=path/to/pack.sh to use another pack.sh
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:-.gpuj}
mvn -B -ntp -q -pl colibri-bench -am package -DskipTests
jar=colibri-bench/target/colibri-jmh.jar
[[ -f $jar ]] || { echo "jmh-bundle: $jar was not built" >&2; exit 1; }
rm -rf "$dir" && mkdir -p "$dir/lib"
pack=${PACK_SH:-../shared/gpu/pack.sh}
if [[ -f $pack ]]; then
  bash "$pack" "$dir" "$jar"
else
  echo "jmh-bundle: no $pack; making jre.txz with jlink" >&2
  cp -f "$jar" "$dir/lib/"
  tmp=$(mktemp -d)
  jlink --add-modules java.base,java.logging,java.management,jdk.management,jdk.unsupported,java.xml \
    --output "$tmp/jre" --strip-debug --no-man-pages --no-header-files
  tar cJf "$dir/jre.txz" -C "$tmp" jre
  rm -rf "$tmp"
fi
ls -l "$dir" "$dir/lib"
du -sh "$dir"
echo "on the GPU host: bash scripts/jmh-gpu.sh $dir   (results to \$OUT, else $dir/results)"
