#!/usr/bin/python3
"""PyTorch reference for bench/train_step.cpp: the same pre-norm decoder (bytes, RMSNorm eps 1e-6,
rotate-half RoPE, causal softmax attention with one fused QKV projection, SwiGLU with one
[d, 2h] up-projection, no biases, untied LM head), float32, AdamW (PyTorch's defaults but
weight_decay 0.01, as sinklab's), timed per training step and per forward-only pass.
--autocast runs the model under torch.autocast(device, bfloat16) (on cpu or cuda); --also-fp32
adds the float32 model's timings from the same process (a fresh model from the same seed).

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OPENBLAS_CORETYPE=SkylakeX \
  OMP_NUM_THREADS=2 /usr/bin/python3 bench/train_step_torch.py --config small

Debian's torch links libblas.so.3, which is the slow reference BLAS unless LD_LIBRARY_PATH puts
OpenBLAS's first; the script reports which libblas the process mapped and the GFLOP/s of a
1024² matmul so a wrong setup is visible. OPENBLAS_CORETYPE=SkylakeX is for a CPU with AVX-512;
use Haswell on one with AVX2 only (bench/train_step picks it). With --json it prints one JSON line per config
and mode (read by bench/train_step.cpp), with the loss before and after the warmup + timed steps.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    # d, heads, layers, T, batch
    "small": dict(d=128, heads=4, layers=4, T=128, batch=16),
    "large": dict(d=256, heads=8, layers=6, T=256, batch=8),
}
VOCAB = 256


def glu_hidden(d):
    """LLaMA's SwiGLU width as sinklab's ffn::glu_hidden: 2/3 of 4d rounded up to a multiple of 8."""
    return ((8 * d + 2) // 3 + 7) // 8 * 8


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)  # each [B, H, T, dh]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh)) + mask
            y = torch.matmul(torch.softmax(s, dim=-1), v)
        return self.o(y.transpose(1, 2).reshape(B, T, D))


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_up = nn.Linear(d, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        a, b = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(a) * b)


class Block(nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.attn_norm = RMSNorm(d)
        self.attn = Attention(d, heads)
        self.ffn_norm = RMSNorm(d)
        self.ffn = SwiGLU(d, hidden)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return x + self.ffn(self.ffn_norm(x))


class Decoder(nn.Module):
    def __init__(self, d, heads, layers, T, theta=10000.0):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.layers = nn.ModuleList(Block(d, heads, glu_hidden(d)) for _ in range(layers))
        self.final_norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
        dh = d // heads
        inv_freq = theta ** (-torch.arange(0, dh // 2, dtype=torch.float64) * 2.0 / dh)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1), persistent=False)

    def forward(self, ids, targets):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin, self.mask)
        logits = self.lm_head(self.final_norm(h))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def parameter_count(d, heads, layers):
    """What sinklab's model holds, counted independently of torch."""
    h = glu_hidden(d)
    per_layer = 2 * d + 3 * d * d + d * d + d * 2 * h + h * d
    return VOCAB * d + layers * per_layer + d + d * VOCAB


def loaded_blas():
    """Paths of the BLAS/OpenBLAS shared objects this process has mapped."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in os.path.basename(path):
                libs.add(path)
    return sorted(libs)


def matmul_gflops(n=1024, reps=5):
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0) * 1e-9)
    return best


def bench(name, warmup, steps, seed, autocast=False, device="cpu"):
    c = CONFIGS[name]
    torch.manual_seed(seed)
    model = Decoder(c["d"], c["heads"], c["layers"], c["T"]).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    expected = parameter_count(c["d"], c["heads"], c["layers"])
    if n_params != expected:
        raise SystemExit(f"train_step_torch: {name}: torch model has {n_params} parameters, sinklab's has {expected}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ids = torch.randint(0, VOCAB, (c["batch"], c["T"])).to(device)
    targets = torch.randint(0, VOCAB, (c["batch"], c["T"])).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    tokens = c["batch"] * c["T"]

    # --autocast: torch.autocast(device, bfloat16) around the forward, the mode a PyTorch user turns on
    # for bf16 matrix products (weights, gradients and AdamW stay fp32).
    def run_model():
        if autocast:
            with torch.autocast(device, dtype=torch.bfloat16):
                return model(ids, targets)
        return model(ids, targets)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = run_model()
        loss.backward()
        opt.step()
        return loss

    def forward_only():
        with torch.no_grad():
            return run_model()

    def timed(f):
        for _ in range(warmup):
            f()
        sync()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            f()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    loss0 = forward_only().item()
    t_train = timed(train_step)
    t_fwd = timed(forward_only)
    loss_end = forward_only().item()  # after the warmup + timed training steps
    return dict(config=name, autocast=autocast, device=device, params=n_params, tokens=tokens, loss0=loss0,
                loss_end=loss_end, train_steps=warmup + steps, train_step_s=t_train, train_tok_s=tokens / t_train,
                fwd_s=t_fwd, fwd_tok_s=tokens / t_fwd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=["small", "large", "both"], default="both")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON line per config and mode on stdout")
    ap.add_argument("--autocast", action="store_true",
                    help="run the model under torch.autocast(DEVICE, bfloat16) (DEVICE: --device)")
    ap.add_argument("--also-fp32", action="store_true",
                    help="with --autocast, also time the float32 model in the same process (first)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where the model runs (default cpu)")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("train_step_torch: --device cuda, but torch.cuda.is_available() is False "
                         "(a PyTorch without CUDA, or no GPU)")
    if a.also_fp32 and not a.autocast:
        raise SystemExit("train_step_torch: --also-fp32 goes with --autocast (without it the model runs in float32)")
    torch.set_num_threads(a.threads)
    gf = matmul_gflops()
    info = dict(torch=torch.__version__, threads=torch.get_num_threads(), blas=loaded_blas(), matmul1024_gflops=gf,
                sdpa=hasattr(F, "scaled_dot_product_attention"),
                env={k: os.environ.get(k, "") for k in ("LD_LIBRARY_PATH", "OPENBLAS_CORETYPE", "OMP_NUM_THREADS")})
    if a.device == "cuda":  # float32 products stay float32 unless TF32 is allowed (PyTorch's default: not)
        info.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                    matmul_tf32=torch.backends.cuda.matmul.allow_tf32)
    if a.json:
        print(json.dumps(dict(info=info)), flush=True)
    else:
        print(f"torch {info['torch']}, {info['threads']} threads, BLAS {info['blas']}, "
              f"1024² matmul {gf:.1f} GFLOP/s, sdpa {info['sdpa']}")
    modes = [False, True] if a.also_fp32 else [a.autocast]
    for name in (["small", "large"] if a.config == "both" else [a.config]):
        for autocast in modes:
            r = bench(name, a.warmup, a.steps, a.seed, autocast, a.device)
            if a.json:
                print(json.dumps(r), flush=True)
            else:
                print(f"{name}{' (autocast bf16)' if autocast else ''} on {a.device}: {r['params']} params, "
                      f"train {r['train_tok_s']:.0f} tok/s ({r['train_step_s'] * 1e3:.1f} ms/step), "
                      f"forward {r['fwd_tok_s']:.0f} tok/s")


if __name__ == "__main__":
    sys.exit(main())
