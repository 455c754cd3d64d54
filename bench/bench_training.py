#!/usr/bin/env python3
"""Training benchmarks on the CPU, measured side by side in one run: a GPT-2-small-shaped model
(124M parameters, random weights made locally with HF transformers).

    .venv/bin/python bench/bench_training.py [--build build] [--repeats 2] [--steps 4]
        [--only throughput,recompute,zero]

  * throughput: one rank, fp32, global batch 4 x 256 tokens, AdamW with clipping. The host's
    `train` job (its metrics file's per-step seconds) against HF transformers' GPT2LMHeadModel
    with torch.optim.AdamW (forward, loss, backward, clip_grad_norm_, step, zero_grad) on the
    same threads, in a subprocess. Each side runs --steps steps; the first is a warm-up and the
    median of the rest is its step time; repeats alternate host and HF. The machine's own
    limit is measured in the same run: the faster of fp32 torch.matmul on the model's shapes
    (the best call) and the host's GEMM on 2048^2 (bench/kernel_speed --limits); the
    roofline is that rate over the step's matrix-product FLOPs (3 x forward: the linear layers,
    the tied LM head and attention's two batched products). The fp32 FMA peak is printed too.
  * recompute: the peak resident memory of one rank training 2 steps at batch 4 x 512 tokens
    with train.gradient_checkpointing_ratio 0, 0.5 and 1, and the step time against ratio 0.
  * zero: the peak resident memory per rank at dp = 2 (batch 2 x 128) with ZeRO-1 and without.

Peak memory is the host's own `peak RSS` log line (getrusage), per rank; HF's is its
subprocess's. Prints markdown tables, the machine and the exact command."""
import argparse
import json
import os
import pathlib
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import machine

ROOT = pathlib.Path(__file__).resolve().parent.parent
from gpt2_small import HIDDEN, VOCAB, forward_flops, make_checkpoint


def make_tokens(path: pathlib.Path) -> None:
    if path.exists():
        return
    import numpy as np
    np.random.default_rng(0).integers(0, VOCAB, 1 << 20, dtype=np.uint16).tofile(path)


def train_config(work, name, checkpoint, tokens, seq, batch, steps, extra="", parallel=""):
    config = work / f"{name}.toml"
    metrics = work / f"{name}.metrics.jsonl"
    metrics.unlink(missing_ok=True)
    config.write_text(f"""[model]
path = "{checkpoint}"
[parallel]
{parallel}
[job]
mode = "train"
[data]
path = "{tokens}"
seq_len = {seq}
[train]
steps = {steps}
global_batch_size = {batch}
max_grad_norm = 1.0
metrics_file = "{metrics}"
{extra}
[optimizer]
lr = 1e-4
weight_decay = 0.1
""")
    return config, metrics


def run_host(host, config):
    log = subprocess.run([str(host), "run", str(config)], capture_output=True, text=True)
    if log.returncode != 0:
        sys.exit(f"{config} failed ({log.returncode}):\n{log.stderr[-3000:]}")
    peaks = {int(m[1]): float(m[2]) for m in
             re.finditer(r"\[rank (\d+)\] \[info\] peak RSS: ([\d.]+) MiB", log.stderr)}
    return peaks


def step_seconds(metrics):
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    seconds = [r["seconds"] for r in records if "seconds" in r]
    return statistics.median(seconds[1:])


def hf_worker(args):
    """Runs in a subprocess: HF's training loop; prints JSON with step seconds and peak RSS."""
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(args.threads)
    model = GPT2LMHeadModel.from_pretrained(args.checkpoint, attn_implementation="eager")
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=1e-4,
                                  foreach=False)
    generator = torch.Generator().manual_seed(0)
    seconds = []
    for _ in range(args.steps):
        ids = torch.randint(0, VOCAB, (args.batch, args.seq), generator=generator)
        start = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"step": statistics.median(seconds[1:]), "peak_mib": peak}))


