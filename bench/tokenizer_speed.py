#!/usr/bin/env python3
"""Tokenizer speed: the SDK's Tokenizer (build/bench/tokenizer_speed) against HF tokenizers (Rust,
the same tokenizer.json) encoding the same lines on one thread (HF's encode_batch with RAYON_NUM_THREADS=1, so that
Python's loop is not timed), best of 5 rounds;
both must give the same token count. The first round (word caches cold) and the best of 5. Prints the machine line (bench/machine.py) and tokens/s.

    .venv/bin/python bench/tokenizer_speed.py [--model build/models/SmolLM2-135M-Instruct]
        [--text FILE] [--build build]

The default text is the WordPiece test sentences and 20,000 generated strings of
tools/gen_bpe_tokenizer_reference.py (scripts, emoji, code, whitespace runs), about 2 MB."""
import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))


def default_text(path):
    from gen_bpe_tokenizer_reference import SENTENCES, random_string
    from gen_tokenizer_reference import read_sentences
    sentences = read_sentences(SENTENCES)
    rng = random.Random(0)
    lines = sentences + [random_string(rng, sentences, []).replace("\r", " ").replace("\n", " ")
                         for _ in range(20000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=pathlib.Path,
                        default=ROOT / "build" / "models" / "SmolLM2-135M-Instruct")
    parser.add_argument("--text", type=pathlib.Path)
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer
    import machine

    print(machine.describe(args.build, 1))
    with tempfile.TemporaryDirectory() as tmp:
        text = args.text or pathlib.Path(tmp) / "text.txt"
        if not args.text:
            default_text(text)
        with open(text, encoding="utf-8", newline="") as f:  # no newline translation
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        hf = Tokenizer.from_file(str(args.model / "tokenizer.json"))
        best, first, tokens = 1e30, 0.0, 0
        for round in range(5):
            start = time.perf_counter()
            count = sum(len(e.ids) for e in hf.encode_batch(lines))  # in Rust, 1 thread
            seconds = time.perf_counter() - start
            first = seconds if round == 0 else first
            best = min(best, seconds)
            tokens = count
        ours = json.loads(subprocess.run(
            [str(args.build / "bench" / "tokenizer_speed"), str(args.model), str(text)],
            capture_output=True, text=True, check=True).stdout)
    if ours["tokens"] != tokens:
        sys.exit(f"token counts differ: ours {ours['tokens']}, HF {tokens}")
    mb = ours["bytes"] / 1e6
    print(f"text: {len(lines)} lines, {mb:.2f} MB, {tokens} tokens ({args.model.name})")
    for label, hf_rate, our_rate in (
            ("first round (cold word caches)", tokens / first, ours["first_round_tokens_per_s"]),
            ("best of 5 rounds", tokens / best, ours["tokens_per_s"])):
        print(f"{label}: HF tokenizers {hf_rate:,.0f} tokens/s, shardformer {our_rate:,.0f} "
              f"tokens/s = {our_rate / hf_rate:.2f}x HF")


if __name__ == "__main__":
    main()
