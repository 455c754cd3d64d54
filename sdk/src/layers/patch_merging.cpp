// Swin's patch merging, in HF's order of the 2 x 2 neighbours.
#include "shardformer/layers/patch_merging.h"

#include "shardformer/layers/windows.h"

#include <ATen/ATen.h>

#include <vector>

namespace shardformer::layers {

PatchMerging::PatchMerging(const BuildContext& ctx, int64_t dim, double eps) {
  norm_ = register_module("norm", std::make_shared<LayerNorm>(ctx.child("norm"), 4 * dim, eps));
  reduction_ = register_module("reduction", make_linear(ctx.child("reduction"), 4 * dim, 2 * dim,
                                                        LinearOptions{.bias = false}));
}

at::Tensor PatchMerging::forward(const at::Tensor& x, int64_t height, int64_t width) const {
  const int64_t batch = x.size(0), dim = x.size(2);
  const at::Tensor grid = pad_to_windows(x.view({batch, height, width, dim}), 2);
  // HF's order: (0, 0), (1, 0), (0, 1), (1, 1) as (row, column) offsets in each 2 x 2 block.
  std::vector<at::Tensor> parts;
  for (int64_t col = 0; col < 2; ++col) {
    for (int64_t row = 0; row < 2; ++row) {
      parts.push_back(grid.slice(1, row, std::nullopt, 2).slice(2, col, std::nullopt, 2));
    }
  }
  const at::Tensor merged = at::cat(parts, -1).reshape({batch, -1, 4 * dim});
  return reduction_->forward(norm_->forward(merged));  // [batch, tokens / 4, 2 dim]
}

}  // namespace shardformer::layers
