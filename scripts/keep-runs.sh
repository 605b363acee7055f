#!/usr/bin/env bash
# Keeps the record of an experiment's finished runs in the repository, so a matrix too long for
# one machine's sitting (the sink atlas: about 60 runs of 45–100 minutes) can be run in parts, on
# different days and machines, and summarised as one.
#
#   scripts/keep-runs.sh OUT RECORDS     # e.g. out/atlas-a docs/results/runs/sink-atlas
#
# OUT is an experiment's --out (run.json, runs/<variant>/seed<k>/). For each finished run there
# (result.json present) it copies run.json, result.json and metrics.jsonl — what `--resume` reads
# back, about 100 KB a run — to RECORDS/runs/<variant>/seed<k>/, with machine.txt naming the CPU it
# is copied on (run it on the machine that ran the runs). Weights, checkpoints and full reports
# stay behind. RECORDS/run.json (the experiment and its settings) is copied once; a later OUT must
# be of the same experiment with the same settings, all but those run.json lists as free_settings
# (the variants, seeds and threads: what --resume lets differ). A run already kept is left as it
# is. To summarise the kept runs:
#
#   cp -r docs/results/runs/sink-atlas out/sink-atlas
#   build-release/examples/sink_atlas --summarize --no-plots --out out/sink-atlas --seeds 0,1 --variants baseline,vscale
#
# (--summarize trains nothing: it compares the settings, so runs of other settings are refused,
# not mixed, and names a listed run that is not kept and leaves it out.)
set -euo pipefail

say() { echo "keep-runs.sh: $*" >&2; }
[[ $# -eq 2 ]] || { say "usage: scripts/keep-runs.sh OUT RECORDS (an experiment's --out, the folder that keeps its runs)"; exit 2; }
out="$1"
records="$2"
[[ -f "$out/run.json" ]] || { say "'$out' has no run.json: not an experiment's output folder"; exit 1; }
[[ -d "$out/runs" ]] || { say "'$out' has no runs/ folder: nothing to keep"; exit 1; }

experiment_of() { sed -n 's/^ *"experiment": *"\([^"]*\)".*/\1/p' "$1" | head -n 1; }
exp="$(experiment_of "$out/run.json")"
[[ -n "$exp" ]] || { say "'$out/run.json' names no experiment"; exit 1; }
mkdir -p "$records/runs"
# The keys --resume lets differ: run.json's "free_settings" (of either file); run.json written
# before that key existed let the variants, seeds and threads differ.
free_keys() {
  awk '/^  "free_settings": \[/ { s = 1; next } s && /^  \]/ { s = 0 } s' "$@" | tr -d ' ",' | sort -u
}
runjsons=("$out/run.json")
[[ -f "$records/run.json" ]] && runjsons+=("$records/run.json")
free="$(free_keys "${runjsons[@]}" | paste -sd '|' -)"
free="${free:-variants|seeds|threads}"
# The settings that decide a run's result: run.json's "settings" without the free keys, one key a
# line, trailing commas dropped.
result_settings() {
  awk '/^  "settings": \{/ { s = 1; next } s && /^  \}/ { s = 0 } s' "$1" |
    awk -v free="^    \"(${free})\":" 'skip && /^    []}]/ { skip = 0; next } skip { next }
         $0 ~ free { if ($0 ~ /[[{]$/) skip = 1; next } { print }' | sed 's/,$//'
}
if [[ -f "$records/run.json" ]]; then
  kept="$(experiment_of "$records/run.json")"
  [[ "$kept" == "$exp" ]] || { say "'$records' keeps runs of '$kept', '$out' holds runs of '$exp'"; exit 1; }
  if ! differ="$(diff <(result_settings "$records/run.json") <(result_settings "$out/run.json"))"; then
    say "the settings of '$out' differ from those of the runs kept in '$records' (< kept, > $out):"
    echo "$differ" >&2
    exit 1
  fi
else
  cp "$out/run.json" "$records/run.json"
fi

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
family="$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
model="$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
isa="$(grep -m 1 -o -w 'avx2\|avx512f\|avx512_bf16\|avx512_vnni\|amx_tile\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)"
cores="$(nproc)"

added=0 present=0 unfinished=0
for dir in "$out"/runs/*/seed*; do
  [[ -d "$dir" ]] || continue
  rel="${dir#"$out"/}"
  if [[ ! -f "$dir/result.json" ]]; then
    unfinished=$((unfinished + 1)); say "skipped $rel: not finished"; continue
  fi
  dest="$records/$rel"
  if [[ -f "$dest/result.json" ]]; then
    present=$((present + 1)); continue
  fi
  for f in run.json result.json metrics.jsonl; do
    [[ -f "$dir/$f" ]] || { say "$rel has result.json but no $f"; exit 1; }
  done
  mkdir -p "$dest.tmp"
  cp "$dir/run.json" "$dir/result.json" "$dir/metrics.jsonl" "$dest.tmp/"
  printf 'cpu: %s (family %s, model %s), %s cores\nisa: %s\nkept: %s\n' "$cpu" "$family" "$model" "$cores" \
    "${isa% }" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$dest.tmp/machine.txt"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  added=$((added + 1)); say "kept $rel"
done
say "$added run(s) added to $records, $present already kept, $unfinished unfinished left out"
