#!/usr/bin/env python3
"""PyTorch reference for `bench/attention --device cuda`: causal scaled_dot_product_attention on
the GPU, forward and backward timed with CUDA events (the median of the timed calls after
warm-ups; timed calls go on until they add up to --budget seconds, at least 3, at most --reps),
for every head size of --d and every T of --T:

  fp32   SDPA's own choice of kernel for float32 (the memory-efficient one on sm_80/sm_90)
  fa2    bf16 inputs with the FLASH_ATTENTION backend forced: FlashAttention-2

Prints one JSON line per (mode, d, T): {"mode", "d", "T", "forward_ms", "backward_ms",
"backend"}, or {"mode", "d", "T", "error"} where that configuration fails.

  python3 bench/attention_torch.py --batch 4 --heads 16 --d 64 128 --T 512 1024 2048
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def timed(fn, budget_s, max_reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    while len(times) < max_reps and (len(times) < 3 or sum(times) < 1e3 * budget_s):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def measure(mode, B, H, T, d, budget_s, max_reps):
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
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), budget_s, max_reps)

        def backward():
            q.grad = k.grad = v.grad = None
            out.backward(do, retain_graph=True)

        bwd = timed(backward, budget_s, max_reps)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return {"mode": mode, "d": d, "T": T, "forward_ms": fwd, "backward_ms": bwd, "backend": backend}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4, help="batch (default 4)")
    ap.add_argument("--heads", type=int, default=16, help="heads (default 16)")
    ap.add_argument("--d", type=int, nargs="+", default=[64], help="head dimensions (default 64)")
    ap.add_argument("--T", type=int, nargs="+", default=[512, 1024, 2048], help="sequence lengths (default 512 1024 2048)")
    ap.add_argument("--budget", type=float, default=0.3,
                    help="seconds of timed calls per measurement (default 0.3; at least 3 calls)")
    ap.add_argument("--reps", type=int, default=100, help="at most this many timed calls, median reported (default 100)")
    ap.add_argument("--modes", nargs="+", default=["fp32", "fa2"], choices=["fp32", "fa2"],
                    help="what to time (default fp32 fa2)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("attention_torch.py: torch sees no CUDA device", file=sys.stderr)
        return 77
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
    for d in a.d:
        for T in a.T:
            for mode in a.modes:
                try:
                    line = measure(mode, a.batch, a.heads, T, d, a.budget, a.reps)
                except Exception as e:  # one configuration a backend refuses must not end the run
                    line = {"mode": mode, "d": d, "T": T, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
                print(json.dumps(line), flush=True)
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