def run_hf(checkpoint, threads, steps, batch, seq):
    out = subprocess.run([sys.executable, __file__, "--hf-worker", "--checkpoint", str(checkpoint),
                          "--threads", str(threads), "--steps", str(steps), "--batch",
                          str(batch), "--seq", str(seq)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"HF loop failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def gemm_best(tokens, reps=3):
    """The best fp32 matmul GFLOP/s over GPT-2's shapes at `tokens` rows."""
    import torch
    best = 0.0
    for m, k, n in [(tokens, HIDDEN, 3 * HIDDEN), (tokens, HIDDEN, 4 * HIDDEN),
                    (tokens, 4 * HIDDEN, HIDDEN), (tokens, HIDDEN, VOCAB)]:
        a, b = torch.randn(m, k), torch.randn(k, n)
        torch.matmul(a, b)
        for _ in range(reps):
            start = time.perf_counter()
            torch.matmul(a, b)
            best = max(best, 2 * m * k * n / (time.perf_counter() - start) / 1e9)
    return best


def host_limits(build, threads):
    """The host's GEMM GFLOP/s on 2048^2 and the FMA peak (bench/kernel_speed)."""
    out = subprocess.run([str(build / "bench" / "kernel_speed"), str(threads), "--limits"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def step_flops(batch, seq):
    """Matrix-product FLOPs of one training step: 3 x forward."""
    return 3 * forward_flops(batch, seq)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--only", default="throughput,recompute,zero")
    parser.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", type=pathlib.Path, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, default=256, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hf_worker:
        return hf_worker(args)
    import torch
    torch.set_num_threads(args.threads)
    host = args.build / "shardformer-host"
    cache = args.build / "bench-models"
    checkpoint, tokens = cache / "gpt2-small-random", cache / "tokens-u16.bin"
    cache.mkdir(parents=True, exist_ok=True)
    make_checkpoint(checkpoint)
    make_tokens(tokens)
    parts = args.only.split(",")
    print(f"command: {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(machine.describe(args.build, args.threads))
    print(f"machine: {os.cpu_count()} cores, {args.threads} threads, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        if "throughput" in parts:
            batch, seq = 4, 256
            host_s, hf_s, gemm, hf_peak, host_peak, fma = [], [], [], [], [], []
            for _ in range(args.repeats):
                config, metrics = train_config(work, "throughput", checkpoint, tokens, seq, batch,
                                               args.steps)
                host_peak.append(run_host(host, config)[0])
                host_s.append(step_seconds(metrics))
                hf = run_hf(checkpoint, args.threads, args.steps, batch, seq)
                hf_s.append(hf["step"])
                hf_peak.append(hf["peak_mib"])
                limits = host_limits(args.build, args.threads)
                gemm.append(max(gemm_best(batch * seq), limits["host_gemm_gflops"]))
                fma.append(limits["fma_gflops"])
            roof = step_flops(batch, seq) / (max(gemm) * 1e9)
            tok = batch * seq
            h, f = statistics.median(host_s), statistics.median(hf_s)
            print(f"### Training step, GPT-2 small shape, 1 rank, fp32, batch {batch} x {seq}\n")
            print("| | step (s) | tokens/s | vs HF | of the GEMM roofline | peak RSS (MiB) |")
            print("|---|---|---|---|---|---|")
            print(f"| HF transformers + torch AdamW | {f:.3f} | {tok / f:.0f} | 1.00 | "
                  f"{roof / f:.0%} | {statistics.median(hf_peak):.0f} |")
            print(f"| shardformer-host train | {h:.3f} | {tok / h:.0f} | {f / h:.2f} | "
                  f"{roof / h:.0%} | {statistics.median(host_peak):.0f} |")
            print(f"\nGEMM best {max(gemm):.0f} GFLOP/s (fp32 FMA peak {max(fma):.0f}); a step's "
                  f"matrix products "
                  f"{step_flops(batch, seq) / 1e9:.0f} GFLOP -> roofline {roof:.3f} s; "
                  f"host steps {[round(s, 3) for s in host_s]}, HF {[round(s, 3) for s in hf_s]}\n")
        if "recompute" in parts:
            batch, seq = 4, 512
            print(f"### Activation checkpointing, 1 rank, fp32, batch {batch} x {seq}\n")
            print("| gradient_checkpointing_ratio | peak RSS (MiB) | saved vs 0 (MiB) | "
                  "step time vs 0 |")
            print("|---|---|---|---|")
            base_peak = base_step = None
            for ratio in (0.0, 0.5, 1.0):
                config, metrics = train_config(work, f"recompute{ratio}", checkpoint, tokens, seq,
                                               batch, 3, f"gradient_checkpointing_ratio = {ratio}")
                peak = run_host(host, config)[0]
                step = step_seconds(metrics)
                base_peak = base_peak or peak
                base_step = base_step or step
                print(f"| {ratio} | {peak:.0f} | {base_peak - peak:.0f} | {step / base_step:.2f} |")
            print()
        if "zero" in parts:
            print("### ZeRO-1, dp = 2 (2 ranks, 1 thread each), fp32, batch 2 x 128\n")
            print("| zero_stage | peak RSS rank 0 (MiB) | rank 1 (MiB) |")
            print("|---|---|---|")
            for stage in (0, 1):
                config, _ = train_config(work, f"zero{stage}", checkpoint, tokens, 128, 2, 2,
                                         f"zero_stage = {stage}", "dp_size = 2")
                peaks = run_host(host, config)
                print(f"| {stage} | {peaks[0]:.0f} | {peaks[1]:.0f} |")
            print("\nAdamW states are 2 x 4 bytes x 124.4M parameters = 949 MiB; ZeRO-1 keeps "
                  "about half of them on each of 2 ranks.")


if __name__ == "__main__":
    main()
