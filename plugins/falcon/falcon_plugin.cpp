// The Falcon plugin: its policy table and factory.
#include "falcon_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::falcon {

// Megatron's split: the fused query_key_value column-parallel by whole KV groups (ranks sharing
// a multi-query group each hold it, layers::FusedQKVAttention), dense and dense_4h_to_h
// row-parallel, dense_h_to_4h column-parallel; the vocabulary split in word_embeddings and the
// head. Norms replicated. Two all-reduces per layer. Sequence parallelism in every mode, as the
// Llama family's (the rotary layouts).
Policy falcon_policy(bool tied) {
  using namespace styles;
  return Policy(
      {
          {"word_embeddings", vocab},
          {"lm_head", vocab},
          {"h.*.self_attention.query_key_value", column},
          {"h.*.self_attention.dense", row},
          {"h.*.mlp.dense_h_to_4h", column},
          {"h.*.mlp.dense_4h_to_h", row},
      },
      tied ? std::vector<std::string>{"word_embeddings.weight"} : std::vector<std::string>{},
      // rotary Falcon only: ALiBi's biases are refused under sequence parallelism (FalconModel)
      {SequenceParallelMode::kSplitGather, SequenceParallelMode::kAllToAll,
       SequenceParallelMode::kRingAttn});
}

class FalconFamily : public ModelFamily {
 public:
  std::string name() const override { return "falcon"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "TII Falcon (HF modeling_falcon)"; }
  std::vector<std::string> architectures() const override {
    return {"FalconForCausalLM", "FalconModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const FalconConfig config = FalconConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, falcon_policy(tied), "transformer");
    return builder.decoder<FalconModel>(args.architecture == "FalconForCausalLM", config, tied,
                                        config.vocab_size, config.hidden_size);
  }
};

}  // namespace shardformer::falcon

SHARDFORMER_PLUGIN(shardformer::falcon::FalconFamily)
