// PIL's convolution resampling of 8-bit images (libImaging/Resample.c's algorithm, written from
// its description): per output pixel, filter weights over the input pixels its footprint covers,
// normalized, turned into fixed-point integers, and one pass per axis, horizontal first.
#include "shardformer/vision/image_processor.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace shardformer::vision {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's fixed-point fraction for 8-bit images

struct Filter {
  double support;
  double (*weight)(double);
};

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::kBox: return {0.5, [](double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }};
    case Resample::kBilinear:
      return {1.0, [](double x) {
                x = std::abs(x);
                return x < 1.0 ? 1.0 - x : 0.0;
              }};
    case Resample::kHamming:
      return {1.0, [](double x) {
                x = std::abs(x);
                if (x == 0.0) return 1.0;
                if (x >= 1.0) return 0.0;
                x *= std::numbers::pi;
                return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
              }};
    case Resample::kBicubic:
      return {2.0, [](double x) {
                constexpr double a = -0.5;
                x = std::abs(x);
                if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
                if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
                return 0.0;
              }};
    case Resample::kLanczos:
      return {3.0, [](double x) { return x > -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }};
    default: throw Error("resize: nearest-neighbour resampling (resample = 0) is not supported");
  }
}

// Each output pixel's first input pixel, count and fixed-point weights along one axis.
struct Coefficients {
  int64_t taps = 0;  // weights per output pixel (some trailing ones zero)
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // [out, taps]
};

Coefficients coefficients(int64_t in_size, int64_t out_size, const Filter& filter) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);  // widened when shrinking: antialiasing
  const double support = filter.support * filter_scale;
  const double inverse_scale = 1.0 / filter_scale;  // PIL multiplies by it: the same rounding
  Coefficients c;
  c.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size * c.taps), 0);
  std::vector<double> w(static_cast<size_t>(c.taps));
  for (int64_t out = 0; out < out_size; ++out) {
    const double center = (static_cast<double>(out) + 0.5) * scale;
    const auto first = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t last = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    const int64_t count = last - first;
    double total = 0.0;
    for (int64_t i = 0; i < count; ++i) {
      w[i] = filter.weight((static_cast<double>(i + first) - center + 0.5) * inverse_scale);
      total += w[i];
    }
    for (int64_t i = 0; i < count; ++i) {
      const double normalized = total != 0.0 ? w[i] / total : w[i];
      const double fixed = normalized * (1 << kPrecisionBits);
      c.weights[out * c.taps + i] =
          static_cast<int32_t>(normalized < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    c.first[out] = first;
    c.count[out] = count;
  }
  return c;
}

uint8_t clip(int32_t sum) {
  const int32_t v = sum >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// in [rows, in_width, 3] -> [rows, out_width, 3]
std::vector<uint8_t> horizontal(const std::vector<uint8_t>& in, int64_t rows, int64_t in_width,
                                const Coefficients& c) {
  const int64_t out_width = static_cast<int64_t>(c.first.size());
  std::vector<uint8_t> out(static_cast<size_t>(rows * out_width * 3));
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* row = in.data() + y * in_width * 3;
    for (int64_t x = 0; x < out_width; ++x) {
      const int32_t* k = c.weights.data() + x * c.taps;
      for (int ch = 0; ch < 3; ++ch) {
        int32_t sum = 1 << (kPrecisionBits - 1);
        for (int64_t i = 0; i < c.count[x]; ++i) sum += row[(c.first[x] + i) * 3 + ch] * k[i];
        out[(y * out_width + x) * 3 + ch] = clip(sum);
      }
    }
  }
  return out;
}

// in [in_height, width, 3] -> [out_height, width, 3]
std::vector<uint8_t> vertical(const std::vector<uint8_t>& in, int64_t width,
                              const Coefficients& c) {
  const int64_t out_height = static_cast<int64_t>(c.first.size());
  std::vector<uint8_t> out(static_cast<size_t>(out_height * width * 3));
  for (int64_t y = 0; y < out_height; ++y) {
    const int32_t* k = c.weights.data() + y * c.taps;
    for (int64_t x = 0; x < width * 3; ++x) {
      int32_t sum = 1 << (kPrecisionBits - 1);
      for (int64_t i = 0; i < c.count[y]; ++i) sum += in[(c.first[y] + i) * width * 3 + x] * k[i];
      out[y * width * 3 + x] = clip(sum);
    }
  }
  return out;
}

}  // namespace

Image resize(const Image& image, int64_t width, int64_t height, Resample r) {
  if (width < 1 || height < 1) {
    throw Error(str("resize: cannot resize to ", width, " x ", height, " pixels"));
  }
  const Filter filter = filter_of(r);
  Image out{.width = width, .height = height, .rgb = image.rgb};
  const bool horizontal_pass = width != image.width, vertical_pass = height != image.height;
  // Pillow 13 runs the vertical pass first where the height shrinks, by more than twice as many
  // pixels as the width does (read from its ImagingResample): the rounding between the passes
  // makes the order visible in the result.
  if (horizontal_pass && height < image.height &&
      image.height - height > 2 * (image.width - width)) {
    out.rgb = vertical(out.rgb, image.width, coefficients(image.height, height, filter));
    out.rgb = horizontal(out.rgb, height, image.width, coefficients(image.width, width, filter));
    return out;
  }
  if (horizontal_pass) {
    out.rgb =
        horizontal(out.rgb, image.height, image.width, coefficients(image.width, width, filter));
  }
  if (vertical_pass) {
    out.rgb = vertical(out.rgb, width, coefficients(image.height, height, filter));
  }
  return out;
}

}  // namespace shardformer::vision
