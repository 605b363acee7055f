#!/usr/bin/env python3
"""Reads a safetensors file with nothing but the standard library (numpy if present), as an
independent check that sinklab's files follow the format:  scripts/check_safetensors.py FILE"""
import json
import struct
import sys

FORMATS = {"F64": "d", "F32": "f", "I64": "q", "I32": "i", "I16": "h", "I8": "b", "U8": "B", "BOOL": "?"}

def main(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    print("metadata:", meta)
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    pos = 0
    for b, e, k in spans:
        assert b == pos, f"{k}: gap or overlap at {b} (expected {pos})"
        pos = e
    assert pos == len(data), f"tensors cover {pos} bytes, buffer has {len(data)}"
    try:
        import numpy as np
    except ImportError:
        np = None
    for b, e, name in spans:
        info = header[name]
        shape, dtype = info["shape"], info["dtype"]
        count = 1
        for d in shape:
            count *= d
        fmt = FORMATS[dtype]
        assert e - b == count * struct.calcsize(fmt), f"{name}: byte count mismatch"
        if np is not None:
            values = np.frombuffer(data[b:e], dtype="<" + {"d": "f8", "f": "f4", "q": "i8", "i": "i4", "h": "i2",
                                                           "b": "i1", "B": "u1", "?": "?"}[fmt]).reshape(shape)
            flat = values.ravel().tolist()
        else:
            flat = list(struct.unpack("<" + fmt * count, data[b:e]))
        print(f"{name}: {dtype} {shape} {flat[:8]}{' ...' if count > 8 else ''}")
    print("OK:", len(spans), "tensors")

if __name__ == "__main__":
    main(sys.argv[1])
