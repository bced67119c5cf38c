# Sourced by scripts/run.sh and scripts/test.sh: logging, timing and installing missing tools.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.

COLIBRI_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COLIBRI_T0=$(date +%s)

log() { printf '==> [%4ss] %s\n' "$(( $(date +%s) - COLIBRI_T0 ))" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_tools CMD:PACKAGE ... : installs, with apt-get, the package of every CMD that is not on the
# PATH (a CMD starting with / is a file that must exist instead). Nothing is installed when all are
# there, so the scripts run unchanged on machines that are already set up (or that have no apt).
ensure_tools() {
  local missing=() spec cmd pkg
  for spec in "$@"; do
    cmd="${spec%%:*}"
    pkg="${spec#*:}"
    if [[ "$cmd" == /* ]]; then
      [[ -e "$cmd" ]] && continue
    else
      command -v "$cmd" >/dev/null 2>&1 && continue
    fi
    [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  command -v apt-get >/dev/null 2>&1 \
    || die "missing ${missing[*]} and no apt-get here: install them with your package manager"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "missing ${missing[*]}: run as root or install them"
    sudo=(sudo)
  fi
  log "installing missing packages: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# The build needs a JDK 17 or newer (javac) and Maven; the native core a C++17 compiler and CMake.
# ensure_cuda_toolkit: nvcc and cuda.h where the native build looks for them (PATH, CUDA_HOME,
# /usr/local/cuda), or stop saying what to install: the kernel images of colibri-cuda need them,
# and no distribution's default repositories carry a current toolkit to install here.
ensure_cuda_toolkit() {
  local home=${CUDA_HOME:-/usr/local/cuda}
  if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x "$home/bin/nvcc" ]]; then
    die "nvcc not found (PATH, CUDA_HOME, /usr/local/cuda/bin): the CUDA toolkit builds the kernel images of colibri-cuda. Install NVIDIA's cuda-nvcc and cuda-cudart-dev packages (https://developer.nvidia.com/cuda-downloads) or Debian's nvidia-cuda-toolkit (non-free), or set CUDA_HOME; no GPU is needed to build"
  fi
  if [[ ! -f "$home/include/cuda.h" && ! -f /usr/include/cuda.h ]]; then
    die "cuda.h not found ($home/include, /usr/include): install the CUDA toolkit's headers (cuda-cudart-dev) or set CUDA_HOME"
  fi
}

ensure_build_tools() {
  ensure_tools cmake:cmake make:make g++:g++ java:default-jdk-headless \
    javac:default-jdk-headless mvn:maven
  local v
  v=$(javac -version 2>&1 | sed -n 's/^javac \([0-9][0-9]*\).*/\1/p')
  [[ -n "$v" && "$v" -ge 17 ]] \
    || die "Colibri needs JDK 17 or newer; javac says: $(javac -version 2>&1). Set JAVA_HOME/PATH to a JDK 17+"
}

# unpack_arm64_debs DEST PACKAGE...: Debian's arm64 packages downloaded with arm64 package lists of
# their own (the machine's apt set-up is left as it is: no dpkg --add-architecture) and unpacked
# into DEST, not installed. For what the aarch64 cross sysroot lacks (libssl3, a JRE).
unpack_arm64_debs() {
  local dest=$1 tmp deb
  shift
  command -v apt-get >/dev/null 2>&1 || die "arm64: $* (arm64) come from Debian's packages and there is no apt-get here"
  tmp=$(mktemp -d)
  mkdir -p "$tmp/lists/partial" "$dest"
  local apt=(apt-get -qq -o APT::Architectures::=arm64 -o "Dir::State::Lists=$tmp/lists" -o APT::Sandbox::User=root)
  ("${apt[@]}" update && cd "$tmp" && "${apt[@]}" download "${@/%/:arm64}") >"$tmp/apt.log" 2>&1 \
    || die "arm64: cannot download $* (arm64): $(tail -3 "$tmp/apt.log")"
  for deb in "$tmp"/*_arm64.deb; do dpkg-deb -x "$deb" "$dest"; done
  rm -rf "$tmp"
}

# register_arm64_binfmt: Debian's qemu-aarch64 entry (qemu-user-binfmt's file) registered with
# binfmt_misc when it is missing, so that the kernel runs aarch64 programs through qemu (programs
# that start others: rank processes). Takes root and a kernel that lets binfmt_misc be mounted; the
# entry is kernel-wide (a privileged container registers it for its host). The callers check by
# running an aarch64 program.
register_arm64_binfmt() {
  [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] && return 0
  [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
  if [[ -w /proc/sys/fs/binfmt_misc/register && -f /usr/lib/binfmt.d/qemu-aarch64.conf ]]; then
    sed -n '/^:qemu-aarch64:/p' /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register 2>/dev/null || true
  fi
}
