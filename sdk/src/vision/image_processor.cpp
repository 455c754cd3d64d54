// HF's ViT image processor (PIL backend): preprocessor_config.json read and refused key by key,
// and resize, centre crop, rescale and normalize in HF's order and arithmetic.
#include "shardformer/vision/image_processor.h"

#include "../json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <set>

namespace shardformer::vision {
namespace {

using nlohmann::json;

// Python's floor division, which HF's centre crop uses on sizes that may be negative.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

namespace {

// The settings in `file` (the object of preprocessor_config.json, or processor_config.json's
// "image_processor"), errors naming `path` and the key after `prefix`.
ImageProcessorOptions parse_options(const json& file, const std::filesystem::path& path,
                                    const std::string& prefix) {
  ImageProcessorOptions o;
  if (!file.is_object()) {
    throw CheckpointError(str(path.string(), ": ", prefix, " expected a JSON object"));
  }
  const auto fail = [&](const std::string& key, const std::string& what) -> CheckpointError {
    return CheckpointError(str(path.string(), ": ", prefix, key, ": ", what));
  };
  const auto boolean = [&](const std::string& key, const json& v) {
    if (!v.is_boolean())
      throw fail(key, str("expected true or false, not ", detail::describe_json(v)));
    return v.get<bool>();
  };
  const auto positive = [&](const std::string& key, const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      throw fail(key, str("expected a positive integer, not ", detail::describe_json(v)));
    }
    return v.get<int64_t>();
  };
  // The processor first: SAM's takes settings that ViT's refuses.
  static const std::set<std::string> kViT = {"ViTImageProcessor", "ViTImageProcessorPil",
                                             "ViTFeatureExtractor"};
  static const std::set<std::string> kSam = {"SamImageProcessor", "SamImageProcessorPil"};
  static const std::set<std::string> kBlip = {"BlipImageProcessor", "BlipImageProcessorPil"};
  for (const char* key : {"image_processor_type", "feature_extractor_type"}) {
    const auto it = file.find(key);
    if (it == file.end() || it->is_null()) continue;
    if (it->is_string() && kSam.contains(it->get<std::string>())) {
      o.kind = ProcessorKind::kSam;
    } else if (it->is_string() && kBlip.contains(it->get<std::string>())) {
      o.kind = ProcessorKind::kBlip;
    } else if (!it->is_string() || !kViT.contains(it->get<std::string>())) {
      throw fail(key, str(detail::describe_json(*it),
                          " is not an image processor this host runs "
                          "(ViTImageProcessor, ViTFeatureExtractor, BlipImageProcessor, "
                          "SamImageProcessor)"));
    }
  }
  const bool sam = o.kind == ProcessorKind::kSam;
  if (sam) {  // SamImageProcessor's defaults
    o.size = SizeRule{.longest_edge = 1024};
    o.image_mean = {0.485F, 0.456F, 0.406F};
    o.image_std = {0.229F, 0.224F, 0.225F};
    o.do_pad = true;
    o.pad_size = SizeRule{.height = 1024, .width = 1024};
    o.do_convert_rgb = true;
  } else if (o.kind == ProcessorKind::kBlip) {  // BlipImageProcessor's defaults
    o.size = SizeRule{.height = 384, .width = 384};
    o.resample = Resample::kBicubic;
    o.image_mean = {0.48145466F, 0.4578275F, 0.40821073F};  // OpenAI CLIP's
    o.image_std = {0.26862954F, 0.26130258F, 0.27577711F};
    o.do_convert_rgb = true;
  }
  // HF's get_size_dict: an integer is a square (ViT's default_to_square); an object gives height
  // and width, the shortest edge, or (SAM) the longest edge.
  const auto size_rule = [&](const std::string& key, const json& v) {
    if (v.is_number_integer()) {
      const int64_t side = positive(key, v);
      return SizeRule{.height = side, .width = side};
    }
    if (!v.is_object()) throw fail(key, "expected an integer or an object of sizes");
    SizeRule rule;
    for (const auto& [name, side] : v.items()) {
      if (side.is_null()) continue;
      if (name == "height") {
        rule.height = positive(key + "." + name, side);
      } else if (name == "width") {
        rule.width = positive(key + "." + name, side);
      } else if (name == "shortest_edge") {
        rule.shortest_edge = positive(key + "." + name, side);
      } else if (name == "longest_edge" && sam) {
        rule.longest_edge = positive(key + "." + name, side);
      } else {
        throw fail(key + "." + name,
                   str("is not a size rule this host applies (height and width, or ",
                       sam ? "longest_edge" : "shortest_edge", ")"));
      }
    }
    const bool square = rule.height > 0 && rule.width > 0;
    const int edges = (rule.shortest_edge > 0 ? 1 : 0) + (rule.longest_edge > 0 ? 1 : 0);
    if ((square ? 1 : 0) + edges != 1 || (!square && (rule.height > 0 || rule.width > 0))) {
      throw fail(key, "give height and width, or one edge alone");
    }
    return rule;
  };
  const auto triple = [&](const std::string& key, const json& v) {
    std::array<float, 3> t{};
    if (v.is_number()) {
      t.fill(v.get<float>());
      return t;
    }
    if (!v.is_array() || v.size() != 3) throw fail(key, "expected a number or three numbers");
    for (size_t i = 0; i < 3; ++i) {
      if (!v[i].is_number()) throw fail(key, "expected three numbers");
      t[i] = v[i].get<float>();
    }
    return t;
  };
  for (const auto& [key, v] : file.items()) {
    if (v.is_null() || key == "processor_class" || key == "image_processor_type" ||
        key == "feature_extractor_type") {
      continue;
    }
    if (key == "do_resize") {
      o.do_resize = boolean(key, v);
    } else if (key == "size") {
      o.size = size_rule(key, v);
    } else if (key == "resample") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 5) {
        throw fail(key, str(detail::describe_json(v),
                            " is not one of PIL's filters this host "
                            "applies (1 Lanczos, 2 bilinear, 3 bicubic, "
                            "4 box, 5 Hamming)"));
      }
      o.resample = static_cast<Resample>(v.get<int64_t>());
    } else if (key == "do_center_crop") {
      o.do_center_crop = boolean(key, v);
    } else if (key == "crop_size") {
      o.crop_size = size_rule(key, v);
      if (o.crop_size.shortest_edge > 0) throw fail(key, "a crop needs height and width");
    } else if (key == "do_rescale") {
      o.do_rescale = boolean(key, v);
    } else if (key == "rescale_factor") {
      if (!v.is_number()) throw fail(key, "expected a number");
      o.rescale_factor = v.get<double>();
    } else if (key == "do_normalize") {
      o.do_normalize = boolean(key, v);
    } else if (key == "image_mean") {
      o.image_mean = triple(key, v);
    } else if (key == "image_std") {
      o.image_std = triple(key, v);
      for (const float s : o.image_std) {
        if (s == 0.0F) throw fail(key, "a standard deviation of 0 divides by zero");
      }
    } else if (key == "do_convert_rgb") {
      o.do_convert_rgb = boolean(key, v);
    } else if (sam && key == "do_pad") {
      o.do_pad = boolean(key, v);
    } else if (sam && key == "pad_size") {
      o.pad_size = size_rule(key, v);
    } else if (sam && (key == "mask_size" || key == "mask_pad_size")) {
      size_rule(key, v);  // for segmentation maps (training labels), not for pixel_values
    } else {
      throw fail(key, str("is not a ",
                          sam                              ? "SamImageProcessor"
                          : o.kind == ProcessorKind::kBlip ? "BlipImageProcessor"
                                                           : "ViTImageProcessor",
                          " setting this host applies"));
    }
  }
  if (sam && o.do_resize && o.size.longest_edge == 0) {
    throw fail("size", "SamImageProcessor resizes to a longest_edge");
  }
  if (!sam && o.size.longest_edge > 0) throw fail("size", "longest_edge is SAM's rule");
  if (o.do_pad && (o.pad_size.height == 0 || o.pad_size.width == 0)) {
    throw fail("pad_size", "padding needs a height and a width");
  }
  return o;
}

}  // namespace

