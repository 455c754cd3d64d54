// Model defaults: the causal-LM loss through forward(), what a model was built with, and
// gathering split parameters.
#include "shardformer/model.h"

#include "shardformer/build_context.h"
#include "shardformer/error.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/losses.h"

#include <ATen/ATen.h>

namespace shardformer {

at::Tensor Model::loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (task() == ModelTask::kBase) throw Error("a base model (" + output_name() + ") has no loss");
  const at::Tensor logits = forward(inputs);
  return task_loss(task(), layers::VocabLogits{logits, false, 0, logits.size(-1), nullptr}, labels);
}

int64_t ForwardInputs::rows() const {
  for (const at::Tensor* t : {&input_ids, &input_features, &pixel_values, &decoder_input_ids}) {
    if (t->defined() && t->dim() >= 1) return t->size(0);
  }
  return 0;
}

ForwardInputs Model::with_labels(const ForwardInputs& inputs, const at::Tensor& /*labels*/) const {
  return inputs;
}

std::map<std::string, at::Tensor> Model::forward_all(const ForwardInputs& inputs) {
  return {{output_name(), forward(inputs)}};
}

void Model::bind(const BuildContext& ctx) {
  bind(ctx.plan(), ctx.parallel());
  usage_ = ctx.usage();
}

void Model::bind(std::shared_ptr<ShardingPlan> plan, const ParallelContext* parallel) {
  sharding_ = std::move(plan);
  if (parallel != nullptr && parallel->pipeline != nullptr) pipeline_ = *parallel->pipeline;
  if (parallel != nullptr) {
    shared_patterns_ = parallel->policy.shared_parameters();
    sequence_ = {.mode = parallel->config.sequence_parallelism_mode,
                 .group = parallel->sequence_group()};
  }
}

void Model::set_recompute(const layers::RecomputePolicy& policy) {
  bool found = false;
  for (const auto& module : modules()) {
    if (auto* list = dynamic_cast<layers::LayerList*>(module.get())) {
      list->set_recompute(policy);
      found = true;
    }
  }
  if (!found && policy.enabled()) {
    throw ConfigError(
        "activation checkpointing: this model holds no layers::LayerStack to "
        "recompute");
  }
}

std::vector<std::string> Model::shared_parameters(size_t pattern) const {
  std::vector<std::string> names;
  for (const auto& item : named_parameters()) {
    if (Policy::matches(shared_patterns_.at(pattern), item.key())) names.push_back(item.key());
  }
  return names;
}

std::map<std::string, at::Tensor> gather_parameters(const Model& model,
                                                    const distributed::ProcessGroup* group,
                                                    bool grads) {
  std::map<std::string, at::Tensor> result;
  for (const auto& item : model.named_parameters()) {
    at::Tensor local = grads ? item.value().grad() : item.value().detach();
    if (!local.defined()) local = at::zeros_like(item.value());
    const auto shard = model.sharding().find(item.key());
    result[item.key()] = shard == model.sharding().end() || group == nullptr
                             ? local
                             : gather_shard(local, shard->second, *group, grads);
  }
  return result;
}

}  // namespace shardformer
