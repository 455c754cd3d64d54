#!/usr/bin/env python3
"""Makes a tiny random GPT-2 checkpoint with HF transformers (fixed seed), as a single
model.safetensors and, with --max-shard-size, as shards with model.safetensors.index.json."""
import argparse
import pathlib

import torch
from transformers import GPT2Config, GPT2LMHeadModel

# Odd sizes on purpose: the vocabulary (1013) divides by no tensor-parallel size, and 8 layers
# split evenly over 2, 4 and 8 pipeline pieces but unevenly over 3 or 6. A wide init (0.2)
# makes greedy decoding vary from step to step, so a wrong cache or position shows up in the
# generated tokens.
TINY = dict(vocab_size=1013, n_positions=64, n_embd=64, n_layer=8, n_head=4,
            bos_token_id=1012, eos_token_id=1012, initializer_range=0.2)


def spread_biases_and_norms(model: torch.nn.Module) -> torch.nn.Module:
    """HF initialises every bias to 0 and every LayerNorm to weight 1, bias 0, so a bias that a
    parallel layer drops or adds twice would still match HF: draws them at random instead (from
    torch's generator, seeded by the caller)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.normal_(0.0, 0.1)
            elif ".ln_" in name or name.startswith("ln_"):
                parameter.normal_(1.0, 0.1)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output", type=pathlib.Path, help="checkpoint folder to write")
    parser.add_argument("--max-shard-size", default=None, help='e.g. "60KB" for a sharded copy')
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = spread_biases_and_norms(GPT2LMHeadModel(GPT2Config(**TINY))).eval()
    kwargs = {"max_shard_size": args.max_shard_size} if args.max_shard_size else {}
    model.save_pretrained(args.output, safe_serialization=True, **kwargs)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
