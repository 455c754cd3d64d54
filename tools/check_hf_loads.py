#!/usr/bin/env python3
"""Checks that HF transformers reads a checkpoint the C++ trainer saved, whatever its family:
`ARCHITECTURE.from_pretrained(SAVED_DIR)` loads it with no missing, unexpected or mismatched
weight, and HF's logits for LOGITS_FILE's input_ids (and decoder_input_ids, for an
encoder-decoder model) equal the logits our model gave from the same folder (atol 1e-5 + rtol
1e-5).

usage: check_hf_loads.py SAVED_DIR ARCHITECTURE LOGITS_FILE
Exit 0 when it does, 1 with what differs otherwise."""
import sys

import torch
import transformers
from safetensors.torch import load_file


def main() -> int:
    saved, architecture, logits_file = sys.argv[1:4]
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
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
