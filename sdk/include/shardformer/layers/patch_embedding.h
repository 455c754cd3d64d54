// Image patches to tokens: HF's patch_embeddings.projection, a Conv2d whose kernel and stride are
// the patch size (ViT, BEiT, Swin, SAM, BLIP-2's vision encoder), replicated or column-parallel
// (hidden / tp output channels a rank, all-gathered); and ViT-style class token and positions.
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

#include <array>
#include <memory>
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

struct ClassTokenEmbeddingOptions {
  PatchEmbeddingOptions patch;
  std::array<int64_t, 2> image_size{224, 224};  // [height, width] the positions were learned for
  bool positions = true;                        // false: none (BEiT with relative positions only)
  // Module and parameter names under the embeddings module (BLIP-2: "patch_embedding",
  // "class_embedding", "position_embedding").
  std::string patch_name = "patch_embeddings.projection";
  std::string class_name = "cls_token", positions_name = "position_embeddings";
  std::string model = "ViT";  // names the model in errors
};

// The embeddings of ViT-style encoders (ViT, BEiT, BLIP-2's vision encoder): a learned class
// token before the patch tokens, plus learned positions [1, 1 + patches, hidden], replicated.
class ClassTokenEmbedding : public torch::nn::Module {
 public:
  // ctx: the embeddings module ("vit.embeddings"); the family registers this under that name
  // and may register more modules on it (its dropout).
  ClassTokenEmbedding(const BuildContext& ctx, const ClassTokenEmbeddingOptions& options);
  // pixels [batch, channels, height, width] -> [batch, 1 + patches, hidden]. An image of another
  // size than image_size needs `interpolate` (HF's interpolate_pos_encoding: the learned grid
  // resized by interpolate_positions), else Error names both sizes.
  at::Tensor forward(const at::Tensor& pixels, bool interpolate) const;

 private:
  ClassTokenEmbeddingOptions options_;
  std::shared_ptr<PatchEmbedding> patches_;
  at::Tensor class_token_, positions_;  // [1, 1, hidden], [1, 1 + patches, hidden] or undefined
};

}  // namespace shardformer::layers
