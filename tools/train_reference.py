#!/usr/bin/env python3
"""Reference training loop for the C++ training job: HF transformers' GPT-2 and
torch.optim.AdamW on the CPU, in fp32. HF and torch are the oracle, never our code.

usage: train_reference.py MODELS_DIR OUT_DIR [--steps 20] [--dtype float32] [--model NAME]
                          [--mlm P --mask-token-id ID | --classify | --seq2seq | --images]

What it does, exactly (the C++ side implements the same). With --model NAME, step 1 is
replaced: MODELS_DIR/NAME (any causal LM) is copied to OUT_DIR/model with every numeric
config.json key naming a dropout ("dropout", "pdrop" in its name) set to 0, so that both sides
are deterministic, and that copy is trained (loaded with AutoModelForCausalLM); everything else
is the same. With --mlm P (a masked-LM --model, loaded with AutoModelForMaskedLM), each
sample's inputs and labels are masked as the C++ TokenDataset masks them (mlm_batch below:
static masks from splitmix64 seeded with ORDER_SEED ^ splitmix64(MASK_STREAM + sample * golden)), and a
micro-batch's loss is weighted by its labelled tokens over the step's instead of 1/4. With
--classify, the copy becomes a ...ForSequenceClassification checkpoint (its new head drawn after
torch.manual_seed(1234), saved), each sample's label is sum(ids) % 2, and OUT_DIR/train_cls.jsonl
holds every sample with its label, one {"input_ids", "label"} a line. With --seq2seq (an
encoder-decoder --model, loaded with AutoModelForSeq2SeqLM), sample i becomes a pair: the source
is its first 12 + i % 21 ids, the target the source reversed, cut to 4 + i % 13 ids;
OUT_DIR/train_s2s.jsonl holds every pair, one {"input_ids", "labels"} a line. A micro-batch's
sources are padded to 32 with id 0 and masked, its targets to the file's longest (16) with -100
(HF shifts them right into decoder inputs), and its loss weighted as --mlm's. With --images (an
image classifier --model with its preprocessor_config.json, loaded with
AutoModelForImageClassification), the samples are 48 synthetic images (make_images below: 16 per
class of the model's first 3, horizontal stripes, vertical stripes or a checkerboard in random
colours and sizes, as RGB, palette, grey and RGBA PNG and JPEG files) written to
OUT_DIR/images/<id2label name>/NN.<ext> and listed, in the order torchvision's ImageFolder lists
them (folders, then files, sorted by name), in OUT_DIR/train_images.jsonl as {"image", "label"}
lines; each is prepared with HF's load_image and the model's ViTImageProcessorPil, and a
micro-batch's loss is weighted as --classify's.

 1. Checkpoint MODELS_DIR/tiny-gpt2-train/: torch.manual_seed(1234), then
    GPT2LMHeadModel(GPT2Config(**TINY, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)),
    save_pretrained (safetensors). TINY comes from make_tiny_gpt2.py. Kept as it is when
    its config.json already equals this config (transformers_version, architectures, dtype
    ignored) and model.safetensors exists. Every run below (the full one and both halves of
    the resume check) loads its model with from_pretrained(dtype=float32), as the C++ job
    does, so all use the same code path (attention implementation: HF's default, sdpa).
 2. Data OUT_DIR/train.bin: 16384 token ids, little-endian uint16 (np.uint16 tofile).
    rng = numpy.random.default_rng(4321); tokens[0] = rng.integers(0, 1013);
    noise = rng.integers(0, 7, size=16383) (ONE vectorised draw, after tokens[0]);
    tokens[i] = (tokens[i-1] * 31 + noise[i-1]) % 1013. So each token has 7 possible
    successors: the loss floor is ln 7 = 1.946. OUT_DIR/train.jsonl: samples 0..63 in index
    order (not stream order), one {"input_ids": [32 ints]} per line.
 3. Samples: seq_len 32; sample i = tokens[32 i : 32 (i + 1)], i in [0, 512). No held-out split.
 4. Order: epoch e's permutation of the 512 sample indices is permutation(512, 1234, e)
    (splitmix64 Fisher-Yates below). Stream = epoch 0's permutation, then epoch 1's, ...;
    step s takes stream[8 s : 8 s + 8]. A resumed run continues the same stream at 8 * step.
 5. Loss: each step's 8 samples are 4 micro-batches of 2, in stream order. Per micro-batch
    model(input_ids=x, labels=x).loss (HF ForCausalLMLoss: logits upcast to fp32, shifted,
    mean cross-entropy over 2 x 31 = 62 tokens, no attention mask); that fp32 loss is divided
    by 4 (fp32) and backward()'d; gradients accumulate in .grad (fp32, summed in micro-batch
    order). Recorded loss = float64 sum, in micro-batch order, of the four fp32 scaled losses
    (= the mean over the batch's 248 predicted tokens), taken before the update.
 6. Optimizer: torch.optim.AdamW(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    => torch's single-tensor implementation (_single_tensor_adam with
    decoupled_weight_decay). On the CPU foreach=None picks the same one anyway (foreach
    kernels are for cuda/xpu/mtia only), and fused is off unless asked for. Groups, in
    model.named_parameters() order: [params with ndim >= 2, weight_decay 0.1] then
    [ndim < 2 (biases, LayerNorm weights and biases), weight_decay 0.0]. The tied
    lm_head.weight is wte.weight, one parameter (decayed). Per parameter, per step (t counts
    from 1, lr is the group's Python float, bias corrections in Python float64):
        p *= 1 - lr * wd                            (only when wd != 0)
        m.lerp_(g, 1 - 0.9)                         (m = exp_avg)
        v = v * 0.95 + (1 - 0.95) * g * g            (v = exp_avg_sq; mul_ then addcmul_)
        denom = sqrt(v) / sqrt(1 - 0.95**t) + 1e-8
        p += -(lr / (1 - 0.9**t)) * m / denom        (addcdiv_)
    The moments are updated at step 0 too, where lr = 0 (the weights do not move then).
 7. LR: transformers.get_cosine_schedule_with_warmup(opt, 5, steps), a LambdaLR: step s
    uses lr = 1e-3 * f(s), f(s) = s / 5 for s < 5, else 0.5 (1 + cos(pi (s - 5) / (steps - 5))),
    in Python float64. Recorded lrs are optimizer.param_groups[0]["lr"] at optimizer.step().
 8. Clip: after the 4 micro-batches, total = clip_grad_norm_(model.parameters(), 1.0)
    (on the CPU: per-tensor vector_norm, then the norm of their stack, fp32; every gradient
    is then multiplied by min(1, 1.0 / (total + 1e-6)) (fp32), even when that factor is 1).
    Then optimizer.step(), scheduler.step(), optimizer.zero_grad() (grads set to None).
 9. model.train() (dropout is 0). Only --dtype float32 is accepted for now.
10. OUT_DIR/reference.safetensors (all on the CPU, contiguous):
        losses [steps] f64, grad_norms [steps] f64 (the fp32 norms, exactly), lrs [steps] f64,
        sample_order [steps, 8] i64, permutation_epoch0 / permutation_epoch1 [512] i64,
        weights.<name>, adam.exp_avg.<name>, adam.exp_avg_sq.<name> (f32, after the last
        step; HF names from named_parameters(), so the tied head appears once as
        transformer.wte.weight), adam_step [1] f64 (= steps),
        resume_losses [steps] f64: steps // 2 steps, then save_pretrained + torch.save of the
        optimizer and scheduler state_dicts into a temp dir, then a fresh model (from that
        dir), a fresh AdamW and scheduler built as above and then given those state_dicts
        (optimizer first, then scheduler, as HF Trainer does), and the remaining steps.
    The script checks that resume_losses equals losses bitwise, and the final weights and
    moments too, and says so (exit status 1 otherwise). Metadata holds the settings.
"""
import argparse
import json
import math
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, AutoModelForImageClassification,
                          AutoModelForMaskedLM, AutoModelForSeq2SeqLM,
                          AutoModelForSequenceClassification, GPT2Config, GPT2LMHeadModel,
                          get_cosine_schedule_with_warmup)

