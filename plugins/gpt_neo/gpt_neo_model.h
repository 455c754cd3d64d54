// GPT-Neo (HF GPTNeoModel; GPTNeoForCausalLM is the SDK's CausalLM over it, tied by default)
// with SDK blocks: learned positions, layers alternating global and local attention
// (attention_types; local: the last window_size keys), no scaling of q . k, GPT-2's sequential
// pre-LN block. Shapes are per rank.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <memory>
#include <vector>

namespace shardformer::gpt_neo {

struct GPTNeoConfig {
  int64_t vocab_size, max_position_embeddings, hidden_size, num_layers, num_heads;
  int64_t intermediate_size, window_size;
  double layer_norm_epsilon, resid_dropout, embed_dropout, attention_dropout;
  layers::Activation activation_function;
  bool tie_word_embeddings;
  std::vector<bool> local_layers;  // per layer: local (windowed) or global attention

  static GPTNeoConfig from(const HFConfig& config);
  int64_t head_dim() const { return hidden_size / num_heads; }
};

// What every block of a forward pass gets: global attention's step and the window's.
struct GPTNeoStep {
  layers::AttentionStep global{}, local{};
};

class GPTNeoBlock : public torch::nn::Module {
 public:
  GPTNeoBlock(const BuildContext& ctx, const GPTNeoConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const GPTNeoStep& step);
  // The same with in.normed = ln_1(in.sum) when the block before computed it, and the output
  // normed by `next` in the same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const GPTNeoStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const { return ln_1_.get(); }
  int64_t num_kv_heads() const { return attention_->num_kv_heads(); }
  bool local() const { return local_; }

 private:
  bool local_;
  std::shared_ptr<layers::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<layers::SelfAttention> attention_;  // attn.attention
  std::shared_ptr<layers::MLP> mlp_;
  std::shared_ptr<layers::Dropout> resid_dropout_, mlp_dropout_;
};

// wte and wpe (first stage; wte on the last too when tied), this stage's blocks, ln_f (last).
// Its output is the last hidden state.
class GPTNeoModel : public Model {
 public:
  GPTNeoModel(const BuildContext& ctx, const GPTNeoConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return wte_; }

 private:
  GPTNeoConfig config_;
  std::shared_ptr<layers::Embedding> wte_, wpe_;
  std::shared_ptr<layers::Dropout> drop_;
  layers::LayerStack<GPTNeoBlock> h_;
  std::shared_ptr<layers::LayerNorm> ln_f_;
};

}  // namespace shardformer::gpt_neo
