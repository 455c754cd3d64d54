#!/usr/bin/env python3
"""The real chat model's decoding speed: SmolLM2-135M-Instruct (fp32) greedy, the host
(`shardformer-host run`, tp 1 on all threads, and tp 2) against HF transformers eager and
llama.cpp on the same threads, side by side in one run, alternating, median of the rounds. Each
host run has a llama.cpp run next to it (before it in every other round), and the ratio to
llama.cpp is the median of those pairs' ratios, since this machine's read rate drifts within
seconds; llama.cpp's own row is the median of all its runs.

    .venv/bin/python bench/bench_chat.py [--threads 2] [--rounds 3] [--new 64] [--batch 1,8]
                                         [--no-llama-cpp]

llama.cpp: its llama-batched-bench (built from the llama-cpp-python sdist by
tools/setup_llama_cpp.sh on first use, for the machine's own instruction set) on an f32 GGUF of
the same folder made by llama.cpp's converter; it decodes --batch sequences of --new tokens after
a prompt of the same length (its own dummy tokens: the speed, not the text, is compared).

Each side generates --new tokens after the same 30-token prompt (a batch repeats it), with the
eos set to an id neither produces, so both decode every step (their tokens are equal, HF greedy
being the oracle). Reported: decode tokens/s (every row's new tokens over the time of the
generation call), time to the first token (the prompt's forward and the first step: HF's
generate() with max_new_tokens = 1 after a warm-up, llama.cpp's prompt time after its warm-up;
the host's log "first token after", its job's first and cold pass over the mapped weights, and
beside it "warm": bench/speed's prompt + one step after a warm-up in one process), and decoding's
weight reads as a fraction of the memory read bandwidth measured in the same run. The first
line names the CPU (bench/machine.py)."""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
MODEL = ROOT / "build" / "models" / "SmolLM2-135M-Instruct"
PROMPT = ("Write a short story about a lighthouse keeper who finds a message in a bottle, and "
          "tell it in the first person with vivid detail about the sea.")
NEVER = 49151  # an id neither side produces here: every step decodes


def hf_worker(threads, batch, new):
    import torch
    import transformers
    torch.set_num_threads(threads)
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    model = transformers.AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
    ids = tok([PROMPT] * batch, return_tensors="pt").input_ids
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, do_sample=False, eos_token_id=NEVER)  # warm-up
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=1, do_sample=False, eos_token_id=NEVER)
        first = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(ids, max_new_tokens=new, do_sample=False, eos_token_id=NEVER)
        seconds = time.perf_counter() - start
    return {"tokens_per_s": batch * (out.shape[1] - ids.shape[1]) / seconds, "first": first,
            "ids": out[0, ids.shape[1]:].tolist(), "prompt": ids.shape[1]}


def host_run(build, tp, threads, batch, new, output):
    with tempfile.TemporaryDirectory() as tmp:
        job = pathlib.Path(tmp) / "job.toml"
        prompts = json.dumps([PROMPT] * batch)
        job.write_text(f"[model]\npath = {json.dumps(str(MODEL))}\n[parallel]\ntp_size = {tp}\n"
                       f"[job]\nmode = \"generate\"\n[generate]\nprompts = {prompts}\n"
                       f"max_new_tokens = {new}\neos_token_id = {NEVER}\nstream = false\n"
                       f"output = {json.dumps(str(output))}\n")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads // tp))
        done = subprocess.run([str(build / "shardformer-host"), "run", str(job)], env=env,
                              capture_output=True, text=True, check=True)
    m = re.search(r"rank 0\] \[info\] generate: (\d+) tokens .* in ([0-9.e-]+) s .*first token "
                  r"after ([0-9.e-]+) s", done.stderr)
    ids = json.loads(output.read_text().splitlines()[0])["ids"]
    return {"tokens_per_s": int(m.group(1)) / float(m.group(2)), "first": float(m.group(3)),
            "ids": ids}


