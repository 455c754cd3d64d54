// The BLIP-2 plugin: its policy table and factory.
#include "blip2_config.h"
#include "blip2_model.h"
#include "opt_policy.h"
#include "t5_policy.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::blip2 {

// As ColossalAI's BLIP-2 policy: in the vision encoder the fused qkv column-parallel by heads
// (each rank its heads' q, k and v), projection row, fc1 column and fc2 row; in the Q-Former
// every attention's query / key / value column and output.dense row, intermediate_query column
// and output_query row; the OPT language model as the OPT family splits it (vocabulary split in
// the tied embedding and head), a T5 one by T5's own table. The patch embedding, positions, query
// tokens, norms and the language projection stay replicated.
Policy blip2_policy(const Blip2Config& config) {
  using namespace styles;
  const ShardStyle fused_qkv{.kind = ShardKind::kColumn, .fused_blocks = 3};  // [3, heads, dim]
  std::vector<PolicyRule> rules = {
      {"vision_model.encoder.layers.*.self_attn.qkv", fused_qkv},
      {"vision_model.encoder.layers.*.self_attn.projection", row},
      {"vision_model.encoder.layers.*.mlp.fc1", column},
      {"vision_model.encoder.layers.*.mlp.fc2", row},
      {"qformer.encoder.layer.*.intermediate_query.dense", column},
      {"qformer.encoder.layer.*.output_query.dense", row},
  };
  for (const char* attention : {"attention", "crossattention"}) {
    const std::string at = std::string("qformer.encoder.layer.*.") + attention;
    rules.push_back({at + ".attention.query", column});
    rules.push_back({at + ".attention.key", column});
    rules.push_back({at + ".attention.value", column});
    rules.push_back({at + ".output.dense", row});
  }
  const std::string lm = "language_model.";
  for (PolicyRule& rule : config.t5 ? t5::t5_rules(lm) : opt::opt_rules(lm)) {
    rules.push_back(std::move(rule));
  }
  return Policy(rules, config.t5 ? t5::t5_shared_parameters(lm)
                                 : opt::opt_shared_parameters(config.opt->tie_word_embeddings, lm));
}

class Blip2Family : public ModelFamily {
 public:
  std::string name() const override { return "blip2"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Salesforce BLIP-2 with an OPT or a T5 language model (HF modeling_blip_2)";
  }
  std::vector<std::string> architectures() const override {
    return {"Blip2ForConditionalGeneration"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const Blip2Config config = Blip2Config::from(args.checkpoint->config());
    const ModelBuilder builder(args, blip2_policy(config), "");
    return builder.finish(
        std::make_shared<Blip2ForConditionalGeneration>(builder.context(), config));
  }
};

}  // namespace shardformer::blip2

SHARDFORMER_PLUGIN(shardformer::blip2::Blip2Family)
