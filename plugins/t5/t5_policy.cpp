// T5's policy table.
#include "t5_policy.h"

namespace shardformer::t5 {

// Megatron's split, as ColossalAI's T5 policy: q / k / v of self- and cross-attention and the
// feed-forward's wi (wi_0 / wi_1) column-parallel by heads and features, o and wo row-parallel
// (three all-reduces per decoder block); the vocabulary split in shared and lm_head; each rank
// holds its heads' columns of the relative position bias. Norms replicated.
std::vector<PolicyRule> t5_rules(const std::string& prefix) {
  using namespace styles;
  std::vector<PolicyRule> rules = {{prefix + "shared", vocab}, {prefix + "lm_head", vocab}};
  for (const char* attention :
       {"*.block.*.layer.0.SelfAttention", "decoder.block.*.layer.1.EncDecAttention"}) {
    for (const char* name : {"q", "k", "v"}) {
      rules.push_back({prefix + attention + "." + name, column});
    }
    rules.push_back({prefix + attention + ".o", row});
  }
  for (const char* ff : {"encoder.block.*.layer.1", "decoder.block.*.layer.2"}) {
    for (const char* name : {"wi", "wi_0", "wi_1"}) {
      rules.push_back({prefix + ff + ".DenseReluDense." + name, column});
    }
    rules.push_back({prefix + ff + ".DenseReluDense.wo", row});
  }
  return rules;
}

// Under a pipeline `shared` (first stage, the decoder's first, the last when tied) and each
// stack's bias table (every stage running the stack) are held by several stages, their
// gradients summed.
std::vector<std::string> t5_shared_parameters(const std::string& prefix) {
  return {prefix + "shared.weight",
          prefix + "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
          prefix + "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"};
}

}  // namespace shardformer::t5
