#!/usr/bin/env bash
# Fails when a comment or a doc names a file of the repository that is not there.
#
# Read: every .md file (all of its text) and the comments of the sources and build files (// in
# C++ and CUDA, # in shell, CMake and Makefiles) under the repository's own folders. A reference
# is a word that ends in a source or script extension (.hpp .cpp .cu .cuh .sh .cmake .py:
# nn/attention.hpp, check-layering.sh), or a path whose first part is a top-level folder of the
# repository (docs/cuda.md, tests/test_dist.cpp, bench/attention). It resolves when it exists from
# the repository root, from include/, include/sinklab/, cuda/include/, cuda/include/sinklab/, or
# the naming file's folder; a bare file name when a file of that name exists anywhere in the tree;
# a program's path when its source does (bench/attention: bench/attention.cpp). Words with *, <,
# $ or { are patterns, not references; links and what starts with out/, build or DIR/ (run
# outputs, build trees) are skipped.
#
# Usage: scripts/check-references.sh [repository root]   (exit 1 lists each unresolved reference)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

folders=(include cuda src examples tests bench scripts docs fuzz cmake)
present=()
for f in "${folders[@]}"; do [[ -d $f ]] && present+=("$f"); done
roots=$(IFS='|'; echo "${folders[*]}")

# Every file of the tree (the index of bare names), without build outputs.
mapfile -t tree < <(find "${present[@]}" -type f -not -path '*/build*' 2>/dev/null; ls README.md Makefile CMakeLists.txt 2>/dev/null || true)
declare -A base=()
for f in "${tree[@]}"; do base["${f##*/}"]=1; done

resolves() {  # resolves REF NAMING_FILE
  local ref="$1" dir p
  dir=$(dirname "$2")
  for p in "$ref" "include/$ref" "include/sinklab/$ref" "cuda/include/$ref" "cuda/include/sinklab/$ref" "$dir/$ref"; do
    [[ -e $p ]] && return 0
  done
  [[ $ref != */* && -n ${base[$ref]:-} ]] && return 0
  # A program named after its source or folder (bench/attention, examples/vga_lm).
  for p in "$ref".cpp "$ref".cu "$ref"/main.cpp; do [[ -e $p ]] && return 0; done
  return 1
}

# The text a file's references are read from: a doc whole, a source's comments only.
text_of() {
  case "$1" in
    *.md) cat "$1" ;;
    *.hpp | *.cpp | *.cu | *.cuh | *.h) grep -o '//.*' "$1" || true ;;
    *) grep -oE '(^|[[:space:]])#.*' "$1" || true ;;
  esac
}

word='[A-Za-z0-9_./*<>${}-]+'
bad=0
for f in "${tree[@]}"; do
  case "$f" in *.md | *.hpp | *.cpp | *.cu | *.cuh | *.h | *.sh | *.cmake | *CMakeLists.txt | Makefile | *.py) ;; *) continue ;; esac
  while IFS= read -r ref; do
    [[ $ref == *[\*\<\$\{]* ]] && continue
    ref=${ref%.}  # a sentence's full stop
    ref=${ref#./}
    case "$ref" in /* | out/* | build* | */build* | DIR/* | http* | *//*) continue ;; esac  # /x: after an ellipsis
    if [[ $ref =~ [A-Za-z0-9_-]\.(hpp|cpp|cu|cuh|sh|cmake|py)$ || $ref =~ ^($roots)/[A-Za-z0-9_.-] ]]; then
      if ! resolves "$ref" "$f"; then
        echo "$f: names $ref, which is not in the repository"
        bad=1
      fi
    fi
  done < <(text_of "$f" | grep -oE "$word" | sort -u)
done
exit $bad
