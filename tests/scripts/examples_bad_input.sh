#!/usr/bin/env bash
# Every example refuses bad input the way a user needs: a non-zero exit (not an abort, not a
# hang), a short message on stderr that names the program or the flag, nothing thrown past main.
#   examples_bad_input.sh DIR_WITH_EXAMPLE_BINARIES
# Cases: a missing --text file, an empty one, a one-character one, bad flag values, an unknown
# flag, and a head count that does not divide the width. --smoke keeps every run tiny, so a case
# that is (wrongly) accepted still ends in seconds; a 60 s timeout counts as a hang.
set -uo pipefail
bin="${1:?usage: examples_bad_input.sh DIR}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
: >"$work/empty.txt"
printf 'a' >"$work/one.txt"
failures=0

# expect NAME MODE ARGS...: MODE "refuse" wants exit 1..127; "survive" also accepts 0.
expect() {
  local name="$1" mode="$2"
  shift 2
  local out="$work/out.$RANDOM" rc
  timeout 60 "$bin/$name" "$@" >"$out.stdout" 2>"$out.stderr"
  rc=$?
  local first
  first="$(grep -m1 -v '^[[:space:]]*$' "$out.stderr" || true)"
  local why=""
  if [[ $rc -eq 124 ]]; then why="hung (60 s timeout)"
  elif [[ $rc -ge 128 ]]; then why="died with signal $((rc - 128))"
  elif [[ $rc -eq 0 && "$mode" == refuse ]]; then why="exited 0"
  elif grep -q "terminate called" "$out.stderr"; then why="threw past main"
  elif [[ $rc -ne 0 && -z "$first" ]]; then why="failed without a message"
  elif [[ ${#first} -gt 400 ]]; then why="a ${#first}-character message"
  elif [[ $rc -ne 0 && "$first" != *"$name"* && "$first" != *"--"* ]]; then why="a message naming neither the program nor a flag"
  fi
  if [[ -n "$why" ]]; then
    echo "FAIL: $name $* -> rc $rc: $why" >&2
    sed -n '1,5p' "$out.stderr" >&2
    failures=$((failures + 1))
  else
    echo "ok:   $name $* -> rc $rc: ${first:0:160}"
  fi
}

all=(train_tiny compose vga_bigram_backcopy vga_lm exoformer gradient_sinks outlier_rescaling sink_toys vit_sinks)
with_text=(compose vga_bigram_backcopy vga_lm exoformer gradient_sinks outlier_rescaling)
with_heads=(compose vga_lm exoformer gradient_sinks outlier_rescaling vit_sinks)
matrix=(vga_bigram_backcopy vga_lm exoformer gradient_sinks outlier_rescaling sink_toys vit_sinks)

smoke() {  # the flags that keep a run of $1 tiny and out of the source tree
  case "$1" in
    train_tiny) echo "--steps 2" ;;
    compose) echo "--smoke" ;;
    *) echo "--smoke --out $work/run-$1-$RANDOM" ;;
  esac
}

for p in "${all[@]}"; do
  [[ -x "$bin/$p" ]] || { echo "FAIL: $bin/$p not built" >&2; failures=$((failures + 1)); continue; }
  expect "$p" refuse --no-such-flag
  expect "$p" refuse $(smoke "$p") --steps abc
  expect "$p" refuse $(smoke "$p") --steps -1
done
for p in "${matrix[@]}"; do
  expect "$p" refuse $(smoke "$p") --seeds x
  expect "$p" refuse $(smoke "$p") --distribute everything
done
for p in "${with_text[@]}"; do
  expect "$p" refuse $(smoke "$p") --text "$work/missing.txt"
  expect "$p" refuse $(smoke "$p") --text "$work/empty.txt"
  expect "$p" survive $(smoke "$p") --text "$work/one.txt"
done
for p in "${with_heads[@]}"; do
  if [[ "$p" == compose ]]; then  # --smoke fixes compose's shape: ask on the built-in text instead
    expect compose refuse --text builtin --steps 1 --heads 3 --d-model 32
  else
    expect "$p" refuse $(smoke "$p") --heads 3 --d-model 32
  fi
done

# The benchmarks (built beside the examples when SINKLAB_BUILD_BENCH is on): bad numbers and
# unknown flags, before any timing starts.
bench_dir="$(dirname "$bin")/bench"
for p in attention elementwise gemm train_step; do
  [[ -x "$bench_dir/$p" ]] || continue
  bin="$bench_dir" expect "$p" refuse --threads abc
  bin="$bench_dir" expect "$p" refuse --threads 0
done
if [[ -x "$bench_dir/train_step" ]]; then
  bin="$bench_dir" expect train_step refuse --steps -3
  bin="$bench_dir" expect train_step refuse --no-such-flag
fi

if [[ -x "$bench_dir/data_parallel" ]]; then
  bin="$bench_dir" expect data_parallel refuse --ranks 1
  bin="$bench_dir" expect data_parallel refuse --steps abc
  bin="$bench_dir" expect data_parallel refuse --no-such-flag
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures case(s) failed" >&2
  exit 1
fi
