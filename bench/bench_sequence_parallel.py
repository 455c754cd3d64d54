#!/usr/bin/env python3
"""Sequence parallelism on the CPU: peak activation memory per rank and step time of one
training step (forward + backward) of a GPT-2-medium-shaped base model (hidden 1024, 16 heads,
24 layers, random weights), at each layout, measured in one run.

    .venv/bin/python bench/bench_sequence_parallel.py [--build build] [--seq 2048]
        [--layers 24] [--layouts tp2,tp4,sg2,sg4,overlap2,a2a2,a2a4,ring2,ring4]
        [--longest tp4,ring4 --budget-gib 24]

Layouts: tpN (tensor parallelism only, N ranks), sgN (split_gather over N tp ranks), overlapN
(split_gather with enable_sequence_overlap), a2aN (all_to_all over N sp ranks, weights
replicated), ringN (ring_attn over N sp ranks). Each rank is build/bench/sequence_memory (one
process, one intra-op thread: the ranks share this machine's cores). A rank's activation
memory is its peak RSS during the step above its RSS just before (gradients already allocated
by a short warm-up step; glibc returns freed blocks at once, so the peak is what was live).
The embeddings are frozen (their dense gradient, 196 MiB / tp, is not an activation) and
dropout is off (ring attention refuses attention dropout).
--longest doubles the sequence from --seq for the listed layouts until a step fails or the
ranks' peak RSS together pass --budget-gib (this machine's memory), and reports the longest
that fitted. Prints markdown tables and the command."""
import argparse
import json
import os
import pathlib
import shlex
import socket
import subprocess
import sys
import tempfile
import time

import machine

ROOT = pathlib.Path(__file__).resolve().parent.parent
HIDDEN, HEADS, VOCAB = 1024, 16, 50257


def make_checkpoint(path: pathlib.Path, layers: int, positions: int) -> None:
    """GPT-2-medium-shaped random weights (N(0, 0.02), norms 1), written without HF's init."""
    if (path / "model.safetensors").exists():
        return
    import torch
    import transformers
    from safetensors.torch import save_file
    config = transformers.GPT2Config(n_embd=HIDDEN, n_layer=layers, n_head=HEADS,
                                     n_positions=positions, vocab_size=VOCAB, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)
    with torch.device("meta"):
        shapes = {n: p.shape for n, p in transformers.GPT2Model(config).named_parameters()}
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for name, shape in shapes.items():
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            tensors[name] = torch.ones(shape)
        else:
            tensors[name] = torch.randn(shape, generator=generator) * 0.02
    path.mkdir(parents=True, exist_ok=True)
    config.architectures = ["GPT2Model"]
    config.save_pretrained(path)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})


