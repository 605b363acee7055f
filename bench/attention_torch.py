#!/usr/bin/env python3
"""PyTorch reference for `bench/attention --device cuda`: causal scaled_dot_product_attention on
the GPU, forward and backward timed with CUDA events (median of --reps after warm-ups), for

  fp32   SDPA's own choice of kernel for float32 (the memory-efficient one on sm_80/sm_90)
  fa2    bf16 inputs with the FLASH_ATTENTION backend forced: FlashAttention-2

Prints one JSON line per (mode, T): {"mode", "T", "forward_ms", "backward_ms", "backend"}.

  python3 bench/attention_torch.py --batch 4 --heads 16 --d 64 --T 512 1024 2048
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def timed(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def measure(mode, B, H, T, d, reps):
    dtype = torch.float32 if mode == "fp32" else torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(7)
    q, k, v, do = (torch.randn(B, H, T, d, device="cuda", dtype=dtype, generator=g) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    backend = "auto"
    ctx = None
    if mode == "fa2":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION)
        backend = "flash_attention"
        ctx.__enter__()
    try:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)

        def backward():
            q.grad = k.grad = v.grad = None
            out.backward(do, retain_graph=True)

        bwd = timed(backward, reps)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return {"mode": mode, "T": T, "forward_ms": fwd, "backward_ms": bwd, "backend": backend}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4, help="batch (default 4)")
    ap.add_argument("--heads", type=int, default=16, help="heads (default 16)")
    ap.add_argument("--d", type=int, default=64, help="head dimension (default 64)")
    ap.add_argument("--T", type=int, nargs="+", default=[512, 1024, 2048], help="sequence lengths (default 512 1024 2048)")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions, median reported (default 20)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("attention_torch.py: torch sees no CUDA device", file=sys.stderr)
        return 77
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
    for T in a.T:
        for mode in ("fp32", "fa2"):
            print(json.dumps(measure(mode, a.batch, a.heads, T, a.d, a.reps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