ImageProcessorOptions ImageProcessorOptions::from_file(const std::filesystem::path& path) {
  return parse_options(detail::read_json_file(path), path, "");
}

ImageProcessorOptions ImageProcessorOptions::from_folder(const std::filesystem::path& folder) {
  const std::filesystem::path path = folder / "preprocessor_config.json";
  if (std::filesystem::exists(path)) return from_file(path);
  // transformers 5 saves a processor's image settings inside processor_config.json.
  const std::filesystem::path processor = folder / "processor_config.json";
  if (std::filesystem::exists(processor)) {
    const json file = detail::read_json_file(processor);
    const auto it = file.is_object() ? file.find("image_processor") : file.end();
    if (it != file.end()) return parse_options(*it, processor, "image_processor.");
  }
  throw CheckpointError(str(folder.string(),
                            ": no preprocessor_config.json (the image processor's settings), nor "
                            "an image_processor in processor_config.json, in the model folder"));
}

std::array<int64_t, 2> resized_size(const Image& image, const ImageProcessorOptions& options) {
  const SizeRule& s = options.size;
  if (s.longest_edge > 0) {  // SAM's _get_preprocess_shape: each side scaled, rounded to nearest
    const double scale = static_cast<double>(s.longest_edge) /
                         static_cast<double>(std::max(image.height, image.width));
    return {std::max<int64_t>(static_cast<int64_t>(image.height * scale + 0.5), 1),
            std::max<int64_t>(static_cast<int64_t>(image.width * scale + 0.5), 1)};
  }
  if (s.shortest_edge == 0) return {s.height, s.width};
  // HF's get_resize_output_image_size without max_size: the long side int(size * long / short)
  const bool portrait = image.width <= image.height;
  const int64_t short_side = portrait ? image.width : image.height;
  const int64_t long_side = portrait ? image.height : image.width;
  const auto long_out =
      static_cast<int64_t>(static_cast<double>(s.shortest_edge) * static_cast<double>(long_side) /
                           static_cast<double>(short_side));
  if (long_out > kMaxImagePixels / s.shortest_edge) {
    throw ConfigError(str("an image of ", image.width, " x ", image.height,
                          " pixels resized to a "
                          "shortest edge of ",
                          s.shortest_edge, " would hold more than ", kMaxImagePixels, " pixels"));
  }
  return portrait ? std::array<int64_t, 2>{long_out, s.shortest_edge}
                  : std::array<int64_t, 2>{s.shortest_edge, long_out};
}

