// What HF's image processors do to an RGB image before a vision model sees it, as their PIL
// backend computes it: PIL's resampling filters on 8-bit pixels (bit for bit), the centre crop,
// rescale, normalize and SAM's padding, read from a model folder's preprocessor_config.json; SAM's
// prompt coordinates scaled with the image and its masks brought back to the image's size.
#pragma once

#include "shardformer/vision/image.h"

#include <ATen/Tensor.h>

#include <array>
#include <filesystem>
#include <string>

namespace shardformer::vision {

// PIL's resampling filters, by their numbers in preprocessor_config.json's "resample".
enum class Resample {
  kNearest = 0,
  kLanczos = 1,
  kBilinear = 2,
  kBicubic = 3,
  kBox = 4,
  kHamming = 5
};

// PIL's Image.resize((width, height), filter) of an 8-bit RGB image for the convolution filters
// (every one but kNearest): separable passes in Pillow 13's order (horizontal first unless the
// height shrinks by more than twice the pixels the width does), with PIL's fixed-point weights
// (22 fractional bits) and its rounding, so every value equals PIL's. A side of the same size is
// left as it is. Throws Error for kNearest or a size below 1.
Image resize(const Image& image, int64_t width, int64_t height, Resample filter);

// A "size" or "crop_size" setting: height and width, the shortest edge (the other scaled to
// keep the aspect ratio, rounded down as HF does), or the longest edge (SAM's: the other scaled
// and rounded to nearest).
struct SizeRule {
  int64_t height = 0, width = 0;
  int64_t shortest_edge = 0;
  int64_t longest_edge = 0;
};

// Which of HF's processors the file is for: ViT's (ViTImageProcessor, ViTFeatureExtractor and
// its defaults), BLIP's (BlipImageProcessor: the same steps, bicubic 384 x 384 and CLIP's mean and
// std by default; BLIP-2's), or SAM's (a longest-edge resize and padding to pad_size).
enum class ProcessorKind { kViT, kBlip, kSam };

// The settings of HF's ViTImageProcessor (and ViTFeatureExtractor) or SamImageProcessor, the
// processor's defaults where the file has none.
struct ImageProcessorOptions {
  ProcessorKind kind = ProcessorKind::kViT;
  bool do_resize = true;
  SizeRule size{.height = 224, .width = 224};
  Resample resample = Resample::kBilinear;
  bool do_center_crop = false;
  SizeRule crop_size{.height = 224, .width = 224};
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<float, 3> image_mean{0.5F, 0.5F, 0.5F}, image_std{0.5F, 0.5F, 0.5F};
  // HF's convert_to_rgb first: a PNG's transparent colour painted white (Image::
  // transparent_colour). The file's setting; SAM's and BLIP's processors default to it.
  bool do_convert_rgb = false;
  bool do_pad = false;  // SAM: zeros below and right of the normalized image up to pad_size
  SizeRule pad_size{};

  // The file's settings. Throws CheckpointError naming the file and key for a value of the wrong
  // kind, a processor other than ViT's, BLIP's or SAM's, or a setting this host does not apply
  // (padding, label reduction, ...): never a silently different image.
  static ImageProcessorOptions from_file(const std::filesystem::path& path);
  // A model folder's preprocessor_config.json, or else the image_processor object of its
  // processor_config.json (where transformers 5 saves it); throws CheckpointError when neither.
  static ImageProcessorOptions from_folder(const std::filesystem::path& folder);
};

// The (height, width) the resize step gives an image of this size. Throws ConfigError when a
// shortest-edge rule would make it larger than kMaxImagePixels (a very long, thin image).
std::array<int64_t, 2> resized_size(const Image& image, const ImageProcessorOptions& options);

// HF's pixel_values of one image [3, height, width] fp32: resized (PIL), centre-cropped (zero
// padded where the crop is larger), rescaled (in float64, then fp32), normalized (fp32) and
// padded (SAM). Throws ConfigError as resized_size() does, or when the resized image is larger
// than pad_size.
at::Tensor pixel_values(const Image& image, const ImageProcessorOptions& options);

// SAM's prompt coordinates (SamProcessor): points [..., 2] (x, y) in pixels of an image of
// `original` (height, width) scaled to the resized image of `resized` (height, width), in
// float64 as HF computes them, returned as fp32. Boxes are two such points each.
at::Tensor scale_coordinates(const at::Tensor& points, std::array<int64_t, 2> original,
                             std::array<int64_t, 2> resized);

// SAM's masks back on the image (SamImageProcessor.post_process_masks): masks [..., h, w] (the
// model's pred_masks) resized bilinearly to pad_size, cropped to the resized image (height,
// width), resized to the original image (height, width) and compared with `threshold`: bool
// [..., original height, original width].
at::Tensor post_process_masks(const at::Tensor& masks, std::array<int64_t, 2> pad_size,
                              std::array<int64_t, 2> resized, std::array<int64_t, 2> original,
                              double threshold = 0.0);

}  // namespace shardformer::vision
