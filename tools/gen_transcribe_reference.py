#!/usr/bin/env python3
"""Writes what the transcription tests compare the host against: HF transformers' Whisper
generate() on each clip of a speech folder (tools/make_speech.py), greedy, as a user runs it:
clips up to 30 s as one padded window without timestamps, longer ones whole (truncation=False,
padding="longest") with return_timestamps=True, HF's sequential long-form decoding. Per clip:
the text tokens (the segments' tokens, timestamps included, without prompt and eos), the text
and its word error rate against the spoken text; and the log-mel features HF's extractor gave
each clip (features.safetensors next to OUT: the audio front end's check on real speech).

    .venv/bin/python tools/gen_transcribe_reference.py OUT.json --model DIR --speech DIR"""
import argparse
import json
import pathlib
import re
import wave

import numpy as np
import torch
import transformers
from safetensors.torch import save_file


def read_wav(path):
    """PCM16 as libsndfile reads it: samples / 32768."""
    with wave.open(str(path), "rb") as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return pcm.astype(np.float32) / 32768.0, w.getframerate()


def words(text):
    """Lower case, punctuation dropped: the words a WER counts."""
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def word_error_rate(reference, hypothesis):
    """(substitutions + deletions + insertions) / reference words, by edit distance."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(len(ref), 1)


def transcribe(model, extractor, samples):
    """HF's tokens for one clip (timestamps included, no prompt, no eos) and its features."""
    eos = model.generation_config.eos_token_id
    if len(samples) <= extractor.n_samples:
        features = extractor(samples, sampling_rate=16000, return_tensors="pt").input_features
        with torch.no_grad():
            out = model.generate(features)
        tokens = out[0].tolist()
        prompt = [model.generation_config.decoder_start_token_id,
                  model.generation_config.no_timestamps_token_id]
        if tokens[:len(prompt)] == prompt:  # older transformers return the prompt too
            tokens = tokens[len(prompt):]
    else:
        inputs = extractor(samples, sampling_rate=16000, return_tensors="pt", truncation=False,
                           padding="longest", return_attention_mask=True)
        features = inputs.input_features
        with torch.no_grad():
            out = model.generate(inputs.input_features, attention_mask=inputs.attention_mask,
                                 return_timestamps=True, return_segments=True)
        tokens = [t for segment in out["segments"][0] for t in segment["tokens"].tolist()]
    while tokens and tokens[-1] == eos:
        tokens.pop()
    return tokens, features[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--model", type=pathlib.Path, required=True)
    parser.add_argument("--speech", type=pathlib.Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model = transformers.WhisperForConditionalGeneration.from_pretrained(args.model,
                                                                         dtype=torch.float32)
    model.eval()
    extractor = transformers.WhisperFeatureExtractor.from_pretrained(args.model)
    tok = transformers.AutoTokenizer.from_pretrained(args.model)
    timestamp_begin = model.generation_config.no_timestamps_token_id + 1
    spoken = json.loads((args.speech / "speech.json").read_text())
    clips, features = [], {}
    for name, text in spoken.items():
        samples, rate = read_wav(args.speech / f"{name}.wav")
        assert rate == 16000, f"{name}.wav is at {rate} Hz"
        tokens, features[name] = transcribe(model, extractor, samples)
        heard = tok.decode([t for t in tokens if t < timestamp_begin], skip_special_tokens=True)
        clips.append({"name": name, "file": f"{name}.wav", "seconds": len(samples) / 16000,
                      "spoken": text, "tokens": tokens, "text": heard,
                      "wer": word_error_rate(text, heard)})
        print(f"{name}: {len(samples) / 16000:.1f} s, WER {clips[-1]['wer']:.3f}: {heard.strip()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in features.items()},
              str(args.out.parent / "features.safetensors"))
    args.out.write_text(json.dumps({"clips": clips}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
