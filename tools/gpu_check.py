#!/usr/bin/env python3
"""GPU checks, run where torch sees a CUDA device after tools/gpu_check.sh has built the host:
the host on CUDA against HF transformers on CUDA (fp32, TF32 off) for tiny causal-LM checkpoints
(logits, loss, greedy tokens; bf16 logits no further from fp32 HF than HF's own bf16), and GPT-2-small forward and decode timings of the
host and HF on the same GPU. Multi-rank layouts (tp, pp, sp in each mode, dp training) run their
ranks on this machine's GPUs, sharing one where there are fewer GPUs than ranks.
`--device cpu` runs the same checks here, to test this script.
Prints one JSON line per result; exits 1 when a check fails, 77 (skipped) without a GPU.
`ctest -L cuda` runs it from a full build (tests/CMakeLists.txt)."""
import argparse
import json
import pathlib
import subprocess
import sys
import time

# No NVIDIA driver here (no device node, no driver in /proc; WSL's /dev/dxg counts as one): skip
# before importing torch, which takes seconds of every CPU machine's suite.
if __name__ == "__main__" and "--device" not in sys.argv and not any(
        pathlib.Path(p).exists() for p in ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")):
    print("gpu_check: skipped: no NVIDIA driver on this machine", flush=True)
    sys.exit(77)

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import gpt2_small  # noqa: E402

FORWARD_IDS = [[5, 17, 301, 44, 9, 1000, 3, 77, 512, 8, 2, 60], [7, 8, 9, 10, 11, 12, 13, 14,
                                                                 15, 16, 17, 18]]
PROMPTS = [[11, 22, 33, 44, 55], [600, 7, 8, 9, 10]]
NEW_TOKENS = 12
failures = []
DEVICE = "cuda"
SKIPPED = 77  # the exit status ctest's SKIP_RETURN_CODE reads (tests/CMakeLists.txt, label cuda)


def report(**fields) -> None:
    print(json.dumps(fields), flush=True)


def check(name: str, ok: bool, **fields) -> None:
    report(check=name, ok=ok, **fields)
    if not ok:
        failures.append(name)


def run_host(build: pathlib.Path, config: pathlib.Path, may_fail: bool = False) -> str:
    """The job's stdout; with may_fail, "exit N" and the end of its stderr, for the caller to
    judge."""
    done = subprocess.run([str(build / "shardformer-host"), "run", str(config)],
                          capture_output=True, text=True, timeout=300)
    if may_fail:
        return f"exit {done.returncode}\n{done.stderr[-3000:]}"
    if done.returncode != 0:
        raise RuntimeError(f"{config.name}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout


# Multi-rank layouts: name -> ([parallel] keys, [shard] keys). On one GPU their ranks share it
# (collectives staged through host memory over Gloo); on several, a GPU per rank (NCCL).
LAYOUTS = {
    "tp2": ("tp_size = 2", ""),
    "pp2": ("pp_size = 2", ""),
    "pp2_tp2": ("pp_size = 2\ntp_size = 2", ""),
    "split_gather_tp2": ("tp_size = 2", 'enable_sequence_parallelism = true\n'
                         'sequence_parallelism_mode = "split_gather"'),
    "all_to_all_sp2": ("sp_size = 2", 'enable_sequence_parallelism = true\n'
                       'sequence_parallelism_mode = "all_to_all"'),
    "ring_attn_sp2": ("sp_size = 2", 'enable_sequence_parallelism = true\n'
                      'sequence_parallelism_mode = "ring_attn"'),
}
SEQUENCE_PARALLEL_FAMILIES = ("tiny-gpt2", "tiny-llama")
# One checkpoint per family runs the multi-rank layouts (Mistral and Qwen share Llama's code).
LAYOUT_MODELS = ("tiny-gpt2", "tiny-llama", "tiny-opt", "tiny-bloom")


def write_config(path: pathlib.Path, model: pathlib.Path, build: pathlib.Path, dtype: str,
                 mode: str, tp: int = 1, layout: str = "") -> None:
    parallel, shard = LAYOUTS[layout] if layout else (f"tp_size = {tp}", "")
    body = (f'[model]\npath = "{model}"\ndtype = "{dtype}"\ndevice = "{DEVICE}"\n\n'
            f'[job]\nmode = "{mode}"\n\n[plugins]\npaths = ["{build / "plugins"}"]\n\n'
            f'[parallel]\n{parallel}\ntimeout_seconds = 60\n\n')
    if shard:
        body += f"[shard]\n{shard}\n\n"
    if mode == "forward":
        body += (f"[forward]\ninput_ids = {FORWARD_IDS}\nloss = true\n"
                 f'output = "{path.with_suffix(".safetensors")}"\n')
    else:
        body += f"[generate]\nprompts = {PROMPTS}\nmax_new_tokens = {NEW_TOKENS}\n"
    path.write_text(body)


def host_forward(build: pathlib.Path, work: pathlib.Path, model: pathlib.Path, dtype: str,
                 tp: int = 1, layout: str = "") -> dict:
    config = work / f"{model.name}-forward-{dtype}-{layout or f'tp{tp}'}.toml"
    write_config(config, model, build, dtype, "forward", tp, layout)
    run_host(build, config)
    return load_file(str(config.with_suffix(".safetensors")))


def host_generate(build: pathlib.Path, work: pathlib.Path, model: pathlib.Path,
                  layout: str = "") -> list:
    config = work / f"{model.name}-generate-{layout or 'tp1'}.toml"
    write_config(config, model, build, "float32", "generate", layout=layout)
    out = run_host(build, config)
    return [[int(t) for t in line.split(":")[1].split()] for line in out.splitlines()
            if line.startswith("generated[")]


def correctness(build: pathlib.Path, work: pathlib.Path, model: pathlib.Path) -> None:
    hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).to(DEVICE).eval()
    ids = torch.tensor(FORWARD_IDS, device=DEVICE)
    with torch.no_grad():
        want = hf(ids, labels=ids)
    want_logits = want.logits.cpu()
    got = host_forward(build, work, model, "float32")
    logits_err = (got["logits"].float() - want_logits).abs().max().item()
    loss_err = abs(got["loss"].item() - want.loss.item())
    check(f"{model.name} fp32 forward on {DEVICE} vs HF", logits_err < 1e-5 and loss_err < 1e-5,
          logits_max_abs=logits_err, loss_abs=loss_err, logits_max=want_logits.abs().max().item())

    got_rows = host_generate(build, work, model)
    want_rows = []
    for prompt in PROMPTS:
        with torch.no_grad():
            seq = hf.generate(torch.tensor([prompt], device=DEVICE), max_new_tokens=NEW_TOKENS,
                              do_sample=False)
        want_rows.append(seq[0, len(prompt):].tolist())
    check(f"{model.name} greedy generate on {DEVICE} vs HF", got_rows == want_rows,
          host=got_rows, hf=want_rows)

    # bf16 has no exact reference: the host's rounding error against fp32 HF must be of the size
    # of HF's own bf16 error (same weights rounded the same way, different op order).
    hf_bf16 = AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16).to(DEVICE).eval()
    with torch.no_grad():
        hf_bf16_err = (hf_bf16(ids).logits.float().cpu() - want_logits).abs().max().item()
    del hf_bf16
    got = host_forward(build, work, model, "bfloat16")
    host_bf16_err = (got["logits"].float() - want_logits).abs().max().item()
    check(f"{model.name} bf16 forward on {DEVICE}: error vs fp32 HF within 2x HF bf16's",
          host_bf16_err <= 2 * hf_bf16_err + 1e-3, host_max_abs=host_bf16_err,
          hf_bf16_max_abs=hf_bf16_err)

    if model.name in LAYOUT_MODELS:
        layouts(build, work, model, want_logits, want.loss.item(), want_rows)


