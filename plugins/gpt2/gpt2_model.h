// GPT-2 (HF GPT2Model; GPT2LMHeadModel is the SDK's CausalLM over it) written with SDK building
// blocks. Parameter names and layouts equal HF's, so any HF GPT-2 safetensors checkpoint loads
// as it is. The blocks take their tensor-parallel form from gpt2_policy.cpp; shapes are per rank.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer::gpt2 {

// The config.json fields GPT-2 uses, validated.
struct GPT2Config {
  int64_t vocab_size, n_positions, n_embd, n_layer, n_head, n_inner;
  double layer_norm_epsilon;
  double embd_pdrop, resid_pdrop, attn_pdrop;  // applied in training mode
  layers::Activation activation;
  bool scale_attn_weights, scale_attn_by_inverse_layer_idx;
  bool reorder_and_upcast_attn;  // attention computed in fp32 (matters in fp16 / bf16 only)
  bool tie_word_embeddings;      // false: the checkpoint's lm_head.weight is the head

  // Throws ModelError naming config.json and the field for unsupported or inconsistent values.
  static GPT2Config from(const HFConfig& config);
  int64_t head_dim() const { return n_embd / n_head; }
};

class GPT2Attention : public torch::nn::Module {
 public:
  GPT2Attention(const BuildContext& ctx, const GPT2Config& config, int64_t layer_idx);
  // residual + attention(x) and `norm` of it (the next sublayer's input): x, residual [batch,
  // seq, hidden] (seq: this rank's tokens when split) -> the same shapes.
  layers::ResidualSum forward(const at::Tensor& x, const layers::AttentionStep& step,
                              const at::Tensor& residual, const layers::LayerNorm& norm);
  int64_t num_heads() const { return num_heads_; }

 private:
  int64_t layer_idx_, num_heads_, head_dim_;  // num_heads_: this rank's (n_head / tp)
  double scale_;
  bool upcast_;
  std::shared_ptr<layers::Linear> c_attn_, c_proj_;
  std::shared_ptr<layers::Dropout> attn_dropout_, resid_dropout_;
};

class GPT2MLP : public torch::nn::Module {
 public:
  GPT2MLP(const BuildContext& ctx, const GPT2Config& config);
  // residual + mlp(x) and, given `next`, its norm: [batch, seq, hidden] -> same; sequence: the
  // split of this forward pass (null: none)
  layers::ResidualSum forward(const at::Tensor& x, const SequenceSplit* sequence,
                              const at::Tensor& residual, const layers::ResidualNorm* next);

 private:
  layers::Activation activation_;
  std::shared_ptr<layers::Linear> c_fc_, c_proj_;
  std::shared_ptr<layers::Dropout> dropout_;
};

class GPT2Block : public torch::nn::Module {
 public:
  GPT2Block(const BuildContext& ctx, const GPT2Config& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);
  // The same with in.normed = ln_1(in.sum) when the block before computed it, and the output
  // normed by `next` (the next block's ln_1) in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const layers::AttentionStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return ln_1_.get(); }
  int64_t num_heads() const { return attn_->num_heads(); }

 private:
  std::shared_ptr<layers::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<GPT2Attention> attn_;
  std::shared_ptr<GPT2MLP> mlp_;
};

// HF GPT2Model: embeddings, blocks, final norm; its output is the last hidden state. As a
// pipeline stage it holds its chunks' blocks, the embeddings on the first stage and ln_f on
// the last (with wte_on_last_stage, wte there too, for a tied LM head).
class GPT2Model : public Model {
 public:
  GPT2Model(const BuildContext& ctx, const GPT2Config& config, bool wte_on_last_stage = false);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return wte_; }

 private:
  GPT2Config config_;
  std::shared_ptr<layers::Embedding> wte_, wpe_;
  std::shared_ptr<layers::Dropout> drop_;
  layers::LayerStack<GPT2Block> h_;
  std::shared_ptr<layers::LayerNorm> ln_f_;
};

}  // namespace shardformer::gpt2
