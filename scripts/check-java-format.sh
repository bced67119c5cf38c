#!/usr/bin/env bash
# The Java sources (every tracked .java file) are as google-java-format writes them: Google's style
# (two-space indent, four-space continuation, 100 columns, imports sorted, unused ones removed),
# with the Javadoc left as written.
#   bash scripts/check-java-format.sh         exit 0 when every file is, 1 naming those that are not
#   bash scripts/check-java-format.sh --fix   rewrites them in place
# The formatter is one pinned version (versions format differently), run as its all-deps jar from
# the local Maven repository (~/.m2/repository). Maven downloads it there from Maven Central the
# first time; after that the check needs no network and does not start Maven.
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$COLIBRI_ROOT"
ensure_tools java:default-jdk-headless mvn:maven

version=1.28.0 # the newest that runs on Java 17
# --skip-javadoc-formatting: the formatter would refill every Javadoc paragraph to 100 columns,
# splitting {@code ...} and {@link ...} tags across lines where the comments now keep them whole.
options=(--skip-javadoc-formatting)
# A short run: the quick JIT tier and the serial collector take a third less CPU than the defaults.
jvm=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC)

java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p')
if [[ -z $java_major || $java_major -lt 17 ]]; then
  echo "check-java-format: google-java-format $version needs Java 17 or newer; java here is $(java -version 2>&1 | head -1)" >&2
  exit 2
fi

repo=$HOME/.m2/repository
jar=$repo/com/google/googlejavaformat/google-java-format/$version/google-java-format-$version-all-deps.jar
if [[ ! -f $jar ]]; then
  log "java format: downloading google-java-format $version into $repo (once)"
  # Outside the project (no pom to read), into the repository looked in above whatever settings.xml says.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # Maven's output is shown only when it fails (with -q it prints colour codes and nothing else).
  if ! out=$(cd "$tmp" && mvn -B -q -ntp -Dmaven.repo.local="$repo" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get -Dtransitive=false \
    -Dartifact="com.google.googlejavaformat:google-java-format:$version:jar:all-deps" 2>&1) \
    || [[ ! -f $jar ]]; then
    printf '%s\n' "$out" >&2
    echo "check-java-format: Maven could not bring google-java-format $version into $repo" >&2
    exit 2
  fi
fi

files=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] && files+=("$f") # a tracked file deleted in the work tree is not checked
done < <(git ls-files -z '*.java')

# differing FILE...: sets bad to those of the files the formatter would change, in one JVM.
# --dry-run prints their names, one a line; a file it cannot parse makes it print the error and
# exit non-zero.
differing() {
  local out
  if ! out=$(java "${jvm[@]}" -jar "$jar" "${options[@]}" --dry-run "$@"); then
    echo "check-java-format: google-java-format $version failed (above)" >&2
    exit 2
  fi
  mapfile -t bad < <(printf '%s' "$out" | sed '/^$/d')
}

differing "${files[@]}"
if [[ ${1:-} == --fix ]]; then
  # Rewrites only the files that differ, until none does: the formatter's output is not always
  # final in one pass (a trailing comment it wraps moves again on the next run).
  for _ in 1 2 3; do
    ((${#bad[@]})) || exit 0
    java "${jvm[@]}" -jar "$jar" "${options[@]}" --replace "${bad[@]}"
    differing "${bad[@]}"
  done
  echo "check-java-format: google-java-format $version keeps changing these; format them by hand:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
if ((${#bad[@]})); then
  echo "check-java-format: ${#bad[@]} file(s) are not as google-java-format $version writes them (bash scripts/check-java-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-java-format: ${#files[@]} files as google-java-format $version writes them"