def layouts(build: pathlib.Path, work: pathlib.Path, model: pathlib.Path, want_logits,
            want_loss: float, want_rows: list) -> None:
    """Every multi-rank layout on this machine's GPUs (ranks sharing one where there are fewer
    GPUs than ranks) against HF: fp32 logits and loss, and greedy tokens at tp 2 and pp 2."""
    names = [n for n in LAYOUTS if "sp" not in n and "split" not in n
             or model.name in SEQUENCE_PARALLEL_FAMILIES]
    for name in names:
        start = time.perf_counter()
        try:
            got = host_forward(build, work, model, "float32", layout=name)
        except RuntimeError as e:
            check(f"{model.name} fp32 forward {name} on {DEVICE} vs HF", False, error=str(e)[-2000:])
            continue
        seconds = time.perf_counter() - start
        diff = (got["logits"].float() - want_logits).abs()
        err = diff.max().item()
        # atol 1e-5 plus rtol 1e-5 of HF's logit: sums split over ranks and devices round apart.
        excess = (diff - 1e-5 * want_logits.abs()).max().item()
        loss_err = abs(got["loss"].item() - want_loss)
        check(f"{model.name} fp32 forward {name} on {DEVICE} vs HF",
              excess <= 1e-5 and loss_err < 1e-5, logits_max_abs=err,
              logits_max_abs_less_rtol=excess, loss_abs=loss_err, job_seconds=round(seconds, 2),
              gpus=torch.cuda.device_count() if DEVICE == "cuda" else 0)
    for name in ("tp2", "pp2"):
        try:
            rows = host_generate(build, work, model, name)
        except RuntimeError as e:
            check(f"{model.name} greedy generate {name} on {DEVICE} vs HF", False,
                  error=str(e)[-2000:])
            continue
        check(f"{model.name} greedy generate {name} on {DEVICE} vs HF", rows == want_rows,
              host=rows, hf=want_rows)


