#!/usr/bin/env python3
"""Image classification speed of a ViT-base-shaped or Swin-T-shaped model (fp32): the host's classify
job against HF transformers eager (ViTForImageClassification or SwinForImageClassification, its
default attention) and timm (vit_base_patch16_224 or swin_tiny_patch4_window7_224) on the same
threads, side by side in one run, alternating, median of the
rounds; and the image front end (decoding and preprocessing) against HF's (PIL's load_image and
ViTImageProcessorPil, which both families use).

    .venv/bin/python bench/bench_vit.py [--model vit-base|swin-tiny] [--threads 2] [--rounds 3]
                                        [--build build]

The models: google/vit-base-patch16-224's shapes (hidden 768, 12 layers, 12 heads, MLP 3072,
224 x 224 images in 16 x 16 patches, 1000 labels) or microsoft/swin-tiny-patch4-window7-224's
(embed 96, depths 2, 2, 6, 2, heads 3, 6, 12, 24, windows of 7, 224 x 224 images in 4 x 4
patches, 1000 labels), with HF's random init, made once under BUILD/bench-models/<model> with
its preprocessor_config.json (bilinear to 224 x 224). The images:
matplotlib's photograph (512 x 600 JPEG) repeated. Two settings: 32 images in one batch, and 8
images one at a time. Reported per side: images/s of the model alone (the host's own log line,
model loading and the front end excluded; HF timed around model(pixel_values)), and the front
end's images/s (the host's decoding + preprocessing lines; HF's load_image + processor). The
roofline: this machine's fp32 FMA peak (bench/machine.py, measured in the same run) over the
model's FLOPs per image (its matrix products and attention; ViT-base 35.1 GFLOP, Swin-T 9.0). The
first line names the CPU and its limits."""
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
import machine  # noqa: E402

PHOTO = ROOT / "build" / "test-data" / "images" / "photo.jpg"
VIT = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
           image_size=224, patch_size=16, num_labels=1000)
SWIN = dict(image_size=224, patch_size=4, embed_dim=96, depths=[2, 2, 6, 2],
            num_heads=[3, 6, 12, 24], window_size=7, num_labels=1000)
SETTINGS = {"batch 32": (32, 32), "batch 1": (8, 1)}  # images, batch size
LINE = re.compile(r"classify: (\d+) images: decoding ([0-9.eE+-]+) s, preprocessing "
                  r"([0-9.eE+-]+) s, model ([0-9.eE+-]+) s")


def vit_flops(c):
    h, i, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    tokens = (c["image_size"] // c["patch_size"]) ** 2 + 1
    per_token_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * tokens * h  # products + attention
    patches = 2 * (tokens - 1) * h * 3 * c["patch_size"] ** 2
    return layers * tokens * per_token_layer + patches + 2 * h * c["num_labels"]


def swin_flops(c):
    side, dim, window = c["image_size"] // c["patch_size"], c["embed_dim"], c["window_size"]
    total = 2 * side * side * dim * 3 * c["patch_size"] ** 2  # the patch embedding
    for stage, depth in enumerate(c["depths"]):
        tokens = side * side
        # q, k, v, o and the 4x MLP per token; scores and context within a window of window^2
        total += depth * tokens * (2 * 12 * dim * dim + 2 * 2 * window * window * dim)
        if stage + 1 < len(c["depths"]):  # patch merging: 4 dim -> 2 dim per merged token
            side = (side + 1) // 2
            total += 2 * side * side * 4 * dim * 2 * dim
            dim *= 2
    return total + 2 * dim * c["num_labels"]


MODELS = {"vit-base": ("ViT-base", "ViTForImageClassification", "ViTConfig", VIT, vit_flops),
          "swin-tiny": ("Swin-T", "SwinForImageClassification", "SwinConfig", SWIN, swin_flops)}
TIMM = {"vit-base": "vit_base_patch16_224", "swin-tiny": "swin_tiny_patch4_window7_224"}


def make_model(build, name):
    folder = build / "bench-models" / name
    if (folder / "model.safetensors").exists():
        return folder
    import torch
    import transformers
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil
    _, cls, config_cls, config, _ = MODELS[name]
    torch.manual_seed(0)
    model = getattr(transformers, cls)(getattr(transformers, config_cls)(**config))
    model.save_pretrained(folder)
    ViTImageProcessorPil(size={"height": 224, "width": 224}).save_pretrained(folder)
    return folder


def hf_worker(folder, threads, images, batch):
    """Runs in a child process: prints JSON {front_s, model_s}."""
    import torch
    import transformers
    from transformers.image_utils import load_image
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil
    torch.set_num_threads(threads)
    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForImageClassification.from_pretrained(folder).eval()
    processor = ViTImageProcessorPil.from_pretrained(folder)
    with torch.no_grad():
        model(pixel_values=torch.zeros(1, 3, 224, 224))  # warm-up
        front = model_time = 0.0
        for first in range(0, images, batch):
            n = min(batch, images - first)
            start = time.perf_counter()
            pixels = processor([load_image(str(PHOTO)) for _ in range(n)],
                               return_tensors="pt")["pixel_values"]
            front += time.perf_counter() - start
            start = time.perf_counter()
            model(pixel_values=pixels).logits.softmax(-1)
            model_time += time.perf_counter() - start
    print(json.dumps({"front_s": front, "model_s": model_time}))


def timm_worker(name, threads, images, batch):
    """Runs in a child process: prints JSON {model_s}. timm's model of the same shapes (its own
    random init; the speed does not depend on the values), on the pixel values of HF's processor:
    timm's own transforms need torchvision, which is not installed (bench/torchvision_stand_in.py).
    """
    import torch
    import torchvision_stand_in
    torchvision_stand_in.install()
    import timm
    from transformers.image_utils import load_image
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil
    torch.set_num_threads(threads)
    model = timm.create_model(TIMM[name], pretrained=False, num_classes=1000).eval()
    processor = ViTImageProcessorPil(size={"height": 224, "width": 224})
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))  # warm-up
        model_time = 0.0
        for first in range(0, images, batch):
            n = min(batch, images - first)
            pixels = processor([load_image(str(PHOTO)) for _ in range(n)],
                               return_tensors="pt")["pixel_values"]
            start = time.perf_counter()
            model(pixels).softmax(-1)
            model_time += time.perf_counter() - start
    print(json.dumps({"model_s": model_time}))


