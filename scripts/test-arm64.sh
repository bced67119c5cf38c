#!/usr/bin/env bash
# linux-arm64 (aarch64): cross-builds the native library, the NCCL drop-in, the verbs plugin and the
# native tests with Debian's cross toolchain (src/cmake/linux-arm64.cmake) into build/arm64, then
# runs a bounded part of the native suite under qemu-aarch64 (user mode): the host collectives and
# their data types, the bootstrap, split and shrink, point-to-point and all-to-all, the shm
# segments' ownership and the drop-in's host tests, over shm, socket, socket+TLS and the verbs
# stand-in, with rank threads and, where the kernel runs aarch64 programs through qemu
# (binfmt_misc), rank processes. scripts/test.sh calls it.
#   bash scripts/test-arm64.sh          COLIBRI_ARM64_FILTER / COLIBRI_ARM64_NCCL_FILTER: other tests
# Emulation keeps x86-64's stronger memory order, so it cannot show a missing acquire or release
# (docs/platforms.md says how those were checked); it shows the build, the layouts, the arithmetic
# and the logic on aarch64. Timing bounds in the tests stretch by COLIBRI_TEST_SLOWDOWN (10 here).
# Installs what it needs (g++-aarch64-linux-gnu, qemu-user, the aarch64 libc) with apt-get as root.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"

ensure_tools aarch64-linux-gnu-g++:g++-aarch64-linux-gnu qemu-aarch64:qemu-user \
  /usr/aarch64-linux-gnu/include/stdio.h:libc6-dev-arm64-cross /usr/src/googletest/CMakeLists.txt:googletest
jobs=$(nproc 2>/dev/null || echo 2)
sysroot=/usr/aarch64-linux-gnu
toolchain=$COLIBRI_ROOT/src/cmake/linux-arm64.cmake
prefix=$COLIBRI_ROOT/build/arm64-prefix

# GoogleTest for aarch64, from Debian's sources (the packaged libraries are x86-64's).
if [[ ! -f $prefix/lib/libgtest.a ]]; then
  log "arm64: GoogleTest from /usr/src/googletest"
  cmake -S /usr/src/googletest -B build/arm64-gtest -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_GMOCK=OFF >/dev/null
  cmake --build build/arm64-gtest -j "$jobs" >/dev/null
  cmake --install build/arm64-gtest >/dev/null
fi

log "arm64: cmake -S src -B build/arm64 (src/cmake/linux-arm64.cmake)"
cmake -S src -B build/arm64 -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
  -DCOLIBRI_ARM64_PREFIX="$prefix" -DCOLIBRI_KERNEL_IMAGES=OFF >/dev/null
cmake --build build/arm64 -j "$jobs" --target colibri_package colibri_tests colibri_nccl_tests colibri_test_libs
for lib in libcolibri.so.0 libnccl.so.2 libcolibri_verbs.so; do
  [[ -f build/arm64/$lib ]] || die "build/arm64/$lib was not built"
  machine=$(readelf -h "build/arm64/$lib" | sed -n 's/^ *Machine: *//p')
  [[ $machine == AArch64 ]] || die "build/arm64/$lib is not an aarch64 library (its machine: $machine)"
done

# Rank processes: the tests start their own binary again, which the kernel runs only where
# binfmt_misc sends aarch64 programs to qemu (Debian's qemu-user-binfmt file). Registered here when
# this is root and the kernel allows it; otherwise the tests of rank processes are left out, said.
processes=1
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
  [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
  conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  if [[ -w /proc/sys/fs/binfmt_misc/register && -f $conf ]]; then
    sed -n 1p "$conf" >/proc/sys/fs/binfmt_misc/register 2>/dev/null || true
  fi
fi
[[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] || processes=0
# TLS: the tests load libssl.so.3 of aarch64, which the cross sysroot lacks. Debian's package is
# unpacked into build/arm64-prefix/ssl, not installed (apt learns of arm64 packages for that).
ssl=$prefix/ssl/usr/lib/aarch64-linux-gnu
if [[ ! -f $ssl/libssl.so.3 && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  log "arm64: libssl3:arm64 for the TLS tests (unpacked into $prefix/ssl)"
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  tmp=$(mktemp -d)
  if env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
    && (cd "$tmp" && apt-get download -qq libssl3:arm64 >/dev/null 2>&1); then
    dpkg-deb -x "$tmp"/libssl3_*_arm64.deb "$prefix/ssl"
  fi
  rm -rf "$tmp"
fi
if [[ -f $ssl/libssl.so.3 ]]; then
  export COLIBRI_REQUIRE_TLS_TESTS=1  # as on x86-64: a TLS test that cannot run fails
else
  log "arm64: no aarch64 libssl.so.3: the TLS tests skip"
  unset COLIBRI_REQUIRE_TLS_TESTS
fi
export QEMU_LD_PREFIX=$sysroot   # the aarch64 libraries, for programs started through binfmt_misc
export COLIBRI_TEST_SLOWDOWN=10  # about 10 x slower than native
export COLIBRI_PLUGIN_DIR=$COLIBRI_ROOT/build/arm64  # the aarch64 verbs plugin, its stand-in libibverbs, libssl
export LD_LIBRARY_PATH=$COLIBRI_ROOT/build/arm64/verbs-emu:$ssl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

filter=${COLIBRI_ARM64_FILTER:-'Host/Collectives.*:Collectives.*:Transports/Barrier.*:Host/PreMulSum.*:AllTypesOps/DtypeReduce.*:DtypeSemantics.*:Bootstrap.*:BootstrapTree.*:UniqueId.*:RingOrder.*:Split.*:Transports/SplitOver.*:Transports/ShrinkOver.*:Transports/ShrinkAfterKill.*:Transports/Peer*:Host/PeerMatrix.*:Segments.*:ShmOwnership.*:Transports/AsyncErrorProcesses.*:NcclAbi.*:Sha256.*:HmacSha256.*'}
nccl_filter=${COLIBRI_ARM64_NCCL_FILTER:-'*'}
if ((processes == 0)); then
  log "arm64: binfmt_misc cannot run aarch64 programs here: the tests of rank processes are left out"
  filter+=":-*Processes*:*ShrinkAfterKill*:*ShmOwnership*:*Child*"
  nccl_filter+=":-*Process*:*Child*"
fi
emu=(qemu-aarch64 -L "$sysroot")
log "arm64: colibri_tests under qemu-aarch64 ($filter)"
timeout -k 10 1200 "${emu[@]}" build/arm64/colibri_tests --gtest_filter="$filter" --gtest_brief=1 \
  || die "arm64: colibri_tests failed under qemu-aarch64 (exit code $?; 124: past 1200 s)"
log "arm64: colibri_nccl_tests under qemu-aarch64 ($nccl_filter)"
timeout -k 10 600 "${emu[@]}" build/arm64/colibri_nccl_tests --gtest_filter="$nccl_filter" --gtest_brief=1 \
  || die "arm64: colibri_nccl_tests failed under qemu-aarch64 (exit code $?; 124: past 600 s)"
log "arm64: passed"
