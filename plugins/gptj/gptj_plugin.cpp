// The GPT-J plugin: its policy table and factory.
#include "gptj_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::gptj {

// Megatron's split: q / k / v and fc_in column-parallel by heads and features, out_proj and
// fc_out row-parallel (two all-reduces per block); the vocabulary split in wte and the head,
// whose bias is split with its rows. ln_1 and ln_f replicated.
Policy gptj_policy(bool tied) {
  using namespace styles;
  return Policy(
      {
          {"wte", vocab},
          {"lm_head", vocab},
          {"h.*.attn.q_proj", column},
          {"h.*.attn.k_proj", column},
          {"h.*.attn.v_proj", column},
          {"h.*.attn.out_proj", row},
          {"h.*.mlp.fc_in", column},
          {"h.*.mlp.fc_out", row},
      },
      tied ? std::vector<std::string>{"wte.weight"} : std::vector<std::string>{});
}

class GPTJFamily : public ModelFamily {
 public:
  std::string name() const override { return "gptj"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "EleutherAI GPT-J (HF modeling_gptj)"; }
  std::vector<std::string> architectures() const override {
    return {"GPTJForCausalLM", "GPTJModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const GPTJConfig config = GPTJConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, gptj_policy(tied), "transformer");
    return builder.decoder<GPTJModel>(args.architecture == "GPTJForCausalLM", config, tied,
                                      config.vocab_size, config.n_embd, {.bias = true});
  }
};

}  // namespace shardformer::gptj

SHARDFORMER_PLUGIN(shardformer::gptj::GPTJFamily)
