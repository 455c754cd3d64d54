// Patch merging between the stages of hierarchical vision transformers (Swin, Swin v2, Donut's
// and MaskFormer's Swin): each 2 x 2 block of tokens concatenated, normed and reduced to twice
// the width by a linear layer without bias (replicated).
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::layers {

class PatchMerging : public torch::nn::Module {
 public:
  // ctx: the module ("encoder.layers.0.downsample") holding norm and reduction; dim: the
  // tokens' width before merging. The norm's eps is LayerNorm's default, as HF builds it.
  PatchMerging(const BuildContext& ctx, int64_t dim, double eps = 1e-5);
  // x [batch, height * width, dim], the grid padded at the bottom and right to even sides ->
  // [batch, ceil(height / 2) * ceil(width / 2), 2 dim]
  at::Tensor forward(const at::Tensor& x, int64_t height, int64_t width) const;

 private:
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Linear> reduction_;
};

}  // namespace shardformer::layers
