// Forward and generate jobs: load the checkpoint, build the model through its plugin, run.
#include "jobs.h"

#include "shardformer/checkpoint.h"
#include "shardformer/dtype.h"
#include "shardformer/error.h"
#include "shardformer/generation.h"
#include "shardformer/log.h"
#include "shardformer/safetensors.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <chrono>
#include <ostream>

namespace shardformer::host {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void check_single_rank(const JobConfig& config) {
  const ParallelSection& p = config.parallel;
  if (p.tp_size * p.pp_size * p.dp_size != 1) {
    throw ConfigError(str(config.source.string(), ": parallel.tp_size = ", p.tp_size,
                          ", pp_size = ", p.pp_size, ", dp_size = ", p.dp_size,
                          ": this build runs one rank only (tp_size = pp_size = dp_size = 1)"));
  }
}

c10::Device job_device(const JobConfig& config) {
  if (config.model.device == "cuda") {
    if (!torch::cuda::is_available()) {
      throw ConfigError(
          str(config.source.string(), ": model.device = \"cuda\" but no CUDA device is visible"));
    }
    return c10::Device(c10::kCUDA, 0);
  }
  return c10::Device(c10::kCPU);
}

// The architecture to build: the first of config.json's "architectures".
std::string architecture_of(const Checkpoint& checkpoint) {
  const auto architectures = checkpoint.config().architectures();
  if (architectures.empty()) {
    throw CheckpointError(checkpoint.config().path().string() +
                          ": no \"architectures\" entry names the model class to build");
  }
  return architectures.front();
}

// Right-pads token-id lists into input_ids and attention_mask [batch, max_len].
std::pair<at::Tensor, at::Tensor> right_pad(const std::vector<std::vector<int64_t>>& sequences,
                                            int64_t pad_token_id) {
  size_t max_len = 0;
  for (const auto& s : sequences) max_len = std::max(max_len, s.size());
  const auto batch = static_cast<int64_t>(sequences.size());
  at::Tensor ids = at::full({batch, static_cast<int64_t>(max_len)}, pad_token_id, at::kLong);
  at::Tensor mask = at::zeros({batch, static_cast<int64_t>(max_len)}, at::kLong);
  for (int64_t row = 0; row < batch; ++row) {
    const auto& s = sequences[row];
    const auto n = static_cast<int64_t>(s.size());
    ids[row].narrow(0, 0, n).copy_(at::tensor(s, at::kLong));
    mask[row].narrow(0, 0, n).fill_(1);
  }
  return {ids, mask};
}

void check_token_ids(const std::vector<std::vector<int64_t>>& sequences, int64_t vocab_size,
                     const std::string& key) {
  for (size_t row = 0; row < sequences.size(); ++row) {
    for (int64_t id : sequences[row]) {
      if (id >= vocab_size) {
        throw ConfigError(str(key, "[", row, "] has token id ", id,
                              ", outside the model's vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
}

void run_forward(const JobConfig& config, Model& model, std::ostream& out) {
  const ForwardSection& f = config.forward;
  check_token_ids(f.input_ids, model.shape().vocab_size, "forward.input_ids");
  auto [ids, mask] = right_pad(f.input_ids, 0);
  const c10::Device device = model.parameters().front().device();
  const auto start = Clock::now();
  at::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = model.forward(ForwardInputs{ids.to(device), mask.to(device), {}, nullptr});
  }
  const double elapsed = seconds_since(start);
  save_safetensors(f.output,
                   {{model.output_name(), output}, {"input_ids", ids}, {"attention_mask", mask}});
  out << "forward: " << model.output_name() << " " << shape_str(output.sizes().vec())
      << " written to " << f.output.string() << " (" << elapsed * 1e3 << " ms)\n";
}

void run_generate(const JobConfig& config, const Checkpoint& checkpoint, Model& model,
                  std::ostream& out) {
  const GenerateSection& g = config.generate;
  const HFConfig& hf = checkpoint.config();
  GenerationConfig generation;
  generation.max_new_tokens = g.max_new_tokens;
  generation.eos_token_id = g.eos_token_id;
  if (!generation.eos_token_id && hf.get_optional_int("eos_token_id")) {
    generation.eos_token_id = hf.get_optional_int("eos_token_id");
  }
  generation.pad_token_id = g.pad_token_id.value_or(
      hf.get_optional_int("pad_token_id").value_or(generation.eos_token_id.value_or(0)));
  check_token_ids(g.prompts, model.shape().vocab_size, "generate.prompts");

  const auto start = Clock::now();
  const GenerationResult result = greedy_generate(model, g.prompts, generation);
  const double elapsed = seconds_since(start);
  int64_t produced = 0;
  for (size_t i = 0; i < result.new_tokens.size(); ++i) {
    out << "generated[" << i << "]: " << join(result.new_tokens[i], " ") << "\n";
    produced += static_cast<int64_t>(result.new_tokens[i].size());
  }
  log::info(str("generate: ", produced, " tokens for ", g.prompts.size(), " prompts in ", elapsed,
                " s (", produced / std::max(elapsed, 1e-9), " tokens/s)"));
}

}  // namespace

void run_job(const JobConfig& config, const PluginRegistry& registry, std::ostream& out) {
  check_single_rank(config);
  const c10::Device device = job_device(config);
  const c10::ScalarType dtype =
      parse_model_dtype(config.model.dtype, config.source.string() + ": model.dtype");

  auto start = Clock::now();
  const Checkpoint checkpoint(config.model.path);
  const std::string architecture = architecture_of(checkpoint);
  const PluginInfo& plugin = registry.find(architecture);
  log::info(str("checkpoint ", config.model.path.string(), ": ", architecture, ", ",
                checkpoint.total_numel(), " parameters in ", checkpoint.files().size(),
                " file(s); served by plugin '", plugin.name, "' ", plugin.version));

  ModelArgs args{&checkpoint, architecture, dtype, device};
  const std::shared_ptr<Model> model = registry.create_model(args);
  log::info(str("model built in ", seconds_since(start), " s (", c10::toString(dtype), ", ",
                device.str(), ")"));

  switch (config.mode) {
    case JobMode::kForward: run_forward(config, *model, out); break;
    case JobMode::kGenerate: run_generate(config, checkpoint, *model, out); break;
  }
}

}  // namespace shardformer::host