def parse_layout(text):
    for prefix, mode, axis in (("overlap", "overlap", "tp"), ("ring", "ring_attn", "sp"),
                               ("a2a", "all_to_all", "sp"), ("sg", "split_gather", "tp"),
                               ("tp", "none", "tp")):
        if text.startswith(prefix):
            n = int(text[len(prefix):])
            return {"name": text, "mode": mode, "tp": n if axis == "tp" else 1,
                    "sp": n if axis == "sp" else 1, "size": n}
    raise SystemExit(f"unknown layout {text}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EXTRA = []  # further sequence_memory options (--gloo-only)


def run(build, model, layout, seq, batch):
    """The ranks' reports, or None when a rank failed (out of memory, ...)."""
    world = layout["tp"] * layout["sp"]
    port = free_port()
    procs = [subprocess.Popen(
        [str(build / "bench" / "sequence_memory"), "--model", str(model), "--plugins",
         str(build / "plugins"), "--mode", layout["mode"], "--tp", str(layout["tp"]), "--sp",
         str(layout["sp"]), "--rank", str(r), "--port", str(port), "--seq", str(seq),
         "--batch", str(batch)] + EXTRA, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(world)]
    reports, failed = [], False
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            failed = True
            sys.stderr.write(f"{layout['name']} seq {seq}: rank exited {p.returncode}: "
                             f"{err.strip()[-300:]}\n")
            continue
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return None if failed else reports


def summary(reports):
    return {"activation_mib": max(r["activation_mib"] for r in reports),
            "peak_total_gib": sum(r["peak_mib"] for r in reports) / 1024,
            "step_s": max(r["step_s"] for r in reports)}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--layouts", default="tp2,tp4,sg2,sg4,overlap2,a2a2,a2a4,ring2,ring4")
    parser.add_argument("--longest", default="")
    parser.add_argument("--budget-gib", type=float, default=24.0)
    parser.add_argument("--max-seq", type=int, default=65536)
    parser.add_argument("--gloo-only", action="store_true",
                        help="collectives over Gloo alone (no shared-memory transport)")
    args = parser.parse_args()
    if args.gloo_only:
        EXTRA.extend(["--shared-memory-min-bytes", "-1"])
    build = pathlib.Path(args.build)
    work = pathlib.Path(tempfile.gettempdir()) / f"sf-bench-sp-{args.layers}-{args.max_seq}"
    make_checkpoint(work, args.layers, args.max_seq)
    print(f"command: {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(machine.describe(build, os.cpu_count()))
    print(f"machine: {os.cpu_count()} cores; model: GPT-2-medium shape, {args.layers} layers, "
          f"batch {args.batch}\n")

    results = {}
    for text in [t for t in args.layouts.split(",") if t]:
        layout = parse_layout(text)
        start = time.time()
        reports = run(build, work, layout, args.seq, args.batch)
        results[text] = (layout, summary(reports) if reports else None)
        print(f"  {text}: {results[text][1]} ({time.time() - start:.0f} s)", file=sys.stderr)

    print(f"### Seq {args.seq}: activation memory per rank of one forward + backward\n")
    print("| layout | mode | ranks | activation MiB / rank | vs tp-only, same ranks | "
          "peak RSS, all ranks (GiB) | step s |")
    print("|---|---|---|---|---|---|---|")
    for text, (layout, s) in results.items():
        if s is None:
            print(f"| {text} | {layout['mode']} | {layout['size']} | failed | | | |")
            continue
        base = results.get(f"tp{layout['size']}", (None, None))[1]
        ratio = f"{s['activation_mib'] / base['activation_mib']:.2f}" if base else ""
        print(f"| {text} | {layout['mode']} | {layout['size']} | {s['activation_mib']:.0f} | "
              f"{ratio} | {s['peak_total_gib']:.1f} | {s['step_s']:.2f} |")
    for n in (2, 4, 8):
        plain, overlap = results.get(f"sg{n}"), results.get(f"overlap{n}")
        if plain and overlap and plain[1] and overlap[1]:
            print(f"\nsplit_gather over {n} ranks, step time with overlap / without: "
                  f"{overlap[1]['step_s'] / plain[1]['step_s']:.2f}")

    if args.longest:
        print(f"\n### Longest sequence that trains within {args.budget_gib} GiB "
              f"(all ranks' peak RSS)\n")
        print("| layout | longest seq | activation MiB / rank there | peak RSS, all ranks (GiB) |")
        print("|---|---|---|---|")
        for text in args.longest.split(","):
            layout, seq, best = parse_layout(text), args.seq, None
            while seq <= args.max_seq:
                reports = run(build, work, layout, seq, args.batch)
                s = summary(reports) if reports else None
                print(f"  {text} seq {seq}: {s}", file=sys.stderr)
                if s is None or s["peak_total_gib"] > args.budget_gib:
                    break
                best = (seq, s)
                seq *= 2
            if best:
                print(f"| {text} | {best[0]} | {best[1]['activation_mib']:.0f} | "
                      f"{best[1]['peak_total_gib']:.1f} |")
            else:
                print(f"| {text} | < {args.seq} | | |")


if __name__ == "__main__":
    main()
