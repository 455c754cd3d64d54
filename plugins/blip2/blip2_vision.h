// BLIP-2's vision encoder (HF Blip2VisionModel): the patch convolution, class token and learned
// positions, pre-LN layers whose attention projects q, k and v in one fused qkv ([3, heads,
// head_dim] rows), and the post-layernorm. Shapes are per rank.
#pragma once

#include "blip2_config.h"
#include "shardformer/build_context.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/patch_embedding.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/layers/stacked_qkv_attention.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::blip2 {

// x + projection(attention(qkv(layer_norm1(x)))), then x + fc2(act(fc1(layer_norm2(x)))).
class Blip2EncoderLayer : public torch::nn::Module {
 public:
  Blip2EncoderLayer(const BuildContext& ctx, const Blip2VisionConfig& config, int64_t layer_idx);
  // [batch, tokens, hidden] -> same
  at::Tensor forward(const at::Tensor& x, const layers::AttentionStep& step);

 private:
  std::shared_ptr<layers::LayerNorm> layer_norm1_, layer_norm2_;
  std::shared_ptr<layers::StackedQKVAttention> self_attn_;  // self_attn.qkv, self_attn.projection
  std::shared_ptr<layers::MLP> mlp_;                        // mlp.fc1, mlp.fc2
};

class Blip2VisionModel : public torch::nn::Module {
 public:
  Blip2VisionModel(const BuildContext& ctx, const Blip2VisionConfig& config);
  // pixel_values [batch, channels, height, width] -> the last hidden state after
  // post_layernorm [batch, 1 + patches, hidden]; positions interpolated for another image size
  // when `interpolate` (HF's interpolate_pos_encoding), else such images are refused.
  at::Tensor forward(const at::Tensor& pixel_values, bool interpolate);

 private:
  std::shared_ptr<layers::ClassTokenEmbedding> embeddings_;  // patches, class token, positions
  layers::LayerStack<Blip2EncoderLayer> layers_;
  std::shared_ptr<layers::LayerNorm> post_layernorm_;
};

}  // namespace shardformer::blip2
