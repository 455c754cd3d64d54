// GPT-2's tensor-parallel policy (Megatron's split): per block two all-reduces in the forward
// pass (attention output, MLP output), the vocabulary split across ranks in the embedding and
// the head; under pipeline parallelism a tied wte is shared by the first and the last stage.
#include "gpt2_policy.h"

namespace shardformer::gpt2 {

Policy gpt2_policy(bool tied) {
  using namespace styles;
  const ShardStyle fused_qkv{.kind = ShardKind::kColumn, .fused_blocks = 3};
  // module pattern       style        (wpe, ln_1, ln_2, ln_f: replicated)
  return Policy(
      {
          {"wte", vocab},                  // token embedding (and the head when tied)
          {"lm_head", vocab},              // the untied head: VocabParallelLMHead1D
          {"h.*.attn.c_attn", fused_qkv},  // [in, 3 * hidden]: each rank its heads' Q, K and V
          {"h.*.attn.c_proj", row},
          {"h.*.mlp.c_fc", column},
          {"h.*.mlp.c_proj", row},
      },
      // when tied, held by the first pipeline stage (embedding) and the last (LM head)
      tied ? std::vector<std::string>{"wte.weight"} : std::vector<std::string>{},
      {SequenceParallelMode::kSplitGather, SequenceParallelMode::kAllToAll,
       SequenceParallelMode::kRingAttn});
}

}  // namespace shardformer::gpt2
