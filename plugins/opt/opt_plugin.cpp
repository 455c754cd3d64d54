// The OPT plugin: its policy table and factory.
#include "opt_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::opt {

// Megatron's split: q / k / v and fc1 column-parallel, out_proj and fc2 row-parallel (two
// all-reduces per layer); the vocabulary split in the (tied) embedding and head. Positions,
// norms and the projections in and out stay replicated.
Policy opt_policy(bool tied) {
  using namespace styles;
  return Policy(
      {
          {"embed_tokens", vocab},
          {"lm_head", vocab},
          {"layers.*.self_attn.q_proj", column},
          {"layers.*.self_attn.k_proj", column},
          {"layers.*.self_attn.v_proj", column},
          {"layers.*.self_attn.out_proj", row},
          {"layers.*.fc1", column},
          {"layers.*.fc2", row},
      },
      tied ? std::vector<std::string>{"embed_tokens.weight"} : std::vector<std::string>{});
}

class OPTFamily : public ModelFamily {
 public:
  std::string name() const override { return "opt"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "Meta OPT (HF modeling_opt)"; }
  std::vector<std::string> architectures() const override { return {"OPTForCausalLM", "OPTModel"}; }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const OPTConfig config = OPTConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, opt_policy(tied), "model");
    return builder.decoder<OPTModel>(args.architecture == "OPTForCausalLM", config, tied,
                                     config.vocab_size, config.word_embed_proj_dim);
  }
};

}  // namespace shardformer::opt

SHARDFORMER_PLUGIN(shardformer::opt::OPTFamily)
