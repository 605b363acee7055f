#!/usr/bin/env python3
"""sinklab checkpoints in PyTorch, and back.

A sinklab checkpoint describes its model in the safetensors metadata (keys "sinklab.model.*",
written by io::save_parameters). From that description this script builds the equivalent
torch.nn.Module for the decoder family -- RMS / LayerNorm / PreAffineRMS / DyT norms, each
optionally gated (GatedNorm); softmax, learnable-sink and clipped softmax; no gate, G1
(gate from the input) and VGA (gate from the values) on the values or on the output, per head
or per channel; V-scale; SwiGLU / GLU / GELU / ReLU feed-forwards; RoPE or no positions;
grouped-query attention, QK-norm, tied embeddings, z-loss -- with idiomatic PyTorch layouts:
nn.Linear weights [out, in], separate q/k/v and gate/up projections. The converter maps names,
transposes and fused projections both ways.

    import sinklab_torch as st
    model = st.load_sinklab("final.safetensors")   # a SinklabDecoder, in fp32
    logits = model(ids)                             # ids: LongTensor [B, T]
    st.save_sinklab(model, "edited.safetensors")   # sinklab loads it (io::load_parameters)

Commands (python3 scripts/sinklab_torch.py --help):
    parity CHECKPOINT EXPECTED   recompute logits, loss and every gradient that sinklab wrote to
                                 EXPECTED (tests/interop/torch_parity.cpp) and compare them
    llama-fixture DIR            write a small made-up Llama checkpoint with Hugging Face names
                                 (config.json, model.safetensors) and its logits
                                 (expected.safetensors), for the Llama import test

Needs PyTorch (Debian: apt-get install python3-torch); the safetensors format is read and
written here with the standard library, so nothing else is needed.
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # the commands say so; importing this file for its readers still works
    torch = None

MODEL_PREFIX = "sinklab.model."

# ---------------------------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length, a JSON header, the tensors' bytes


def _dtypes():
    return {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
            "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
            "BOOL": torch.bool}


def read_safetensors(path):
    """{name: tensor}, {metadata key: value} of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    dtypes = _dtypes()
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        if e["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor '{name}' has dtype {e['dtype']}, not one this reader knows")
        buf = bytearray(data[begin:end])
        t = torch.frombuffer(buf, dtype=dtypes[e["dtype"]]) if buf else torch.empty(0, dtype=dtypes[e["dtype"]])
        tensors[name] = t.reshape(e["shape"])
    return tensors, meta


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (and string metadata) atomically: a temporary file, then a rename."""
    names = {v: k for k, v in _dtypes().items()}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        blob = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode("utf-8"))
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# The model a description names

SUPPORTED = {
    "model": {"decoder", "encoder"},
    "pos": {"RoPE", "None"},
    "tokens": {"None"},
    "mix": {"None"},
    "attn.score": {"softmax", "softmax_sink", "clipped_softmax"},
    "attn.gate": {"none", "from_input", "from_value"},
    "attn.value": {"identity", "vscale"},
    "ffn": {"SwiGLU", "GLU", "GeluMLP", "ReluMLP"},
}
NORMS = {"RMS", "LayerNorm", "PreAffineRMS", "DyT"}


def architecture(metadata, where="checkpoint"):
    """The sinklab.model.* entries of a file's metadata, checked against what this script builds."""
    arch = {k[len(MODEL_PREFIX):]: v for k, v in metadata.items() if k.startswith(MODEL_PREFIX)}
    if not arch:
        raise ValueError(f"{where}: no sinklab.model.* metadata; save it with io::save_parameters from an "
                         "nn::Transformer to make it self-describing")
    for key, allowed in SUPPORTED.items():
        if arch.get(key) not in allowed:
            raise ValueError(f"{where}: {key} = '{arch.get(key)}'; this script builds {sorted(allowed)}")
    for key in ("norm", "attn.qk_norm"):
        kind = arch[key]
        base = arch.get(key + ".base") if kind == "GatedNorm" else kind
        if not (base in NORMS or (key == "attn.qk_norm" and kind == "none")):
            raise ValueError(f"{where}: {key} = '{kind}'; this script builds {sorted(NORMS)} and GatedNorm over them")
    if arch.get("block", "pre_norm") != "pre_norm":
        raise ValueError(f"{where}: block = '{arch['block']}'; this script builds pre-norm blocks only")
    if float(arch["residual_clip"]) < 0:
        raise ValueError(f"{where}: residual_clip = {arch['residual_clip']} must be >= 0")
    return arch


