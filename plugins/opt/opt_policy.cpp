// OPT's policy table.
#include "opt_policy.h"

namespace shardformer::opt {

// Megatron's split: q / k / v and fc1 column-parallel, out_proj and fc2 row-parallel (two
// all-reduces per layer); the vocabulary split in the (tied) embedding and head. Positions,
// norms and the projections in and out stay replicated.
std::vector<PolicyRule> opt_rules(const std::string& prefix) {
  using namespace styles;
  const std::string decoder = prefix + "model.decoder.";
  std::vector<PolicyRule> rules = {{decoder + "embed_tokens", vocab}, {prefix + "lm_head", vocab}};
  for (const char* name : {"q_proj", "k_proj", "v_proj"}) {
    rules.push_back({decoder + "layers.*.self_attn." + name, column});
  }
  rules.push_back({decoder + "layers.*.self_attn.out_proj", row});
  rules.push_back({decoder + "layers.*.fc1", column});
  rules.push_back({decoder + "layers.*.fc2", row});
  return rules;
}

std::vector<std::string> opt_shared_parameters(bool tied, const std::string& prefix) {
  if (!tied) return {};
  return {prefix + "model.decoder.embed_tokens.weight"};
}

}  // namespace shardformer::opt
