// The T5 plugin: its policy table and factory.
#include "t5_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::t5 {

// Megatron's split, as ColossalAI's T5 policy: q / k / v of self- and cross-attention and the
// feed-forward's wi (wi_0 / wi_1) column-parallel by heads and features, o and wo row-parallel
// (three all-reduces per decoder block); the vocabulary split in shared and lm_head; each rank
// holds its heads' columns of the relative position bias. Norms replicated. Under a pipeline
// `shared` (first stage, the decoder's first, the last when tied) and each stack's bias table
// (every stage running the stack) are held by several stages, their gradients summed.
Policy t5_policy() {
  using namespace styles;
  std::vector<PolicyRule> rules = {{"shared", vocab}, {"lm_head", vocab}};
  for (const char* attention :
       {"*.block.*.layer.0.SelfAttention", "decoder.block.*.layer.1.EncDecAttention"}) {
    for (const char* name : {"q", "k", "v"}) {
      rules.push_back({std::string(attention) + "." + name, column});
    }
    rules.push_back({std::string(attention) + ".o", row});
  }
  for (const char* ff : {"encoder.block.*.layer.1", "decoder.block.*.layer.2"}) {
    for (const char* name : {"wi", "wi_0", "wi_1"}) {
      rules.push_back({std::string(ff) + ".DenseReluDense." + name, column});
    }
    rules.push_back({std::string(ff) + ".DenseReluDense.wo", row});
  }
  return Policy(rules, {"shared.weight",
                        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"});
}

class T5Family : public ModelFamily {
 public:
  std::string name() const override { return "t5"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Google T5, T5 v1.1 and flan-T5 (HF modeling_t5)";
  }
  std::vector<std::string> architectures() const override {
    return {"T5ForConditionalGeneration", "T5EncoderModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const T5Config config = T5Config::from(args.checkpoint->config());
    const ModelBuilder builder(args, t5_policy(), "");
    if (args.architecture == "T5EncoderModel") {
      return builder.finish(std::make_shared<T5EncoderModel>(builder.context(), config));
    }
    return builder.finish(std::make_shared<T5ForConditionalGeneration>(builder.context(), config));
  }
};

}  // namespace shardformer::t5

SHARDFORMER_PLUGIN(shardformer::t5::T5Family)
