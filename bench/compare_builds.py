"""The same host code built two ways (another compiler, other flags) timed side by side: each
build's bench/speed (forward passes and greedy decoding of the GPT-2-small shape, random weights)
and a tiny-GPT-2 `train` job, the two builds alternating round by round. Prints each build's
median per measurement and the second build's time as a ratio of the first's.
    .venv/bin/python bench/compare_builds.py BUILD_A BUILD_B [--rounds 5] [--threads 2]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import machine
from gpt2_small import make_checkpoint

ROOT = pathlib.Path(__file__).resolve().parent.parent


def speed(build, checkpoint, threads, forward, decode):
    out = subprocess.run(
        [str(build / "bench" / "speed"), "--model", str(checkpoint), "--plugins",
         str(build / "plugins"), "--forward", forward, "--decode", decode, "--prompt", "32",
         "--repeats", "3", "--threads", str(threads)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{build}/bench/speed failed:\n{out.stderr[-3000:]}")
    times = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if r["kind"] not in ("forward", "decode"):
                continue
            name = (f"forward {r['batch']}x{r['seq']}" if r["kind"] == "forward"
                    else f"decode b{r['batch']} x {r['new_tokens']}")
            times[name] = r["seconds"]
    return times


def train(build, work):
    """Seconds of a 30-step tiny-GPT-2 `train` job at tp 2 (the host's ranks of one thread)."""
    config = work / "train.toml"
    data = build / "test-data" / "training" / "train.bin"
    config.write_text(f"""[model]
path = "{build / 'models' / 'tiny-gpt2-train'}"
[parallel]
tp_size = 2
[job]
mode = "train"
[data]
path = "{data}"
dtype = "uint16"
seq_len = 32
[train]
steps = 30
global_batch_size = 8
""")
    start = time.perf_counter()
    out = subprocess.run([str(build / "shardformer-host"), "run", str(config)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{build}: train job failed:\n{out.stderr[-3000:]}")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs=2, type=pathlib.Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--forward", default="4x512")
    parser.add_argument("--decode", default="1x64,8x64")
    args = parser.parse_args()
    print(machine.describe(args.builds[0], args.threads))
    samples = [{}, {}]
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        checkpoint = work / "gpt2-small"
        make_checkpoint(checkpoint)
        for r in range(args.rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for i in order:
                build = args.builds[i].resolve()
                for name, seconds in speed(build, checkpoint, args.threads, args.forward,
                                           args.decode).items():
                    samples[i].setdefault(name, []).append(seconds)
                samples[i].setdefault("train 30 steps tp 2", []).append(train(build, work))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    a, b = args.builds
    print(f"{'measurement':<24} {str(a):>14} {str(b):>14}  B / A")
    for name in samples[0]:
        ma, mb = statistics.median(samples[0][name]), statistics.median(samples[1][name])
        print(f"{name:<24} {ma:>13.4f}s {mb:>13.4f}s  {mb / ma:.3f}")


if __name__ == "__main__":
    main()
