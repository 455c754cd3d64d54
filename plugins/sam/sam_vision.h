// SAM's image encoder (HF SamVisionEncoder) with SDK blocks: the patch embedding and absolute
// positions, pre-LN layers attending within windows or over the whole grid under decomposed
// relative positions, and the neck (two convolutions, each followed by a channel layernorm).
// Shapes are per rank.
#pragma once

#include "sam_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/conv.h"
#include "shardformer/layers/decomposed_relative_position.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/patch_embedding.h"
#include "shardformer/layers/stacked_qkv_attention.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::sam {

// HF SamMLPBlock at ctx ("mlp"): lin1, the activation, lin2 (lin1 column-parallel and lin2
// row-parallel where the policy says so). The image encoder's layers and the two-way blocks use it.
std::shared_ptr<layers::MLP> make_sam_mlp(const BuildContext& ctx, int64_t hidden_size,
                                          int64_t mlp_dim, layers::Activation activation);

// The layers' shared step: nothing varies between forward passes (LayerStack's Step).
struct SamVisionStep {};

// HF SamVisionLayer (vision_encoder.layers.<i>): layer_norm1 -> attention (in windows of
// window_size, or over the whole grid) -> residual; layer_norm2 -> mlp -> residual.
class SamVisionLayer : public torch::nn::Module {
 public:
  SamVisionLayer(const BuildContext& ctx, const SamVisionConfig& config, int64_t layer);
  // [batch, height, width, hidden] -> same
  at::Tensor forward(const at::Tensor& x, const SamVisionStep& step);

 private:
  // x [batch', height, width, hidden] -> same: attention over its height x width tokens.
  at::Tensor attend(const at::Tensor& x, int64_t height, int64_t width);

  int64_t window_;
  std::shared_ptr<layers::LayerNorm> layer_norm1_, layer_norm2_;
  std::shared_ptr<layers::StackedQKVAttention> attn_;            // attn.qkv, attn.proj
  std::shared_ptr<layers::DecomposedRelativePosition> rel_pos_;  // null without use_rel_pos
  std::shared_ptr<layers::MLP> mlp_;                             // mlp.lin1, mlp.lin2
};

// HF SamVisionEncoder: pixel_values [batch, channels, image_size, image_size] -> image
// embeddings [batch, output_channels, grid, grid].
class SamVisionEncoder : public torch::nn::Module {
 public:
  SamVisionEncoder(const BuildContext& ctx, const SamVisionConfig& config);
  at::Tensor forward(const at::Tensor& pixel_values);

 private:
  SamVisionConfig config_;
  std::shared_ptr<layers::PatchEmbedding> patch_embed_;
  at::Tensor pos_embed_;  // [1, grid, grid, hidden] (use_abs_pos)
  layers::LayerStack<SamVisionLayer> layers_;
  std::shared_ptr<layers::Conv> neck_conv1_, neck_conv2_;  // 1 x 1, then 3 x 3 (no bias)
  std::shared_ptr<layers::LayerNorm> neck_norm1_, neck_norm2_;
};

}  // namespace shardformer::sam
