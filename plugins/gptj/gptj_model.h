// GPT-J (HF GPTJModel; GPTJForCausalLM is the SDK's CausalLM over it, its lm_head with a bias)
// with SDK blocks: separate q / k / v projections without biases, GPT-J's interleaved rotary on
// the first rotary_dim features of each head, and the parallel residual over one norm
// (x + attn(ln_1(x)) + mlp(ln_1(x))). Shapes are per rank.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/rotary.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer::gptj {

struct GPTJConfig {
  int64_t vocab_size, n_positions, n_embd, n_layer, n_head, rotary_dim, n_inner;
  double layer_norm_epsilon, resid_pdrop, embd_pdrop, attn_pdrop;
  layers::Activation activation_function;
  bool tie_word_embeddings;

  static GPTJConfig from(const HFConfig& config);
  int64_t head_dim() const { return n_embd / n_head; }
};

class GPTJBlock : public torch::nn::Module {
 public:
  GPTJBlock(const BuildContext& ctx, const GPTJConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);
  // The same with in.normed = ln_1(in.sum) when the block before computed it, and the output
  // normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const layers::AttentionStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return ln_1_.get(); }
  int64_t num_kv_heads() const { return attn_->num_kv_heads(); }

 private:
  std::shared_ptr<layers::LayerNorm> ln_1_;
  std::shared_ptr<layers::SelfAttention> attn_;
  std::shared_ptr<layers::MLP> mlp_;
  std::shared_ptr<layers::Dropout> attn_resid_dropout_, mlp_dropout_;
};

// wte (first stage, and the last when the head is tied), this stage's blocks, ln_f (last stage).
// Its output is the last hidden state.
class GPTJModel : public Model {
 public:
  GPTJModel(const BuildContext& ctx, const GPTJConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return wte_; }

 private:
  GPTJConfig config_;
  layers::RotaryEmbedding rotary_;
  std::shared_ptr<layers::Embedding> wte_;
  std::shared_ptr<layers::Dropout> drop_;
  layers::LayerStack<GPTJBlock> h_;
  std::shared_ptr<layers::LayerNorm> ln_f_;
};

}  // namespace shardformer::gptj
