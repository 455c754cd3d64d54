// The classify job: images in, the model's top labels out, each image prepared as the folder's
// image processor prepares it (vision::pixel_values); rank 0 prints every image's labels with
// their probabilities and writes them to a JSON lines file.
#include "job_modes.h"
#include "jobs.h"
#include "output_file.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"
#include "shardformer/vision/image_processor.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;

std::string percent(double p) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.4f", p);
  return text;
}

}  // namespace

int64_t class_count(const HFConfig& config) {
  const std::optional<HFConfig> id2label = config.get_object("id2label");
  if (id2label) return static_cast<int64_t>(id2label->keys().size());
  return config.get_int("num_labels", 2);
}

std::vector<std::string> class_labels(const HFConfig& config, int64_t classes) {
  std::vector<std::string> labels(static_cast<size_t>(classes));
  const std::optional<HFConfig> id2label = config.get_object("id2label");
  for (int64_t i = 0; i < classes; ++i) {
    const std::string key = std::to_string(i);
    labels[i] = id2label && id2label->has(key) ? id2label->get_string(key) : "LABEL_" + key;
  }
  return labels;
}

void run_classify(const JobConfig& config, Session& session, bool writer, std::ostream& out,
                  const JobInputs* read) {
  const ClassifySection& c = config.classify;
  if (session.model().task() != ModelTask::kSequenceClassification) {
    throw ConfigError(str(config.source.string(),
                          ": job.mode = \"classify\" needs an image "
                          "classifier (such as ViTForImageClassification), "
                          "not ",
                          session.architecture()));
  }
  const fs::path folder = session.checkpoint().directory();
  const vision::ImageProcessorOptions processor =
      vision::ImageProcessorOptions::from_folder(folder);
  if (writer && !c.output.empty()) check_output_path(config, c.output, "classify.output");
  std::vector<vision::Image> decoded;
  double decode_seconds = 0;
  const std::vector<vision::Image>& images = job_images(config, read, decoded, &decode_seconds);

  double preprocess_seconds = 0, model_seconds = 0;
  std::vector<at::Tensor> probabilities;  // [batch, classes] per batch, where holds_output()
  for (size_t first = 0; first < images.size(); first += static_cast<size_t>(c.batch_size)) {
    const size_t last = std::min(images.size(), first + static_cast<size_t>(c.batch_size));
    const auto preprocessing = std::chrono::steady_clock::now();
    ForwardInputs inputs;
    inputs.pixel_values = job_pixel_values(config, images, first, last, processor);  // [b, 3, h, w]
    preprocess_seconds += seconds_since(preprocessing);
    const auto running = std::chrono::steady_clock::now();
    const at::Tensor logits = session.forward(inputs);
    if (logits.defined()) probabilities.push_back(at::softmax(logits.to(at::kFloat), -1));
    model_seconds += seconds_since(running);
  }
  const auto n = static_cast<double>(images.size());
  log::info(str("classify: ", images.size(), " images: decoding ", decode_seconds,
                " s, preprocessing ", preprocess_seconds, " s, model ", model_seconds, " s (",
                n / std::max(model_seconds, 1e-9), " images/s)"));
  if (!writer) return;

  const at::Tensor all = at::cat(probabilities, 0);  // [images, classes]
  const std::vector<std::string> labels = class_labels(session.checkpoint().config(), all.size(1));
  const int64_t k = std::min<int64_t>(c.top_k, all.size(1));
  const auto [top, index] = at::topk(all, k, -1);  // [images, k]
  OutputFile file(c.output);
  for (int64_t i = 0; i < all.size(0); ++i) {
    out << "classify[" << i << "] " << c.images[i].filename().string() << ":";
    nlohmann::ordered_json line;
    line["image"] = c.images[i].string();
    line["labels"] = nlohmann::ordered_json::array();
    for (int64_t j = 0; j < k; ++j) {
      const int64_t id = index[i][j].item<int64_t>();
      const double p = top[i][j].item<double>();
      out << (j == 0 ? " " : ", ") << labels[id] << " " << percent(p);
      line["labels"].push_back({{"label", labels[id]}, {"id", id}, {"probability", p}});
    }
    out << "\n";
    file.write_line(line.dump());
  }
  if (file.is_open()) {
    file.commit();
    out << "classify: labels written to " << c.output.string() << "\n";
  }
}

}  // namespace shardformer::host