from make_tiny_gpt2 import TINY

MODEL_NAME = "tiny-gpt2-train"
INIT_SEED = 1234
DATA_SEED, NUM_TOKENS, MULTIPLIER, NOISE = 4321, 16384, 31, 7
SEQ_LEN, GLOBAL_BATCH, MICRO_BATCHES = 32, 8, 4
ORDER_SEED = 1234
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.95), 1e-8, 0.1
WARMUP_STEPS, MAX_GRAD_NORM = 5, 1.0
JSONL_SAMPLES = 64

MASK = 2**64 - 1
GOLDEN, MASK_STREAM = 0x9E3779B97F4A7C15, 0x5DEECE66D
MLM = None  # (probability, mask_token_id, vocab_size) with --mlm
CLASS_LABELS = None  # [samples] int64 with --classify or --images
IMAGES = False  # the samples are pixel_values (--images)
IMAGE_COUNT, IMAGE_SEED = 48, 2024
S2S = None  # (sources, attention masks, labels) [samples, ...] with --seq2seq


def splitmix64(state):
    """Returns (new_state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def permutation(n, seed, epoch):
    state = (seed + epoch * 0x9E3779B97F4A7C15) & MASK
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def uniform(state):
    state, r = splitmix64(state)
    return state, (r >> 11) * 2.0**-53


def mlm_batch(samples, indices):
    """Inputs and labels of masked-LM samples: position t of sample s is picked when its
    uniform draw < p; a picked id becomes the mask id (next draw < 0.8), a random id (< 0.9,
    one more draw mod vocab) or stays; labels are the picked ids, -100 elsewhere."""
    p, mask_id, vocab = MLM
    ids = samples[indices].clone()
    labels = torch.full_like(ids, -100)
    for r, s in enumerate(indices):
        _, hashed = splitmix64((MASK_STREAM + s * GOLDEN) & MASK)
        state = ORDER_SEED ^ hashed
        for t in range(ids.shape[1]):
            state, u = uniform(state)
            if u >= p:
                continue
            labels[r, t] = ids[r, t]
            state, kind = uniform(state)
            if kind < 0.8:
                ids[r, t] = mask_id
            elif kind < 0.9:
                state, x = splitmix64(state)
                ids[r, t] = x % vocab
    return ids, labels


def sample_stream(n, start):
    """Sample indices of the stream from position start on (epoch 0, then 1, ...)."""
    epoch, offset = divmod(start, n)
    while True:
        yield from permutation(n, ORDER_SEED, epoch)[offset:]
        epoch, offset = epoch + 1, 0


def train_config() -> GPT2Config:
    return GPT2Config(**TINY, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def ensure_checkpoint(models: pathlib.Path) -> pathlib.Path:
    path = models / MODEL_NAME
    ignore = {"transformers_version", "architectures", "dtype", "torch_dtype", "_name_or_path"}
    want = {k: v for k, v in train_config().to_dict().items() if k not in ignore}
    if (path / "config.json").is_file() and (path / "model.safetensors").is_file():
        have = {k: v for k, v in GPT2Config.from_pretrained(path).to_dict().items()
                if k not in ignore}
        if have == want:
            print(f"kept {path}")
            return path
    torch.manual_seed(INIT_SEED)
    model = GPT2LMHeadModel(train_config())
    model.save_pretrained(path, safe_serialization=True)
    print(f"wrote {path}")
    return path


def make_data(out: pathlib.Path) -> np.ndarray:
    rng = np.random.default_rng(DATA_SEED)
    vocab = TINY["vocab_size"]
    tokens = np.empty(NUM_TOKENS, dtype=np.int64)
    tokens[0] = rng.integers(0, vocab)
    noise = rng.integers(0, NOISE, size=NUM_TOKENS - 1)
    for i in range(1, NUM_TOKENS):
        tokens[i] = (tokens[i - 1] * MULTIPLIER + noise[i - 1]) % vocab
    tokens.astype("<u2").tofile(out / "train.bin")
    with open(out / "train.jsonl", "w") as f:
        for i in range(JSONL_SAMPLES):
            sample = tokens[i * SEQ_LEN:(i + 1) * SEQ_LEN]
            f.write(json.dumps({"input_ids": [int(t) for t in sample]}) + "\n")
    return tokens


def seq2seq_pairs(samples, out):
    """Sample i's source (its first 12 + i % 21 ids) and target (the source reversed, cut to
    4 + i % 13 ids), padded, and written to OUT/train_s2s.jsonl."""
    sources, targets = [], []
    for i, row in enumerate(samples.tolist()):
        sources.append(row[:12 + i % 21])
        targets.append(sources[-1][::-1][:4 + i % 13])
    with open(out / "train_s2s.jsonl", "w") as f:
        for source, target in zip(sources, targets):
            f.write(json.dumps({"input_ids": source, "labels": target}) + "\n")
    width = max(len(t) for t in targets)
    ids = torch.zeros(len(sources), SEQ_LEN, dtype=torch.long)
    mask = torch.zeros(len(sources), SEQ_LEN, dtype=torch.long)
    labels = torch.full((len(sources), width), -100, dtype=torch.long)
    for i, (source, target) in enumerate(zip(sources, targets)):
        ids[i, :len(source)] = torch.tensor(source)
        mask[i, :len(source)] = 1
        labels[i, :len(target)] = torch.tensor(target)
    return ids, mask, labels


def make_optimizer(model, steps):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS, foreach=False)
    sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=WARMUP_STEPS,
                                            num_training_steps=steps)
    return opt, sched


def run_steps(model, opt, sched, samples, first, count, log):
    """Steps first .. first + count - 1; appends (loss, grad_norm, lr, order) to log."""
    model.train()
    stream = sample_stream(samples.shape[0], first * GLOBAL_BATCH)
    micro = GLOBAL_BATCH // MICRO_BATCHES
    for _ in range(count):
        order = [next(stream) for _ in range(GLOBAL_BATCH)]
        loss_sum = 0.0
        if MLM:
            parts = [mlm_batch(samples, order[m * micro:(m + 1) * micro])
                     for m in range(MICRO_BATCHES)]
            total = sum(int((labels != -100).sum()) for _, labels in parts)
        if S2S:
            total = int((S2S[2][order] != -100).sum())
        for m in range(MICRO_BATCHES):
            if CLASS_LABELS is not None:
                index = order[m * micro:(m + 1) * micro]
                key = "pixel_values" if IMAGES else "input_ids"
                loss = model(**{key: samples[index]},
                             labels=CLASS_LABELS[index]).loss / MICRO_BATCHES
            elif S2S:
                index = order[m * micro:(m + 1) * micro]
                ids, mask, labels = (t[index] for t in S2S)
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss * (
                    int((labels != -100).sum()) / total)
            elif MLM:
                ids, labels = parts[m]
                count = int((labels != -100).sum())
                if count == 0:
                    continue
                loss = model(input_ids=ids, labels=labels).loss * (count / total)
            else:
                ids = samples[order[m * micro:(m + 1) * micro]]
                loss = model(input_ids=ids, labels=ids).loss / MICRO_BATCHES
            loss.backward()
            loss_sum += float(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=MAX_GRAD_NORM)
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        opt.zero_grad()
        log.append((loss_sum, float(norm), lr, order))


def final_state(model, opt):
    out = {}
    for name, p in model.named_parameters():
        out["weights." + name] = p.detach().clone()
        state = opt.state[p]
        out["adam.exp_avg." + name] = state["exp_avg"].clone()
        out["adam.exp_avg_sq." + name] = state["exp_avg_sq"].clone()
    return out


def dropout_free_copy(source: pathlib.Path, out: pathlib.Path, activation: str = None) -> pathlib.Path:
    target = out / "model"
    target.mkdir(parents=True, exist_ok=True)
    config = json.loads((source / "config.json").read_text())
    for key, value in config.items():
        if (("dropout" in key or "pdrop" in key or "drop_path" in key)
                and isinstance(value, (int, float))):
            config[key] = 0.0
    if activation:
        config["activation_function"] = activation
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for file in [*source.glob("*.safetensors*"), *source.glob("preprocessor_config.json")]:
        shutil.copyfile(file, target / file.name)
    print(f"wrote {target} (dropout off)")
    return target


def make_images(model: pathlib.Path, out: pathlib.Path):
    """The --images data: IMAGE_COUNT images, image i of class i % 3 (horizontal stripes, vertical
    stripes, a checkerboard) with a period, two colours and a size (20-47 x 20-47) drawn from
    numpy's default_rng(IMAGE_SEED), noise added, saved as PNG (RGB, palette "P", grey "L", RGBA)
    or JPEG (quality 90) by i % 5. Returns pixel_values [n, 3, h, w] and labels [n] in ImageFolder
    order, which train_images.jsonl lists."""
    from PIL import Image
    from transformers.image_utils import load_image
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil
    names = json.loads((model / "config.json").read_text())["id2label"]
    rng = np.random.default_rng(IMAGE_SEED)
    files = []
    for i in range(IMAGE_COUNT):
        label = i % 3
        height, width = (int(v) for v in rng.integers(20, 48, size=2))
        period = int(rng.integers(2, 7))
        colours = rng.integers(0, 256, size=(2, 3))
        y, x = np.mgrid[0:height, 0:width]
        pattern = [(y // period) % 2, (x // period) % 2, ((y // period) + (x // period)) % 2][label]
        pixels = colours[pattern] + rng.integers(-20, 21, size=(height, width, 3))
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
        kind = i % 5
        folder = out / "images" / names[str(label)]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:02d}.{'jpg' if kind == 4 else 'png'}"
        if kind == 1:
            image = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
        elif kind == 2:
            image = image.convert("L")
        elif kind == 3:
            image.putalpha(Image.fromarray(rng.integers(0, 256, size=(height, width), dtype=np.uint8)))
        image.save(path, **({"quality": 90} if kind == 4 else {}))
        files.append((names[str(label)], path.name, label, path))
    files.sort()  # ImageFolder: class folders by name, then files by name
    processor = ViTImageProcessorPil.from_pretrained(model)
    with open(out / "train_images.jsonl", "w") as f:
        for folder, name, label, _ in files:
            f.write(json.dumps({"image": f"images/{folder}/{name}", "label": label}) + "\n")
    pixels = torch.cat([processor(load_image(str(path)), return_tensors="pt")["pixel_values"]
                        for *_, path in files])
    return pixels, torch.tensor([label for _, _, label, _ in files])


def load(path):
    if IMAGES:
        return AutoModelForImageClassification.from_pretrained(path, dtype=torch.float32)
    auto = (AutoModelForSequenceClassification if CLASS_LABELS is not None
            else AutoModelForMaskedLM if MLM else AutoModelForSeq2SeqLM if S2S
            else AutoModelForCausalLM)
    return auto.from_pretrained(path, dtype=torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", type=pathlib.Path, help="folder for tiny-gpt2-train/")
    parser.add_argument("out", type=pathlib.Path, help="folder for train.bin, train.jsonl, "
                        "reference.safetensors")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dtype", default="float32", choices=["float32"],
                        help="only float32 for now (no bf16 reference yet)")
    parser.add_argument("--model", help="train MODELS_DIR/MODEL instead of making tiny-gpt2-train")
    parser.add_argument("--activation", help="the copy's activation_function: a smooth one for a "
                        "ReLU model, whose kink turns a one-ulp difference into a different "
                        "gradient (a 20-step trajectory then follows the rounding, not the math)")
    parser.add_argument("--mlm", type=float, help="masked-LM: the masking probability")
    parser.add_argument("--mask-token-id", type=int, default=4)
    parser.add_argument("--classify", action="store_true",
                        help="sequence classification of sum(ids) % 2")
    parser.add_argument("--seq2seq", action="store_true",
                        help="an encoder-decoder model on source / target pairs")
    parser.add_argument("--images", action="store_true",
                        help="an image classifier on labelled synthetic images")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the resume check splits the run in two)")
    if args.mlm:
        global MLM
        vocab = json.loads((args.models / args.model / "config.json").read_text())["vocab_size"]
        MLM = (args.mlm, args.mask_token_id, vocab)
    args.out.mkdir(parents=True, exist_ok=True)
    args.models.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    started = time.perf_counter()

    checkpoint = (dropout_free_copy(args.models / args.model, args.out, args.activation) if args.model
                  else ensure_checkpoint(args.models))
    tokens = make_data(args.out)
    n = NUM_TOKENS // SEQ_LEN
    samples = torch.from_numpy(tokens[:n * SEQ_LEN].reshape(n, SEQ_LEN)).long()
    if args.seq2seq:
        global S2S
        S2S = seq2seq_pairs(samples, args.out)
    if args.classify:
        global CLASS_LABELS
        CLASS_LABELS = samples.sum(dim=1) % 2
        with open(args.out / "train_cls.jsonl", "w") as f:
            for ids, label in zip(samples.tolist(), CLASS_LABELS.tolist()):
                f.write(json.dumps({"input_ids": ids, "label": label}) + "\n")
        torch.manual_seed(INIT_SEED)
        AutoModelForSequenceClassification.from_pretrained(checkpoint, dtype=torch.float32) \
            .save_pretrained(checkpoint, safe_serialization=True)
    if args.images:
        global IMAGES
        IMAGES = True
        samples, CLASS_LABELS = make_images(checkpoint, args.out)
        n = samples.shape[0]
    # The full run.
    model = load(checkpoint)
    opt, sched = make_optimizer(model, args.steps)
    log = []
    run_steps(model, opt, sched, samples, 0, args.steps, log)
    full = final_state(model, opt)
    adam_step = float(opt.state[next(model.parameters())]["step"])
    train_time = time.perf_counter() - started

    # The same steps, split in two with a save and a fresh load between.
    half = args.steps // 2
    resumed_log = []
    model = load(checkpoint)
    opt, sched = make_optimizer(model, args.steps)
    run_steps(model, opt, sched, samples, 0, half, resumed_log)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
                   pathlib.Path(tmp) / "trainer_state.pt")
        del model, opt, sched
        model = load(tmp)
        opt, sched = make_optimizer(model, args.steps)
        state = torch.load(pathlib.Path(tmp) / "trainer_state.pt", weights_only=True)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
    run_steps(model, opt, sched, samples, half, args.steps - half, resumed_log)
    resumed = final_state(model, opt)

    losses = torch.tensor([e[0] for e in log], dtype=torch.float64)
    resume_losses = torch.tensor([e[0] for e in resumed_log], dtype=torch.float64)
    same_losses = torch.equal(losses, resume_losses)
    same_state = all(torch.equal(full[k], resumed[k]) for k in full)
    same_order = [e[3] for e in log] == [e[3] for e in resumed_log]

    out = {
        "losses": losses,
        "grad_norms": torch.tensor([e[1] for e in log], dtype=torch.float64),
        "lrs": torch.tensor([e[2] for e in log], dtype=torch.float64),
        "sample_order": torch.tensor([e[3] for e in log], dtype=torch.int64),
        "permutation_epoch0": torch.tensor(permutation(n, ORDER_SEED, 0), dtype=torch.int64),
        "permutation_epoch1": torch.tensor(permutation(n, ORDER_SEED, 1), dtype=torch.int64),
        "adam_step": torch.tensor([adam_step], dtype=torch.float64),
        "resume_losses": resume_losses,
        **full,
    }
    metadata = {k: str(v) for k, v in dict(
        steps=args.steps, dtype=args.dtype, seq_len=SEQ_LEN, global_batch_size=GLOBAL_BATCH,
        micro_batches=MICRO_BATCHES, order_seed=ORDER_SEED, lr=LR, beta1=BETAS[0],
        beta2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY, warmup_steps=WARMUP_STEPS,
        max_grad_norm=MAX_GRAD_NORM, resume_at=half, torch=torch.__version__).items()}
    save_file({k: v.contiguous() for k, v in out.items()}, str(args.out / "reference.safetensors"),
              metadata=metadata)

    print(f"{'step':>4} {'loss':>12} {'grad_norm':>12} {'lr':>12}  samples")
    for s, (loss, norm, lr, order) in enumerate(log):
        print(f"{s:4d} {loss:12.6f} {norm:12.6f} {lr:12.6e}  {order}")
    print(f"loss floor ln {NOISE} = {math.log(NOISE):.4f}")
    print(f"resume after {half} steps: losses bitwise equal: {same_losses}; final weights and "
          f"Adam moments bitwise equal: {same_state}; sample order equal: {same_order}")
    print(f"train time {train_time:.2f} s for {args.steps} steps (incl. checkpoint and data); "
          f"total {time.perf_counter() - started:.2f} s")
    print(f"wrote {args.out / 'reference.safetensors'}, train.bin, train.jsonl")
    if not (same_losses and same_state and same_order):
        sys.exit(1)


if __name__ == "__main__":
    main()
