#!/usr/bin/env python3
"""What HF computes for the classify job's test: tiny-vit (ViTForImageClassification, fp32) on a
few of the test images, each loaded with transformers' load_image (EXIF orientation, RGB) and
prepared by the folder's image processor (ViTImageProcessorPil), then softmax over the logits.

Writes OUT.json: {"images": [paths], "labels": id2label, "probabilities": [[per class]]}.

usage: gen_classify_reference.py MODEL_DIR IMAGE_DIR OUT.json"""
import json
import pathlib
import sys

import torch
import transformers
from transformers.image_utils import load_image
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

IMAGES = ["photo.jpg", "edges_palette.png", "exif_6.jpg", "tall_jpeg.jpg", "one_pixel.png"]


def main():
    model_dir, image_dir, out = (pathlib.Path(a) for a in sys.argv[1:4])
    transformers.logging.set_verbosity_error()
    processor = ViTImageProcessorPil.from_pretrained(model_dir)
    model = transformers.ViTForImageClassification.from_pretrained(model_dir).eval()
    paths = [str(image_dir / name) for name in IMAGES]
    pixels = processor([load_image(p) for p in paths], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        probabilities = torch.softmax(model(pixel_values=pixels).logits, -1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"images": paths, "labels": model.config.id2label,
                               "probabilities": probabilities.tolist()}, indent=1) + "\n")
    print(f"wrote HF's classification of {len(paths)} images to {out}")


if __name__ == "__main__":
    main()