at::Tensor pixel_values(const Image& input, const ImageProcessorOptions& o) {
  Image image = input;
  if (o.do_convert_rgb && image.transparent_colour) {  // HF's convert_to_rgb
    const std::array<int, 3> c = *image.transparent_colour;
    for (size_t i = 0; i < image.rgb.size(); i += 3) {
      uint8_t* p = &image.rgb[i];
      if (p[0] == c[0] && p[1] == c[1] && p[2] == c[2]) p[0] = p[1] = p[2] = 255;
    }
  }
  if (o.do_resize) {
    const auto [height, width] = resized_size(image, o);
    image = resize(image, width, height, o.resample);
  }
  // HF's centre crop: the window at floor((size - crop) / 2); where it reaches past the image,
  // the image is first padded with zeros, centred (ceil of half the difference on the top-left).
  int64_t top = 0, left = 0, height = image.height, width = image.width;
  int64_t pad_top = 0, pad_left = 0;
  if (o.do_center_crop) {
    height = o.crop_size.height;
    width = o.crop_size.width;
    top = floor_div(image.height - height, 2);
    left = floor_div(image.width - width, 2);
    if (top < 0 || left < 0 || top + height > image.height || left + width > image.width) {
      const int64_t padded_height = std::max(height, image.height);
      const int64_t padded_width = std::max(width, image.width);
      pad_top = (padded_height - image.height + 1) / 2;
      pad_left = (padded_width - image.width + 1) / 2;
      top = std::max<int64_t>(top + pad_top, 0);
      left = std::max<int64_t>(left + pad_left, 0);
      height = std::min(height, padded_height - top);
      width = std::min(width, padded_width - left);
    }
  }
  int64_t out_height = height, out_width = width;
  if (o.do_pad) {
    if (height > o.pad_size.height || width > o.pad_size.width) {
      throw ConfigError(str("an image resized to ", width, " x ", height,
                            " pixels is larger than the processor's pad_size ", o.pad_size.width,
                            " x ", o.pad_size.height));
    }
    out_height = o.pad_size.height;
    out_width = o.pad_size.width;
  }
  // [3, height, width], or [3, pad height, pad width] with zeros below and right of the image
  at::Tensor out = o.do_pad ? at::zeros({3, out_height, out_width}, at::kFloat)
                            : at::empty({3, height, width}, at::kFloat);
  float* data = out.data_ptr<float>();
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sy = top + y - pad_top, sx = left + x - pad_left;  // in the image
        const bool inside = sy >= 0 && sy < image.height && sx >= 0 && sx < image.width;
        const uint8_t v = inside ? image.rgb[(sy * image.width + sx) * 3 + c] : 0;
        auto value = o.do_rescale ? static_cast<float>(static_cast<double>(v) * o.rescale_factor)
                                  : static_cast<float>(v);
        if (o.do_normalize) value = (value - o.image_mean[c]) / o.image_std[c];
        data[(c * out_height + y) * out_width + x] = value;
      }
    }
  }
  return out;
}

