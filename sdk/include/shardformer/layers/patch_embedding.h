// Image patches to tokens: HF's patch_embeddings.projection, a Conv2d whose kernel and stride are
// the patch size (ViT, BEiT, Swin, SAM, BLIP-2's vision encoder). Replicated, or column-parallel
// when the policy says so: each rank computes hidden / tp output channels, all-gathered.
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

#include <array>
#include <string>

namespace shardformer::layers {

struct PatchEmbeddingOptions {
  int64_t channels = 3, hidden_size = 0;
  std::array<int64_t, 2> patch{16, 16};  // [height, width]
  bool bias = true;
};

class PatchEmbedding : public torch::nn::Module {
 public:
  // ctx: the convolution's module ("embeddings.patch_embeddings.projection"). Throws ModelError
  // for a policy style other than replicate or column.
  PatchEmbedding(const BuildContext& ctx, const PatchEmbeddingOptions& options);
  // pixels [batch, channels, height, width] -> [batch, hidden, height / ph, width / pw] (rounded
  // down: a partial patch at the edge is dropped, as the convolution drops it), in the weight's
  // dtype. Throws Error naming the expected shape when the channels differ or a side is shorter
  // than a patch.
  at::Tensor grid(const at::Tensor& pixels) const;
  // The same as tokens in row-major patch order: [batch, patches, hidden].
  at::Tensor forward(const at::Tensor& pixels) const;

 private:
  PatchEmbeddingOptions options_;
  const distributed::ProcessGroup* group_ = nullptr;  // column-parallel: the tp group
  at::Tensor weight_, bias_;  // [hidden(/tp), channels, ph, pw], [hidden(/tp)]
};

// HF's interpolate_pos_encoding for a class token and a square grid of learned patch positions
// (ViT, BLIP-2): positions [1, 1 + side^2, dim] for an image of grid [rows, cols] patches ->
// [1, 1 + rows * cols, dim], the grid resized bicubically (align_corners false), the class
// token's row kept; `positions` itself for the same square grid. `who` names the model in the
// error thrown when the learned positions are not a square grid.
at::Tensor interpolate_positions(const at::Tensor& positions, int64_t rows, int64_t cols,
                                 const std::string& who);

}  // namespace shardformer::layers
