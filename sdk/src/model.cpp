// Model defaults: the causal-LM loss through forward(), and gathering split parameters.
#include "shardformer/model.h"

#include "shardformer/error.h"
#include "shardformer/losses.h"

#include <ATen/ATen.h>

namespace shardformer {

at::Tensor Model::lm_loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!has_lm_head()) throw Error("lm_loss needs a model with a language-model head");
  const at::Tensor logits = forward(inputs);
  return causal_lm_loss(layers::VocabLogits{logits, false, 0, logits.size(-1), nullptr}, labels);
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
                             : gather_shard(local, shard->second, *group);
  }
  return result;
}

}  // namespace shardformer
