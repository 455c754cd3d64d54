#!/usr/bin/env python3
# Writes the safetensors fixtures the SDK tests read (tests/sdk), with the Python safetensors
# library, so the C++ reader is checked against files the reference implementation wrote.
# Usage: make_safetensors_fixtures.py OUT_DIR   (deterministic; OUT_DIR is created)
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

SHAPE = (3, 5)


def dtype_tensors():
    """One [3, 5] tensor per safetensors dtype, plus its float64 copy named '<name>.expected'."""
    steps = torch.arange(15, dtype=torch.float64).reshape(SHAPE)
    signed = steps - 7
    values = {
        "F64": (signed / 3, torch.float64),
        "F32": (signed / 3, torch.float32),
        "F16": (signed * 0.25, torch.float16),
        "BF16": (signed * 1.5, torch.bfloat16),
        "I64": (signed * 2**40, torch.int64),
        "I32": (signed * 100_000, torch.int32),
        "I16": (signed * 4_000, torch.int16),
        "I8": (signed * 18, torch.int8),
        "U8": (steps * 17, torch.uint8),
        "BOOL": (steps % 3 == 0, torch.bool),
    }
    # The rest of the format's dtypes that the Python library writes with this torch.
    values.update({
        "U16": (steps * 4_000, torch.uint16),
        "U32": (steps * 250_000_000, torch.uint32),
        "U64": (steps * 2**59, torch.uint64),
        "F8_E4M3": (signed * 0.5, torch.float8_e4m3fn),
        "F8_E5M2": (signed * 0.5, torch.float8_e5m2),
        "F8_E4M3FNUZ": (signed * 0.5, torch.float8_e4m3fnuz),
        "F8_E5M2FNUZ": (signed * 0.5, torch.float8_e5m2fnuz),
    })
    tensors = {}
    for name, (source, dtype) in values.items():
        tensor = source.to(dtype)
        tensors[name] = tensor
        tensors[f"{name}.expected"] = tensor.to(torch.float64).clone()
    # Complex: the real and imaginary parts as two float64 tensors.
    tensors["C64"] = torch.complex(signed / 3, -signed * 0.75).to(torch.complex64)
    tensors["C64.expected_real"] = tensors["C64"].real.to(torch.float64).clone()
    tensors["C64.expected_imag"] = tensors["C64"].imag.to(torch.float64).clone()
    return tensors


def write_sharded(folder: Path):
    """A small GPT-2-like checkpoint split into two shards with an index."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 4,
              "n_layer": 2, "n_head": 2, "vocab_size": 8, "layer_norm_epsilon": 1e-5}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")

    def tensor(*shape, offset=0.0):
        count = 1
        for dim in shape:
            count *= dim
        return (torch.arange(count, dtype=torch.float32) + offset).reshape(shape)

    shards = {
        "model-00001-of-00002.safetensors": {
            "transformer.wte.weight": tensor(8, 4),
            "transformer.h.0.attn.c_attn.weight": tensor(4, 12, offset=100),
            "transformer.h.0.attn.c_attn.bias": tensor(12, offset=200),
        },
        "model-00002-of-00002.safetensors": {
            "transformer.h.1.mlp.c_fc.weight": tensor(4, 16, offset=300),
            "transformer.ln_f.weight": tensor(4, offset=400),
        },
    }
    weight_map = {}
    total_size = 0
    for file_name, tensors in shards.items():
        save_file(tensors, str(folder / file_name), metadata={"format": "pt"})
        for name, value in tensors.items():
            weight_map[name] = file_name
            total_size += value.numel() * value.element_size()
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    save_file(dtype_tensors(), str(out / "dtypes.safetensors"), metadata={"source": "python"})
    # [4, 6, 5] float32 with value = its flat index, for read_slice along every dim.
    slices = {"slice3d": torch.arange(120, dtype=torch.float32).reshape(4, 6, 5)}
    save_file(slices, str(out / "slice3d.safetensors"))
    write_sharded(out / "sharded")


if __name__ == "__main__":
    main()
