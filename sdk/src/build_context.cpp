// BuildContext: module paths and parameter loading from the checkpoint while a model is built.
#include "shardformer/build_context.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer {

BuildContext::BuildContext(const Checkpoint& checkpoint, c10::ScalarType dtype, c10::Device device,
                           std::string base_model_prefix, const ParallelContext* parallel)
    : checkpoint_(&checkpoint),
      dtype_(dtype),
      device_(device),
      base_model_prefix_(std::move(base_model_prefix)),
      parallel_(parallel),
      plan_(std::make_shared<ShardingPlan>()),
      usage_(std::make_shared<CheckpointUsage>()) {
  usage_->views = checkpoint.views();
}

BuildContext BuildContext::child(std::string_view name) const {
  BuildContext result = *this;
  result.path_ = name_of(name);
  return result;
}

BuildContext BuildContext::child(int64_t index) const { return child(std::to_string(index)); }

BuildContext BuildContext::with_dtype(c10::ScalarType dtype) const {
  BuildContext result = *this;
  result.dtype_ = dtype;
  return result;
}

std::string BuildContext::name_of(std::string_view leaf) const {
  return path_.empty() ? std::string(leaf) : path_ + "." + std::string(leaf);
}

const HFConfig& BuildContext::config() const { return checkpoint_->config(); }

std::string BuildContext::resolve(const std::string& name) const {
  if (checkpoint_->contains(name) || base_model_prefix_.empty()) return name;
  const std::string prefix = base_model_prefix_ + ".";
  if (name.starts_with(prefix)) {
    std::string stripped = name.substr(prefix.size());
    if (checkpoint_->contains(stripped)) return stripped;
  } else if (checkpoint_->contains(prefix + name)) {
    return prefix + name;
  }
  return name;  // info() below reports it missing, with suggestions
}

ShardStyle BuildContext::style() const {
  return tensor_parallel() ? parallel_->policy.style_for(path_) : ShardStyle{};
}

int64_t BuildContext::divide_by_tp(int64_t n, std::string_view what) const {
  if (n % tp_size() != 0) {
    throw ModelError(str(config().path().string(), ": ", what, " = ", n,
                         " does not divide by the tensor-parallel size ", tp_size(), " (module ",
                         path_.empty() ? "<root>" : path_, ")"));
  }
  return n / tp_size();
}

void BuildContext::refuse_sequence_parallelism(std::string_view model, std::string_view why) const {
  if (parallel_ == nullptr || !parallel_->config.enable_sequence_parallelism) return;
  throw ModelError(str(config().path().string(), ": ", model,
                       " does not run under sequence parallelism", why.empty() ? "" : ": ", why,
                       "; set shard.enable_sequence_parallelism = false"));
}

std::vector<LayerRange> BuildContext::layer_ranges(int64_t num_layers) const {
  const PipelineStageManager* stages = pipeline();
  if (stages == nullptr) return {LayerRange{0, num_layers}};
  if (stages->num_layers() != num_layers) {
    throw ModelError(str(config().path().string(), ": the model has ", num_layers,
                         " layers but the pipeline was split for ", stages->num_layers()));
  }
  std::vector<LayerRange> ranges;
  for (int64_t chunk = 0; chunk < stages->num_chunks(); ++chunk) {
    ranges.push_back(stages->layers(chunk));
  }
  return ranges;
}

std::vector<LayerRange> BuildContext::layer_ranges(int64_t num_layers, int64_t first,
                                                   int64_t count) const {
  std::vector<LayerRange> ranges;
  for (const LayerRange& range : layer_ranges(num_layers)) {
    const int64_t begin = std::clamp(range.begin - first, int64_t{0}, count);
    const int64_t end = std::clamp(range.end - first, int64_t{0}, count);
    ranges.push_back({begin, std::max(begin, end)});
  }
  return ranges;
}

bool BuildContext::builds_first_piece() const {
  return pipeline() == nullptr || pipeline()->holds_first_piece(0);
}

bool BuildContext::builds_last_piece() const {
  return pipeline() == nullptr || pipeline()->holds_last_piece(pipeline()->num_chunks() - 1);
}

void BuildContext::skip(std::string_view leaf, std::string_view why) const {
  const std::string name = resolve(name_of(leaf));
  if (checkpoint_->contains(name)) usage_->skipped.emplace(name, why);
}

void BuildContext::skip_module(std::string_view child, std::string_view why) const {
  const std::string path = name_of(child) + ".";
  // The checkpoint may store the module with or without the base-model prefix.
  std::vector<std::string> prefixes{path};
  const std::string base = base_model_prefix_.empty() ? "" : base_model_prefix_ + ".";
  if (!base.empty()) {
    prefixes.push_back(path.starts_with(base) ? path.substr(base.size()) : base + path);
  }
  for (const std::string& name : checkpoint_->tensor_names()) {
    for (const std::string& prefix : prefixes) {
      if (name.starts_with(prefix)) usage_->skipped.emplace(name, why);
    }
  }
}

at::Tensor BuildContext::load(std::string_view leaf, const std::vector<int64_t>& shape,
                              TensorShard shard) const {
  const std::string name = resolve(name_of(leaf));
  const TensorInfo& info = checkpoint_->info(name);
  if (info.shape != shape) {
    throw CheckpointError(str(checkpoint_->directory().string(), ": parameter ",
                              checkpoint_->describe(name), " has shape ", shape_str(info.shape),
                              " in ", checkpoint_->file_of(name).path().filename().string(),
                              " but config.json implies ", shape_str(shape)));
  }
  usage_->loaded.insert(name);
  shard.full_shape = shape;
  if ((shard.dim >= 0 || shard.replicas > 1) && tensor_parallel()) {
    shard.rank = tp_rank();
    shard.size = tp_size();
    (*plan_)[name_of(leaf)] = shard;
  } else {
    shard.dim = -1;
    shard.replicas = 1;
  }
  return load_shard(*checkpoint_, name, shard).to(device_, dtype_);
}

}  // namespace shardformer
