// The Llama-family plugin: Llama, Mistral, Qwen2, Qwen3, GLM and GLM-4, which differ in config
// flags only.
#include "llama_model.h"
#include "llama_policy.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

namespace shardformer::llama {

class LlamaFamily : public ModelFamily {
 public:
  std::string name() const override { return "llama"; }
  std::string version() const override { return "0.1.0"; }
  std::string description() const override {
    return "Llama, Mistral, Qwen2, Qwen3, GLM, GLM-4 (HF modeling_llama and its variants)";
  }
  std::vector<std::string> architectures() const override {
    return {"LlamaForCausalLM", "LlamaModel", "MistralForCausalLM", "MistralModel",
            "Qwen2ForCausalLM", "Qwen2Model", "Qwen3ForCausalLM",   "Qwen3Model",
            "GlmForCausalLM",   "GlmModel",   "Glm4ForCausalLM",    "Glm4Model"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const LlamaConfig config = LlamaConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const ModelBuilder builder(args, llama_policy(tied), "model");
    return builder.decoder<LlamaModel>(args.architecture.ends_with("ForCausalLM"), config, tied,
                                       config.vocab_size, config.hidden_size);
  }
};

}  // namespace shardformer::llama

SHARDFORMER_PLUGIN(shardformer::llama::LlamaFamily)
