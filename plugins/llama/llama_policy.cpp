// Megatron's split of a Llama decoder: q / k / v and gate / up column-parallel by heads and
// features (KV heads fewer than tp shared, see SelfAttention), o_proj and down_proj
// row-parallel: two all-reduces per layer; the vocabulary split in the embedding and the head.
#include "llama_policy.h"

namespace shardformer::llama {

Policy llama_policy(bool tied) {
  using namespace styles;  // module pattern, style (norms, rotary: replicated)
  const ShardStyle fused_gate_up{.kind = ShardKind::kColumn, .fused_blocks = 2};
  return Policy(
      {
          {"embed_tokens", vocab},
          {"lm_head", vocab},
          {"layers.*.self_attn.q_proj", column},
          {"layers.*.self_attn.k_proj", column},
          {"layers.*.self_attn.v_proj", column},
          {"layers.*.self_attn.o_proj", row},
          {"layers.*.mlp.gate_proj", column},
          {"layers.*.mlp.up_proj", column},
          {"layers.*.mlp.gate_up_proj", fused_gate_up},  // GLM: [gate; up], a slice of each
          {"layers.*.mlp.down_proj", row},
      },
      tied ? std::vector<std::string>{"embed_tokens.weight"} : std::vector<std::string>{},
      {SequenceParallelMode::kSplitGather, SequenceParallelMode::kAllToAll,
       SequenceParallelMode::kRingAttn});
}

}  // namespace shardformer::llama