at::Tensor scale_coordinates(const at::Tensor& points, std::array<int64_t, 2> original,
                             std::array<int64_t, 2> resized) {
  if (points.dim() < 1 || points.size(-1) != 2) {
    throw Error(
        str("scale_coordinates: points must be [..., 2], not ", shape_str(points.sizes().vec())));
  }
  const at::Tensor scale =
      at::tensor({static_cast<double>(resized[1]) / static_cast<double>(original[1]),
                  static_cast<double>(resized[0]) / static_cast<double>(original[0])},
                 at::kDouble);
  return (points.to(at::kDouble) * scale).to(at::kFloat);
}

at::Tensor post_process_masks(const at::Tensor& masks, std::array<int64_t, 2> pad_size,
                              std::array<int64_t, 2> resized, std::array<int64_t, 2> original,
                              double threshold) {
  if (masks.dim() < 2 || resized[0] > pad_size[0] || resized[1] > pad_size[1]) {
    throw Error(str("post_process_masks: masks [..., h, w] (", shape_str(masks.sizes().vec()),
                    ") of an image resized to ", resized[1], " x ", resized[0], " within pad_size ",
                    pad_size[1], " x ", pad_size[0]));
  }
  const at::Tensor flat = masks.reshape({1, -1, masks.size(-2), masks.size(-1)}).to(at::kFloat);
  const at::Tensor padded =
      at::upsample_bilinear2d(flat, {pad_size[0], pad_size[1]}, /*align_corners=*/false);
  const at::Tensor cropped = padded.narrow(2, 0, resized[0]).narrow(3, 0, resized[1]);
  const at::Tensor full =
      at::upsample_bilinear2d(cropped, {original[0], original[1]}, /*align_corners=*/false);
  std::vector<int64_t> shape = masks.sizes().vec();
  shape[shape.size() - 2] = original[0];
  shape[shape.size() - 1] = original[1];
  return (full > threshold).reshape(shape);
}

}  // namespace shardformer::vision
