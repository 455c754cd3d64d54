// The GPT-2 plugin's entry point: the family, the architectures it serves and its factory.
#include "gpt2_model.h"
#include "gpt2_policy.h"

#include "shardformer/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/plugin.h"

namespace shardformer::gpt2 {

class GPT2Family : public ModelFamily {
 public:
  std::string name() const override { return "gpt2"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override { return "OpenAI GPT-2 (HF modeling_gpt2)"; }
  std::vector<std::string> architectures() const override {
    return {"GPT2LMHeadModel", "GPT2Model"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const GPT2Config config = GPT2Config::from(args.checkpoint->config());
    const ParallelContext parallel =
        with_family_policy(args.parallel, gpt2_policy(config.tie_word_embeddings));
    const BuildContext ctx(*args.checkpoint, args.dtype, args.device, "transformer", &parallel);
    // Refuse sizes that do not divide by tp before loading anything (the blocks check again).
    const auto split = [&](const char* path) {
      return ctx.tensor_parallel() && parallel.policy.style_for(path).kind == ShardKind::kColumn;
    };
    if (split("h.0.attn.c_attn")) ctx.divide_by_tp(config.n_head, "n_head");
    if (split("h.0.mlp.c_fc")) ctx.divide_by_tp(config.n_inner, "n_inner");
    std::shared_ptr<Model> model;
    if (args.architecture == "GPT2LMHeadModel") {
      model = std::make_shared<GPT2LMHeadModel>(ctx, config);
    } else if (args.architecture == "GPT2Model") {
      ctx.skip("lm_head.weight", "GPT2Model has no LM head");
      model = std::make_shared<GPT2Model>(ctx, config);
    } else {
      throw ModelError("gpt2 plugin does not serve architecture '" + args.architecture + "'");
    }
    model->eval();
    return model;
  }
};

}  // namespace shardformer::gpt2

SHARDFORMER_PLUGIN(shardformer::gpt2::GPT2Family)
