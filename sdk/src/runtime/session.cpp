// Session: checkpoint, parallel context, pipeline stage and model of one rank, and running it.
#include "shardformer/runtime/session.h"

#include "shardformer/runtime/inference_scope.h"

#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/pipeline/pipeline_generate.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>

namespace shardformer {
namespace {

std::string first_architecture(const Checkpoint& checkpoint) {
  const auto architectures = checkpoint.config().architectures();
  if (architectures.empty()) {
    throw CheckpointError(checkpoint.config().path().string() +
                          ": no \"architectures\" entry names the model class to build");
  }
  return architectures.front();
}

// An override rule that matches no module of the model is most likely a typo.
void warn_unmatched_overrides(const std::string& origin, const Policy& overrides,
                              const Model& model) {
  std::vector<std::string> modules;
  for (const auto& item : model.named_parameters()) {
    modules.push_back(item.key().substr(0, item.key().rfind('.')));
  }
  for (const PolicyRule& rule : overrides.rules()) {
    const bool used = std::any_of(modules.begin(), modules.end(), [&](const std::string& path) {
      return Policy::matches(rule.pattern, path);
    });
    if (!used) {
      log::warn(str(origin, ": [[shard.policy]] module '", rule.pattern,
                    "' matches no module of the model"));
    }
  }
}

}  // namespace

Session::Session(SessionOptions options, const ModelFactory& factory,
                 const distributed::ProcessMesh* mesh)
    : options_(std::move(options)), mesh_(mesh) {
  if (options_.origin.empty()) options_.origin = "session options";
  checkpoint_ = std::make_unique<Checkpoint>(options_.checkpoint);
  architecture_ =
      options_.architecture.empty() ? first_architecture(*checkpoint_) : options_.architecture;

  parallel_.tp = mesh_ ? &mesh_->tp() : nullptr;
  parallel_.dp = mesh_ ? &mesh_->dp() : nullptr;
  parallel_.sp = mesh_ ? &mesh_->sp() : nullptr;
  parallel_.config = options_.shard;
  parallel_.policy = options_.overrides;
  try {
    check_sequence_layout(parallel_);
  } catch (const ConfigError& e) {
    fail_config(e.what());
  }
  const int64_t pp = mesh_ ? mesh_->shape().pp : 1;
  if (pp > 1) {
    const std::optional<int64_t> layers = checkpoint_->config().pipeline_layers();
    if (!layers) {
      throw ConfigError(str(checkpoint_->config().path().string(),
                            ": no layer count (num_hidden_layers, n_layer, num_layers; an "
                            "encoder-decoder's two) to split over ",
                            pp, " pipeline stages"));
    }
    try {
      stages_.emplace(pp, mesh_->coordinate().pp, *layers, options_.pipeline.num_model_chunks,
                      options_.pipeline.layers_per_stage);
    } catch (const ConfigError& e) {
      fail_config(e.what());
    }
    parallel_.pipeline = &*stages_;
  }

  model_ = factory(
      ModelArgs{checkpoint_.get(), architecture_, options_.dtype, options_.device, &parallel_});
  if (!model_) throw ModelError(str("no model was built for ", architecture_));
  check_checkpoint_usage(*checkpoint_, model_->checkpoint_usage(),
                         mesh_ ? &mesh_->world() : nullptr, options_.usage);
  if (!stages_) warn_unmatched_overrides(options_.origin, options_.overrides, *model_);
  if (parallel_.tensor_parallel() && model_->sharding().empty()) {
    log::warn(str(architecture_, ": no parameter is split: every rank holds the whole model"));
  }
}

void Session::fail_config(const std::string& what) const {
  throw ConfigError(str(options_.origin, ": ", what));
}

pipeline::PipelineOptions Session::pipeline_options(int64_t batch) const {
  pipeline::PipelineOptions result;
  result.schedule = options_.pipeline.schedule;
  const int64_t pp = stages_ ? stages_->num_stages() : 1;
  const int64_t m = options_.pipeline.num_microbatches;
  result.num_microbatches = m > 0 ? m
                            : result.schedule == pipeline::ScheduleKind::kInterleaved
                                ? pp
                                : std::min(batch, pp);
  try {
    pipeline::check_schedule(result.schedule,
                             {pp, result.num_microbatches, options_.pipeline.num_model_chunks});
  } catch (const ConfigError& e) {
    fail_config(e.what());
  }
  if (result.num_microbatches > batch) {
    fail_config(str("pipeline.num_microbatches = ", result.num_microbatches,
                    " exceeds the batch of ", batch, " sequences"));
  }
  return result;
}

GenerationConfig Session::generation_config(int64_t max_new_tokens,
                                            std::optional<int64_t> eos_token_id,
                                            std::optional<int64_t> pad_token_id,
                                            const std::set<std::string>& read_by_caller) const {
  const HFConfig& hf = checkpoint_->config();
  GenerationConfig config;
  config.max_new_tokens = max_new_tokens;
  config.eos_token_id = hf.get_optional_int("eos_token_id");
  config.pad_token_id = hf.get_optional_int("pad_token_id").value_or(-1);
  config.decoder_start_token_id = hf.get_optional_int("decoder_start_token_id");
  apply_generation_config_file(checkpoint_->directory(), config, read_by_caller);
  if (config.pad_token_id < 0) config.pad_token_id = config.eos_token_id.value_or(0);
  if (eos_token_id) {
    config.eos_token_id = eos_token_id;
    config.more_eos_token_ids.clear();
  }
  if (pad_token_id) config.pad_token_id = *pad_token_id;
  return config;
}

pipeline::PipelineRunner& Session::runner(int64_t batch) {
  const pipeline::PipelineOptions wanted = pipeline_options(batch);
  if (!runner_ || runner_->options().num_microbatches != wanted.num_microbatches) {
    runner_ = std::make_unique<pipeline::PipelineRunner>(*model_, mesh_->pp(), wanted);
  }
  return *runner_;
}

namespace {

// The batch's tensors on the model's device (the same tensors where they are there already):
// callers may pass CPU token ids to a GPU session, as the host's jobs and data loader do.
ForwardInputs on_device(const ForwardInputs& batch, c10::Device device) {
  ForwardInputs moved = batch;
  for (at::Tensor* t :
       {&moved.input_ids, &moved.attention_mask, &moved.position_ids, &moved.token_type_ids,
        &moved.hidden_states, &moved.decoder_input_ids, &moved.decoder_attention_mask,
        &moved.input_features, &moved.pixel_values}) {
    if (t->defined()) *t = t->to(device);
  }
  return moved;
}

}  // namespace

at::Tensor Session::forward(const ForwardInputs& inputs) {
  const ForwardInputs batch = on_device(inputs, options_.device);
  if (stages_) return runner(batch.rows()).forward(batch);
  const runtime::InferenceScope inference;
  return model_->forward(batch);
}

at::Tensor Session::loss(const ForwardInputs& inputs, const at::Tensor& targets) {
  const ForwardInputs batch = on_device(inputs, options_.device);
  const at::Tensor labels = targets.to(options_.device);
  if (stages_) return runner(batch.rows()).loss(batch, labels);
  const runtime::InferenceScope inference;
  return model_->loss(batch, labels);
}

at::Tensor Session::train_step(const ForwardInputs& inputs, const at::Tensor& targets,
                               double loss_scale) {
  const ForwardInputs batch = on_device(inputs, options_.device);
  const at::Tensor labels = targets.to(options_.device);
  if (stages_) return runner(batch.rows()).train_step(batch, labels, loss_scale);
  const at::Tensor loss = model_->loss(batch, labels);
  (loss_scale != 1.0 ? loss * loss_scale : loss).backward();
  return loss.detach();
}

GenerationResult Session::generate(const std::vector<std::vector<int64_t>>& prompts,
                                   const GenerationConfig& config) {
  if (model_->sequence_parallelism().active()) {
    fail_config(
        "generation runs without sequence parallelism (decoding adds one token at a time): set "
        "shard.enable_sequence_parallelism = false");
  }
  if (stages_) return pipeline::pipeline_generate(*model_, mesh_->pp(), prompts, config);
  return shardformer::generate(*model_, prompts, config);
}

GenerationResult Session::generate_from_features(const at::Tensor& input_features,
                                                 const GenerationConfig& config) {
  if (stages_) {
    return pipeline::pipeline_generate_from_features(*model_, mesh_->pp(), input_features, config);
  }
  return shardformer::generate_from_features(*model_, input_features, config);
}

GenerationResult Session::generate_with_images(const std::vector<std::vector<int64_t>>& prompts,
                                               const at::Tensor& pixel_values,
                                               const GenerationConfig& config) {
  if (stages_) {
    fail_config("generation with images runs without pipeline parallelism: set pp_size = 1");
  }
  return shardformer::generate_with_images(*model_, prompts, pixel_values, config,
                                           forward_step_of(*model_));
}

}  // namespace shardformer
