// Decomposed relative positions (MViTv2; SAM's image encoder): a table per axis with a row per
// offset between a query and a key along that axis, whose rows the query reads: the bias added
// to the score of (query, key) is q . rel_h[dy] + q . rel_w[dx].
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

#include <array>
#include <cstdint>

namespace shardformer::layers {

// table [length, dim] resized to 2 max(q_size, k_size) - 1 rows (linearly, as F.interpolate
// does, when its length differs) and read for each query and key position along one axis:
// [q_size, k_size, dim], row (i, j) holding offset i - j (scaled where the sizes differ).
at::Tensor relative_rows(const at::Tensor& table, int64_t q_size, int64_t k_size);

class DecomposedRelativePosition : public torch::nn::Module {
 public:
  // ctx: the attention module holding "rel_pos_h" and "rel_pos_w" [2 size - 1, head_dim] for a
  // grid of `size` [height, width] (a window's or the whole image's), registered on `owner`.
  // The tables serve every head: when the heads are split over tp (split), each rank's heads
  // add their share of the tables' gradient and the ranks sum it.
  DecomposedRelativePosition(const BuildContext& ctx, std::array<int64_t, 2> size, int64_t head_dim,
                             bool split, torch::nn::Module& owner);
  // q [batch, heads, height * width, head_dim], unscaled -> [batch, heads, h w, h w]
  at::Tensor bias(const at::Tensor& q, int64_t height, int64_t width) const;

 private:
  at::Tensor rel_h_, rel_w_;  // [2 height - 1, head_dim], [2 width - 1, head_dim]
  const distributed::ProcessGroup* group_ = nullptr;  // split: the tp group
};

}  // namespace shardformer::layers
