// The train job: AdamW steps over a token file or labelled images at any dp x pp x tp layout
// (training/trainer.h), progress lines and JSON-lines metrics, evaluation on held-out samples, and
// saves to checkpoint.dir/step-<N> that a later run of the same config continues from.
#include "job_modes.h"

#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/tokenizer.h"
#include "shardformer/training/trainer.h"
#include "shardformer/vision/image_processor.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStatePath = "training_state/trainer_state.json";

// The saves in `dir` by step: step-<N> folders holding a complete training state.
std::map<int64_t, fs::path> saves_in(const fs::path& dir) {
  std::map<int64_t, fs::path> saves;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return saves;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("step-") || !fs::exists(entry.path() / kStatePath)) continue;
    const std::string digits = name.substr(5);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    saves.emplace(std::stoll(digits), entry.path());
  }
  return saves;
}

fs::path save_path(const CheckpointSection& c, int64_t step) { return c.dir / str("step-", step); }

training::TrainOptions train_options(const JobConfig& config) {
  const TrainSection& t = config.train;
  const OptimizerSection& o = config.optimizer;
  training::TrainOptions options;
  options.steps = t.steps;
  options.global_batch_size = t.global_batch_size;
  options.micro_batch_size = t.micro_batch_size;
  options.adam = {.lr = o.lr,
                  .beta1 = o.betas[0],
                  .beta2 = o.betas[1],
                  .eps = o.eps,
                  .weight_decay = o.weight_decay};
  options.schedule = {.kind = training::parse_schedule_kind(o.schedule),
                      .warmup_steps = o.warmup_steps};
  options.max_grad_norm = t.max_grad_norm;
  options.zero_stage = static_cast<int>(t.zero_stage);
  options.eval_batches = t.eval_batches;
  options.precision = training::parse_precision(t.precision);
  options.loss_scale.initial_scale = t.initial_loss_scale;
  options.loss_scale.growth_interval = t.loss_scale_window;
  options.recompute = {.ratio = t.gradient_checkpointing_ratio,
                       .layers_per_stage = t.num_ckpt_layers_per_stage};
  // A save is a model folder: it holds model.path's tokenizer, processor and generation files.
  for (const char* name :
       {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
        "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja",
        "generation_config.json", "preprocessor_config.json", "processor_config.json"}) {
    if (fs::exists(config.model.path / name)) options.save_with.push_back(config.model.path / name);
  }
  return options;
}

// Deletes all but the newest keep_last saves (rank 0, after a save).
void prune_saves(const CheckpointSection& c) {
  if (c.keep_last <= 0) return;
  auto saves = saves_in(c.dir);
  while (static_cast<int64_t>(saves.size()) > c.keep_last) {
    log::info(str("deleting ", saves.begin()->second.string(),
                  " (checkpoint.keep_last = ", c.keep_last, ")"));
    fs::remove_all(saves.begin()->second);
    saves.erase(saves.begin());
  }
}

// One JSON object a line, flushed at once: a crash keeps every line written.
class MetricsFile {
 public:
  explicit MetricsFile(const fs::path& path) {
    if (path.empty()) return;
    std::error_code error;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), error);
    file_ = std::fopen(path.c_str(), "a");
    if (file_ == nullptr) throw ConfigError(str(path.string(), ": cannot open train.metrics_file"));
  }
  ~MetricsFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  void write(const nlohmann::ordered_json& line) {
    if (file_ == nullptr) return;
    std::fputs((line.dump() + "\n").c_str(), file_);
    std::fflush(file_);
  }

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace

