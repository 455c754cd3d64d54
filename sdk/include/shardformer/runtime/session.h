// Session: a model on one rank of a job, assembled the same way for the host's jobs, the tests
// and library users. It opens the checkpoint, builds the parallel context and the pipeline
// stage from the layout, builds the model through its family's factory, refuses a checkpoint
// it did not fully use, and runs the model with the pipeline hidden: forward, LM loss, a
// training step's forward and backward, greedy generation.
#pragma once

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/checkpoint_io/checkpoint_usage.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/generation.h"
#include "shardformer/model.h"
#include "shardformer/pipeline/pipeline_runner.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardformer {

// How a pipeline (mesh pp > 1) splits the model and schedules micro-batches.
struct PipelineLayout {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kOneFOneB;
  int64_t num_microbatches = 0;                            // 0: min(batch, pp); interleaved: pp
  int64_t num_model_chunks = 1;                            // interleaved: >= 2
  std::optional<std::vector<int64_t>> layers_per_stage{};  // per piece in model order
};

struct SessionOptions {
  std::filesystem::path checkpoint{};
  std::string architecture{};  // empty: the first of config.json's "architectures"
  c10::ScalarType dtype = c10::kFloat;
  c10::Device device = c10::kCPU;
  ShardConfig shard{};
  Policy overrides{};  // rules appended after the family's policy (they win)
  PipelineLayout pipeline{};
  UsagePolicy usage{};
  // What errors about these options name (the job config file); empty: "session options".
  std::string origin{};
};

// Builds a model: a plugin's factory (host::PluginRegistry::create_model) or any function.
using ModelFactory = std::function<std::shared_ptr<Model>(const ModelArgs&)>;

class Session {
 public:
  // mesh: the job's ranks (null: one rank); it must outlive the session. Collective over the
  // mesh (the checkpoint-usage check). Throws ConfigError for a layout that does not fit the
  // model, CheckpointError / ModelError for a checkpoint the model cannot use.
  Session(SessionOptions options, const ModelFactory& factory,
          const distributed::ProcessMesh* mesh = nullptr);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Model& model() const { return *model_; }
  const std::shared_ptr<Model>& model_ptr() const { return model_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  const std::string& architecture() const { return architecture_; }
  const ParallelContext& parallel() const { return parallel_; }
  const distributed::ProcessMesh* mesh() const { return mesh_; }
  // This rank's pipeline stage; null without a pipeline.
  const PipelineStageManager* stages() const { return stages_ ? &*stages_ : nullptr; }
  // Whether forward() and the losses return the model's output here: every rank without a
  // pipeline, the last stage with one.
  bool holds_output() const { return !stages_ || stages_->is_last_stage(); }

  // The runner options for a batch of `batch` sequences: the layout's micro-batch count, or
  // its default. Throws ConfigError naming the origin when the batch cannot be split so.
  pipeline::PipelineOptions pipeline_options(int64_t batch) const;
  // Generation settings as HF generate() takes them: config.json's eos_token_id and
  // pad_token_id (pad falls back to eos, then 0), then the folder's generation_config.json
  // (eos lists, pad, sampling defaults), then the arguments. `read_by_caller`: keys of
  // generation_config.json the caller reads itself (apply_generation_config_file).
  GenerationConfig generation_config(int64_t max_new_tokens, std::optional<int64_t> eos_token_id,
                                     std::optional<int64_t> pad_token_id,
                                     const std::set<std::string>& read_by_caller = {}) const;

  // The model's output for a batch ([batch, seq, ...], gathered over tp); undefined on the
  // pipeline stages that do not end the model, and possibly on tp ranks other than 0 when
  // batch.logits_on_first_tp_rank (a language model's logits then go to tp rank 0 only). Runs
  // without gradients. Here and in loss() and train_step(), the batch and labels may be on the CPU:
  // they are moved to the model's device.
  at::Tensor forward(const ForwardInputs& batch);
  // Mean causal-LM loss of the batch (labels [batch, seq], -100 ignored), without gradients;
  // vocab-parallel when ShardConfig::parallel_output. Undefined where !holds_output().
  at::Tensor loss(const ForwardInputs& batch, const at::Tensor& labels);
  // The same loss with its backward pass: gradients accumulate in the model's parameters
  // (shared parameters summed over the stages holding them). What is backpropagated is the
  // loss times loss_scale (a data-parallel rank's share, a mixed-precision scale); the
  // returned loss is not scaled.
  at::Tensor train_step(const ForwardInputs& batch, const at::Tensor& labels,
                        double loss_scale = 1.0);
  // Greedy generation; every rank returns the same result.
  GenerationResult generate(const std::vector<std::vector<int64_t>>& prompts,
                            const GenerationConfig& config);
  // The same for an audio encoder-decoder model: the encoder reads input_features [batch, mels,
  // frames].
  GenerationResult generate_from_features(const at::Tensor& input_features,
                                          const GenerationConfig& config);
  // The same for a decoder-only model that reads an image with each prompt (BLIP-2):
  // pixel_values [batch, channels, height, width]. Throws ConfigError under a pipeline.
  GenerationResult generate_with_images(const std::vector<std::vector<int64_t>>& prompts,
                                        const at::Tensor& pixel_values,
                                        const GenerationConfig& config);

 private:
  pipeline::PipelineRunner& runner(int64_t batch);
  [[noreturn]] void fail_config(const std::string& what) const;

  SessionOptions options_;
  const distributed::ProcessMesh* mesh_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::string architecture_;
  std::optional<PipelineStageManager> stages_;
  ParallelContext parallel_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<pipeline::PipelineRunner> runner_;  // the last batch shape's
};

}  // namespace shardformer
