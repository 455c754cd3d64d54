#!/usr/bin/env python3
"""Runs HF transformers' GPT-2 and writes what the C++ tests compare against, for the tiny
checkpoint (tools/make_tiny_gpt2.py) and for variants made here with other config options
(untied head, each activation, attention scaling options, no dropout), and a copy holding an
extra tensor no GPT-2 module reads. Per checkpoint: logits and hidden states of a
right-padded batch (fp32, and fp16 / bf16 / fp64 for the tiny one), the LM loss and every
parameter's gradient (float64, and HF's fp32 ones beside them), the losses of a few SGD steps,
and greedy generations of a left-padded batch with and without an early end-of-sequence token.
HF is the oracle, never our code.
usage: gen_gpt2_references.py MODELS_DIR DATA_DIR"""
import argparse
import pathlib
import shutil

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

from make_tiny_gpt2 import TINY, spread_biases_and_norms

# Four rows, so pipeline tests can split the batch into 1 to 4 micro-batches.
FORWARD_BATCH = [[5, 17, 301, 44, 9, 1000, 3], [7, 8, 9, 10], [42], [900, 901, 902, 903, 904, 905]]
# Three unpadded rows of 24 tokens: 72 rows a product, past the fewest a packed weight serves.
LONG_FORWARD_SHAPE = (3, 24)
GENERATE_PROMPTS = [[11, 22, 33, 44, 55], [600, 7], [1, 2, 3]]
GENERATE_UNPADDED_PROMPTS = [[11, 22, 33, 44, 55], [600, 7, 1, 2, 3]]  # one length: no padding
MAX_NEW_TOKENS = 10
SGD_STEPS, SGD_LR = 3, 0.1

# Checkpoint variants (config changes to TINY), each tested against its own reference.
VARIANTS = {
    "tiny-gpt2-untied": dict(tie_word_embeddings=False),
    "tiny-gpt2-gelu": dict(activation_function="gelu", n_inner=96, layer_norm_epsilon=1e-3,
                           scale_attn_weights=False, n_layer=2, resid_pdrop=0.0,
                           embd_pdrop=0.0, attn_pdrop=0.0),
    "tiny-gpt2-relu": dict(activation_function="relu", scale_attn_by_inverse_layer_idx=True,
                           n_layer=3),
    "tiny-gpt2-silu": dict(activation_function="silu", reorder_and_upcast_attn=True, n_layer=2),
    "tiny-gpt2-tanh": dict(activation_function="tanh", n_layer=2),
    "tiny-gpt2-gelu_pytorch_tanh": dict(activation_function="gelu_pytorch_tanh", n_layer=2),
    "tiny-gpt2-quick_gelu": dict(activation_function="quick_gelu", n_layer=2),
}


def pad(sequences, pad_id, left):
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        span = slice(width - len(seq), width) if left else slice(0, len(seq))
        ids[row, span] = torch.tensor(seq)
        mask[row, span] = 1
    return ids, mask


def greedy(model, ids, mask, eos, pad_id):
    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=MAX_NEW_TOKENS,
                          do_sample=False, num_beams=1, eos_token_id=eos, pad_token_id=pad_id)