def training(build: pathlib.Path, work: pathlib.Path, model: pathlib.Path,
             data: pathlib.Path, parallel: str = "") -> None:
    """configs/gpt2_tiny_train.toml's run on the GPU (at the layout `parallel`, e.g.
    "dp_size = 2") against tools/train_reference.py's losses and gradient norms (HF +
    torch.optim.AdamW on the CPU)."""
    tag = parallel.replace(" ", "").replace("\n", "-").replace("=", "") or "one-rank"
    config = work / f"train-{tag}.toml"
    metrics = work / f"train-{tag}.metrics.jsonl"
    metrics.unlink(missing_ok=True)
    pipelined = "pp_size" in parallel
    config.write_text(
        f'[model]\npath = "{model}"\ndevice = "{DEVICE}"\n\n[job]\nmode = "train"\n\n'
        f'[plugins]\npaths = ["{build / "plugins"}"]\n\n'
        f"[parallel]\n{parallel}\ntimeout_seconds = 60\n\n"
        + ("[pipeline]\nnum_microbatches = 4\n\n" if pipelined else "")
        + f'[data]\npath = "{data / "train.bin"}"\ndtype = "uint16"\nseq_len = 32\nseed = 1234\n\n'
        "[train]\nsteps = 20\nglobal_batch_size = 8\n"
        + ("" if pipelined else "micro_batch_size = 2\n")
        + ("zero_stage = 1\n" if "dp_size" in parallel else "")
        + f'max_grad_norm = 1.0\nlog_every = 5\nmetrics_file = "{metrics}"\n\n'
        "[optimizer]\nlr = 1e-3\nbetas = [0.9, 0.95]\neps = 1e-8\nweight_decay = 0.1\n"
        'schedule = "cosine"\nwarmup_steps = 5\n')
    run_host(build, config)
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    want = load_file(str(data / "reference.safetensors"))
    losses = torch.tensor([r["loss"] for r in rows], dtype=torch.float64)
    norms = torch.tensor([r["grad_norm"] for r in rows], dtype=torch.float64)
    loss_err = ((losses - want["losses"]).abs() / want["losses"].abs()).max().item()
    norm_err = ((norms - want["grad_norms"]).abs() / want["grad_norms"].abs()).max().item()
    check(f"tiny-gpt2 20 training steps on {DEVICE} ({tag}) vs HF + AdamW on cpu",
          len(rows) == 20 and loss_err < 1e-4 and norm_err < 1e-3,
          steps=len(rows), loss_max_rel=loss_err, grad_norm_max_rel=norm_err)


