#!/usr/bin/env bash
# Fails when a doc cites a file under results/ that is not there. Reads docs/*.md, README.md and
# results/**/*.md:
#  1. every path that starts with results/ must exist (brace lists and * are expanded, a shell
#     variable such as $n stands for *);
#  2. in results/**/*.md, a file name with a results extension (.md .csv .txt .json .png .svg .log
#     .gz .tgz) must exist under that file's folder (docs/, scripts/, src/ paths: from the root).
#     logs.md and *-logs.md are left out of this rule: they name the raw logs that left on purpose;
#  3. in those, every `git show COMMIT:PATH` must resolve (skipped where COMMIT is not in this
#     clone, a shallow one for instance, or where there is no git).
# (A results/ path right after `git show COMMIT:` is a path in that commit, not here: rule 3.)
# Prints every miss and exits 1 if there was one. Run from anywhere: bash scripts/check-doc-links.sh
# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

shopt -s globstar nullglob
docs=(docs/*.md README.md results/**/*.md)
misses=0 checked=0

miss() { printf 'check-doc-links: %s: %s\n' "$1" "$2" >&2; misses=$((misses + 1)); }

# expand TOKEN: prints the words of a token made only of [A-Za-z0-9_.,*{}/-] (braces expanded;
# globs left as they are). The character set is checked first, so eval sees no other syntax.
expand() {
  [[ $1 =~ ^[A-Za-z0-9_.,*{}/-]+$ ]] || { printf '%s\n' "$1"; return; }
  local f
  set -f
  eval "for f in $1; do printf '%s\n' \"\$f\"; done"
  set +f
}

# exists_from ROOT PATTERN: whether PATTERN (may hold *) names something under ROOT
exists_from() {
  local m=("$1"/$2)
  [[ ${#m[@]} -gt 0 && -e ${m[0]} ]]
}

for doc in "${docs[@]}"; do
  # 1. results/... paths
  while IFS= read -r tok; do
    tok=$(sed -E 's/[.,;:)]+$//' <<<"$tok")
    while IFS= read -r path; do
      checked=$((checked + 1))
      exists_from . "$path" || miss "$doc" "$path does not exist"
    done < <(expand "$tok")
  done < <(sed -E 's/git show [0-9a-f]{7,40}:[^ `|]+//g' "$doc" | grep -oE 'results/[A-Za-z0-9_.,*{}$/-]*' \
             | sed -E 's/\$([A-Za-z_][A-Za-z0-9_]*)/*/g' || true)

  [[ $doc == results/* ]] || continue
  dir=$(dirname "$doc")
  if [[ $(basename "$doc") != *logs.md ]]; then
    # 2. file names in results/**/*.md, relative to the file's folder
    while IFS= read -r tok; do
      [[ $tok == .* || $tok == results/* || $tok == */results/* ]] && continue
      while IFS= read -r name; do
        checked=$((checked + 1))
        case $name in
          docs/* | scripts/* | src/* | README.md) exists_from . "$name" || miss "$doc" "$name does not exist" ;;
          *) [[ -n $(find "$dir" -path "*/$name" -print -quit) ]] || miss "$doc" "$name: nothing under $dir/" ;;
        esac
      done < <(expand "$tok")
    done < <(grep -oE '[A-Za-z0-9_.,*{}/-]*[A-Za-z0-9_*}]\.(md|csv|txt|json|png|svg|log|gz|tgz)\b' "$doc" | sed -E 's/^[,]+//' || true)
  elif git rev-parse --git-dir >/dev/null 2>&1; then
    # 3. the raw logs that logs.md names are in git history
    while IFS= read -r ref; do
      commit=${ref%%:*}
      git cat-file -e "$commit^{commit}" 2>/dev/null || continue
      checked=$((checked + 1))
      git cat-file -e "$ref" 2>/dev/null || miss "$doc" "git show $ref: not in git history"
    done < <(grep -oE 'git show [0-9a-f]{7,40}:[^ `|<]+' "$doc" | sed 's/^git show //' || true)
  fi
done

if [[ $misses -gt 0 ]]; then
  printf 'check-doc-links: %d of %d citations point at nothing\n' "$misses" "$checked" >&2
  exit 1
fi
printf 'check-doc-links: %d citations in %d files, all there\n' "$checked" "${#docs[@]}"
