// The segment job: images and point / box prompts in, SAM's masks out. Each image is prepared as
// the folder's SAM image processor prepares it, its prompts scaled with it (SamProcessor); the
// masks come back to the image's size (post_process_masks). Rank 0 prints each mask's IoU score
// and area and writes the masks as PNG files with a JSON lines index.
#include "job_modes.h"
#include "jobs.h"
#include "output_file.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"
#include "shardformer/vision/image_processor.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;

// One prompt's masks [masks, height, width] on its image and their IoU scores [masks].
struct PromptMasks {
  at::Tensor masks, scores;
};

// Prompts of one image that run in one forward pass: the same number of points, each with or
// without a box (SamModel takes them as point batches of one shape).
using PromptShape = std::tuple<int64_t, size_t, bool>;  // image, points, box

std::string score_text(double score) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.4f", score);
  return text;
}

}  // namespace

void run_segment(const JobConfig& config, Session& session, bool writer, std::ostream& out,
                 const JobInputs* read) {
  const SegmentSection& s = config.segment;
  if (session.model().output_name() != "pred_masks") {
    throw ConfigError(str(config.source.string(),
                          ": job.mode = \"segment\" needs a promptable segmentation model "
                          "(SamModel), not ",
                          session.architecture()));
  }
  const vision::ImageProcessorOptions processor =
      vision::ImageProcessorOptions::from_folder(session.checkpoint().directory());
  if (processor.kind != vision::ProcessorKind::kSam) {
    throw ConfigError(str(session.checkpoint().directory().string(),
                          "/preprocessor_config.json: the segment job needs SAM's image "
                          "processor (SamImageProcessor)"));
  }
  if (writer) {
    std::error_code error;
    fs::create_directories(s.output, error);
    if (error || !fs::is_directory(s.output)) {
      throw ConfigError(str(config.source.string(), ": segment.output: cannot make the folder '",
                            s.output.string(), "'", error ? ": " + error.message() : ""));
    }
  }
  std::vector<vision::Image> decoded;
  const std::vector<vision::Image>& images = job_images(config, read, decoded);

  std::map<PromptShape, std::vector<size_t>> groups;  // prompt indices by shape
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    const SegmentPrompt& p = s.prompts[i];
    groups[{p.image, p.points.size(), p.box.has_value()}].push_back(i);
  }
  std::vector<PromptMasks> results(s.prompts.size());
  at::NoGradGuard no_grad;
  double model_seconds = 0;
  for (const auto& [shape, members] : groups) {
    const auto& [image_index, num_points, with_box] = shape;
    const auto index = static_cast<size_t>(image_index);
    const vision::Image& image = images[index];
    const std::array<int64_t, 2> original{image.height, image.width};
    const std::array<int64_t, 2> resized =
        processor.do_resize ? vision::resized_size(image, processor) : original;
    const auto count = static_cast<int64_t>(members.size());
    ForwardInputs inputs;
    inputs.pixel_values =  // [1, 3, pad height, pad width]
        job_pixel_values(config, images, index, index + 1, processor);
    inputs.multimask_output = s.multimask;
    if (num_points > 0) {
      at::Tensor points = at::empty({count, static_cast<int64_t>(num_points), 2}, at::kDouble);
      at::Tensor labels = at::empty({count, static_cast<int64_t>(num_points)}, at::kLong);
      for (int64_t m = 0; m < count; ++m) {
        const SegmentPrompt& p = s.prompts[members[static_cast<size_t>(m)]];
        for (size_t j = 0; j < num_points; ++j) {
          points[m][static_cast<int64_t>(j)][0] = p.points[j][0];
          points[m][static_cast<int64_t>(j)][1] = p.points[j][1];
          labels[m][static_cast<int64_t>(j)] = p.labels[j];
        }
      }
      inputs.input_points = vision::scale_coordinates(points, original, resized).unsqueeze(0);
      inputs.input_labels = labels.unsqueeze(0);  // [1, prompts, points]
    }
    if (with_box) {
      at::Tensor boxes = at::empty({count, 2, 2}, at::kDouble);
      for (int64_t m = 0; m < count; ++m) {
        const std::array<double, 4>& box = *s.prompts[members[static_cast<size_t>(m)]].box;
        for (int64_t k = 0; k < 4; ++k) boxes[m][k / 2][k % 2] = box[static_cast<size_t>(k)];
      }
      inputs.input_boxes = vision::scale_coordinates(boxes, original, resized).view({1, count, 4});
    }
    const auto running = std::chrono::steady_clock::now();
    const std::map<std::string, at::Tensor> outputs = session.model().forward_all(inputs);
    model_seconds += seconds_since(running);
    const std::array<int64_t, 2> pad =
        processor.do_pad
            ? std::array<int64_t, 2>{processor.pad_size.height, processor.pad_size.width}
            : std::array<int64_t, 2>{inputs.pixel_values.size(2), inputs.pixel_values.size(3)};
    // [prompts, masks, image height, image width]
    const at::Tensor masks = vision::post_process_masks(outputs.at("pred_masks")[0], pad, resized,
                                                        original, s.threshold);
    const at::Tensor scores = outputs.at("iou_scores")[0].to(at::kDouble);  // [prompts, masks]
    for (int64_t m = 0; m < count; ++m) {
      results[members[static_cast<size_t>(m)]] = {masks[m], scores[m]};
    }
  }
  log::info(str("segment: ", s.prompts.size(), " prompts on ", images.size(), " images: model ",
                model_seconds, " s"));
  if (!writer) return;

  const fs::path index = s.output / "masks.jsonl";
  OutputFile file(index);
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    const SegmentPrompt& p = s.prompts[i];
    const fs::path& source = s.images[static_cast<size_t>(p.image)];
    const at::Tensor& masks = results[i].masks;  // [masks, height, width] bool
    out << "segment[" << i << "] " << source.filename().string() << ":";
    for (int64_t m = 0; m < masks.size(0); ++m) {
      const at::Tensor grey = (masks[m].to(at::kByte) * 255).contiguous();  // [height, width]
      const fs::path png = s.output / str(source.stem().string(), "_prompt", i, "_mask", m, ".png");
      vision::write_grey_png(png, {grey.data_ptr<uint8_t>(), static_cast<size_t>(grey.numel())},
                             grey.size(1), grey.size(0));
      const double score = results[i].scores[m].item<double>();
      const int64_t area = masks[m].sum().item<int64_t>();
      out << (m == 0 ? " " : ", ") << "mask " << m << " IoU " << score_text(score) << " area "
          << area;
      nlohmann::ordered_json line;
      line["image"] = source.string();
      line["prompt"] = i;
      line["mask"] = m;
      line["file"] = png.string();
      line["iou_score"] = score;
      line["area"] = area;
      file.write_line(line.dump());
    }
    out << "\n";
  }
  file.commit();
  out << "segment: masks written to " << s.output.string() << "\n";
}

}  // namespace shardformer::host
