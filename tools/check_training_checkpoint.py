#!/usr/bin/env python3
"""Checks a checkpoint the C++ trainer saved against tools/train_reference.py's run, with HF
transformers as the reader: from_pretrained loads it with no missing or unexpected weight, its
weights and the AdamW moments in training_state/ equal torch's after the same steps, and
trainer_state.json records them. The key projection's bias is left out of the weights
compared: its gradient is rounding noise that Adam amplifies (tests/training/test_training.cpp).

usage: check_training_checkpoint.py SAVED_DIR REFERENCE.safetensors --steps N [--logits FILE]
FILE: a safetensors file with input_ids and the logits our model gave for them from SAVED_DIR,
compared with HF's from the same folder (atol 1e-5).
Exit 0 when everything matches, 1 with the differences otherwise.
"""
import argparse
import json
import pathlib
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel

WEIGHT_ATOL = 2e-5
MOMENT_ATOL, MOMENT_RTOL = 1e-6, 1e-3


def read_sharded(folder: pathlib.Path, stem: str) -> dict:
    index = folder / f"{stem}.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = [f"{stem}.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(load_file(str(folder / name)))
    return tensors


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("saved", type=pathlib.Path)
    parser.add_argument("reference", type=pathlib.Path)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--logits", type=pathlib.Path)
    args = parser.parse_args()
    ref = load_file(str(args.reference))
    problems = []

    model, info = GPT2LMHeadModel.from_pretrained(
        str(args.saved), dtype=torch.float32, output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(kind):
            problems.append(f"from_pretrained {kind}: {info[kind]}")
    for name, p in model.named_parameters():
        ours, theirs = p.detach(), ref["weights." + name]
        if name.endswith("attn.c_attn.bias"):  # the key bias: see without_key_bias
            h = ours.numel() // 3
            ours, theirs = (torch.cat([t[:h], t[2 * h:]]) for t in (ours, theirs))
        diff = (ours - theirs).abs().max().item()
        if diff > WEIGHT_ATOL:
            problems.append(f"weight {name}: max |saved - torch| = {diff:.3g}")

    if args.logits is not None:
        ours = load_file(str(args.logits))
        with torch.no_grad():
            theirs = model.eval()(input_ids=ours["input_ids"]).logits
        diff = (ours["logits"] - theirs).abs().max().item()
        print(f"logits: max |ours - HF from the saved checkpoint| = {diff:.3g}")
        if diff > 1e-5:
            problems.append(f"logits differ by {diff:.3g}")

    moments = read_sharded(args.saved / "training_state", "optimizer")
    for name, _ in model.named_parameters():
        for kind in ("exp_avg", "exp_avg_sq"):
            ours, theirs = moments[f"{kind}.{name}"], ref[f"adam.{kind}.{name}"]
            atol = MOMENT_ATOL if kind == "exp_avg" else MOMENT_ATOL ** 2
            excess = ((ours - theirs).abs() - MOMENT_RTOL * theirs.abs()).max().item()
            if excess > atol:
                problems.append(f"{kind} {name}: max |saved - torch| - rtol |torch| = {excess:.3g}")

    state = json.loads((args.saved / "training_state" / "trainer_state.json").read_text())
    if state.get("step") != args.steps or state.get("optimizer_steps") != args.steps:
        problems.append(f"trainer_state.json: {state}, expected step {args.steps}")

    for line in problems:
        print(line)
    print(f"{args.saved}: {'OK' if not problems else f'{len(problems)} differences'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
