// BLOOM (HF BloomModel; BloomForCausalLM is the SDK's CausalLM over it) with SDK blocks: ALiBi
// instead of positions (each rank its own heads' slopes), the per-head interleaved fused QKV,
// and a LayerNorm on the word embeddings.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
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

// What every layer's attention shares in one forward pass: the mask and this rank's ALiBi.
struct BloomStep {
  at::Tensor mask;      // [batch, 1, q, kv] bool
  bool causal = false;  // layers::ForwardStep::causal: no mask tensor, plain causal
  at::Tensor alibi;     // [batch, heads/tp, 1, kv]
  KVCache* cache = nullptr;
};

class BloomAttention : public torch::nn::Module {
 public:
  BloomAttention(const BuildContext& ctx, const BloomConfig& config, int64_t layer_idx);
  // residual + dropout(dense(attention(x))) and, given `norm`, its norm [b, s, hidden]
  // (layers::add_to_residual: one pass with dense's all-reduce where it can be).
  layers::ResidualSum forward(const at::Tensor& x, const BloomStep& step,
                              const at::Tensor& residual, const layers::ResidualNorm* norm,
                              layers::Dropout* dropout);
  int64_t num_heads() const { return heads_; }
  int64_t first_head() const { return first_head_; }

 private:
  int64_t layer_idx_, heads_, first_head_, head_dim_;  // heads_: this rank's
  std::shared_ptr<layers::Linear> query_key_value_, dense_;
  std::shared_ptr<layers::Dropout> attn_dropout_;
};

class BloomBlock : public torch::nn::Module {
 public:
  BloomBlock(const BuildContext& ctx, const BloomConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const BloomStep& step);
  // The same with in.normed = input_layernorm(in.sum) when the block before computed it, and the
  // output normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const BloomStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return input_layernorm_.get(); }
  const BloomAttention& attention() const { return *self_attention_; }

 private:
  bool residual_from_norm_;
  std::shared_ptr<layers::LayerNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<BloomAttention> self_attention_;
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
