// Fuzz target: image files (vision::decode_image: JPEG through libjpeg-turbo, PNG through libpng,
// EXIF orientation, colour modes), then HF's preprocessing of what decodes (resize with two
// filters, a centre crop larger than the image, rescale, normalize). ConfigError is the expected
// outcome for a file that is not a whole image.
#include "shardformer/error.h"
#include "shardformer/vision/image.h"
#include "shardformer/vision/image_processor.h"

#include <cstdint>

namespace {

using namespace shardformer::vision;

// Declared sizes past this are refused before decoding: the target stays fast on headers that
// promise large images; the limit's own check is the same code as the default's. The resizes
// keep outputs small whatever the aspect ratio (a shortest edge of 2 on a 1 x 16384 image makes
// 2 x 32768).
constexpr int64_t kFuzzMaxPixels = 1 << 14;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const Image image = decode_image({data, size}, "fuzz.image", kFuzzMaxPixels);
    ImageProcessorOptions options;
    options.size = SizeRule{.height = 7, .width = 5};
    pixel_values(image, options);
    options.resample = Resample::kLanczos;
    options.size = SizeRule{.shortest_edge = 2};
    options.do_center_crop = true;
    options.crop_size = SizeRule{.height = 6, .width = 40};
    pixel_values(image, options);
  } catch (const shardformer::ConfigError&) {
    // Not a whole JPEG or PNG image: refused naming the file.
  }
  return 0;
}
