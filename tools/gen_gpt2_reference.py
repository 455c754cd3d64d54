#!/usr/bin/env python3
"""Runs HF transformers' GPT-2 on a checkpoint and writes what the C++ tests compare against:
logits and hidden states of a right-padded batch, the LM loss of that batch and every
parameter's gradient after its backward pass, the losses of a few SGD steps on it, and greedy
generations of a left-padded batch (with and without an early end-of-sequence token). HF is
the oracle, never our code."""
import argparse
import pathlib

import torch
from safetensors.torch import save_file
from transformers import GPT2LMHeadModel, GPT2Model

# Four rows, so pipeline tests can split the batch into 1 to 4 micro-batches.
FORWARD_BATCH = [[5, 17, 301, 44, 9, 1000, 3], [7, 8, 9, 10], [42], [900, 901, 902, 903, 904, 905]]
GENERATE_PROMPTS = [[11, 22, 33, 44, 55], [600, 7], [1, 2, 3]]
MAX_NEW_TOKENS = 10
SGD_STEPS, SGD_LR = 3, 0.1


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", type=pathlib.Path)
    parser.add_argument("output", type=pathlib.Path, help="reference .safetensors to write")
    args = parser.parse_args()

    torch.manual_seed(0)
    lm = GPT2LMHeadModel.from_pretrained(args.checkpoint, dtype=torch.float32).eval()
    base = GPT2Model.from_pretrained(args.checkpoint, dtype=torch.float32).eval()
    pad_id = lm.config.eos_token_id
    out = {}
    with torch.no_grad():
        ids, mask = pad(FORWARD_BATCH, 0, left=False)
        out["forward_input_ids"], out["forward_attention_mask"] = ids, mask
        out["forward_logits"] = lm(input_ids=ids, attention_mask=mask).logits
        out["forward_last_hidden_state"] = base(input_ids=ids, attention_mask=mask).last_hidden_state

    # Loss and gradients (eval mode: no dropout). Padding is ignored in the loss via -100.
    ids, mask = out["forward_input_ids"], out["forward_attention_mask"]
    labels = ids.masked_fill(mask == 0, -100)
    loss = lm(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    out["train_labels"], out["train_loss"] = labels, loss.detach().reshape(1)
    for name, param in lm.named_parameters():  # the tied lm_head appears once, as wte
        out["grad." + name] = param.grad.detach()

    # A few plain SGD steps on that batch, from a fresh copy: the loss before each step.
    trained = GPT2LMHeadModel.from_pretrained(args.checkpoint, dtype=torch.float32).eval()
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
    args.output.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, str(args.output))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
