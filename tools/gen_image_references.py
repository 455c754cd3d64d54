#!/usr/bin/env python3
"""Makes the image files of the vision tests and what HF makes of each: the reference the C++
image front end (sdk/src/vision) is compared with. PIL (through transformers' load_image: EXIF
orientation, then convert("RGB")) is the oracle for the decoded pixels; HF's PIL image processor
(ViTImageProcessorPil) for pixel_values.

Images: the photograph matplotlib ships (grace_hopper.jpg), re-encoded as progressive and 4:4:4
JPEG; synthetic ones with sharp edges and noise, written by PIL in every colour mode a user meets
(RGB, grey, CMYK JPEG; RGB, RGBA, L, LA, P with transparency, 1-bit, 16-bit, interlaced PNG),
odd sizes (1 x 1, 3000 x 17, 17 x 3000), the eight EXIF orientations in JPEG and one in PNG.
Per image <name>: "rgb.<name>" (uint8 [height, width, 3]) and, per processor setting <p> of
PROCESSORS, "pixels.<p>.<name>" (fp32 [3, h, w]). PROCESSORS' settings are written as
<p>.json (a preprocessor_config.json). Also files that are not (whole) images, for the error tests,
and a sweep of PIL's Image.resize itself: for 48 random RGB images and target sizes (shrinking,
growing, mixed, both pass orders), "sweep.<i>.input" [h, w, 3], "sweep.<i>.size" [height, width]
and "sweep.<i>.<filter number>" for each convolution filter.

usage: gen_image_references.py IMAGE_DIR OUT.safetensors"""
import io
import json
import pathlib
import struct
import sys
import zlib

import matplotlib.cbook
import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers.image_utils import load_image
from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil
from transformers.models.sam.image_processing_pil_sam import SamImageProcessorPil
from transformers.models.sam.processing_sam import SamProcessor
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

