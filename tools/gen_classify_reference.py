#!/usr/bin/env python3
"""What HF computes for the classify job's test: each tiny image classifier (tiny-vit's
ViTForImageClassification, tiny-swin's SwinForImageClassification; fp32) on a few of the test
images, each loaded with transformers' load_image (EXIF orientation, RGB) and prepared by the
folder's image processor (ViTImageProcessorPil, which both families use), then softmax over the
logits.

Writes OUT_DIR/<model folder name>.json per model: {"images": [paths], "labels": id2label,
"probabilities": [[per class]]}.

usage: gen_classify_reference.py IMAGE_DIR OUT_DIR MODEL_DIR..."""
import json
import pathlib
import sys

import torch
import transformers
from transformers.image_utils import load_image
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

IMAGES = ["photo.jpg", "edges_palette.png", "exif_6.jpg", "tall_jpeg.jpg", "one_pixel.png"]


def main():
    image_dir, out_dir, *model_dirs = (pathlib.Path(a) for a in sys.argv[1:])
    transformers.logging.set_verbosity_error()
    paths = [str(image_dir / name) for name in IMAGES]
    out_dir.mkdir(parents=True, exist_ok=True)
    for model_dir in model_dirs:
        processor = ViTImageProcessorPil.from_pretrained(model_dir)
        model = transformers.AutoModelForImageClassification.from_pretrained(model_dir).eval()
        pixels = processor([load_image(p) for p in paths], return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            probabilities = torch.softmax(model(pixel_values=pixels).logits, -1)
        out = out_dir / f"{model_dir.name}.json"
        out.write_text(json.dumps({"images": paths, "labels": model.config.id2label,
                                   "probabilities": probabilities.tolist()}, indent=1) + "\n")
        print(f"wrote HF's classification of {len(paths)} images by {model_dir.name} to {out}")


if __name__ == "__main__":
    main()
