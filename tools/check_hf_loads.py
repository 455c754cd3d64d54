#!/usr/bin/env python3
"""Checks that HF transformers reads checkpoints the C++ trainer saved, whatever their family:
for each triple, `ARCHITECTURE.from_pretrained(SAVED_DIR)` loads it with no missing, unexpected
or mismatched weight, and HF's logits for LOGITS_FILE's input_ids (and decoder_input_ids, for an
encoder-decoder model) equal the logits our model gave from the same folder (atol 1e-5 + rtol
1e-5). Several triples share one process: its imports take most of a check's time.

usage: check_hf_loads.py SAVED_DIR ARCHITECTURE LOGITS_FILE [SAVED_DIR ARCHITECTURE LOGITS_FILE ...]
Exit 0 when every one does, 1 with what differs otherwise."""
import sys

import torch
import transformers
from safetensors.torch import load_file


def check(saved: str, architecture: str, logits_file: str) -> bool:
    model, info = getattr(transformers, architecture).from_pretrained(
        saved, dtype=torch.float32, output_loading_info=True)
    problems = [f"{kind}: {info[kind]}" for kind in ("missing_keys", "unexpected_keys",
                                                     "mismatched_keys") if info[kind]]
    ours = load_file(logits_file)
    with torch.no_grad():
        inputs = {k: ours[k] for k in ("input_ids", "decoder_input_ids") if k in ours}
        theirs = model.eval()(**inputs).logits
    if theirs.shape != ours["logits"].shape:
        problems.append(f"logits shape {tuple(theirs.shape)} against ours "
                        f"{tuple(ours['logits'].shape)}")
    else:
        excess = ((theirs - ours["logits"]).abs() - 1e-5 * theirs.abs()).max().item()
        if excess > 1e-5:
            problems.append(f"logits differ: max |HF - ours| - 1e-5 |HF| = {excess:.3g}")
    for p in problems:
        print(f"check_hf_loads: {saved} ({architecture}): {p}")
    if not problems:
        print(f"check_hf_loads: {saved}: {architecture} loads it; logits equal ours")
    return not problems


def main() -> int:
    args = sys.argv[1:]
    if not args or len(args) % 3 != 0:
        print(__doc__, file=sys.stderr)
        return 2
    results = [check(*args[i:i + 3]) for i in range(0, len(args), 3)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
