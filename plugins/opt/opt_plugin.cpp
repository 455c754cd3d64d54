// The OPT plugin: its factory (the policy table: opt_policy.cpp).
#include "opt_model.h"
#include "opt_policy.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::opt {

class OPTFamily : public ModelFamily {
 public:
  std::string name() const override { return "opt"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "Meta OPT (HF modeling_opt)"; }
  std::vector<std::string> architectures() const override { return {"OPTForCausalLM", "OPTModel"}; }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const OPTConfig config = OPTConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, Policy(opt_rules(), opt_shared_parameters(tied)), "model");
    return builder.decoder<OPTModel>(args.architecture == "OPTForCausalLM", config, tied,
                                     config.vocab_size, config.word_embed_proj_dim);
  }
};

}  // namespace shardformer::opt

SHARDFORMER_PLUGIN(shardformer::opt::OPTFamily)
