#!/usr/bin/env bash
# Runs an example on the GPU (`--device cuda` among its arguments). Where no CUDA device is usable
# the example must stop with exit 1 and say so ("no usable CUDA device"); the test then reports
# itself skipped (77), or failed under SINKLAB_REQUIRE_GPU=1. Where a GPU is usable the example
# must succeed.
#   on_gpu.sh EXAMPLE_BINARY ARGS...
set -uo pipefail
out="$("$@" 2>&1)"
rc=$?
echo "$out"
echo "exit code: $rc"
if grep -q 'no usable CUDA device' <<<"$out"; then
  [[ $rc -eq 1 ]] || { echo "on_gpu.sh: expected exit 1 after 'no usable CUDA device'"; exit 1; }
  [[ "${SINKLAB_REQUIRE_GPU:-0}" == 1 ]] && { echo "on_gpu.sh: SINKLAB_REQUIRE_GPU=1 and no GPU"; exit 1; }
  echo "on_gpu.sh: no GPU here; skipped"
  exit 77
fi
exit "$rc"
