#!/usr/bin/env python3
"""Writes what the text-generation tests compare the host against, with HF transformers:

  chat:     SmolLM2-135M-Instruct answering a conversation (apply_chat_template with
            add_generation_prompt, then generate(do_sample=False)): the prompt's text and ids
            and the new ids;
  texts:    a batch of text prompts of different lengths (tokenizer(texts), left padding),
            greedy: each prompt's ids and new ids;
  sampling: HF's logits processors (RepetitionPenalty, then Temperature, TopK, TopP, MinP in
            generate()'s order) on random logits, for several settings: the processed scores;
            and Whisper's (SuppressTokensAtBegin, SuppressTokens, WhisperTimeStamp in the order
            WhisperForConditionalGeneration.generate() puts them) on crafted sequences.

    HF_HUB_OFFLINE=1 .venv/bin/python tools/gen_generation_reference.py OUT.json --smollm2 DIR"""
import argparse
import json
import pathlib

import torch
import transformers
from transformers.generation import logits_process as lp

CHAT = [{"role": "user", "content": "What is the capital of France?"}]
TEXTS = ["The capital of France is", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci"]
SETTINGS = [
    {"do_sample": False, "repetition_penalty": 1.3},
    {"do_sample": True, "temperature": 0.7},
    {"do_sample": True, "temperature": 1.0, "top_k": 10},
    {"do_sample": True, "temperature": 0.8, "top_k": 0, "top_p": 0.9},
    {"do_sample": True, "temperature": 1.0, "top_k": 0, "min_p": 0.05},
    {"do_sample": True, "temperature": 0.6, "top_k": 40, "top_p": 0.95, "min_p": 0.02,
     "repetition_penalty": 1.2},
]


def processors(setting):
    """The processors generate() builds for `setting`, in its order (generation/utils.py)."""
    out = []
    if setting.get("repetition_penalty", 1.0) != 1.0:
        out.append(lp.RepetitionPenaltyLogitsProcessor(setting["repetition_penalty"]))
    if setting["do_sample"]:
        if setting.get("temperature", 1.0) != 1.0:
            out.append(lp.TemperatureLogitsWarper(setting["temperature"]))
        if setting.get("top_k", 50) != 0:
            out.append(lp.TopKLogitsWarper(setting.get("top_k", 50)))
        if setting.get("top_p", 1.0) < 1.0:
            out.append(lp.TopPLogitsWarper(setting["top_p"]))
        if setting.get("min_p") is not None:
            out.append(lp.MinPLogitsWarper(setting["min_p"]))
    return out


def sampling_cases():
    torch.manual_seed(0)
    cases = []
    for setting in SETTINGS:
        logits = torch.randn(3, 200) * 3
        sequences = torch.randint(0, 200, (3, 9))
        scores = logits.clone()
        for p in processors(setting):
            scores = p(sequences, scores)
        cases.append(case(setting, logits, sequences, scores))
    return cases


def case(setting, logits, sequences, scores):
    """One reference case: the processed scores with -inf written as null."""
    return {"setting": setting, "logits": logits.tolist(), "sequences": sequences.tolist(),
            "scores": [[s if s != float("-inf") else None for s in row]
                       for row in scores.tolist()]}


def whisper_cases():
    """Whisper's processors over a 200-token vocabulary whose timestamps are 151..199: the
    first token (begin_index = 3), and rows after text, after a lone timestamp, after a pair,
    with timestamps made likely in some rows so that their summed probability wins."""
    torch.manual_seed(1)
    rules = {"no_timestamps_token_id": 150, "eos_token_id": 140, "max_initial_timestamp_index": 5}
    config = transformers.GenerationConfig(no_timestamps_token_id=150, eos_token_id=140,
                                           max_initial_timestamp_index=5)
    prompt = [120, 121, 122]
    batches = [
        [prompt] * 3,
        [prompt + [20, 30, 40, 160], prompt + [151, 30, 158, 162], prompt + [20, 30, 155, 157],
         prompt + [155, 20, 30, 40], prompt + [151, 20, 158, 30]],
    ]
    cases = []
    for rows in batches:
        sequences = torch.tensor(rows)
        logits = torch.randn(len(rows), 200) * 3
        logits[::2, 151:] += 4.0  # timestamps likely in every other row
        setting = {"do_sample": False, "suppress_tokens": [7, 9, 151], "begin_suppress_tokens": [3, 140],
                   "begin_index": 3, "timestamps": rules}
        scores = logits.clone()
        for p in [lp.SuppressTokensAtBeginLogitsProcessor([3, 140], begin_index=3),
                  lp.SuppressTokensLogitsProcessor([7, 9, 151]),
                  lp.WhisperTimeStampLogitsProcessor(config, begin_index=3)]:
            scores = p(sequences, scores)
        cases.append(case(setting, logits, sequences, scores))
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--smollm2", type=pathlib.Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    tok = transformers.AutoTokenizer.from_pretrained(args.smollm2)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.smollm2, dtype=torch.float32)
    model.eval()
    ref = {}
    text = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=24, do_sample=False)
    ref["chat"] = {"messages": CHAT, "prompt": text, "prompt_ids": ids[0].tolist(),
                   "ids": out[0, ids.shape[1]:].tolist(),
                   "text": tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)}
    tok.padding_side = "left"
    batch = tok(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=12, do_sample=False)
    width = batch.input_ids.shape[1]
    ref["texts"] = []
    for i, prompt in enumerate(TEXTS):
        new = out[i, width:].tolist()
        eos = model.generation_config.eos_token_id
        if eos in new:
            new = new[:new.index(eos) + 1]
        ref["texts"].append({"prompt": prompt, "prompt_ids": tok(prompt).input_ids, "ids": new})
    ref["sampling"] = sampling_cases() + whisper_cases()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(ref, ensure_ascii=False))
    print(f"chat answer {ref['chat']['text']!r}; {len(ref['sampling'])} sampling cases")


if __name__ == "__main__":
    main()
