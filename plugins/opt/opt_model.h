// OPT (HF OPTModel; OPTForCausalLM is the SDK's CausalLM over it) with SDK blocks: learned
// positions with their offset of 2, pre- or post-LayerNorm blocks (do_layer_norm_before), and
// project_in / project_out when word_embed_proj_dim differs from the hidden size.
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

namespace shardformer::opt {

struct OPTConfig {
  int64_t vocab_size, hidden_size, ffn_dim, num_hidden_layers, num_attention_heads;
  int64_t max_position_embeddings, word_embed_proj_dim, pad_token_id;
  bool do_layer_norm_before, final_layer_norm, enable_bias, tie_word_embeddings;
  double dropout, attention_dropout;
  layers::Activation activation;

  static OPTConfig from(const HFConfig& config);
};

class OPTDecoderLayer : public torch::nn::Module {
 public:
  OPTDecoderLayer(const BuildContext& ctx, const OPTConfig& config, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);  // [b, s, hidden]
  // The same with in.normed = self_attn_layer_norm(in.sum) when the layer before computed it
  // (pre-LN only: a post-LN layer starts with no norm), and the output normed by `next` in the
  // same pass (layers::HandsOnNorm).
  layers::ResidualSum forward(const layers::ResidualSum& in, const layers::AttentionStep& step,
                              const layers::ResidualNorm* next);
  const layers::ResidualNorm* input_norm() const {
    return pre_norm_ ? self_attn_layer_norm_.get() : nullptr;
  }
  int64_t num_kv_heads() const { return self_attn_->num_kv_heads(); }

 private:
  bool pre_norm_;
  layers::Activation activation_;
  std::shared_ptr<layers::SelfAttention> self_attn_;
  std::shared_ptr<layers::LayerNorm> self_attn_layer_norm_, final_layer_norm_;
  std::shared_ptr<layers::Linear> fc1_, fc2_;
  std::shared_ptr<layers::Dropout> attn_dropout_, ffn_dropout_;
};

// HF OPTModel: its decoder under "decoder"; the output is the last hidden state, of size
// word_embed_proj_dim. ForwardInputs::inputs_embeds [batch, seq, word_embed_proj_dim], when
// given, replace the token embeddings (BLIP-2's language model).
class OPTModel : public Model {
 public:
  OPTModel(const BuildContext& ctx, const OPTConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  const std::shared_ptr<layers::Embedding>& token_embedding() const { return embed_tokens_; }

 private:
  OPTConfig config_;
  std::shared_ptr<layers::Embedding> embed_tokens_, embed_positions_;
  std::shared_ptr<layers::Linear> project_in_, project_out_;
  layers::LayerStack<OPTDecoderLayer> layers_;
  std::shared_ptr<layers::LayerNorm> final_layer_norm_;
};

}  // namespace shardformer::opt
