// The images of the classify, segment and caption jobs: decoded from the config's files (or
// taken from those check_job_inputs decoded before the ranks started) and prepared in batches by
// the model folder's image processor, each error naming the config key and the file.
#include "job_modes.h"
#include "jobs.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::host {
namespace {

const std::vector<std::filesystem::path>& image_files(const JobConfig& config) {
  return config.mode == JobMode::kSegment   ? config.segment.images
         : config.mode == JobMode::kCaption ? config.caption.images
                                            : config.classify.images;
}

}  // namespace

std::vector<vision::Image> read_job_images(const JobConfig& config) {
  const std::vector<std::filesystem::path>& files = image_files(config);
  std::vector<vision::Image> images;
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      images.push_back(vision::read_image(files[i]));
    } catch (const ConfigError& e) {
      throw ConfigError(str(config.source.string(), ": ", job_mode_name(config.mode), ".images[", i,
                            "]: ", e.what()));
    }
  }
  return images;
}

const std::vector<vision::Image>& job_images(const JobConfig& config, const JobInputs* read,
                                             std::vector<vision::Image>& decoded,
                                             double* decode_seconds) {
  if (read != nullptr && read->images.has_value()) {
    if (decode_seconds != nullptr) *decode_seconds = read->decode_seconds;
    return *read->images;
  }
  const auto decoding = std::chrono::steady_clock::now();
  decoded = read_job_images(config);
  if (decode_seconds != nullptr) *decode_seconds = seconds_since(decoding);
  return decoded;
}

at::Tensor job_pixel_values(const JobConfig& config, const std::vector<vision::Image>& images,
                            size_t first, size_t last,
                            const vision::ImageProcessorOptions& processor) {
  std::vector<at::Tensor> pixels;
  for (size_t i = first; i < last; ++i) {
    try {
      pixels.push_back(vision::pixel_values(images[i], processor));  // [3, h, w]
    } catch (const ConfigError& e) {
      throw ConfigError(str(config.source.string(), ": ", job_mode_name(config.mode), ".images[", i,
                            "]: ", image_files(config)[i].string(), ": ", e.what()));
    }
  }
  return at::stack(pixels);  // [last - first, 3, h, w]
}

}  // namespace shardformer::host
