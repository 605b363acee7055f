#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD_DIR (fuzz_<name>) for SECONDS each.
#   scripts/run-fuzz.sh BUILD_DIR SECONDS [name ...]
# New interesting inputs go to BUILD_DIR/fuzz-corpus/<name> (the checked-in seeds in
# fuzz/corpus/<name> are read, never written); a crash leaves its input in
# BUILD_DIR/fuzz-crashes/. Exits non-zero when any target crashed, after running all of them.
set -euo pipefail
build="${1:?usage: scripts/run-fuzz.sh BUILD_DIR SECONDS [name ...]}"
seconds="${2:?usage: scripts/run-fuzz.sh BUILD_DIR SECONDS [name ...]}"
shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(safetensors checkpoint brown text idx tokenizers)
fi
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "run-fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }

mkdir -p "$build/fuzz-crashes"
failed=()
for name in "${names[@]}"; do
  bin="$build/fuzz/fuzz_$name"
  if [[ ! -x "$bin" ]]; then
    echo "run-fuzz.sh: $bin not built (configure with -DSINKLAB_FUZZ=ON and clang: make fuzz)" >&2
    exit 2
  fi
  corpus="$build/fuzz-corpus/$name"
  mkdir -p "$corpus"
  log="$build/fuzz-$name.log"
  echo "== fuzz_$name: ${seconds} s (log: $log)"
  # -rss_limit_mb: a reader that sizes a buffer from a hostile header is a finding, not an OOM kill.
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-crashes/$name-" "$corpus" "$root/fuzz/corpus/$name" >"$log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" | tr '\n' ' ' || true
    echo "corpus $(ls "$corpus" | wc -l) files"
  else
    failed+=("$name")
    echo "fuzz_$name FAILED; the end of its log:" >&2
    tail -n 40 "$log" >&2
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run-fuzz.sh: crashes in: ${failed[*]}. The inputs are in $build/fuzz-crashes/; copy each into" >&2
  echo "fuzz/regressions/<name>/ so the test suite replays it (fuzz_replay_<name>), then fix the reader." >&2
  exit 1
fi