def _int(arch, key):
    return int(arch[key])


def _true(arch, key):
    return arch.get(key) == "true"


if torch is not None:

    class Norm(nn.Module):
        """One of sinklab's norm:: policies over the last axis; GatedNorm keeps its base's parameters
        at the same level and adds down_proj / up_proj (the gate's rank-r bottleneck)."""

        def __init__(self, arch, key, dim):
            super().__init__()
            kind = arch[key]
            self.gated = kind == "GatedNorm"
            base_key = key + ".base" if self.gated else key
            self.kind = arch[base_key]
            if self.kind in ("RMS", "PreAffineRMS", "LayerNorm"):
                self.eps = float(arch[base_key + ".eps"])
            if self.kind == "PreAffineRMS":
                self.pre_weight = nn.Parameter(torch.ones(dim))
            if self.kind == "DyT":
                self.alpha = nn.Parameter(torch.full((1,), 0.5))
            self.weight = nn.Parameter(torch.ones(dim))
            if self.kind in ("LayerNorm", "DyT"):
                self.bias = nn.Parameter(torch.zeros(dim))
            if self.gated:
                rank = _int(arch, key + ".rank")
                self.down_proj = nn.Linear(dim, rank, bias=False)
                self.up_proj = nn.Linear(rank, dim, bias=False)

        def base(self, x):
            if self.kind == "DyT":
                return self.weight * torch.tanh(self.alpha * x) + self.bias
            if self.kind == "LayerNorm":
                return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
            if self.kind == "PreAffineRMS":
                x = x * self.pre_weight
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

        def forward(self, x):
            y = self.base(x)
            if self.gated:
                y = torch.sigmoid(self.up_proj(F.silu(self.down_proj(y)))) * y
            return y

    def rope_tables(length, dim, base, dtype):
        """cos, sin [length, dim/2] of p * base^(-2i/dim), computed in double as sinklab does."""
        inv = base ** (-2.0 * torch.arange(dim // 2, dtype=torch.float64) / dim)
        angle = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
        return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)

    def rope(x, cos, sin):
        """Rotate-half RoPE (LLaMA / Hugging Face): channel i pairs with i + d/2."""
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    class Attention(nn.Module):
        def __init__(self, arch, d):
            super().__init__()
            self.arch = arch
            self.H, self.Hkv, self.dh = _int(arch, "heads"), _int(arch, "kv_heads"), _int(arch, "head_dim")
            H, Hkv, dh = self.H, self.Hkv, self.dh
            self.q_proj = nn.Linear(d, H * dh, bias=False)
            self.k_proj = nn.Linear(d, Hkv * dh, bias=False)
            self.v_proj = nn.Linear(d, Hkv * dh, bias=False)
            self.o_proj = nn.Linear(H * dh, d, bias=False)
            if arch["attn.qk_norm"] != "none":
                self.q_norm = Norm(arch, "attn.qk_norm", dh)
                self.k_norm = Norm(arch, "attn.qk_norm", dh)
            self.gate = arch["attn.gate"]
            if self.gate != "none":
                self.gate_on_values = arch["attn.gate.placement"] == "on_values"
                self.gate_heads = Hkv if self.gate_on_values else H
                self.gate_channels = 1 if arch["attn.gate.granularity"] == "per_head" else dh
                source = d if self.gate == "from_input" else Hkv * dh
                self.gate_proj = nn.Linear(source, self.gate_heads * self.gate_channels,
                                           bias=_true(arch, "attn.gate.bias"))
            self.score = arch["attn.score"]
            if self.score == "softmax_sink":
                self.sink_logit = nn.Parameter(torch.zeros(H))
            if arch["attn.value"] == "vscale":
                self.theta = nn.Parameter(torch.zeros(Hkv))
                self.c_scale = float(arch["attn.value.c_scale"])
            self.causal = arch["attn.mask"] == "causal"

        def heads(self, x, n, width):
            B, T, _ = x.shape
            return x.view(B, T, n, width).transpose(1, 2)

        def forward(self, x, cos=None, sin=None):
            B, T, _ = x.shape
            H, Hkv, dh = self.H, self.Hkv, self.dh
            q, k = self.heads(self.q_proj(x), H, dh), self.heads(self.k_proj(x), Hkv, dh)
            v_tokens = self.v_proj(x)
            v = self.heads(v_tokens, Hkv, dh)
            if self.gate != "none":
                g = self.gate_proj(x if self.gate == "from_input" else v_tokens)
                g = torch.sigmoid(self.heads(g, self.gate_heads, self.gate_channels))
            if hasattr(self, "q_norm"):
                q, k = self.q_norm(q), self.k_norm(k)
            if cos is not None:
                q, k = rope(q, cos[:T], sin[:T]), rope(k, cos[:T], sin[:T])
            if hasattr(self, "theta"):  # V-scale: v <- r / (r + C) v, r = |v|^2, C = (d c)^2 e^theta
                r = (v * v).sum(-1, keepdim=True)
                C = (dh * self.c_scale) ** 2 * torch.exp(self.theta).view(1, Hkv, 1, 1)
                v = r / (r + C) * v
            if self.gate != "none" and self.gate_on_values:
                v = g * v
            group = H // Hkv
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            s = q @ k.transpose(-1, -2) / math.sqrt(dh)
            if self.causal:
                s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            if self.score == "softmax_sink":  # a key of logit S_h that carries no value
                sink = self.sink_logit.view(1, H, 1, 1).expand(B, H, T, 1)
                a = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
            else:
                a = torch.softmax(s, dim=-1)
            if self.score == "clipped_softmax":
                zeta, gamma = float(self.arch["attn.score.zeta"]), float(self.arch["attn.score.gamma"])
                a = torch.clamp((zeta - gamma) * a + gamma, 0.0, 1.0)
            o = a @ v
            if self.gate != "none" and not self.gate_on_values:
                o = g * o
            return self.o_proj(o.transpose(1, 2).reshape(B, T, H * dh))

    class FeedForward(nn.Module):
        def __init__(self, arch, d):
            super().__init__()
            self.kind, h = arch["ffn"], _int(arch, "ffn.hidden")
            if self.kind in ("SwiGLU", "GLU"):
                self.gate_proj = nn.Linear(d, h, bias=False)
                self.up_proj = nn.Linear(d, h, bias=False)
                self.down_proj = nn.Linear(h, d, bias=False)
            else:
                self.fc1 = nn.Linear(d, h, bias=False)
                self.fc2 = nn.Linear(h, d, bias=False)

        def forward(self, x):
            if self.kind == "SwiGLU":
                return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
            if self.kind == "GLU":
                return self.down_proj(torch.sigmoid(self.gate_proj(x)) * self.up_proj(x))
            act = F.gelu if self.kind == "GeluMLP" else F.relu
            return self.fc2(act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, arch, d):
            super().__init__()
            self.attn_norm = Norm(arch, "norm", d)
            self.attn = Attention(arch, d)
            self.ffn_norm = Norm(arch, "norm", d)
            self.mlp = FeedForward(arch, d)
            self.clip = float(arch["residual_clip"])

        def forward(self, h, cos, sin):
            h = h + self.attn(self.attn_norm(h), cos, sin)
            if self.clip > 0:
                h = h.clamp(-self.clip, self.clip)
            h = h + self.mlp(self.ffn_norm(h))
            if self.clip > 0:
                h = h.clamp(-self.clip, self.clip)
            return h

    class SinklabDecoder(nn.Module):
        """nn::Transformer of the decoder family, from its sinklab description (`arch`)."""

        def __init__(self, arch):
            super().__init__()
            self.arch = dict(arch)
            V, d = _int(arch, "vocab"), _int(arch, "d_model")
            self.embed_tokens = nn.Embedding(V, d)
            if _true(arch, "embed_scale"):
                self.embed_scale = nn.Parameter(torch.ones(1))
            self.layers = nn.ModuleList(Block(arch, d) for _ in range(_int(arch, "layers")))
            self.final_norm = Norm(arch, "norm", d)
            self.tied = _true(arch, "tie_embeddings")
            if not self.tied:
                self.lm_head = nn.Linear(d, V, bias=False)
            self.z_loss = float(arch["z_loss"])

        def forward(self, ids):
            """ids [B, T] -> logits [B, T, vocab]."""
            h = self.embed_tokens(ids)
            if hasattr(self, "embed_scale"):
                h = h * self.embed_scale
            cos = sin = None
            if self.arch["pos"] == "RoPE":
                cos, sin = rope_tables(ids.shape[1], _int(self.arch, "head_dim"), float(self.arch["rope_theta"]),
                                       h.dtype)
            for layer in self.layers:
                h = layer(h, cos, sin)
            h = self.final_norm(h)
            return h @ self.embed_tokens.weight.T if self.tied else self.lm_head(h)

        def loss(self, logits, targets, ignore_index=-100):
            """Mean cross-entropy over the targets that are not ignore_index, plus sinklab's z-loss
            (z_loss * mean over every position of logsumexp^2)."""
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long(),
                                 ignore_index=ignore_index)
            if self.z_loss > 0:
                ce = ce + self.z_loss * torch.logsumexp(logits, dim=-1).pow(2).mean()
            return ce

    # -----------------------------------------------------------------------------------------
    # Layouts: sinklab stores y = x W with W [in, out], fused qkv [d, (H + 2 H_kv) d_h] and fused
    # gate_up [d, 2h] (gate columns first); PyTorch's nn.Linear holds [out, in].

    def to_torch_names(arch, tensors):
        """{sinklab name: tensor} (parameters or their gradients) -> {torch name: tensor}."""
        H, Hkv, dh = _int(arch, "heads"), _int(arch, "kv_heads"), _int(arch, "head_dim")
        out = {}
        for name, t in tensors.items():
            stem, _, last = name.rpartition(".")
            if name.endswith("attn.qkv.weight"):
                p = name[:-len("qkv.weight")]
                out[p + "q_proj.weight"] = t[:, :H * dh].T
                out[p + "k_proj.weight"] = t[:, H * dh:(H + Hkv) * dh].T
                out[p + "v_proj.weight"] = t[:, (H + Hkv) * dh:].T
            elif name.endswith("attn.o.weight"):
                out[name[:-len("o.weight")] + "o_proj.weight"] = t.T
            elif name.endswith("attn.gate.weight") or name.endswith("attn.gate.bias"):
                out[stem[:-len("gate")] + "gate_proj." + last] = t.T if last == "weight" else t
            elif ".ffn." in name:
                p = name[:name.index(".ffn.")] + ".mlp."
                if name.endswith("ffn.gate_up.weight"):
                    h = t.shape[1] // 2
                    out[p + "gate_proj.weight"], out[p + "up_proj.weight"] = t[:, :h].T, t[:, h:].T
                elif name.endswith("ffn.down.weight"):
                    out[p + "down_proj.weight"] = t.T
                else:  # fc1 / fc2
                    out[p + name.split(".ffn.")[1]] = t.T
            elif name.endswith(".gate.down.weight") or name.endswith(".gate.up.weight"):
                out[name[:name.rindex(".gate.")] + (".down_proj.weight" if ".down." in name else ".up_proj.weight")] = t.T
            elif name == "embed.weight":
                out["embed_tokens.weight"] = t
            elif name == "lm_head.weight":
                out[name] = t.T
            else:  # norms' vectors, sink logits, V-scale's theta, embed_scale: same name and layout
                out[name] = t
        return {k: v.contiguous() for k, v in out.items()}

    def to_sinklab_names(arch, tensors):
        """{torch name: tensor} -> {sinklab name: tensor}; the inverse of to_torch_names."""
        out, used = {}, set()
        for name, t in tensors.items():
            if name in used:
                continue
            stem, _, last = name.rpartition(".")
            if stem.endswith("attn.q_proj"):
                p = stem[:-len("q_proj")]
                parts = [tensors[p + s + ".weight"] for s in ("q_proj", "k_proj", "v_proj")]
                used.update(p + s + ".weight" for s in ("q_proj", "k_proj", "v_proj"))
                out[p + "qkv.weight"] = torch.cat([w.T for w in parts], dim=1)
            elif stem.endswith("attn.k_proj") or stem.endswith("attn.v_proj"):
                continue  # with q_proj
            elif stem.endswith("attn.o_proj"):
                out[stem[:-len("o_proj")] + "o.weight"] = t.T
            elif stem.endswith("attn.gate_proj"):
                out[stem[:-len("gate_proj")] + "gate." + last] = t.T if last == "weight" else t
            elif ".mlp." in name:
                p = name[:name.index(".mlp.")] + ".ffn."
                if stem.endswith("mlp.gate_proj"):
                    up = name.replace("gate_proj", "up_proj")
                    used.add(up)
                    out[p + "gate_up.weight"] = torch.cat([t.T, tensors[up].T], dim=1)
                elif stem.endswith("mlp.up_proj"):
                    continue  # with gate_proj
                elif stem.endswith("mlp.down_proj"):
                    out[p + "down.weight"] = t.T
                else:
                    out[p + name.split(".mlp.")[1]] = t.T
            elif stem.endswith("norm.down_proj") or stem.endswith("norm.up_proj"):
                out[stem.rpartition(".")[0] + (".gate.down.weight" if "down_proj" in stem else ".gate.up.weight")] = t.T
            elif name == "embed_tokens.weight":
                out["embed.weight"] = t
            elif name == "lm_head.weight":
                out[name] = t.T
            else:
                out[name] = t
        return {k: v.contiguous() for k, v in out.items()}

    def load_sinklab(path, dtype=torch.float32):
        """The SinklabDecoder a self-describing sinklab checkpoint holds, its weights loaded."""
        tensors, meta = read_safetensors(path)
        arch = architecture(meta, path)
        model = SinklabDecoder(arch).to(dtype)
        state = {k: v.to(dtype) for k, v in to_torch_names(arch, tensors).items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(f"{path}: the tensors do not match the described model; missing {missing}, "
                             f"unexpected {unexpected}")
        return model

    def save_sinklab(model, path, metadata=None, dtype=torch.float32):
        """Writes a SinklabDecoder as a sinklab checkpoint (its description included)."""
        state = {k: v.detach().to(dtype) for k, v in model.state_dict().items()}
        meta = {MODEL_PREFIX + k: v for k, v in model.arch.items()}
        meta.update(metadata or {})
        write_safetensors(path, to_sinklab_names(model.arch, state), meta)


# ---------------------------------------------------------------------------------------------
# Commands


def relative_error(ours, ref):
    """max |ours - ref| / max |ref| over one tensor (0 for two zero tensors)."""
    scale = ref.abs().max().item() if ref.numel() else 0.0
    diff = (ours - ref).abs().max().item() if ref.numel() else 0.0
    return diff / scale if scale > 0 else diff


def gradients(path, ids, targets, dtype):
    """logits, loss and {sinklab name: gradient} of the checkpoint's model in `dtype`."""
    model = load_sinklab(path, dtype)
    logits = model(ids)
    loss = model.loss(logits, targets)
    loss.backward()
    grads = to_sinklab_names(model.arch, {n: p.grad for n, p in model.named_parameters()})
    return model, logits.detach(), loss.detach().reshape(1), grads


def command_parity(args):
    expected, _ = read_safetensors(args.expected)
    ids, targets = expected["ids"].long(), expected["targets"].long()
    model, logits, loss, grads = gradients(args.checkpoint, ids, targets, torch.float32)
    want = {k[len("grad."):]: v for k, v in expected.items() if k.startswith("grad.")}
    if set(grads) != set(want):
        print(f"parity: gradients differ in names: only in torch {sorted(set(grads) - set(want))}, "
              f"only in sinklab {sorted(set(want) - set(grads))}", file=sys.stderr)
        return 1
    ours = {"logits": logits, "loss": loss, **{"grad " + n: g for n, g in grads.items()}}
    theirs = {"logits": expected["logits"], "loss": expected["loss"].reshape(1),
              **{"grad " + n: g for n, g in want.items()}}
    rows = [(n, relative_error(ours[n], theirs[n])) for n in ours]
    worst = max(e for _, e in rows)
    # The same model in float64: which side a disagreement comes from (both are fp32). A tensor
    # whose float32 value is ill-conditioned (a scalar gradient summing terms that cancel, say)
    # can differ between the two by more than --tol while each is as close to float64 as float32
    # allows: such a tensor passes when sinklab is no further from float64 than --fp32-factor
    # times torch's own distance (and within 100 × --tol).
    _, logits64, loss64, grads64 = gradients(args.checkpoint, ids, targets, torch.float64)
    exact = {"logits": logits64, "loss": loss64, **{"grad " + n: g for n, g in grads64.items()}}
    to_exact = {side: {n: relative_error(v[n].double(), exact[n]) for n in exact} for side, v in
                (("sinklab", theirs), ("torch", ours))}
    off = {side: max(errs.values()) for side, errs in to_exact.items()}

    def verdict(n, e):
        if e <= args.tol:
            return "ok  "
        s64, t64 = to_exact["sinklab"][n], to_exact["torch"][n]
        return "fp32" if s64 <= min(100 * args.tol, max(args.tol, args.fp32_factor * t64)) else "FAIL"

    label = os.path.basename(args.checkpoint)
    print(f"{label}: {len(rows)} tensors, worst relative error {worst:.2e} (tolerance {args.tol:.0e}); "
          f"against float64: sinklab {off['sinklab']:.2e}, torch {off['torch']:.2e}")
    failed = 0
    for n, e in rows:
        v = verdict(n, e)
        failed += v == "FAIL"
        if v != "ok  " or args.verbose:
            print(f"  {v} {n}: {e:.2e} (float64: sinklab {to_exact['sinklab'][n]:.2e}, torch {to_exact['torch'][n]:.2e})"
                  + (f"; passes: sinklab within {args.fp32_factor:g}x torch's own float32 error" if v == "fp32" else ""))
    if args.roundtrip:
        save_sinklab(model, args.roundtrip, {"written_by": "sinklab_torch.py"})
    return 1 if failed else 0


# Hugging Face Llama names for the sinklab decoder's vanilla form.
def llama_names(layers):
    m = {"embed_tokens.weight": "model.embed_tokens.weight", "final_norm.weight": "model.norm.weight",
         "lm_head.weight": "lm_head.weight"}
    for i in range(layers):
        p = f"layers.{i}."
        q = f"model.layers.{i}."
        m[p + "attn_norm.weight"] = q + "input_layernorm.weight"
        m[p + "ffn_norm.weight"] = q + "post_attention_layernorm.weight"
        for s in ("q_proj", "k_proj", "v_proj", "o_proj"):
            m[p + f"attn.{s}.weight"] = q + f"self_attn.{s}.weight"
        for s in ("gate_proj", "up_proj", "down_proj"):
            m[p + f"mlp.{s}.weight"] = q + f"mlp.{s}.weight"
    return m


def command_llama_fixture(args):
    torch.manual_seed(args.seed)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 37, "hidden_size": 48,
           "intermediate_size": 80, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
           "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False,
           "max_position_embeddings": 128, "torch_dtype": "float32"}
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    arch = {"model": "decoder", "vocab": str(cfg["vocab_size"]), "d_model": str(d),
            "layers": str(cfg["num_hidden_layers"]), "heads": str(H), "kv_heads": str(cfg["num_key_value_heads"]),
            "head_dim": str(d // H), "rope_theta": str(cfg["rope_theta"]), "tie_embeddings": "false", "z_loss": "0",
            "residual_clip": "0", "embed_scale": "false", "pos": "RoPE", "tokens": "None", "mix": "None",
            "norm": "RMS", "norm.eps": str(cfg["rms_norm_eps"]), "attn.score": "softmax", "attn.gate": "none",
            "attn.value": "identity", "attn.mask": "causal", "attn.qk_norm": "none", "ffn": "SwiGLU",
            "ffn.hidden": str(cfg["intermediate_size"])}
    model = SinklabDecoder(architecture({MODEL_PREFIX + k: v for k, v in arch.items()}, "llama fixture"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("norm.weight") else 0.2 * torch.randn_like(p))
    ids = torch.randint(0, cfg["vocab_size"], (2, 9))
    with torch.no_grad():
        logits = model(ids)
    os.makedirs(args.dir, exist_ok=True)
    names = llama_names(cfg["num_hidden_layers"])
    write_safetensors(os.path.join(args.dir, "model.safetensors"),
                      {names[n]: p for n, p in model.state_dict().items()}, {"format": "pt"})
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(args.dir, "expected.safetensors"), {"ids": ids.int(), "logits": logits})
    print(f"llama fixture in {args.dir}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"GQA {H}/{cfg['num_key_value_heads']}, rope_theta {cfg['rope_theta']}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("parity", help="compare logits, loss and gradients with what sinklab computed",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("checkpoint", help="a self-describing sinklab checkpoint (io::save_parameters)")
    p.add_argument("expected", help="ids, targets, logits, loss and grad.<parameter> written by sinklab")
    p.add_argument("--tol", type=float, default=1e-5, help="largest max|torch - sinklab| / max|sinklab| per tensor")
    p.add_argument("--fp32-factor", type=float, default=4.0,
                   help="a tensor over --tol still passes when sinklab's distance to float64 is at most this times "
                        "torch's (default 4)")
    p.add_argument("--roundtrip", help="also write the PyTorch module back as a sinklab checkpoint here")
    p.add_argument("--verbose", action="store_true", help="list every tensor, not only the failing ones")
    p.set_defaults(run=command_parity)
    p = sub.add_parser("llama-fixture", help="write a small Llama checkpoint with Hugging Face names",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("dir", help="folder for config.json, model.safetensors and expected.safetensors")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the weights and ids")
    p.set_defaults(run=command_llama_fixture)
    args = ap.parse_args(argv)
    if torch is None:
        print("sinklab_torch.py: PyTorch is not installed (Debian: apt-get install python3-torch)", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