fs::path train_resume_checkpoint(const JobConfig& config) {
  const CheckpointSection& c = config.checkpoint;
  const auto saves = saves_in(c.dir);
  if (c.resume == "never") {
    if (!saves.empty()) {
      throw ConfigError(str(config.source.string(), ": checkpoint.resume = \"never\" but ",
                            c.dir.string(), " holds saves (", saves.rbegin()->second.string(),
                            "); give another checkpoint.dir or resume = \"auto\""));
    }
    return {};
  }
  if (c.resume == "auto") return saves.empty() ? fs::path() : saves.rbegin()->second;
  if (!fs::exists(fs::path(c.resume) / kStatePath)) {
    throw CheckpointError(str(config.source.string(), ": checkpoint.resume = \"", c.resume,
                              "\" holds no ", kStatePath, " (not a training save)"));
  }
  return c.resume;
}

void run_train(const JobConfig& config, Session& session, const fs::path& resume, int rank,
               std::ostream& out) {
  const bool writer = rank == 0;
  const CheckpointSection& c = config.checkpoint;
  const training::DataOptions data_options{.path = config.data.path,
                                           .dtype = config.data.dtype,
                                           .seq_len = config.data.seq_len,
                                           .seed = static_cast<uint64_t>(config.data.seed),
                                           .shuffle = config.data.shuffle,
                                           .eval_fraction = config.data.eval_fraction,
                                           .mlm_probability = config.data.mlm_probability,
                                           .mask_token_id = config.data.mask_token_id};
  // Text data (source / target pairs) is tokenized with model.path's tokenizer (a save that
  // training continues from holds none).
  const fs::path& folder = config.model.path;
  std::optional<tokenizer::Tokenizer> tok;
  if (fs::exists(folder / "tokenizer.json")) tok = tokenizer::Tokenizer::from_file(folder);
  // Images are prepared by model.path's image processor, for an image classifier.
  std::optional<training::ImageClasses> images;
  if (session.model().task() == ModelTask::kSequenceClassification &&
      (fs::exists(folder / "preprocessor_config.json") ||
       fs::exists(folder / "processor_config.json"))) {
    const HFConfig& model_config = session.checkpoint().config();
    images = training::ImageClasses{.processor = vision::ImageProcessorOptions::from_folder(folder),
                                    .names = class_labels(model_config, class_count(model_config))};
  }
  const training::TokenDataset data(data_options, session.model().shape().vocab_size,
                                    tok ? &*tok : nullptr, images ? &*images : nullptr);
  if (images && !data.has_images()) {
    throw ConfigError(str(config.source.string(), ": data.path = ", config.data.path.string(), ": ",
                          session.architecture(),
                          " classifies images: its data is {\"image\": \"file\", \"label\": k} "
                          "lines or a folder of images per class"));
  }
  training::Trainer trainer(session, data, train_options(config));
  if (!resume.empty()) {
    trainer.load(resume);
    if (writer)
      out << "train: continuing from " << resume.string() << " at step " << trainer.steps_done()
          << "\n";
  }
  if (trainer.steps_done() >= config.train.steps) {
    if (writer)
      out << "train: the save at step " << trainer.steps_done()
          << " has done train.steps = " << config.train.steps << "; nothing to do\n";
    return;
  }
  if (!c.dir.empty()) {
    std::error_code error;
    fs::create_directories(c.dir, error);
    for (const auto& [step, path] : saves_in(c.dir)) {
      if (step > trainer.steps_done()) {
        throw ConfigError(str(config.source.string(), ": ", path.string(),
                              " is later than the start (step ", trainer.steps_done(),
                              "): a save of this run would replace it"));
      }
    }
  }
  if (writer) {
    for (const auto& [name, label] : data.class_folders()) {
      out << "train: class folder " << name << ": label " << label << "\n";
    }
    if (data.has_images()) {
      out << "train: " << data.num_train() << " images";
    } else {
      out << "train: " << data.num_train()
          << (data.has_targets() ? " source / target pairs (sources up to " : " samples of ")
          << data.seq_len() << " tokens" << (data.has_targets() ? ")" : "");
    }
    out << " (" << data.num_eval() << " held out), " << config.train.global_batch_size
        << " a step, dp " << config.parallel.dp_size << " x pp " << config.parallel.pp_size
        << " x tp " << config.parallel.tp_size << (config.train.zero_stage > 0 ? ", ZeRO-1" : "")
        << ", " << config.train.precision << "\n";
  }
  MetricsFile metrics(writer ? config.train.metrics_file : fs::path());
  const auto save = [&](int64_t step) {
    const fs::path path = save_path(c, step);
    const auto start = std::chrono::steady_clock::now();
    const runtime::PhaseScope phase(str("saving ", path.string()));
    trainer.save(path);
    if (!writer) return;
    prune_saves(c);
    out << "train: saved " << path.string() << " (" << seconds_since(start) << " s)\n";
  };

  const bool scaled = config.train.precision == "fp16";
  const char* unit = data.has_images() ? "images" : "tokens";  // what a step's count counts
  const auto start = std::chrono::steady_clock::now();
  const int64_t first = trainer.steps_done();
  int64_t tokens = 0;
  double last_loss = 0;
  while (trainer.steps_done() < config.train.steps) {
    const runtime::PhaseScope phase(str("training step ", trainer.steps_done() + 1));
    const training::StepMetrics m = trainer.step();
    tokens += m.tokens;
    last_loss = m.loss;
    if (!std::isfinite(m.loss)) {
      throw Error(str("training diverged: the loss of step ", m.step, " is ", m.loss));
    }
    nlohmann::ordered_json record = {{"step", m.step},     {"loss", m.loss},
                                     {"lr", m.lr},         {"grad_norm", m.grad_norm},
                                     {"tokens", m.tokens}, {"seconds", m.seconds}};
    if (scaled) {
      record["loss_scale"] = m.loss_scale;
      record["skipped"] = m.skipped;
    }
    metrics.write(record);
    if (m.skipped) {
      log::warn(str("step ", m.step, ": gradients overflowed at loss scale ", m.loss_scale,
                    "; the update is skipped and the scale halved"));
    }
    if (writer && (m.step % config.train.log_every == 0 || m.step == config.train.steps)) {
      char line[256];
      // The time left at the mean step time of this run so far.
      const int64_t eta = std::llround(seconds_since(start) / static_cast<double>(m.step - first) *
                                       static_cast<double>(config.train.steps - m.step));
      std::snprintf(
          line, sizeof(line),
          "step %lld/%lld  loss %.6f  lr %.3e  grad_norm %.4f  %.3f s  %.0f %s/s"
          "  ETA %lld:%02lld:%02lld%s\n",
          static_cast<long long>(m.step), static_cast<long long>(config.train.steps), m.loss, m.lr,
          m.grad_norm, m.seconds, static_cast<double>(m.tokens) / std::max(m.seconds, 1e-9), unit,
          static_cast<long long>(eta / 3600), static_cast<long long>(eta / 60 % 60),
          static_cast<long long>(eta % 60),
          scaled ? str("  loss scale ", m.loss_scale, m.skipped ? " (skipped)" : "").c_str() : "");
      out << line << std::flush;
    }
    if (config.train.eval_every > 0 && m.step % config.train.eval_every == 0) {
      const double eval_loss = trainer.evaluate();
      metrics.write({{"step", m.step}, {"eval_loss", eval_loss}});
      if (writer) out << "eval step " << m.step << ": loss " << eval_loss << "\n";
    }
    if (!c.dir.empty() && c.save_every > 0 && m.step % c.save_every == 0) save(m.step);
    inject_test_failure(m.step);
  }
  const double elapsed = seconds_since(start);
  const int64_t done = trainer.steps_done() - first;
  if (!c.dir.empty() && !fs::exists(save_path(c, trainer.steps_done()))) {
    save(trainer.steps_done());
  }
  if (writer) {
    out << "train: " << done << " steps in " << elapsed << " s ("
        << static_cast<double>(tokens) / std::max(elapsed, 1e-9) << " " << unit << "/s)";
    if (done > 0) out << "; last loss " << last_loss;
    out << "\n";
  }
}

}  // namespace shardformer::host
