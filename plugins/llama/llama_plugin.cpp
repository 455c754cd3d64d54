// The Llama-family plugin: Llama, Mistral, Qwen2, Qwen3, GLM and GLM-4, which differ in config
// flags only, and ChatGLM2 / ChatGLM3 checkpoints under their original names (GLM's model).
#include "chatglm_layout.h"
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
    return "Llama, Mistral, Qwen2, Qwen3, GLM, GLM-4 (HF modeling_llama and its variants), "
           "ChatGLM2 / ChatGLM3 (original checkpoints, as GLM)";
  }
  std::vector<std::string> architectures() const override {
    return {"LlamaForCausalLM",   "LlamaModel",
            "MistralForCausalLM", "MistralModel",
            "Qwen2ForCausalLM",   "Qwen2Model",
            "Qwen3ForCausalLM",   "Qwen3Model",
            "GlmForCausalLM",     "GlmModel",
            "Glm4ForCausalLM",    "Glm4Model",
            "ChatGLMModel",       "ChatGLMForConditionalGeneration"};
  }

  std::shared_ptr<Model> create(const ModelArgs& args) const override {
    const LlamaConfig config = LlamaConfig::from(args.checkpoint->config());
    const bool tied = config.tie_word_embeddings;
    const bool chatglm = config.model_type == "chatglm";
    if (chatglm) args.checkpoint->add_views(chatglm_views(config, *args.checkpoint));
    const ModelBuilder builder(args, llama_policy(tied), "model");
    if (chatglm)
      builder.context().skip(kChatGlmInvFreq, "recomputed from config.json, as GLM does");
    // ChatGLM's two classes both carry the head (THUDM's AutoModel is the generation class).
    const bool head =
        args.architecture.ends_with("ForCausalLM") || args.architecture.starts_with("ChatGLM");
    return builder.decoder<LlamaModel>(head, config, tied, config.vocab_size, config.hidden_size);
  }
};

}  // namespace shardformer::llama

SHARDFORMER_PLUGIN(shardformer::llama::LlamaFamily)
