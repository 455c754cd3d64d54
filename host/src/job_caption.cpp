// The caption job: images in, text out, with BLIP-2 as HF's Blip2Processor and generate() run
// it: each image's pixel_values from the folder's image processor, a prompt of the model's image
// tokens then the tokenized text, greedy decoding; rank 0 prints each caption and writes JSON
// lines.
#include "job_modes.h"
#include "jobs.h"
#include "output_file.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/tokenizer.h"
#include "shardformer/vision/image_processor.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace shardformer::host {

namespace fs = std::filesystem;

void run_caption(const JobConfig& config, Session& session, bool writer, std::ostream& out,
                 const JobInputs* read) {
  const CaptionSection& c = config.caption;
  const HFConfig& hf = session.checkpoint().config();
  if (session.architecture() != "Blip2ForConditionalGeneration") {
    throw ConfigError(str(config.source.string(),
                          ": job.mode = \"caption\" needs an image-to-text model "
                          "(Blip2ForConditionalGeneration), not ",
                          session.architecture()));
  }
  const fs::path folder = session.checkpoint().directory();
  if (!fs::exists(folder / "tokenizer.json")) {
    throw ConfigError(str(config.source.string(), ": caption: '", folder.string(),
                          "' has no tokenizer.json to turn text into ids and back"));
  }
  const vision::ImageProcessorOptions processor =
      vision::ImageProcessorOptions::from_folder(folder);
  if (writer && !c.output.empty()) check_output_path(config, c.output, "caption.output");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_file(folder);
  // Blip2Processor's input_ids: num_query_tokens image tokens, then the prompt with the
  // tokenizer's special tokens (OPT's bos).
  const int64_t image_token =
      hf.has("image_token_id") ? hf.get_int("image_token_id") : hf.get_int("image_token_index");
  std::vector<int64_t> prompt(static_cast<size_t>(hf.get_int("num_query_tokens")), image_token);
  const std::vector<int64_t> text = tok.encode(c.prompt);
  prompt.insert(prompt.end(), text.begin(), text.end());
  const GenerationConfig generation =
      session.generation_config(c.max_new_tokens, std::nullopt, std::nullopt);

  std::vector<vision::Image> decoded;
  const std::vector<vision::Image>& images = job_images(config, read, decoded);

  OutputFile file(c.output, writer);
  const auto start = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  for (size_t first = 0; first < images.size(); first += static_cast<size_t>(c.batch_size)) {
    const size_t last = std::min(images.size(), first + static_cast<size_t>(c.batch_size));
    const std::vector<std::vector<int64_t>> prompts(last - first, prompt);
    const GenerationResult result = session.generate_with_images(
        prompts, job_pixel_values(config, images, first, last, processor), generation);
    for (size_t row = 0; row < prompts.size(); ++row) {
      const std::vector<int64_t>& ids = result.new_tokens[row];
      tokens += static_cast<int64_t>(ids.size());
      if (!writer) continue;
      const std::string caption = tok.decode(ids);
      out << "caption[" << first + row << "]: " << caption << std::endl;
      if (!file.is_open()) continue;
      nlohmann::ordered_json line;
      line["image"] = c.images[first + row].string();
      line["prompt"] = c.prompt;
      line["text"] = caption;
      line["ids"] = ids;
      file.write_line(line.dump());
    }
  }
  const double elapsed = seconds_since(start);
  if (file.is_open()) {
    file.commit();
    out << "caption: captions written to " << c.output.string() << std::endl;
  }
  log::info(str("caption: ", images.size(), " images, ", tokens, " tokens in ", elapsed, " s (",
                static_cast<double>(tokens) / std::max(elapsed, 1e-9), " tokens/s)"));
}

}  // namespace shardformer::host
