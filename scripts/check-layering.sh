#!/usr/bin/env bash
# Fails when a header under include/sinklab/ (or cuda/include/sinklab/) includes a sinklab header
# from a folder its layer may not use. The layers, lowest first:
#
#   core                          tensors, shapes, storage, RNG, threads, SIMD vocabulary
#   io        | policy            file formats (core only) | device-neutral policy math (SINKLAB_HD)
#   kernels                       loops per device: kernels/cpu/ (and cuda/)
#   autodiff                      the tape and its ops; each op calls the kernels through
#                                 kernels::backend<Device> only (kernels/backend.hpp): it includes
#                                 no device's kernel header but kernels/<device>/backend.hpp and
#                                 never names a device's kernel namespace (kernels::cpu); an op
#                                 indexes no tensor data itself (no .data()[i], parallel_for, simd::)
#   nn                            modules and models (attention, norms, FFNs, positions, mixing)
#   optim | probe | quant         what trains, measures or quantises a model
#   data                          datasets and batchers
#   interop                       other tools' formats for models and probes (Hugging Face Llama
#                                 checkpoints, probe export for notebooks)
#   dist                          communicators (one process, MPI; NCCL under cuda/) and data-parallel
#                                 gradient reduction over the tape's hooks
#   experiment                    run matrices, run directories, reports
#
# Usage: scripts/check-layering.sh [repository root]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"

declare -A allowed=(
  [core]="core"
  [io]="core io"
  [policy]="core policy"
  [kernels]="core policy kernels"
  [autodiff]="core policy kernels autodiff"
  [nn]="core policy autodiff nn"
  [optim]="core policy kernels autodiff optim"
  [probe]="core policy autodiff nn io probe"
  [quant]="core policy kernels autodiff nn quant"
  [data]="core io data"
  [interop]="core io policy autodiff nn probe interop"
  [dist]="core autodiff dist"
  [experiment]="core io policy autodiff nn optim probe quant data dist experiment"
  [cuda]="core policy kernels dist cuda"
)

status=0
checked=0
while IFS= read -r -d '' file; do
  rel="${file#"$root"/}"
  case "$rel" in
    include/sinklab/sinklab.hpp) continue ;;  # the umbrella header includes every layer
    include/sinklab/*/*) layer="$(cut -d/ -f3 <<<"$rel")" ;;
    cuda/include/sinklab/*) layer=cuda ;;
    *) echo "check-layering: $rel is not in a layer folder (include/sinklab/<layer>/)" >&2; status=1; continue ;;
  esac
  if [[ -z "${allowed[$layer]+x}" ]]; then
    echo "check-layering: $rel is in folder '$layer', which has no place in the layering (add it to $0)" >&2
    status=1
    continue
  fi
  checked=$((checked + 1))
  while IFS=: read -r line target; do
    dep="$(cut -d/ -f2 <<<"$target")"
    if [[ " ${allowed[$layer]} " != *" $dep "* ]]; then
      echo "$rel:$line: includes \"$target\", but $layer/ may only include from: ${allowed[$layer]}" >&2
      status=1
    fi
    if [[ $layer == autodiff && $dep == kernels && $target != sinklab/kernels/backend.hpp &&
          $target != sinklab/kernels/*/backend.hpp ]]; then
      echo "$rel:$line: includes \"$target\"; autodiff/ reaches kernels only through kernels::backend<Device> (sinklab/kernels/backend.hpp, sinklab/kernels/<device>/backend.hpp)" >&2
      status=1
    fi
  done < <(grep -no '^[[:space:]]*#[[:space:]]*include[[:space:]]*"sinklab/[^"]*"' "$file" |
           sed -E 's/^([0-9]+):.*"(sinklab\/[^"]*)"/\1:\2/')
  if [[ $layer == autodiff ]]; then
    while IFS=: read -r line _; do
      echo "$rel:$line: names kernels::cpu; an op calls kernels::backend<Device> so that it runs on every device" >&2
      status=1
    done < <(sed 's|//.*||' "$file" | grep -n 'kernels::cpu\|using namespace kernels' || true)
    if [[ $rel == include/sinklab/autodiff/ops/* ]]; then
      while IFS=: read -r line _; do
        echo "$rel:$line: loops over a tensor's data; that belongs in a kernel (kernels/<device>/), called through kernels::backend<Device>" >&2
        status=1
      done < <(sed 's|//.*||' "$file" | grep -n '\.data()\[\|parallel_for\|simd::' || true)
    fi
  fi
done < <(find "$root/include/sinklab" "$root/cuda/include/sinklab" -type f \( -name '*.hpp' -o -name '*.cuh' -o -name '*.h' \) -print0 2>/dev/null)

if [[ $checked -eq 0 ]]; then
  echo "check-layering: no headers found under $root/include/sinklab" >&2
  exit 1
fi
[[ $status -eq 0 ]] && echo "check-layering: $checked headers obey the layering"
exit $status
