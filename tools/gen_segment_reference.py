#!/usr/bin/env python3
"""What HF computes for the segment job's test: tiny-sam's SamModel (fp32) on a few of the test
images, each loaded with transformers' load_image and prepared with its prompts by SamProcessor
(the folder's SamImageProcessorPil), each prompt on its own; masks brought back to the image's
size by post_process_masks without binarizing (the logits, so that a test can tell a pixel that
flips at the threshold from a wrong one).

Writes OUT_DIR/<model>.json ({"images": [paths], "prompts": [{"image", "points", "labels",
"box"}]}) and OUT_DIR/<model>.safetensors ("prompt<i>.logits" [3, height, width] fp32,
"prompt<i>.iou_scores" [3]).

usage: gen_segment_reference.py IMAGE_DIR OUT_DIR MODEL_DIR"""
import json
import pathlib
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.image_utils import load_image
from transformers.models.sam.image_processing_pil_sam import SamImageProcessorPil

IMAGES = ["edges_rgb.png", "exif_6.jpg", "photo.jpg"]  # 97 x 61, 24 x 40 upright, 512 x 600
# Two prompts of the same shape on one image (one forward pass in the job), a box alone, a point
# with a box, a single point on the photograph.
PROMPTS = [
    {"image": 0, "points": [[20, 15], [70, 40]], "labels": [1, 0]},
    {"image": 0, "points": [[50, 30], [10, 50]], "labels": [1, 1]},
    {"image": 0, "box": [5, 5, 60, 50]},
    {"image": 1, "points": [[12, 20]], "labels": [1], "box": [2, 3, 20, 35]},
    {"image": 2, "points": [[256, 300]], "labels": [1]},
]


def main():
    image_dir, out_dir, model_dir = (pathlib.Path(a) for a in sys.argv[1:])
    transformers.logging.set_verbosity_error()
    paths = [str(image_dir / name) for name in IMAGES]
    out_dir.mkdir(parents=True, exist_ok=True)
    processor = transformers.SamProcessor(
        image_processor=SamImageProcessorPil.from_pretrained(model_dir))
    model = transformers.SamModel.from_pretrained(model_dir).eval()
    tensors = {}
    for i, prompt in enumerate(PROMPTS):
        image = load_image(paths[prompt["image"]])
        args = {}
        if "points" in prompt:
            args["input_points"] = [[prompt["points"]]]
            args["input_labels"] = [[prompt["labels"]]]
        if "box" in prompt:
            args["input_boxes"] = [[prompt["box"]]]
        inputs = processor(images=image, return_tensors="pt", **args)
        with torch.no_grad():
            out = model(**{k: v for k, v in inputs.items()
                           if k not in ("original_sizes", "reshaped_input_sizes")})
        logits = processor.post_process_masks(out.pred_masks, inputs["original_sizes"],
                                              inputs["reshaped_input_sizes"], binarize=False)[0]
        tensors[f"prompt{i}.logits"] = logits[0].float().contiguous()  # [3, height, width]
        tensors[f"prompt{i}.iou_scores"] = out.iou_scores[0, 0].float().contiguous()
    name = model_dir.name
    save_file(tensors, str(out_dir / f"{name}.safetensors"))
    (out_dir / f"{name}.json").write_text(
        json.dumps({"images": paths, "prompts": PROMPTS}, indent=1) + "\n")
    print(f"wrote HF's masks for {len(PROMPTS)} prompts by {name} to {out_dir}")


if __name__ == "__main__":
    main()
