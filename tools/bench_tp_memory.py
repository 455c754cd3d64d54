#!/usr/bin/env python3
"""Peak resident memory per rank when a GPT-2 of about 350M parameters (GPT-2 medium shape,
random weights made locally with HF transformers) is loaded and run at tp = 1, 2 and 4.

Checks the bound: at tp=4 a rank's peak <= 1.2 x (checkpoint bytes / 4) + the process
baseline (RSS of a tp=1 host before it loads anything). Prints a markdown table.
usage: tools/bench_tp_memory.py [--build build] [--sizes 1 2 4]"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def make_checkpoint(path: pathlib.Path) -> None:
    if (path / "model.safetensors").exists():
        return
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_embd=1024, n_layer=24, n_head=16, n_positions=1024, vocab_size=50257)
    GPT2LMHeadModel(config).save_pretrained(path, safe_serialization=True)


def run(host: pathlib.Path, checkpoint: pathlib.Path, tp: int, work: pathlib.Path):
    config = work / f"tp{tp}.toml"
    config.write_text(f'[model]\npath = "{checkpoint}"\n[parallel]\ntp_size = {tp}\n'
                      f'[job]\nmode = "forward"\n[forward]\ninput_ids = [[464, 2068, 7586, 21831]]\n'
                      f'output = "{work}/tp{tp}.safetensors"\n')
    log = subprocess.run([str(host), "run", str(config)], capture_output=True, text=True)
    if log.returncode != 0:
        sys.exit(f"tp={tp} failed:\n{log.stderr}")
    baseline, peak = {}, {}
    for line in log.stderr.splitlines():
        if m := re.search(r"\[rank (\d+)\] \[info\] RSS before loading: ([\d.]+) MiB", line):
            baseline[int(m[1])] = float(m[2])
        if m := re.search(r"\[rank (\d+)\] \[info\] peak RSS: ([\d.]+) MiB", line):
            peak[int(m[1])] = float(m[2])
    return baseline, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    checkpoint = build / "bench" / "gpt2-350m-random"
    make_checkpoint(checkpoint)
    ckpt_mib = (checkpoint / "model.safetensors").stat().st_size / 2**20
    with tempfile.TemporaryDirectory() as work:
        results = {tp: run(build / "shardformer-host", checkpoint, tp, pathlib.Path(work))
                   for tp in args.sizes}
    base = results[args.sizes[0]][0][0]
    print(f"checkpoint: {ckpt_mib:.0f} MiB; process baseline (tp=1, before loading): {base:.0f} MiB\n")
    print("| tp | rank | peak RSS (MiB) | bound 1.2 x ckpt/tp + baseline (MiB) | within |")
    print("|---|---|---|---|---|")
    ok = True
    for tp, (_, peak) in results.items():
        bound = 1.2 * ckpt_mib / tp + base
        for rank in sorted(peak):
            within = peak[rank] <= bound
            ok &= within or tp != 4
            print(f"| {tp} | {rank} | {peak[rank]:.0f} | {bound:.0f} | {'yes' if within else 'NO'} |")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