# Settings of HF's ViT processor: its defaults; each resampling filter of PIL's (1 Lanczos,
# 2 bilinear, 3 bicubic, 4 box, 5 Hamming), up- and down-scaling; shortest-edge resize with a
# centre crop (larger than the image on one side: HF pads it); other means and scales.
PROCESSORS = {
    "vit": {"image_processor_type": "ViTImageProcessor", "do_resize": True, "do_rescale": True,
            "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "resample": 2, "rescale_factor": 1 / 255, "size": {"height": 224, "width": 224}},
    "bicubic_crop": {"image_processor_type": "ViTImageProcessor", "resample": 3,
                     "size": {"shortest_edge": 40}, "do_center_crop": True,
                     "crop_size": {"height": 32, "width": 48},
                     "image_mean": [0.48145466, 0.4578275, 0.40821073],
                     "image_std": [0.26862954, 0.26130258, 0.27577711]},
    "lanczos": {"image_processor_type": "ViTImageProcessor", "resample": 1,
                "size": {"height": 61, "width": 37}},
    "box": {"image_processor_type": "ViTImageProcessor", "resample": 4, "size": 29},
    "hamming_up": {"image_processor_type": "ViTImageProcessor", "resample": 5,
                   "size": {"height": 700, "width": 450}, "do_normalize": False},
    "no_resize": {"feature_extractor_type": "ViTFeatureExtractor", "do_resize": False,
                  "rescale_factor": 0.5, "image_mean": [0.1, 0.2, 0.3], "image_std": [2, 3, 4]},
    # SAM's: the longest edge to 96 (the other side rounded to nearest), ImageNet's means, padded
    # to 100 x 120 below and right; the mask settings prepare training labels only. Its default
    # do_convert_rgb paints a PNG's transparent colour (tRNS) white.
    "sam": {"image_processor_type": "SamImageProcessor", "size": {"longest_edge": 96},
            "pad_size": {"height": 100, "width": 120}, "mask_size": {"longest_edge": 24},
            "mask_pad_size": {"height": 25, "width": 30}, "resample": 2, "do_pad": True},
    # BLIP's (BLIP-2's): its defaults (bicubic, OpenAI CLIP's means, do_convert_rgb) at another
    # size.
    "blip": {"image_processor_type": "BlipImageProcessor", "size": {"height": 48, "width": 40}},
}
# SamProcessor on the photograph: points and boxes in its pixels scaled to the resized image,
# and random low-resolution masks brought back to its size (post_process_masks).
SAM_POINTS = [[[[100.0, 200.5], [639.0, 0.0]]]]
SAM_BOXES = [[[10.0, 20.0, 300.0, 400.25]]]


def exif_with_orientation(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif


def synthetic(width, height, seed):
    """Sharp edges (a checkerboard of 7-pixel squares and a diagonal), a ramp and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    board = (((x // 7) + (y // 7)) % 2) * 255
    ramp = (x * 255 // max(width - 1, 1)).astype(np.int64)
    diagonal = np.where(x * height > y * width, 230, 20)
    noise = rng.integers(0, 256, size=(height, width))
    rgb = np.stack([board, (ramp + noise // 4) % 256, np.where(noise > 128, diagonal, ramp)], -1)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


def write_images(folder):
    """Every test image as a file in folder: name -> path."""
    files = {}

    def save(name, image, fmt, **kwargs):
        path = folder / f"{name}.{'jpg' if fmt == 'JPEG' else 'png'}"
        image.save(path, fmt, **kwargs)
        files[name] = path

    photo = Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    photo.load()
    files["photo"] = folder / "photo.jpg"
    files["photo"].write_bytes(
        pathlib.Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg",
                                                      asfileobj=False)).read_bytes())
    save("photo_progressive", photo, "JPEG", quality=90, progressive=True)
    save("photo_444", photo, "JPEG", quality=95, subsampling=0)
    save("photo_png", photo.resize((301, 353), Image.BICUBIC), "PNG")

    edges = synthetic(97, 61, 1)
    save("edges_jpeg", edges, "JPEG", quality=85)
    save("edges_grey_jpeg", edges.convert("L"), "JPEG", quality=85)
    save("edges_cmyk_jpeg", edges.convert("CMYK"), "JPEG", quality=90)
    save("edges_rgb", edges, "PNG")
    rgba = edges.copy()
    rgba.putalpha(Image.fromarray((np.arange(97 * 61).reshape(61, 97) % 256).astype(np.uint8)))
    save("edges_rgba", rgba, "PNG")
    save("edges_grey", edges.convert("L"), "PNG")
    save("edges_grey_alpha", rgba.convert("LA"), "PNG")
    palette = edges.convert("P", palette=Image.ADAPTIVE, colors=37)
    save("edges_palette", palette, "PNG", transparency=5)
    save("edges_1bit", edges.convert("1"), "PNG")
    # Transparent colours (tRNS), which do_convert_rgb paints white as PIL leaves them after
    # convert("RGB"): a grey level, an RGB colour (the first pixel's), a 1-bit black, and a
    # palette whose alphas are more than one transparent entry (none painted).
    grey = edges.convert("L")
    save("trns_grey", grey, "PNG", transparency=grey.getpixel((0, 0)))
    save("trns_rgb", edges, "PNG", transparency=edges.getpixel((0, 0)))
    save("trns_1bit", edges.convert("1"), "PNG", transparency=0)
    save("trns_palette_alphas", palette, "PNG", transparency=bytes([255, 0, 128, 0, 255]))
    save("edges_interlaced", edges, "PNG", optimize=False)
    files["edges_interlaced"] = interlace(folder / "edges_interlaced.png", edges)
    deep = np.asarray(edges).astype(np.uint16) * 257 + np.arange(3, dtype=np.uint16)
    files["edges_rgb16"] = folder / "edges_rgb16.png"
    write_png16(files["edges_rgb16"], deep)
    grey16 = (np.arange(97 * 61, dtype=np.uint32).reshape(61, 97) * 11 % 700).astype(np.uint16)
    save("edges_grey16", Image.fromarray(grey16), "PNG")

    save("one_pixel", Image.new("RGB", (1, 1), (200, 10, 99)), "PNG")
    save("wide", synthetic(3000, 17, 2), "PNG")
    save("tall_jpeg", synthetic(17, 3000, 3), "JPEG", quality=80)
    oriented = synthetic(40, 24, 4)
    for orientation in range(1, 9):
        save(f"exif_{orientation}", oriented, "JPEG", quality=90,
             exif=exif_with_orientation(orientation))
    save("exif_png_6", oriented, "PNG", exif=exif_with_orientation(6))
    return files


def write_png16(path, rgb16):
    """A 16-bit RGB PNG ([h, w, 3] uint16), which PIL writes only as 8-bit."""
    h, w, _ = rgb16.shape
    rows = b"".join(b"\0" + rgb16[y].astype(">u2").tobytes() for y in range(h))
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data +
                                struct.pack(">I", zlib.crc32(kind + data)))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0,
                                                                        0, 0)) +
                     chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def interlace(path, image):
    """image as an Adam7-interlaced 8-bit RGB PNG (PIL writes none)."""
    a = np.asarray(image)
    h, w, _ = a.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]
    data = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.size:
            data += b"".join(b"\0" + row.tobytes() for row in sub)
    chunk = lambda kind, d: (struct.pack(">I", len(d)) + kind + d +
                             struct.pack(">I", zlib.crc32(kind + d)))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0,
                                                                        0, 1)) +
                     chunk(b"IDAT", zlib.compress(data)) + chunk(b"IEND", b""))
    return path


def write_broken(folder):
    """Files that are not whole images."""
    photo = (folder / "photo.jpg").read_bytes()
    (folder / "broken_truncated.jpg").write_bytes(photo[: len(photo) // 2])
    png = (folder / "edges_rgb.png").read_bytes()
    (folder / "broken_truncated.png").write_bytes(png[: len(png) - 300])
    (folder / "broken_magic.png").write_bytes(b"GIF89a" + png[6:])
    (folder / "broken_empty.jpg").write_bytes(b"")
    chunk = lambda kind, d: (struct.pack(">I", len(d)) + kind + d +
                             struct.pack(">I", zlib.crc32(kind + d)))
    (folder / "broken_huge.png").write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    (folder / "broken_text.png").write_text("not an image\n")


def main():
    folder, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    files = write_images(folder)
    write_broken(folder)
    tensors = {}
    for p, settings in PROCESSORS.items():
        (folder / f"{p}.json").write_text(json.dumps(settings, indent=1) + "\n")
    def processor_of(settings):
        kind = settings.get("image_processor_type", "")
        cls = (SamImageProcessorPil if kind.startswith("Sam")
               else BlipImageProcessorPil if kind.startswith("Blip") else ViTImageProcessorPil)
        return cls(**{k: v for k, v in settings.items() if not k.endswith("_type")})

    processors = {p: processor_of(s) for p, s in PROCESSORS.items()}
    for name, path in sorted(files.items()):
        image = load_image(str(path))
        rgb = np.asarray(image)
        tensors[f"rgb.{name}"] = torch.from_numpy(rgb.copy())
        for p, processor in processors.items():
            pixels = processor(image, return_tensors="np")["pixel_values"][0]
            assert pixels.dtype == np.float32, pixels.dtype
            tensors[f"pixels.{p}.{name}"] = torch.from_numpy(np.ascontiguousarray(pixels))
    sam = SamProcessor(image_processor=processors["sam"])
    photo = load_image(str(files["photo"]))
    prompts = sam(images=photo, input_points=SAM_POINTS, input_boxes=SAM_BOXES, return_tensors="pt")
    tensors["sam_prompts.points"] = torch.tensor(SAM_POINTS[0][0])
    tensors["sam_prompts.boxes"] = torch.tensor(SAM_BOXES[0])
    tensors["sam_prompts.scaled_points"] = prompts["input_points"][0, 0].float()
    tensors["sam_prompts.scaled_boxes"] = prompts["input_boxes"][0].float()
    tensors["sam_prompts.reshaped_size"] = torch.tensor(list(prompts["reshaped_input_sizes"][0]))
    torch.manual_seed(7)
    masks = torch.randn(1, 1, 3, 25, 30)  # [images, prompts, masks, h, w]
    tensors["sam_masks.low"] = masks[0]
    tensors["sam_masks.image"] = sam.post_process_masks(
        masks, prompts["original_sizes"], prompts["reshaped_input_sizes"])[0]
    rng = np.random.default_rng(7)
    for i in range(48):
        w, h, out_w, out_h = (int(v) for v in rng.integers(1, 120, 4))
        pixels = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
        tensors[f"sweep.{i}.input"] = torch.from_numpy(pixels)
        tensors[f"sweep.{i}.size"] = torch.tensor([out_h, out_w])
        for f in (1, 2, 3, 4, 5):
            resized = np.asarray(Image.fromarray(pixels).resize((out_w, out_h), f))
            tensors[f"sweep.{i}.{f}"] = torch.from_numpy(resized.copy())
    save_file(tensors, str(out))
    print(f"wrote {len(files)} images and {len(tensors)} references to {out}")


if __name__ == "__main__":
    main()
