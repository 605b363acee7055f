#!/usr/bin/env bash
# scripts/keep-runs.sh: a matrix run in two parts, kept in one records folder, is summarised by
# --resume from the records alone (no run trains again, the summary holds both parts); an
# unfinished run is left out, a kept run is not overwritten, settings run.json lists as free may
# differ, and runs of other settings, records of another experiment or a folder that is no
# experiment's output are refused with a message.
#   tests/scripts/keep_runs.sh <repository root> <sink_atlas program>
set -uo pipefail
root="$1"
atlas="$2"
keep="$root/scripts/keep-runs.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "exited non-zero: $*"; }; }

# Two parts of one matrix, as two processes would run them.
run "$atlas" --smoke --no-plots --variants baseline --out "$tmp/part-a"
run "$atlas" --smoke --no-plots --variants vscale --out "$tmp/part-b"
run bash "$keep" "$tmp/part-a" "$tmp/records"
grep -q "1 run(s) added" "$tmp/out" || { cat "$tmp/out"; fail "part a: expected one run kept"; }
run bash "$keep" "$tmp/part-b" "$tmp/records"
grep -q "1 run(s) added" "$tmp/out" || { cat "$tmp/out"; fail "part b: expected one run kept"; }
for v in baseline vscale; do
  for f in run.json result.json metrics.jsonl machine.txt; do
    [[ -s "$tmp/records/runs/$v/seed0/$f" ]] || fail "records lack runs/$v/seed0/$f"
  done
  [[ ! -e "$tmp/records/runs/$v/seed0/final.safetensors" ]] || fail "records hold weights of $v"
done
grep -q "^cpu: " "$tmp/records/runs/baseline/seed0/machine.txt" || fail "machine.txt names no cpu"

# Kept runs are not overwritten, and an unfinished run is left out.
before="$(cat "$tmp/records/runs/baseline/seed0/result.json")"
rm "$tmp/part-a/runs/baseline/seed0/result.json"
run bash "$keep" "$tmp/part-a" "$tmp/records"
grep -q "skipped runs/baseline/seed0: not finished" "$tmp/out" || { cat "$tmp/out"; fail "an unfinished run was not named"; }
grep -q "0 run(s) added to .*, 0 already kept, 1 unfinished" "$tmp/out" || { cat "$tmp/out"; fail "unfinished run counted wrong"; }
run bash "$keep" "$tmp/part-b" "$tmp/records"
grep -q "1 already kept" "$tmp/out" || { cat "$tmp/out"; fail "a kept run was not recognised"; }
[[ "$(cat "$tmp/records/runs/baseline/seed0/result.json")" == "$before" ]] || fail "a kept run changed"

# The summary of both parts from the records alone: nothing trains again.
cp -r "$tmp/records" "$tmp/summary"
run "$atlas" --smoke --no-plots --resume --variants baseline,vscale --out "$tmp/summary"
[[ "$(grep -c "finished earlier; read from" "$tmp/out")" == 2 ]] || { cat "$tmp/out"; fail "--resume trained instead of reading the records"; }
grep -q "| V-scale keeps the sink |" "$tmp/summary/summary.md" || fail "the summary lacks the pair's claim"
[[ ! -e "$tmp/summary/runs/baseline/seed0/final.safetensors" ]] || fail "--resume retrained the baseline"

# Refusals: runs of other settings (here --steps), another experiment's records, a folder that is
# no experiment's output.
run "$atlas" --smoke --no-plots --variants g1 --steps 4 --out "$tmp/part-c"
if bash "$keep" "$tmp/part-c" "$tmp/records" >"$tmp/out" 2>&1; then fail "runs of other settings were kept"; fi
grep -q "the settings of '$tmp/part-c' differ" "$tmp/out" && grep -q '"steps": 4' "$tmp/out" ||
  { cat "$tmp/out"; fail "no message naming the differing setting"; }
[[ ! -e "$tmp/records/runs/g1" ]] || fail "a refused part left runs behind"
# The keys that may differ come from run.json's "free_settings": listing "steps" there lets the
# --steps 4 part in.
cp -r "$tmp/records" "$tmp/records-free"
awk 'f && /^  \]/ { f = 0; next } f { next } /^  "free_settings": \[/ { f = 1; next } { print }
     /^  "experiment":/ { print "  \"free_settings\": [\n    \"seeds\",\n    \"steps\",\n    \"threads\",\n    \"variants\"\n  ]," }' \
  "$tmp/part-c/run.json" >"$tmp/run.json" && mv "$tmp/run.json" "$tmp/part-c/run.json"
run bash "$keep" "$tmp/part-c" "$tmp/records-free"
grep -q "1 run(s) added" "$tmp/out" || { cat "$tmp/out"; fail "a free_settings key was not let differ"; }
mkdir -p "$tmp/other/runs/x/seed0"
printf '{\n  "experiment": "vga_lm",\n  "settings": {}\n}\n' >"$tmp/other/run.json"
if bash "$keep" "$tmp/other" "$tmp/records" >"$tmp/out" 2>&1; then fail "records of another experiment were accepted"; fi
grep -q "keeps runs of 'sink_atlas', '$tmp/other' holds runs of 'vga_lm'" "$tmp/out" || { cat "$tmp/out"; fail "no message for another experiment"; }
if bash "$keep" "$tmp" "$tmp/records" >"$tmp/out" 2>&1; then fail "a folder without run.json was accepted"; fi
grep -q "has no run.json" "$tmp/out" || { cat "$tmp/out"; fail "no message for a folder without run.json"; }
if bash "$keep" "$tmp/part-a" >"$tmp/out" 2>&1; then fail "one argument was accepted"; fi
grep -q "usage:" "$tmp/out" || fail "no usage line"
echo "ok: keep-runs.sh"
