#!/usr/bin/env python3
"""CPU speed suite: the host against HF transformers eager on the same threads and against this
machine's own limits, measured side by side in one run (GPT-2-small shape, 124M, fp32, random
weights made locally).

    .venv/bin/python bench/bench_speed.py [--build build] [--threads 2] [--repeats 2]
        [--forward 4x128,4x256,4x512,4x1024] [--decode 1x64,8x64] [--only forward,decode,start,tp]

  * forward: full logits for batch x seq random tokens (no gradients), median of 3 timed calls
    after a warm-up, in one process per side that loads the model once (bench/speed for the
    host: the host's plugins, Session and allocator settings; a Python worker for HF).
  * decode: greedy generation of N new tokens after a 32-token prompt, eos disabled, median of 3.
  * start: to the first generated token. The host: `shardformer-host run` on a generate job
    with max_new_tokens = 1, timed three ways: from main() to the job's end (plugin discovery,
    config, load, prefill: the like of HF's figure), from process start to the job's end (adds
    the dynamic loading and LibTorch's static initialisation, the host's `import torch`), and
    the whole process's wall time (adds the exit). HF: from_pretrained + the first forward in
    a process that has already imported torch and transformers (their import time is printed
    apart). Page cache warm.
  * tp: the host's forward 4 x 512 and greedy decode 1 x 64 at tp = 2 (two ranks, one thread
    each) against tp = 1, and the forward at tp = 2 with sequence parallelism (split_gather);
    then where one more forward's time goes in each layout (bench/speed --kernel-times): its
    kernels' wall time (rank 0's at tp = 2), each rank's wait in barriers, and the rest. The
    three layouts run back to back in each round, in reversed order every other round; the
    tp2 / tp1 ratios are per round, with their geometric mean and its 95% interval.
The checkpoint is evicted from the page cache once at the start (--page-cache keep leaves it), so
the host's first load reads it from disk, as after a download or a reboot, and its mapping gets
2 MiB pages (a file just written sits in the cache in 4 KiB pages). Rounds alternate the host
and HF; the machine's limits are measured in every round (fp32 GEMM GFLOP/s on 2048^2 with the
same threads, ATen's and the host's own GEMM's (bench/kernel_speed --limits); the fp32 FMA
peak; memory read bandwidth by summing 1 GiB) and each result is printed as a ratio to HF
(median over rounds) and as a fraction of the machine's limit: the forward's matrix-product FLOPs
at the FMA peak, decoding's bytes at the read bandwidth. The first line names the CPU
(bench/machine.py)."""
import argparse
import json
import math
import os
import pathlib
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import machine
from gpt2_small import HIDDEN, LAYERS, VOCAB, forward_flops, make_checkpoint

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPT = 32


def parse_shapes(text):
    return [tuple(int(v) for v in item.split("x")) for item in text.split(",") if item]


