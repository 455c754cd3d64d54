// The Llama-family decoder (HF LlamaModel, MistralModel, Qwen2Model, Qwen3Model, GlmModel,
// Glm4Model) written with SDK blocks; the ...ForCausalLM classes are the SDK's CausalLM over it.
// Shapes are per rank.
#pragma once

#include "llama_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/gated_mlp.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/rms_norm.h"
#include "shardformer/layers/rotary.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer::llama {

// What every layer of a forward pass gets: the full-attention step and, for sliding-window
// layers, the same with the window's mask.
struct LlamaStep {
  layers::AttentionStep full{}, sliding{};
};

class DecoderLayer : public torch::nn::Module {
 public:
  DecoderLayer(const BuildContext& ctx, const LlamaConfig& config, int64_t layer_idx);
  // x [batch, seq, hidden] -> same
  at::Tensor forward(const at::Tensor& x, const LlamaStep& step);
  // The same with in.normed = input_layernorm(in.sum) when the layer before computed it, and the
  // output normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const LlamaStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return input_layernorm_.get(); }
  int64_t num_kv_heads() const { return self_attn_->num_kv_heads(); }
  bool sliding() const { return sliding_; }

 private:
  bool sliding_;
  std::shared_ptr<layers::RMSNorm> input_layernorm_, post_attention_layernorm_;
  // GLM-4: the norms of the attention's and the MLP's outputs before each residual add
  std::shared_ptr<layers::RMSNorm> post_self_attn_layernorm_, post_mlp_layernorm_;
  std::shared_ptr<layers::SelfAttention> self_attn_;
  std::shared_ptr<layers::GatedMLP> mlp_;
};

// Embeddings (first stage, and the last when the head is tied), this stage's layers, the final
// norm (last stage). Its output is the last hidden state.
class LlamaModel : public Model {
 public:
  LlamaModel(const BuildContext& ctx, const LlamaConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return embed_tokens_; }

 private:
  LlamaConfig config_;
  layers::RotaryEmbedding rotary_;
  std::shared_ptr<layers::Embedding> embed_tokens_;
  layers::LayerStack<DecoderLayer> layers_;
  std::shared_ptr<layers::RMSNorm> norm_;
};

}  // namespace shardformer::llama