def worker_run(kind, target, threads, images, batch):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, __file__, kind, str(target), str(threads),
                           str(images), str(batch)], capture_output=True, text=True, env=env,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def timm_available():
    import importlib.util
    return importlib.util.find_spec("timm") is not None


def host_run(build, folder, threads, images, batch):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "job.toml"
        listed = ", ".join(json.dumps(str(PHOTO)) for _ in range(images))
        config.write_text(f'[model]\npath = "{folder}"\n[job]\nmode = "classify"\n'
                          f"[classify]\nbatch_size = {batch}\nimages = [{listed}]\n")
        done = subprocess.run([str(build / "shardformer-host"), "run", str(config)],
                              capture_output=True, text=True, env=env, check=True)
    match = LINE.search(done.stdout + done.stderr)
    if not match:
        raise SystemExit(f"no classify line in the host's output:\n{done.stdout}{done.stderr}")
    return {"front_s": float(match[2]) + float(match[3]), "model_s": float(match[4])}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--hf-worker":
        hf_worker(pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                  int(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--timm-worker":
        timm_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="vit-base")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    args = parser.parse_args()
    print(machine.describe(args.build, args.threads))
    limits = machine.limits(args.build, args.threads)
    title, _, _, config, count_flops = MODELS[args.model]
    folder = make_model(args.build, args.model)
    flops = count_flops(config)
    roofline = limits["fma_gflops"] * 1e9 / flops
    sides = [("hf", lambda *a: worker_run("--hf-worker", folder, *a)),
             ("host", lambda *a: host_run(args.build, folder, *a))]
    if timm_available():
        sides.append(("timm", lambda *a: worker_run("--timm-worker", args.model, *a)))
    else:
        print("timm is not installed (tools/setup.sh installs it): its column stays empty")
    results = {}
    for _ in range(args.rounds):
        for name, (images, batch) in SETTINGS.items():
            for side, run in sides:
                r = run(args.threads, images, batch)
                results.setdefault((name, side), []).append(
                    (images / r["model_s"], images / r.get("front_s", float("inf"))))
    print(f"\n{title} shapes, fp32, {args.threads} threads, median of {args.rounds} rounds; "
          f"{flops / 1e9:.1f} GFLOP per image; roofline {roofline:.2f} images/s "
          f"(FMA peak {limits['fma_gflops']:.0f} GFLOP/s)\n")
    print("| setting | HF (images/s) | timm | host | host / HF | host / timm | HF / roofline | "
          "timm / roofline | host / roofline | front end: HF | host | host / HF |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in SETTINGS:
        hf, host = ([statistics.median(v) for v in zip(*results[(name, side)])]
                    for side in ("hf", "host"))
        timm = ([statistics.median(v) for v in zip(*results[(name, "timm")])]
                if (name, "timm") in results else [float("nan")])
        print(f"| {name} | {hf[0]:.2f} | {timm[0]:.2f} | {host[0]:.2f} | {host[0] / hf[0]:.2f} | "
              f"{host[0] / timm[0]:.2f} | {hf[0] / roofline:.2f} | {timm[0] / roofline:.2f} | "
              f"{host[0] / roofline:.2f} | {hf[1]:.1f} | {host[1]:.1f} | {host[1] / hf[1]:.2f} |")
    print(f"\ncommand: .venv/bin/python bench/bench_vit.py --model {args.model} "
          f"--threads {args.threads} --rounds {args.rounds}")


if __name__ == "__main__":
    main()
