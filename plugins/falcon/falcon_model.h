// Falcon (HF FalconModel; FalconForCausalLM is the SDK's CausalLM over it) with SDK blocks: the
// fused query_key_value grouped by KV head (multi-query [q..., k, v], one [q k v] per head, or
// new_decoder_architecture's groups), rotary or ALiBi, and the parallel block (one norm, or
// ln_attn / ln_mlp) or the sequential one. Shapes are per rank.
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
#include <optional>

namespace shardformer::falcon {

struct FalconConfig {
  int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_kv_heads;
  int64_t ffn_hidden_size;
  double layer_norm_epsilon, hidden_dropout, attention_dropout;
  layers::Activation activation;
  bool alibi, parallel_attn, bias, tie_word_embeddings;
  bool two_norms;  // new_decoder_architecture with num_ln_in_parallel_attn 2: ln_attn, ln_mlp

  static FalconConfig from(const HFConfig& config);
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

class FalconDecoderLayer : public torch::nn::Module {
 public:
  FalconDecoderLayer(const BuildContext& ctx, const FalconConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);
  // The same with in.normed = input_norm()(in.sum) when the layer before computed it, and the
  // output normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const layers::AttentionStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return attention_norm_.get(); }
  const layers::FusedQKVAttention& attention() const { return *self_attention_; }

 private:
  bool parallel_;
  // input_layernorm (or ln_attn); the MLP's own norm: ln_mlp, post_attention_layernorm or none
  std::shared_ptr<layers::LayerNorm> attention_norm_, mlp_norm_;
  std::shared_ptr<layers::FusedQKVAttention> self_attention_;
  std::shared_ptr<layers::MLP> mlp_;
  // HF's dropout_add: p = attention_dropout after a sequential block's attention, hidden_dropout
  // on the MLP's output (a parallel block's attention + MLP).
  std::shared_ptr<layers::Dropout> attention_out_dropout_, out_dropout_;
};

// word_embeddings (first stage, and the last when the head is tied), this stage's layers, ln_f
// (last stage). Its output is the last hidden state.
class FalconModel : public Model {
 public:
  FalconModel(const BuildContext& ctx, const FalconConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return word_embeddings_; }

 private:
  FalconConfig config_;
  std::optional<layers::RotaryEmbedding> rotary_;  // none with ALiBi
  at::Tensor slopes_;                              // ALiBi [heads]
  std::shared_ptr<layers::Embedding> word_embeddings_;
  layers::LayerStack<FalconDecoderLayer> h_;
  std::shared_ptr<layers::LayerNorm> ln_f_;
};

}  // namespace shardformer::falcon
