// The GPT-Neo plugin: its policy table and factory.
#include "gpt_neo_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::gpt_neo {

// Megatron's split: q / k / v and c_fc column-parallel by heads and features, out_proj and
// c_proj row-parallel (two all-reduces per block); the vocabulary split in wte and the (tied)
// head. wpe and the norms replicated.
Policy gpt_neo_policy(bool tied) {
  using namespace styles;
  return Policy(
      {
          {"wte", vocab},
          {"lm_head", vocab},
          {"h.*.attn.attention.q_proj", column},
          {"h.*.attn.attention.k_proj", column},
          {"h.*.attn.attention.v_proj", column},
          {"h.*.attn.attention.out_proj", row},
          {"h.*.mlp.c_fc", column},
          {"h.*.mlp.c_proj", row},
      },
      tied ? std::vector<std::string>{"wte.weight"} : std::vector<std::string>{});
}

class GPTNeoFamily : public ModelFamily {
 public:
  std::string name() const override { return "gpt_neo"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "EleutherAI GPT-Neo (HF modeling_gpt_neo)"; }
  std::vector<std::string> architectures() const override {
    return {"GPTNeoForCausalLM", "GPTNeoModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const GPTNeoConfig config = GPTNeoConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, gpt_neo_policy(tied), "transformer");
    return builder.decoder<GPTNeoModel>(args.architecture == "GPTNeoForCausalLM", config, tied,
                                        config.vocab_size, config.hidden_size);
  }
};

}  // namespace shardformer::gpt_neo

SHARDFORMER_PLUGIN(shardformer::gpt_neo::GPTNeoFamily)
