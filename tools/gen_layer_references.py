#!/usr/bin/env python3
"""HF's own functions for SDK layers that no tiny checkpoint reaches: SamVisionAttention's
get_rel_pos for tables whose length differs from the grid's (resized linearly) and for queries
and keys of different lengths (scaled offsets), the branches layers::relative_rows takes when a
family's grids differ from its tables.

Per case "rel_pos.<name>.table" [length, dim] (seeded normal), ".sizes" [q_size, k_size] and
".rows" [q_size, k_size, dim] = get_rel_pos(q_size, k_size, table).

usage: gen_layer_references.py OUT.safetensors"""
import pathlib
import sys

import torch
from safetensors.torch import save_file
from transformers.models.sam.modeling_sam import SamVisionAttention

# name: (q_size, k_size, table rows); HF's tables hold 2 max(q, k) - 1 rows when they fit.
REL_POS_CASES = {
    "fits": (4, 4, 7),
    "shorter_table": (6, 6, 7),
    "longer_table": (3, 3, 9),
    "fewer_queries": (3, 5, 9),
    "fewer_keys": (5, 3, 9),
    "uneven_resized": (7, 4, 5),
    "thirds": (6, 9, 11),
}


def main():
    out = pathlib.Path(sys.argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for name, (q_size, k_size, length) in REL_POS_CASES.items():
        table = torch.randn(length, 3, generator=generator)
        rows = SamVisionAttention.get_rel_pos(None, q_size, k_size, table)
        tensors[f"rel_pos.{name}.table"] = table
        tensors[f"rel_pos.{name}.sizes"] = torch.tensor([q_size, k_size])
        tensors[f"rel_pos.{name}.rows"] = rows.contiguous()
    save_file(tensors, str(out))


if __name__ == "__main__":
    main()
