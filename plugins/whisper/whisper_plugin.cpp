// The Whisper plugin: its policy table and factory.
#include "whisper_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::whisper {

// Megatron's split, as ColossalAI's Whisper policy: q / k / v of self- and cross-attention and
// fc1 column-parallel by heads and features, out_proj and fc2 row-parallel; the decoder's
// vocabulary split in embed_tokens and the tied proj_out. Convolutions, positions and norms
// replicated. Under a pipeline the decoder's embedding is held by the decoder's first stage and
// the last one (the head), its gradient summed.
Policy whisper_policy() {
  using namespace styles;
  std::vector<PolicyRule> rules = {{"embed_tokens", vocab}, {"proj_out", vocab}};
  for (const char* attention : {"layers.*.self_attn", "layers.*.encoder_attn"}) {
    for (const char* name : {"q_proj", "k_proj", "v_proj"}) {
      rules.push_back({std::string(attention) + "." + name, column});
    }
    rules.push_back({std::string(attention) + ".out_proj", row});
  }
  rules.push_back({"layers.*.fc1", column});
  rules.push_back({"layers.*.fc2", row});
  return Policy(rules, {"model.decoder.embed_tokens.weight"});
}

class WhisperFamily : public ModelFamily {
 public:
  std::string name() const override { return "whisper"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "OpenAI Whisper speech recognition (HF modeling_whisper)";
  }
  std::vector<std::string> architectures() const override {
    return {"WhisperForConditionalGeneration", "WhisperModel"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const WhisperConfig config = WhisperConfig::from(args.checkpoint->config());
    const ModelBuilder builder(args, whisper_policy(), "model");
    if (args.architecture == "WhisperModel") {
      builder.context().skip("proj_out.weight", "WhisperModel has no head");
      return builder.finish(std::make_shared<WhisperModel>(builder.context(), config, false));
    }
    return builder.finish(
        std::make_shared<WhisperForConditionalGeneration>(builder.context(), config));
  }
};

}  // namespace shardformer::whisper

SHARDFORMER_PLUGIN(shardformer::whisper::WhisperFamily)
