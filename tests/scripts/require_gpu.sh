#!/usr/bin/env bash
# A GPU test run with SINKLAB_REQUIRE_GPU=1 fails (exit 1, the runtime's reason printed) where no
# CUDA device is usable, and passes where one is: never the skip (77) it gives by default.
#   require_gpu.sh GPU_TEST_BINARY
set -uo pipefail
out="$(SINKLAB_REQUIRE_GPU=1 "$1" 2>&1)"
rc=$?
echo "$out"
echo "exit code: $rc"
if grep -q 'no CUDA device is usable' <<<"$out"; then
  [[ $rc -eq 1 ]]
else
  [[ $rc -eq 0 ]]
fi
