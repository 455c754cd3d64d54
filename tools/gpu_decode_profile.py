#!/usr/bin/env python3
"""Where a GPU decode step's time goes: the kernels each generated token launches and the GPU time
they take (Nsight Compute, `ncu`), against the step's wall time, for the host (`bench/speed`) and
HF transformers eager on the same GPT-2-small-shaped model (random weights). A step far longer than its kernels' GPU
time is bound by the CPU launching them (what CUDA graphs remove). Run where `ncu` and a CUDA
torch are, after tools/gpu_check.sh has built the host. Prints one JSON line per result."""
import argparse
import collections
import csv
import glob
import json
import pathlib
import shutil
import subprocess
import sys
import time

import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import gpt2_small  # noqa: E402

PROMPT = 32


def hf_generate(model_dir: pathlib.Path, dtype: str, tokens: int, calls: int) -> float:
    """HF's greedy generation of `tokens` after a 32-token prompt, `calls` times; the last call's
    seconds."""
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).cuda().eval()
    prompt = torch.randint(gpt2_small.VOCAB, (1, PROMPT), device="cuda",
                           generator=torch.Generator("cuda").manual_seed(0))
    seconds = 0.0
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            hf.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                        pad_token_id=0)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return seconds


def kernels(csv_path: pathlib.Path) -> list:
    """(kernel name, ns) of every kernel in an `ncu --csv` log."""
    lines = csv_path.read_text(errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if '"Kernel Name"' in line)
    rows = []
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            rows.append((row["Kernel Name"], float(row["Metric Value"].replace(",", ""))))
    return rows


def summarise(who: str, rows: list, calls: int, tokens: int, wall_s: float) -> None:
    """Per generated token (each call: the prompt's forward and `tokens` - 1 steps, so the
    prompt's share is included): kernels and their GPU time, against an unprofiled call's wall
    time."""
    per_call = len(rows) / calls
    gpu_us = sum(ns for _, ns in rows) / calls / tokens / 1e3
    top = collections.Counter(name.split("(")[0][:80] for name, _ in rows).most_common(8)
    print(json.dumps({"who": who, "kernels_per_token": round(per_call / tokens, 1),
                      "gpu_us_per_token": round(gpu_us, 1),
                      "wall_us_per_token": round(wall_s / tokens * 1e6, 1),
                      "gpu_busy": round(gpu_us / (wall_s / tokens * 1e6), 3),
                      "most_launched": [[n, round(c / calls / tokens, 1)] for n, c in top]}),
          flush=True)


def run(command: list) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", type=pathlib.Path, help="the build folder of gpu_check.sh")
    parser.add_argument("--work", type=pathlib.Path, help="a folder for the model and logs")
    parser.add_argument("--tokens", type=int, default=4,
                        help="new tokens a call (ncu costs about 15 ms a kernel: keep it small)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--hf-child", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hf_child:  # under ncu: one warm-up call and one counted call
        hf_generate(args.hf_child, args.dtype, args.tokens, calls=2)
        return 0
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    model = work / "gpt2-small-random"
    if not (model / "config.json").exists():
        gpt2_small.make_checkpoint(model)
    speed = [str(args.build.resolve() / "bench" / "speed"), "--model", str(model), "--plugins",
             str(args.build.resolve() / "plugins"), "--device", "cuda", "--dtype", args.dtype,
             "--decode", f"1x{args.tokens}", "--repeats", "1"]
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))),
                                        None)
    if found is None:
        raise SystemExit("ncu (Nsight Compute) is not on this machine")
    ncu = [found, "--csv", "--metrics", "gpu__time_duration.sum", "--print-units", "base",
           "--clock-control", "none"]

    # Wall times without the profiler: the host's median of 5 calls, HF's fifth call.
    done = run(speed[:-1] + ["5"])
    host_s = next(json.loads(line) for line in done.stdout.splitlines()
                  if line.startswith("{") and '"decode"' in line)["seconds"]
    hf_s = hf_generate(model, args.dtype, args.tokens, calls=5)

    host_log, hf_log = work / "ncu-host.csv", work / "ncu-hf.csv"
    run(ncu + ["--log-file", str(host_log)] + speed)
    run(ncu + ["--log-file", str(hf_log), sys.executable, __file__, "--tokens", str(args.tokens),
               "--dtype", args.dtype, "--hf-child", str(model)])
    # bench/speed with --repeats 1 generates twice (a warm-up and the timed call).
    summarise(f"host {args.dtype}", kernels(host_log), 2, args.tokens, host_s)
    summarise(f"HF eager {args.dtype}", kernels(hf_log), 2, args.tokens, hf_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
