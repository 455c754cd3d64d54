// The BLOOM plugin: its policy table and factory.
#include "bloom_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::bloom {

// Megatron's split: the fused query_key_value column-parallel by whole heads (its rows are
// per-head [q k v] groups), dense and dense_4h_to_h row-parallel, dense_h_to_4h column-parallel;
// the vocabulary split in the (tied) embedding and head. Norms replicated.
Policy bloom_policy(bool tied) {
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
      tied ? std::vector<std::string>{"word_embeddings.weight"} : std::vector<std::string>{});
}

class BloomFamily : public ModelFamily {
 public:
  std::string name() const override { return "bloom"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "BigScience BLOOM (HF modeling_bloom)"; }
  std::vector<std::string> architectures() const override {
    return {"BloomForCausalLM", "BloomModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const BloomConfig config = BloomConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, bloom_policy(tied), "transformer");
    return builder.decoder<BloomModel>(args.architecture == "BloomForCausalLM", config, tied,
                                       config.vocab_size, config.hidden_size);
  }
};

}  // namespace shardformer::bloom

SHARDFORMER_PLUGIN(shardformer::bloom::BloomFamily)
