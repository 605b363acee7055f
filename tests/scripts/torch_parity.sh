#!/usr/bin/env bash
# PyTorch parity (tests/interop.cmake): sinklab and scripts/sinklab_torch.py compute the same logits,
# loss and gradients for every decoder variant; a model written back from PyTorch loads into
# sinklab and computes the same logits bit for bit; a Hugging Face Llama checkpoint imports.
# Skips (77) when no python3 here can import torch (Debian: apt-get install python3-torch).
#   torch_parity.sh parity|llama TORCH_PARITY_BINARY SCRIPT
set -euo pipefail
case_="$1" bin="$2" script="$3"

python=""
for candidate in ${SINKLAB_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$candidate" > /dev/null && "$candidate" -c 'import torch' > /dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "skipped: no python3 with torch (apt-get install python3-torch, or set SINKLAB_PYTHON)"
  exit 77
fi
echo "python: $python (torch $("$python" -c 'import torch; print(torch.__version__)'))"

dir="$(mktemp -d "${TMPDIR:-/tmp}/sinklab_torch_parity.XXXXXX")"
trap 'rm -rf "$dir"' EXIT

case "$case_" in
  parity)
    "$bin" export "$dir"
    status=0
    for expected in "$dir"/*.expected.safetensors; do
      variant="$(basename "$expected" .expected.safetensors)"
      "$python" "$script" parity "$dir/$variant.safetensors" "$expected" \
        --roundtrip "$dir/$variant.roundtrip.safetensors" || status=1
    done
    [[ $status -eq 0 ]] || { echo "FAILED: PyTorch disagrees with sinklab (above)"; exit 1; }
    "$bin" check "$dir"
    ;;
  llama)
    "$python" "$script" llama-fixture "$dir/llama"
    "$bin" llama "$dir/llama"
    ;;
  *) echo "torch_parity.sh: unknown case '$case_'" >&2; exit 2 ;;
esac
