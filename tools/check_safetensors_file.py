#!/usr/bin/env python3
"""Reads a safetensors file written by shardformer with the Python safetensors library (the
reference implementation of the format): every tensor must load, and each NAME with a
NAME.expected float64 copy must equal it. Prints the metadata and the tensor names as JSON.
Exit status 1 on any difference. usage: check_safetensors_file.py FILE"""
import json
import sys

import torch
from safetensors import safe_open


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    bad = []
    with safe_open(path, framework="pt") as f:
        names = sorted(f.keys())
        tensors = {name: f.get_tensor(name) for name in names}
        metadata = f.metadata() or {}
    for name, tensor in tensors.items():
        expected = tensors.get(name + ".expected")
        if expected is None:
            continue
        if tensor.shape != expected.shape or not torch.equal(tensor.to(torch.float64), expected):
            bad.append(name)
    print(json.dumps({"metadata": metadata, "tensors": names, "mismatched": bad}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
