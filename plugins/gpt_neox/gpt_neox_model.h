// GPT-NeoX (HF GPTNeoXModel, Pythia; GPTNeoXForCausalLM is the SDK's CausalLM over it, its head
// named embed_out) with SDK blocks: the per-head fused query_key_value, partial rotary, and the
// parallel residual (use_parallel_residual) or the sequential one. Shapes are per rank.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/fused_qkv_attention.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/rotary.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer::gpt_neox {

struct GPTNeoXConfig {
  int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  double layer_norm_eps, attention_dropout, hidden_dropout;
  layers::Activation hidden_act;
  bool use_parallel_residual, attention_bias, tie_word_embeddings;

  static GPTNeoXConfig from(const HFConfig& config);
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

class GPTNeoXLayer : public torch::nn::Module {
 public:
  GPTNeoXLayer(const BuildContext& ctx, const GPTNeoXConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);
  // The same with in.normed = input_layernorm(in.sum) when the layer before computed it, and the
  // output normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const layers::AttentionStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return input_layernorm_.get(); }
  const layers::FusedQKVAttention& attention() const { return *attention_; }

 private:
  bool parallel_residual_;
  std::shared_ptr<layers::LayerNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<layers::FusedQKVAttention> attention_;
  std::shared_ptr<layers::MLP> mlp_;
  std::shared_ptr<layers::Dropout> post_attention_dropout_, post_mlp_dropout_;
};

// embed_in (first stage, and the last when the head is tied), this stage's layers,
// final_layer_norm (last stage). Its output is the last hidden state.
class GPTNeoXModel : public Model {
 public:
  GPTNeoXModel(const BuildContext& ctx, const GPTNeoXConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return embed_in_; }

 private:
  GPTNeoXConfig config_;
  layers::RotaryEmbedding rotary_;
  std::shared_ptr<layers::Embedding> embed_in_;
  std::shared_ptr<layers::Dropout> emb_dropout_;
  layers::LayerStack<GPTNeoXLayer> layers_;
  std::shared_ptr<layers::LayerNorm> final_layer_norm_;
};

}  // namespace shardformer::gpt_neox