def host_warm_first(build, tp, threads, batch, prompt):
    """The host's first token after a warm-up in the same process, as HF and llama.cpp are timed:
    `bench/speed --decode {batch}x1` (a random prompt of the same length, median of 3)."""
    port = str(29700 + tp)
    command = [str(build / "bench" / "speed"), "--model", str(MODEL), "--plugins",
               str(build / "plugins"), "--decode", f"{batch}x1", "--prompt", str(prompt),
               "--repeats", "3", "--threads", str(threads // tp), "--tp", str(tp), "--port", port]
    others = [subprocess.Popen(command + ["--rank", str(r)], stdout=subprocess.DEVNULL)
              for r in range(1, tp)]
    done = subprocess.run(command + ["--rank", "0"], capture_output=True, text=True, check=True)
    for other in others:
        if other.wait() != 0:
            sys.exit(f"bench/speed rank of tp {tp} failed")
    row = next(json.loads(line) for line in done.stdout.splitlines() if '"decode"' in line)
    return row["seconds"]


def llama_cpp_run(tools, threads, batch, prompt, new):
    bench, gguf = tools
    done = subprocess.run(
        [bench, "-m", gguf, "-t", str(threads), "-tb", str(threads), "-c", "2048",
         "-npp", str(prompt), "-ntg", str(new), "-npl", str(batch), "--output-format", "jsonl"],
        capture_output=True, text=True, check=True)
    row = next(json.loads(line) for line in (done.stdout + done.stderr).splitlines()
               if line.startswith('{"n_kv_max"'))
    # As for HF and the host, every new token over the whole generation, the prompt's pass
    # included (llama-batched-bench's own speed_tg leaves it out).
    return {"tokens_per_s": row["pl"] * row["tg"] / (row["t_pp"] + row["t_tg"]),
            "first": row["t_pp"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--no-llama-cpp", action="store_true", help="leave llama.cpp out")
    parser.add_argument("--worker", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(hf_worker(args.threads, args.worker[0], args.worker[1])))
        return
    import machine
    print(machine.describe(args.build, args.threads))
    weights = (MODEL / "model.safetensors").stat().st_size
    llama_cpp = None
    if not args.no_llama_cpp:
        llama_cpp = subprocess.run([str(ROOT / "tools" / "setup_llama_cpp.sh"), str(MODEL)],
                                   stdout=subprocess.PIPE, text=True,
                                   check=True).stdout.splitlines()
    for batch in [int(b) for b in args.batch.split(",")]:
        results = {"HF": [], "host tp 1": [], "host tp 2": []}
        if llama_cpp:
            results["llama.cpp"] = []
        bandwidth = machine.limits(args.build, args.threads)["read_gbs"]
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp) / "out.jsonl"
            rounds_done = 0
            for _ in range(args.rounds):
                hf = json.loads(subprocess.run(
                    [sys.executable, __file__, "--threads", str(args.threads), "--worker",
                     str(batch), str(args.new)], capture_output=True, text=True,
                    check=True).stdout.splitlines()[-1])
                results["HF"].append(hf)
                # Each host run beside a llama.cpp run, in turn first and second: this machine's
                # read rate drifts within seconds, so the ratio is taken pair by pair.
                for tp in (1, 2):
                    order = ["host", "llama.cpp"] if rounds_done % 2 == 0 else ["llama.cpp", "host"]
                    for side in order:
                        if side == "host":
                            run = host_run(args.build, tp, args.threads, batch, args.new, out)
                            if run["ids"] != hf["ids"]:
                                sys.exit(f"tp {tp}: the host's tokens differ from HF's")
                        elif llama_cpp:
                            pair = llama_cpp_run(llama_cpp, args.threads, batch, hf["prompt"],
                                                 args.new)
                            results["llama.cpp"].append(pair)
                    if llama_cpp:
                        run["pair_ratio"] = run["tokens_per_s"] / pair["tokens_per_s"]
                    run["warm_first"] = host_warm_first(args.build, tp, args.threads, batch,
                                                        hf["prompt"])
                    results[f"host tp {tp}"].append(run)
                rounds_done += 1
        hf_rate = statistics.median(r["tokens_per_s"] for r in results["HF"])
        print(f"batch {batch}, {results['HF'][0]['prompt']}-token prompt + {args.new} new tokens:")
        for name, runs in results.items():
            rate = statistics.median(r["tokens_per_s"] for r in runs)
            first = statistics.median(r["first"] for r in runs)
            steps_per_s = rate / batch
            versus = ""
            if llama_cpp and name.startswith("host"):
                pairs = sorted(r["pair_ratio"] for r in runs)
                versus = (f", {statistics.median(pairs):.2f}x llama.cpp run beside it "
                          f"({pairs[0]:.2f}-{pairs[-1]:.2f} over {len(pairs)} pairs)")
            warm = ""
            if name.startswith("host"):
                warm = f" (warm {statistics.median(r['warm_first'] for r in runs) * 1000:.1f} ms)"
            print(f"  {name:10s} {rate:8.1f} tokens/s ({rate / hf_rate:.2f}x HF{versus}), first token "
                  f"{first * 1000:6.1f} ms{warm}, weights read at {steps_per_s * weights / 1e9:5.1f} "
                  f"GB/s = {steps_per_s * weights / 1e9 / bandwidth:.0%} of {bandwidth:.0f} GB/s")


if __name__ == "__main__":
    main()
