#!/usr/bin/env bash
# linux-arm64 from Java: the example (examples/: its Launcher starts rank processes that make every
# kind of host call and check every element) on Debian's aarch64 OpenJDK 17 under qemu-aarch64,
# against the artifacts `mvn install -Plinux-arm64` put in ~/.m2. Both natives jars are on the
# class path (linux-x86_64 and linux-arm64, as an application built for both platforms has them):
# JavaCPP must pick the arm64 one, which is checked in its cache afterwards. 3 rank processes over
# shared memory, over sockets and over the verbs transport (colibri-verbs' linux-arm64 plugin over
# the aarch64 stand-in libibverbs). scripts/test.sh runs it after the Java modules, unless
# COLIBRI_SKIP_ARM64=1; it needs scripts/test-arm64.sh's set-up (cross sysroot, qemu and its binfmt
# entry), which runs before. The JRE (openjdk-17-jre-headless:arm64 and zlib1g:arm64) is unpacked
# into build/arm64-prefix/jre, not installed.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"

ensure_tools qemu-aarch64:qemu-user /usr/lib/binfmt.d/qemu-aarch64.conf:qemu-user-binfmt \
  /usr/aarch64-linux-gnu/lib/libc.so.6:libc6-arm64-cross
register_arm64_binfmt
sysroot=/usr/aarch64-linux-gnu
jre=$COLIBRI_ROOT/build/arm64-prefix/jre
java=$jre/usr/lib/jvm/java-17-openjdk-arm64/bin/java
if [[ ! -f $jre/.complete ]]; then
  log "arm64 Java: openjdk-17-jre-headless:arm64 (unpacked into $jre)"
  rm -rf "$jre"
  unpack_arm64_debs "$jre" openjdk-17-jre-headless zlib1g
  # Debian's JRE keeps its configuration in /etc (conf/security/java.security and the rest are
  # absolute links there): pointed at the unpacked copies instead, so that the host's own JDK (or
  # none) does not matter.
  find "$jre" -type l -lname '/*' | while read -r link; do
    target=$(readlink "$link")
    if [[ -e $jre$target ]]; then ln -sfnr "$jre$target" "$link"; fi  # relative: the tree may move
  done
  touch "$jre/.complete"
fi
[[ -x $java ]] || die "arm64 Java: no $java after unpacking openjdk-17-jre-headless:arm64"
# (lib/security/cacerts stays a link to the host's CA store, which the example does not read.)
! find "$jre" -type l -lname '/etc/java-17-openjdk/*' | grep -q . \
  || die "arm64 Java: the JRE in $jre still points into /etc/java-17-openjdk"
# The JVM's own libraries (libz) beside the cross sysroot's libc; children (the rank JVMs) inherit
# both through the environment, and the kernel sends them to qemu through binfmt_misc.
export QEMU_LD_PREFIX=$sysroot
export LD_LIBRARY_PATH=$jre/lib/aarch64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$java" -version 2>&1 | grep -q 'OpenJDK' \
  || die "arm64 Java: $java does not run under qemu-aarch64 (binfmt_misc: the kernel must run aarch64 programs through qemu, as scripts/test-arm64.sh says; $("$java" -version 2>&1 | tail -1))"

version=$(sed -n 's:^  <version>\(.*\)</version>$:\1:p' pom.xml | head -1)
m2=${MAVEN_REPO:-$HOME/.m2/repository}
m2jar() { echo "$m2/io/colibri/$1/$version/$1-$version${2:+-$2}.jar"; }
javacpp_version=$(sed -n 's:.*<javacpp.version>\(.*\)</javacpp.version>.*:\1:p' pom.xml | head -1)
cp=$(m2jar colibri-api):$(m2jar colibri-native):$(m2jar colibri-native linux-x86_64):$(m2jar colibri-native linux-arm64)
cp=$cp:$(m2jar colibri-verbs):$(m2jar colibri-verbs linux-x86_64):$(m2jar colibri-verbs linux-arm64)
cp=$cp:$m2/org/bytedeco/javacpp/$javacpp_version/javacpp-$javacpp_version.jar
for f in ${cp//:/ }; do
  [[ -f $f ]] || die "arm64 Java: $f is missing: run mvn install -Plinux-arm64 first (scripts/test.sh does)"
done
classes=build/arm64-java/classes
rm -rf build/arm64-java && mkdir -p "$classes"
# For the aarch64 JVM, Java 17, whatever javac is on the PATH.
javac --release 17 -d "$classes" -cp "$(m2jar colibri-api)" examples/src/main/java/io/colibri/examples/*.java

# The verbs transport goes through colibri-verbs' linux-arm64 plugin, which the loader extracts
# from the class path, over the aarch64 stand-in libibverbs of scripts/test-arm64.sh's build.
[[ -f build/arm64/verbs-emu/libibverbs.so.1 ]] \
  || die "arm64 Java: build/arm64/verbs-emu/libibverbs.so.1 is missing: run scripts/test-arm64.sh first"
for transport in shm socket verbs; do
  cache=$COLIBRI_ROOT/build/arm64-java/cache-$transport
  log "arm64 Java: the example, 3 rank processes over $transport, on an aarch64 JVM under qemu"
  extra=()
  [[ $transport == verbs ]] && extra=(env "LD_LIBRARY_PATH=$COLIBRI_ROOT/build/arm64/verbs-emu:$LD_LIBRARY_PATH")
  # JAVA_TOOL_OPTIONS reaches the rank JVMs too: JavaCPP extracts into a cache of this run's own.
  # At log level info each rank says which transport it runs on.
  log=$COLIBRI_ROOT/build/arm64-java/$transport.log
  COLIBRI_TRANSPORT=$transport COLIBRI_LOG_LEVEL=info JAVA_TOOL_OPTIONS="-Dorg.bytedeco.javacpp.cachedir=$cache" \
    timeout -k 10 300 "${extra[@]}" "$java" -cp "$classes:$cp" io.colibri.examples.Launcher 3 240 >"$log" 2>&1 \
    || { rc=$?; tail -30 "$log"; die "arm64 Java: the example failed over $transport (exit code $rc; 124: past 300 s; $log)"; }
  grep '^launcher:' "$log"
  ready=$(grep -c "ready: transport $transport" "$log" || true)
  [[ $ready -ge 3 ]] || die "arm64 Java: $ready of 3 ranks said they run on transport $transport ($log)"
  found=$(find "$cache" -name libcolibri.so.0 2>/dev/null | head -1 || true)
  [[ $found == */linux-arm64/libcolibri.so.0 ]] \
    || die "arm64 Java: JavaCPP did not load the linux-arm64 natives jar (libcolibri.so.0 from: ${found:-nowhere})"
  if find "$cache" -path '*linux-x86_64*' -name '*.so*' 2>/dev/null | grep -q .; then
    die "arm64 Java: JavaCPP extracted linux-x86_64 libraries on aarch64"
  fi
  if [[ $transport == verbs ]]; then
    plugin=$(find "$cache" -name libcolibri_verbs.so 2>/dev/null | head -1 || true)
    [[ $plugin == */linux-arm64/libcolibri_verbs.so ]] \
      || die "arm64 Java: the verbs plugin did not come from colibri-verbs' linux-arm64 jar (${plugin:-none extracted})"
  fi
done
log "arm64 Java: passed"