def references(checkpoint: pathlib.Path, other_dtypes: bool) -> dict:
    torch.manual_seed(0)
    lm = GPT2LMHeadModel.from_pretrained(checkpoint, dtype=torch.float32).eval()
    base = GPT2Model.from_pretrained(checkpoint, dtype=torch.float32).eval()
    pad_id = lm.config.eos_token_id
    out = {}
    ids, mask = pad(FORWARD_BATCH, 0, left=False)
    out["forward_input_ids"], out["forward_attention_mask"] = ids, mask
    with torch.no_grad():
        out["forward_logits"] = lm(input_ids=ids, attention_mask=mask).logits
        out["forward_last_hidden_state"] = base(input_ids=ids, attention_mask=mask).last_hidden_state
        long_ids = torch.randint(lm.config.vocab_size, LONG_FORWARD_SHAPE,
                                 generator=torch.Generator().manual_seed(3))
        out["forward_long_input_ids"] = long_ids
        out["forward_long_logits"] = lm(input_ids=long_ids).logits
        for name, dtype in ([("float16", torch.float16), ("bfloat16", torch.bfloat16),
                             ("float64", torch.float64)] if other_dtypes else []):
            typed = GPT2LMHeadModel.from_pretrained(checkpoint, dtype=dtype).eval()
            out[f"forward_logits_{name}"] = typed(input_ids=ids, attention_mask=mask).logits

    # Loss and gradients (eval mode: no dropout), in float64 (the exact values) and, as
    # "hf_fp32.<key>", HF's own fp32 ones: HF's fp32 gradients of wte and wpe miss the exact
    # ones by up to 3.7e-6, so the tests hold ours to the exact values, allowing twice HF's
    # fp32 error (tests/model_fixture.h). Padding is ignored in the loss via -100.
    labels = ids.masked_fill(mask == 0, -100)
    out["train_labels"] = labels
    exact = GPT2LMHeadModel.from_pretrained(checkpoint, dtype=torch.float64).eval()
    for model, prefix in ((exact, ""), (lm, "hf_fp32.")):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        out[prefix + "train_loss"] = loss.detach().reshape(1)
        for name, param in model.named_parameters():  # a tied lm_head appears once, as wte
            out[prefix + "grad." + name] = param.grad.detach()

    # A few plain SGD steps on that batch, from a fresh copy: the loss before each step.
    trained = GPT2LMHeadModel.from_pretrained(checkpoint, dtype=torch.float32).eval()
    sgd = torch.optim.SGD(trained.parameters(), lr=SGD_LR)
    losses = []
    for _ in range(SGD_STEPS):
        sgd.zero_grad()
        step_loss = trained(input_ids=ids, attention_mask=mask, labels=labels).loss
        step_loss.backward()
        sgd.step()
        losses.append(step_loss.detach())
    out["sgd_losses"], out["sgd_lr"] = torch.stack(losses), torch.tensor([SGD_LR])

    with torch.no_grad():
        ids, mask = pad(GENERATE_PROMPTS, pad_id, left=True)
        out["generate_input_ids"], out["generate_attention_mask"] = ids, mask
        # Generation that never stops early (an eos id the model cannot produce: none).
        out["generate_sequences"] = greedy(lm, ids, mask, None, pad_id)
        # Then with an eos the model does produce: the first row's third new token.
        eos = int(out["generate_sequences"][0, ids.shape[1] + 2])
        out["generate_eos_token_id"] = torch.tensor([eos])
        out["generate_eos_sequences"] = greedy(lm, ids, mask, eos, pad_id)
        out["generate_pad_token_id"] = torch.tensor([pad_id])
        out["generate_max_new_tokens"] = torch.tensor([MAX_NEW_TOKENS])
        ids, mask = pad(GENERATE_UNPADDED_PROMPTS, pad_id, left=True)
        out["generate_unpadded_input_ids"] = ids
        out["generate_unpadded_sequences"] = greedy(lm, ids, mask, None, pad_id)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("models", type=pathlib.Path, help="folder holding tiny-gpt2")
    parser.add_argument("data", type=pathlib.Path, help="folder for <checkpoint>.safetensors")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    for name, changes in VARIANTS.items():
        torch.manual_seed(1234)
        model = spread_biases_and_norms(GPT2LMHeadModel(GPT2Config(**{**TINY, **changes}))).eval()
        model.save_pretrained(args.models / name, safe_serialization=True)
    # The tiny checkpoint with one tensor no GPT-2 module reads (as a merged LoRA adapter
    # leaves behind): jobs must refuse it unless told otherwise.
    extra = args.models / "tiny-gpt2-extra-tensor"
    extra.mkdir(parents=True, exist_ok=True)
    shutil.copy(args.models / "tiny-gpt2" / "config.json", extra / "config.json")
    tensors = load_file(str(args.models / "tiny-gpt2" / "model.safetensors"))
    tensors["transformer.h.0.attn.c_attn.lora_A"] = torch.zeros(4, 64)
    save_file(tensors, str(extra / "model.safetensors"), metadata={"format": "pt"})
    for name in ["tiny-gpt2", *VARIANTS]:
        out = references(args.models / name, other_dtypes=name == "tiny-gpt2")
        save_file({k: v.contiguous() for k, v in out.items()}, str(args.data / f"{name}.safetensors"))
    print(f"wrote {len(VARIANTS) + 1} references to {args.data}")


if __name__ == "__main__":
    main()
