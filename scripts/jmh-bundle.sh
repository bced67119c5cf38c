#!/usr/bin/env bash
# Builds what scripts/jmh-gpu.sh and scripts/gpu-java-decode.sh need into DIR (default .gpuj), for
# a GPU host without Java or network: lib/colibri-jmh.jar (the JMH benchmarks and the decode
# command with Colibri, its native library and kernel images, JMH, and the org.bytedeco CUDA
# presets' JNI bindings: CUDA and NCCL themselves come from the host), lib/picocli and xchart (the
# commands' io.colibri.bench.Main), test/ (colibri-bench's test classes and JUnit, for
# io.colibri.bench.GpuTestLauncher) and jre.txz (a trimmed Java 17, made by shared/gpu/pack.sh; by
# jlink here when pack.sh is not there). Run here, then on the GPU host: bash scripts/jmh-gpu.sh DIR
#   bash scripts/jmh-bundle.sh [DIR]        PACK_SH=path/to/pack.sh to use another pack.sh
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${1:-.gpuj}
mvn -B -ntp -q -pl colibri-bench -am package -DskipTests
mvn -B -ntp -q -pl colibri-bench -am test-compile
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
# The jars beside colibri-jmh.jar, from the local Maven repository at the versions the poms give.
m2=${MAVEN_REPO:-$HOME/.m2/repository}
version() {  # version FILE ARTIFACT: the <version> after <artifactId>ARTIFACT</artifactId>
  grep -A1 "<artifactId>$2</artifactId>" "$1" | sed -n 's:.*<version>\([^<$]*\)</version>.*:\1:p' | head -1
}
prop() { sed -n "s:.*<$1>\\(.*\\)</$1>.*:\\1:p" pom.xml | head -1; }
copy() {  # copy GROUP-PATH ARTIFACT VERSION DEST
  local f=$m2/$1/$2/$3/$2-$3.jar
  [[ -f $f ]] || { echo "jmh-bundle: $f is missing (run the tests once: mvn test)" >&2; exit 1; }
  cp -f "$f" "$4/"
}
copy info/picocli picocli "$(version colibri-bench/pom.xml picocli)" "$dir/lib"
copy org/knowm/xchart xchart "$(version colibri-bench/pom.xml xchart)" "$dir/lib"
mkdir -p "$dir/test"
jv=$(prop junit.version) pv=$(prop junit.platform.version)
for a in junit-jupiter-api junit-jupiter-engine junit-jupiter-params; do copy org/junit/jupiter $a "$jv" "$dir/test"; done
for a in junit-platform-commons junit-platform-engine junit-platform-launcher; do
  copy org/junit/platform $a "$pv" "$dir/test"
done
# opentest4j at the version junit-jupiter-api declares
copy org/opentest4j opentest4j "$(version "$m2/org/junit/jupiter/junit-jupiter-api/$jv/junit-jupiter-api-$jv.pom" opentest4j)" \
  "$dir/test"
jar cf "$dir/test/colibri-bench-tests.jar" -C colibri-bench/target/test-classes .
ls -l "$dir" "$dir/lib" "$dir/test"
du -sh "$dir"
echo "on the GPU host: bash scripts/jmh-gpu.sh $dir   (results to \$OUT, else $dir/results)"