def hf_seconds(run, repeats: int) -> float:
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def speed(build: pathlib.Path, work: pathlib.Path, repeats: int) -> None:
    model = work / "gpt2-small-random"
    gpt2_small.make_checkpoint(model)
    forward_shapes, decode_shapes = [(4, 512), (16, 1024)], [(1, 64), (8, 64)]
    for dtype, torch_dtype in [("float32", torch.float32), ("bfloat16", torch.bfloat16)]:
        done = subprocess.run(
            [str(build / "bench" / "speed"), "--model", str(model), "--plugins",
             str(build / "plugins"), "--device", "cuda", "--dtype", dtype, "--repeats",
             str(repeats), "--forward", ",".join(f"{b}x{s}" for b, s in forward_shapes),
             "--decode", ",".join(f"{b}x{n}" for b, n in decode_shapes)],
            capture_output=True, text=True, timeout=400)
        if done.returncode != 0:
            check(f"speed {dtype}", False, stderr=done.stderr[-2000:])
            continue
        host = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype).cuda().eval()
        for row in host:
            if row["kind"] == "forward":
                ids = torch.randint(gpt2_small.VOCAB, (row["batch"], row["seq"]), device="cuda")
                with torch.no_grad():
                    base = hf_seconds(lambda: hf(ids), repeats)
                tokens = row["batch"] * row["seq"]
                flops = gpt2_small.forward_flops(row["batch"], row["seq"])
                report(speed="forward", dtype=dtype, batch=row["batch"], seq=row["seq"],
                       host_s=row["seconds"], hf_s=base, host_vs_hf=base / row["seconds"],
                       host_tflops=flops / row["seconds"] / 1e12,
                       host_tokens_per_s=tokens / row["seconds"])
            elif row["kind"] == "decode":
                prompt = torch.randint(gpt2_small.VOCAB, (row["batch"], row["prompt"]),
                                       device="cuda")
                with torch.no_grad():
                    base = hf_seconds(lambda: hf.generate(
                        prompt, max_new_tokens=row["new_tokens"], min_new_tokens=row["new_tokens"],
                        do_sample=False, pad_token_id=0), repeats)
                tokens = row["batch"] * row["new_tokens"]
                report(speed="decode", dtype=dtype, batch=row["batch"], new_tokens=row["new_tokens"],
                       host_s=row["seconds"], hf_s=base, host_vs_hf=base / row["seconds"],
                       host_tokens_per_s=tokens / row["seconds"], hf_tokens_per_s=tokens / base)
            else:
                report(speed=row["kind"], dtype=dtype, host_s=row["seconds"])
        del hf
        torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", type=pathlib.Path, required=True)
    parser.add_argument("--models", type=pathlib.Path, nargs="+", required=True,
                        help="tiny checkpoint folders to check for correctness")
    parser.add_argument("--work", type=pathlib.Path, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: the correctness checks on this machine (tests this script)")
    parser.add_argument("--train", type=pathlib.Path, nargs=2, metavar=("MODEL", "DATA"),
                        help="tiny-gpt2-train and test-data/training of a CPU build")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("gpu_check: skipped: no CUDA device is visible", flush=True)
        return SKIPPED
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    args.work.mkdir(parents=True, exist_ok=True)
    report(device=torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu",
           gpus=torch.cuda.device_count(), torch=torch.__version__)
    for model in args.models:
        try:
            correctness(args.build.resolve(), args.work.resolve(), model.resolve())
        except Exception as e:  # one model's failure must not hide the others' results
            check(f"{model.name}", False, error=str(e)[-3000:])
    if args.train:
        for parallel in ("", "dp_size = 2", "tp_size = 2", "pp_size = 2"):
            try:
                training(args.build.resolve(), args.work.resolve(), args.train[0].resolve(),
                         args.train[1].resolve(), parallel)
            except Exception as e:
                check(f"training {parallel}", False, error=str(e)[-3000:])
    if not args.no_speed and DEVICE == "cuda":
        speed(args.build.resolve(), args.work.resolve(), args.repeats)
    report(failed=failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
