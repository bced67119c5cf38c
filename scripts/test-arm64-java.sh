#!/usr/bin/env bash
# linux-arm64 from Java: the example (examples/: its Launcher starts rank processes that make every
# kind of host call and check every element) on Debian's aarch64 OpenJDK 17 under qemu-aarch64,
# against the artifacts `mvn install -Plinux-arm64` put in ~/.m2. Both natives jars are on the
# class path (linux-x86_64 and linux-arm64, as an application built for both platforms has them):
# JavaCPP must pick the arm64 one, which is checked in its cache afterwards. 3 rank processes over
# shared memory, then over sockets. scripts/test.sh runs it after the Java modules, unless
# COLIBRI_SKIP_ARM64=1; it needs scripts/test-arm64.sh's set-up (cross sysroot, qemu and its binfmt
# entry), which runs before. The JRE (openjdk-17-jre-headless:arm64 and zlib1g:arm64) is unpacked
# into build/arm64-prefix/jre, not installed.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"

sysroot=/usr/aarch64-linux-gnu
jre=$COLIBRI_ROOT/build/arm64-prefix/jre
java=$jre/usr/lib/jvm/java-17-openjdk-arm64/bin/java
if [[ ! -x $java ]]; then
  log "arm64 Java: openjdk-17-jre-headless:arm64 (unpacked into $jre)"
  unpack_arm64_debs "$jre" openjdk-17-jre-headless zlib1g
fi
[[ -x $java ]] || die "arm64 Java: no $java after unpacking openjdk-17-jre-headless:arm64"
# The JVM's own libraries (libz) beside the cross sysroot's libc; children (the rank JVMs) inherit
# both through the environment, and the kernel sends them to qemu through binfmt_misc.
export QEMU_LD_PREFIX=$sysroot
export LD_LIBRARY_PATH=$jre/lib/aarch64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$java" -version 2>&1 | grep -q 'OpenJDK' || die "arm64 Java: $java does not run under qemu-aarch64"

version=$(sed -n 's:^  <version>\(.*\)</version>$:\1:p' pom.xml | head -1)
m2=${MAVEN_REPO:-$HOME/.m2/repository}
jar() { echo "$m2/io/colibri/$1/$version/$1-$version${2:+-$2}.jar"; }
javacpp_version=$(sed -n 's:.*<javacpp.version>\(.*\)</javacpp.version>.*:\1:p' pom.xml | head -1)
cp=$(jar colibri-api):$(jar colibri-native):$(jar colibri-native linux-x86_64):$(jar colibri-native linux-arm64)
cp=$cp:$m2/org/bytedeco/javacpp/$javacpp_version/javacpp-$javacpp_version.jar
for f in ${cp//:/ }; do
  [[ -f $f ]] || die "arm64 Java: $f is missing: run mvn install -Plinux-arm64 first (scripts/test.sh does)"
done
classes=build/arm64-java/classes
rm -rf build/arm64-java && mkdir -p "$classes"
javac -d "$classes" -cp "$(jar colibri-api)" examples/src/main/java/io/colibri/examples/*.java

for transport in shm socket; do
  cache=$COLIBRI_ROOT/build/arm64-java/cache-$transport
  log "arm64 Java: the example, 3 rank processes over $transport, on an aarch64 JVM under qemu"
  # JAVA_TOOL_OPTIONS reaches the rank JVMs too: JavaCPP extracts into a cache of this run's own.
  COLIBRI_TRANSPORT=$transport JAVA_TOOL_OPTIONS="-Dorg.bytedeco.javacpp.cachedir=$cache" \
    timeout -k 10 300 "$java" -cp "$classes:$cp" io.colibri.examples.Launcher 3 240 \
    || die "arm64 Java: the example failed over $transport (exit code $?; 124: past 300 s)"
  found=$(find "$cache" -name libcolibri.so.0 | head -1)
  [[ $found == */linux-arm64/libcolibri.so.0 ]] \
    || die "arm64 Java: JavaCPP did not load the linux-arm64 natives jar (libcolibri.so.0 from: ${found:-nowhere})"
  ! find "$cache" -path '*linux-x86_64*' -name '*.so*' | grep -q . \
    || die "arm64 Java: JavaCPP extracted linux-x86_64 libraries on aarch64"
done
log "arm64 Java: passed"
