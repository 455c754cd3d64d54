#!/usr/bin/env python3
"""What HF computes for the caption job's test: a tiny Blip2ForConditionalGeneration's (fp32)
on a few of the test images, each loaded with transformers' load_image and prepared with a text
prompt by Blip2Processor (the folder's tokenizer with BlipImageProcessorPil at the folder's
settings), then generate() greedily: the new tokens (with a T5 language model, the decoder's
tokens after decoder_start_token_id) and their text (skip_special_tokens).

Writes OUT_DIR/<model>.json: {"images": [paths], "max_new_tokens": n, "cases": [{"image",
"prompt", "ids", "text"}]}.

usage: gen_caption_reference.py IMAGE_DIR OUT_DIR MODEL_DIR"""
import json
import pathlib
import sys

import torch
import transformers
from transformers.image_utils import load_image
from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil

IMAGES = ["edges_rgb.png", "exif_6.jpg", "photo.jpg"]  # 97 x 61, 24 x 40 upright, 512 x 600
PROMPTS = ["", "a photograph of"]
MAX_NEW_TOKENS = 12


def main():
    image_dir, out_dir, model_dir = (pathlib.Path(a) for a in sys.argv[1:])
    transformers.logging.set_verbosity_error()
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = json.loads((model_dir / "processor_config.json").read_text())["image_processor"]
    settings.pop("image_processor_type")
    processor = transformers.Blip2Processor(
        image_processor=BlipImageProcessorPil(**settings),
        tokenizer=transformers.AutoTokenizer.from_pretrained(model_dir),
        num_query_tokens=transformers.AutoConfig.from_pretrained(model_dir).num_query_tokens)
    model = transformers.Blip2ForConditionalGeneration.from_pretrained(model_dir).eval()
    paths = [str(image_dir / name) for name in IMAGES]
    cases = []
    for index, path in enumerate(paths):
        for prompt in PROMPTS:
            inputs = processor(images=load_image(path), text=prompt, return_tensors="pt")
            with torch.no_grad():
                seqs = model.generate(**inputs, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
            skip = 1 if model.config.is_encoder_decoder else inputs["input_ids"].shape[1]
            new = seqs[0, skip:].tolist()
            cases.append({"image": index, "prompt": prompt, "ids": new,
                          "text": processor.tokenizer.decode(new, skip_special_tokens=True)})
    (out_dir / f"{model_dir.name}.json").write_text(json.dumps(
        {"images": paths, "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
