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

ImageProcessorOptions ImageProcessorOptions::from_file(const std::filesystem::path& path) {
  ImageProcessorOptions o;
  const json file = detail::read_json_file(path);
  if (!file.is_object()) throw CheckpointError(str(path.string(), ": expected a JSON object"));
  const auto fail = [&](const std::string& key, const std::string& what) -> CheckpointError {
    return CheckpointError(str(path.string(), ": ", key, ": ", what));
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
  // HF's get_size_dict: an integer is a square (ViT's default_to_square); an object gives height
  // and width, or the shortest edge.
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
      } else {
        throw fail(key + "." + name,
                   "is not a size rule this host applies (height and width, or "
                   "shortest_edge)");
      }
    }
    const bool square = rule.height > 0 && rule.width > 0;
    if (square == (rule.shortest_edge > 0) || (!square && (rule.height > 0 || rule.width > 0))) {
      throw fail(key, "give height and width, or shortest_edge alone");
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
  static const std::set<std::string> kProcessors = {"ViTImageProcessor", "ViTImageProcessorPil",
                                                    "ViTFeatureExtractor"};
  for (const auto& [key, v] : file.items()) {
    if (v.is_null() || key == "processor_class") continue;
    if (key == "image_processor_type" || key == "feature_extractor_type") {
      if (!v.is_string() || !kProcessors.contains(v.get<std::string>())) {
        throw fail(key, str(detail::describe_json(v),
                            " is not an image processor this host runs "
                            "(ViTImageProcessor, ViTFeatureExtractor)"));
      }
    } else if (key == "do_resize") {
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
      boolean(key, v);  // images are always converted to RGB, as HF's load_image does
    } else {
      throw fail(key, "is not a ViTImageProcessor setting this host applies");
    }
  }
  return o;
}

ImageProcessorOptions ImageProcessorOptions::from_folder(const std::filesystem::path& folder) {
  const std::filesystem::path path = folder / "preprocessor_config.json";
  if (!std::filesystem::exists(path)) {
    throw CheckpointError(str(folder.string(),
                              ": no preprocessor_config.json (the image "
                              "processor's settings) in the model folder"));
  }
  return from_file(path);
}

std::array<int64_t, 2> resized_size(const Image& image, const ImageProcessorOptions& options) {
  const SizeRule& s = options.size;
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
  at::Tensor out = at::empty({3, height, width}, at::kFloat);  // [3, height, width]
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
        data[(c * height + y) * width + x] = value;
      }
    }
  }
  return out;
}

}  // namespace shardformer::vision
