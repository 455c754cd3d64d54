// BLOOM (HF BloomModel; BloomForCausalLM is the SDK's CausalLM over it) with SDK blocks: ALiBi
// instead of positions (each rank its own heads' slopes), the per-head interleaved fused QKV,
// and a LayerNorm on the word embeddings.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/fused_qkv_attention.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/linear.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer::bloom {

struct BloomConfig {
  int64_t vocab_size, hidden_size, n_layer, n_head;
  double layer_norm_epsilon, hidden_dropout, attention_dropout;
  bool apply_residual_connection_post_layernorm, tie_word_embeddings;

  static BloomConfig from(const HFConfig& config);
  int64_t head_dim() const { return hidden_size / n_head; }
};

class BloomBlock : public torch::nn::Module {
 public:
  BloomBlock(const BuildContext& ctx, const BloomConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);
  // The same with in.normed = input_layernorm(in.sum) when the block before computed it, and the
  // output normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const layers::AttentionStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return input_layernorm_.get(); }
  const layers::FusedQKVAttention& attention() const { return *self_attention_; }

 private:
  bool residual_from_norm_;
  std::shared_ptr<layers::LayerNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<layers::FusedQKVAttention> self_attention_;
  std::shared_ptr<layers::Linear> dense_h_to_4h_, dense_4h_to_h_;
  std::shared_ptr<layers::Dropout> attn_out_dropout_, mlp_dropout_;
};

class BloomModel : public Model {
 public:
  BloomModel(const BuildContext& ctx, const BloomConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return word_embeddings_; }

 private:
  BloomConfig config_;
  at::Tensor slopes_;  // [n_head]
  std::shared_ptr<layers::Embedding> word_embeddings_;
  std::shared_ptr<layers::LayerNorm> word_embeddings_layernorm_, ln_f_;
  layers::LayerStack<BloomBlock> h_;
};

}  // namespace shardformer::bloom