def drop_from_page_cache(folder):
    """Evicts the checkpoint's files from the page cache (they are clean: nothing is lost)."""
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def limits_worker(args):
    """GEMM GFLOP/s and read GB/s, best of a few tries each, on args.threads threads."""
    import torch
    torch.set_num_threads(args.threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    gemm = 0.0
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        gemm = max(gemm, 2 * n ** 3 / (time.perf_counter() - start) / 1e9)
    x = torch.ones(1 << 28)  # 1 GiB of fp32
    x.sum()
    read = 0.0
    for _ in range(5):
        start = time.perf_counter()
        x.sum()
        read = max(read, x.numel() * 4 / (time.perf_counter() - start) / 1e9)
    print(json.dumps({"kind": "limits", "gemm_gflops": gemm, "read_gbs": read}))


def hf_worker(args):
    """HF's side of one round: the same JSON lines as bench/speed."""
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    start = time.perf_counter()
    model = GPT2LMHeadModel.from_pretrained(args.checkpoint).eval()
    print(json.dumps({"kind": "load", "seconds": time.perf_counter() - start}))

    def median(run):
        run()
        times = []
        for _ in range(args.timed):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    with torch.inference_mode():
        for batch, seq in parse_shapes(args.forward):
            ids = torch.randint(VOCAB, (batch, seq))
            print(json.dumps({"kind": "forward", "batch": batch, "seq": seq,
                              "seconds": median(lambda: model(ids))}), flush=True)
        for batch, new in parse_shapes(args.decode):
            ids = torch.randint(VOCAB, (batch, PROMPT))
            mask = torch.ones_like(ids)
            run = lambda: model.generate(ids, attention_mask=mask, max_new_tokens=new,
                                         min_new_tokens=new, do_sample=False, eos_token_id=None,
                                         pad_token_id=0)
            print(json.dumps({"kind": "decode", "batch": batch, "new_tokens": new,
                              "prompt": PROMPT, "seconds": median(run)}), flush=True)


def hf_start_worker(args):
    """from_pretrained + the first forward, after the imports (timed apart)."""
    start = time.perf_counter()
    import torch
    from transformers import GPT2LMHeadModel
    imported = time.perf_counter()
    torch.set_num_threads(args.threads)
    model = GPT2LMHeadModel.from_pretrained(args.checkpoint).eval()
    with torch.inference_mode():
        model(torch.randint(VOCAB, (1, PROMPT))).logits[:, -1].argmax(-1)
    print(json.dumps({"kind": "start", "seconds": time.perf_counter() - imported,
                      "import_seconds": imported - start}))


def run_lines(command, env=None):
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{shlex.join(map(str, command))} failed ({out.returncode}):\n"
                 f"{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def worker(args, kind, **extra):
    command = [sys.executable, __file__, "--worker", kind, "--threads", str(args.threads),
               "--checkpoint", str(args.checkpoint)]
    for key, value in extra.items():
        command += [f"--{key}", str(value)]
    return run_lines(command)


def host_limits(args):
    """The host's GEMM on 2048^2 and the FMA peak, on args.threads threads."""
    return run_lines([str(args.build / "bench" / "kernel_speed"), str(args.threads), "--limits"])


def host_speed(args, forward, decode, tp=1, extra=()):
    command = [args.build / "bench" / "speed", "--model", args.checkpoint, "--plugins",
               args.build / "plugins", "--forward", forward, "--decode", decode, "--prompt",
               PROMPT, "--repeats", args.timed, *extra]
    if tp == 1:
        return run_lines([str(c) for c in command + ["--threads", args.threads]])
    port = 29600 + os.getpid() % 1000
    ranks = [subprocess.Popen([str(c) for c in command + ["--threads", max(1, args.threads // tp),
                                                          "--tp", tp, "--rank", r, "--port", port]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(tp)]
    outputs = [p.communicate() for p in ranks]
    for p, (_, err) in zip(ranks, outputs):
        if p.returncode != 0:
            sys.exit(f"speed at tp={tp} failed:\n{err[-3000:]}")
    return [json.loads(line) for line in outputs[0][0].splitlines() if line.startswith("{")]


def host_start(args, work):
    config = work / "start.toml"
    config.write_text(f"""[model]
path = "{args.checkpoint}"
[job]
mode = "generate"
[generate]
prompts = [{list(range(1, PROMPT + 1))}]
max_new_tokens = 1
eos_token_id = {VOCAB - 1}
""")
    start = time.perf_counter()
    out = subprocess.run([str(args.build / "shardformer-host"), "run", str(config)],
                         capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    wall = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"host start failed:\n{out.stderr[-3000:]}")
    found = re.search(r"job finished ([0-9.e-]+) s after main\(\) started, ([0-9.e-]+) s after "
                      r"the process started", out.stdout + out.stderr)
    if not found:
        sys.exit(f"host start: no 'job finished' line in its log:\n{out.stderr[-3000:]}")
    return {"main": float(found[1]), "process": float(found[2]), "wall": wall}


def key(record):
    if record["kind"] == "forward":
        return f"forward {record['batch']}x{record['seq']}"
    if record["kind"] == "decode":
        return f"decode b{record['batch']} x {record['new_tokens']}"
    return record["kind"]


def weight_bytes():
    """Bytes one decoding step reads at least: every parameter once (the tied head included)."""
    per_layer = 12 * HIDDEN * HIDDEN + 13 * HIDDEN
    return 4 * (LAYERS * per_layer + VOCAB * HIDDEN + 2 * HIDDEN)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=2, help="rounds (host, HF alternate)")
    parser.add_argument("--timed", type=int, default=3, help="timed calls per measurement")
    parser.add_argument("--forward", default="4x128,4x256,4x512,4x1024")
    parser.add_argument("--decode", default="1x64,8x64")
    parser.add_argument("--only", default="forward,decode,start,tp")
    parser.add_argument("--page-cache", choices=("drop", "keep"), default="drop",
                        help="drop: evict the checkpoint from the page cache first, so that the "
                        "first run reads it from disk as after a download or a reboot (the host's "
                        "mapping then gets 2 MiB pages); keep: leave it as it is (a file just "
                        "written sits in the cache in 4 KiB pages)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return {"limits": limits_worker, "hf": hf_worker, "hf_start": hf_start_worker}[
            args.worker](args)
    parts = args.only.split(",")
    cache = args.build / "bench-models"
    cache.mkdir(parents=True, exist_ok=True)
    args.checkpoint = cache / "gpt2-small-random"
    make_checkpoint(args.checkpoint)
    if args.page_cache == "drop":
        drop_from_page_cache(args.checkpoint)
    forward = args.forward if "forward" in parts else ""
    decode = args.decode if "decode" in parts else ""
    print(f"command: {shlex.join(sys.argv)}")
    print(machine.describe(args.build, args.threads))
    print(f"machine: {os.cpu_count()} cores, {args.threads} threads, "
          f"load average {os.getloadavg()[0]:.2f}, checkpoint page cache: {args.page_cache}\n")
    host, hf, limits = {}, {}, []
    start_host, start_hf, imports, tp1, tp2 = [], [], [], [], []
    decode_tp1, decode_tp2, tp2_sp = [], [], []
    profiles = {"tp = 1": [], "tp = 2": [], "tp = 2, sequence parallel": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            limits.append({**worker(args, "limits")[0], **host_limits(args)[0]})
            if forward or decode:
                for r in host_speed(args, forward, decode):
                    host.setdefault(key(r), []).append(r["seconds"])
                for r in worker(args, "hf", forward=forward, decode=decode, timed=args.timed):
                    hf.setdefault(key(r), []).append(r["seconds"])
            if "start" in parts:
                start_host.append(host_start(args, pathlib.Path(tmp)))
                r = worker(args, "hf_start")[0]
                start_hf.append(r["seconds"])
                imports.append(r["import_seconds"])
            if "tp" in parts:
                layouts = [(tp1, decode_tp1, 1, False), (tp2, decode_tp2, 2, False),
                           (tp2_sp, None, 2, True)]
                # The order reversed every other round: no layout always runs first.
                for forwards, decodes, tp, sp in layouts[::1 if len(tp1) % 2 == 0 else -1]:
                    extra = ["--sequence-parallel"] if sp else []
                    records = host_speed(args, "4x512", "" if sp else "1x64", tp=tp,
                                         extra=extra + ["--kernel-times"])
                    profiles["tp = 2, sequence parallel" if sp else f"tp = {tp}"].append(records)
                    for r in records:
                        if r["kind"] in ("forward", "decode"):
                            (forwards if r["kind"] == "forward" else decodes).append(r["seconds"])
    med = statistics.median
    aten_gemm = med(r["gemm_gflops"] for r in limits)
    host_gemm = med(r["host_gemm_gflops"] for r in limits)
    fma = med(r["fma_gflops"] for r in limits)
    read = med(r["read_gbs"] for r in limits)
    host_on = limits[0]["host_gemm_enabled"]
    print(f"limits: fp32 GEMM on 2048^2 {aten_gemm:.0f} GFLOP/s with ATen (MKL), {host_gemm:.0f} "
          f"with the host's {limits[0]['host_gemm']} ({'on' if host_on else 'off'} by default "
          f"here); fp32 "
          f"FMA peak {fma:.0f} GFLOP/s; memory read {read:.1f} GB/s (medians of {len(limits)} "
          f"rounds)\n")
    if forward:
        print(f"| forward (full logits) | host s | HF s | host / HF speed | host of FMA peak | "
              f"HF of FMA peak | host tokens/s |")
        print("|---|---|---|---|---|---|---|")
        for batch, seq in parse_shapes(forward):
            k = f"forward {batch}x{seq}"
            h, f = med(host[k]), med(hf[k])
            floor = forward_flops(batch, seq, causal_half=True) / (fma * 1e9)
            print(f"| {batch} x {seq} | {h:.3f} | {f:.3f} | {f / h:.2f} x | {floor / h:.0%} | "
                  f"{floor / f:.0%} | {batch * seq / h:.0f} |")
        print(f"(of FMA peak: the forward's matrix-product FLOPs at the measured fp32 FMA peak, "
              f"{fma:.0f} GFLOP/s)\n")
    if decode:
        print("| greedy decode | host tokens/s | HF tokens/s | host / HF speed | "
              "host bandwidth roofline | HF bandwidth roofline |")
        print("|---|---|---|---|---|---|")
        for batch, new in parse_shapes(decode):
            k = f"decode b{batch} x {new}"
            h, f = med(host[k]), med(hf[k])
            # Per token: the weights once, and the KV cache at the mean context length.
            kv = 2 * LAYERS * HIDDEN * 4 * batch * (PROMPT + new / 2)
            ideal = new * (weight_bytes() + kv) / (read * 1e9)
            print(f"| batch {batch} x {new} new | {batch * new / h:.1f} | {batch * new / f:.1f} | "
                  f"{f / h:.2f} x | {ideal / h:.0%} | {ideal / f:.0%} |")
        print()
    if "start" in parts:
        h = {k: med(r[k] for r in start_host) for k in ("main", "process", "wall")}
        f = med(start_hf)
        print(f"start to first token: host {h['main']:.3f} s from main() (config, plugins, "
              f"load, prefill), {h['process']:.2f} s from process start, {h['wall']:.2f} s "
              f"whole process with its exit; HF {f:.3f} s (from_pretrained + first forward; "
              f"importing torch + transformers took {med(imports):.2f} s more): host / HF time "
              f"{h['main'] / f:.2f} from main(), {h['process'] / f:.2f} from process start\n")
    if "tp" in parts:
        # Each round runs tp = 1, tp = 2 and tp = 2 with sequence parallelism back to back: the
        # ratios within a round share the machine's state (its memory-bandwidth mode, its load).
        def paired(times):
            ratios = sorted(t / base for t, base in zip(times, tp1))
            return (f"tp2 / tp1 time {med(times) / med(tp1):.3f}; per round {med(ratios):.3f} "
                    f"(from {ratios[0]:.3f} to {ratios[-1]:.3f} over {len(ratios)} rounds)"
                    f"{geometric_interval(ratios)}")
        print(f"forward 4 x 512 at tp = 2 (1 thread per rank) against tp = 1 ({args.threads} "
              f"threads): {med(tp2):.3f} s vs {med(tp1):.3f} s, {paired(tp2)}")
        print(f"the same with sequence parallelism (split_gather): {med(tp2_sp):.3f} s, "
              f"{paired(tp2_sp)}")
        print(f"greedy decode 1 x 64 at tp = 2 against tp = 1: {64 / med(decode_tp2):.1f} vs "
              f"{64 / med(decode_tp1):.1f} tokens/s, tp2 / tp1 time "
              f"{med(decode_tp2) / med(decode_tp1):.2f}\n")
        print_tp_accounting(profiles)


def geometric_interval(ratios):
    """The geometric mean of per-round ratios and its 95% interval (Student's t on the logs)."""
    if len(ratios) < 2:
        return ""
    logs = [math.log(r) for r in ratios]
    mean, sd = statistics.mean(logs), statistics.stdev(logs)
    # t quantiles (0.975) for 1 to 14 degrees of freedom; 2.0 is close enough beyond.
    t = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14]
    half = (t[len(logs) - 2] if len(logs) - 2 < len(t) else 2.0) * sd / math.sqrt(len(logs))
    return (f"; geometric mean {math.exp(mean):.3f} (95% interval {math.exp(mean - half):.3f}"
            f"-{math.exp(mean + half):.3f})")


def print_tp_accounting(profiles):
    """Where a forward 4 x 512's time goes per layout, ms, medians over rounds: each kernel's wall
    time (at tp = 2 rank 0's, on its one thread), the barrier waits, and what is outside both."""
    med = statistics.median
    rows = {}  # row -> layout -> [ms per round]
    for layout, rounds in profiles.items():
        for records in rounds:
            kernels, waits, forward = {}, [], None
            for r in records:
                if r["kind"] == "kernel_time":
                    name = r["call"].split(" ")[0]
                    kernels[name] = kernels.get(name, 0.0) + 1e3 * r["seconds"]
                elif r["kind"] == "tp_wait":
                    waits.append(1e3 * r["seconds"])
                elif r["kind"] == "profiled_forward":
                    forward = 1e3 * r["seconds"]
            total = sum(kernels.values())
            values = {**kernels, "all kernels": total, "outside the kernels": forward - total,
                      "of which rank 0 waited in barriers": waits[0] if waits else 0.0,
                      "(rank 1 waited)": waits[1] if len(waits) > 1 else 0.0,
                      "the forward": forward}
            for row, value in values.items():
                rows.setdefault(row, {}).setdefault(layout, []).append(value)
    order = sorted((r for r in rows if r not in ("all kernels", "outside the kernels",
                                                   "of which rank 0 waited in barriers",
                                                   "(rank 1 waited)", "the forward")),
                   key=lambda r: -med(next(iter(rows[r].values()))))
    order += ["all kernels", "outside the kernels", "of which rank 0 waited in barriers",
              "(rank 1 waited)", "the forward"]
    print("where one more forward 4 x 512's time goes (ms; kernels' wall time, at tp = 2 rank "
          "0's on its one thread; medians over rounds):\n")
    print("| | " + " | ".join(profiles) + " |")
    print("|---" * (len(profiles) + 1) + "|")
    for row in order:
        cells = [f"{med(rows[row][layout]):.1f}" if layout in rows[row] else "-"
                 for layout in profiles]
        print(f"| {row} | " + " | ".join(cells) + " |")
    print()


if __name__ == "__main__":
    main()
