#!/usr/bin/env python3
"""torch.matmul on the products bench/gemm times, for its --torch table.

  gemm_torch.py --threads 2 --trials 7 --min-time 0.2 --dtype fp32|bf16 --cases M,N,K,ta,tb;...

Operands are stored as bench/gemm stores them (A is M x K, or K x M read transposed; B is K x N,
or N x K read transposed) and are already in the dtype: bf16 times torch's bf16 matmul on bf16
tensors (oneDNN on a CPU with AVX512-BF16 or AMX), without the fp32 -> bf16 conversion that
sinklab's gemm_bf16 does inside each call. Prints one line per case, "case <i> <best GFLOP/s>",
the best of `trials` runs of at least `min-time` seconds each.
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--trials", type=int, default=7, help="timed runs per case, best kept (default 7)")
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per run (default 0.2)")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="operand type (default fp32)")
    p.add_argument("--cases", required=True, help="M,N,K,ta,tb for each product, separated by ';'")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.dtype}", flush=True)
    gen = torch.Generator().manual_seed(42)
    for i, case in enumerate(c for c in a.cases.split(";") if c):
        M, N, K, ta, tb = (int(v) for v in case.split(","))
        A = torch.rand((K, M) if ta else (M, K), generator=gen).mul_(2).sub_(1).to(dtype)
        B = torch.rand((N, K) if tb else (K, N), generator=gen).mul_(2).sub_(1).to(dtype)
        opA, opB = (A.t() if ta else A), (B.t() if tb else B)
        out = torch.empty((M, N), dtype=dtype)
        torch.matmul(opA, opB, out=out)
        flops = 2.0 * M * N * K
        best = 0.0
        for _ in range(a.trials):
            calls, t0 = 0, time.perf_counter()
            while True:
                torch.matmul(opA, opB, out=out)
                calls += 1
                t = time.perf_counter() - t0
                if t >= a.min_time:
                    break
            best = max(best, calls * flops / t * 1e-9)
        print(f"case {i} {best:.3f}", flush=True)


if __name__ == "__main__":
    main()
