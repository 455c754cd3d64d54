// The GPT-2 plugin's entry point: the family, the architectures it serves and its factory.
#include "gpt2_model.h"
#include "gpt2_policy.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::gpt2 {

class GPT2Family : public ModelFamily {
 public:
  std::string name() const override { return "gpt2"; }
  std::string version() const override { return "0.2.0"; }
  std::string description() const override { return "OpenAI GPT-2 (HF modeling_gpt2)"; }
  std::vector<std::string> architectures() const override {
    return {"GPT2LMHeadModel", "GPT2Model"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const GPT2Config config = GPT2Config::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, gpt2_policy(tied), "transformer");
    return builder.decoder<GPT2Model>(args.architecture == "GPT2LMHeadModel", config, tied,
                                      config.vocab_size, config.n_embd);
  }
};

}  // namespace shardformer::gpt2

SHARDFORMER_PLUGIN(shardformer::gpt2::GPT2Family)
