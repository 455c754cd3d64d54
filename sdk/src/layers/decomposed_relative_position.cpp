// Decomposed relative position bias, as HF's SamVisionAttention.get_decomposed_rel_pos computes
// it.
#include "shardformer/layers/decomposed_relative_position.h"

#include "shardformer/distributed/comm_ops.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::layers {

at::Tensor relative_rows(const at::Tensor& table, int64_t q_size, int64_t k_size) {
  const int64_t length = 2 * std::max(q_size, k_size) - 1;
  at::Tensor rows = table;  // [length, dim]
  if (table.size(0) != length) {
    // F.interpolate(mode="linear", align_corners=False) over the rows, per column.
    rows = at::upsample_linear1d(table.t().unsqueeze(0), {length}, false).squeeze(0).t();
  }
  const double q_scale = std::max(static_cast<double>(k_size) / q_size, 1.0);
  const double k_scale = std::max(static_cast<double>(q_size) / k_size, 1.0);
  const at::TensorOptions options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q_coords = at::arange(q_size, options).unsqueeze(1) * q_scale;
  const at::Tensor k_coords = at::arange(k_size, options).unsqueeze(0) * k_scale;
  // HF truncates the (non-negative) coordinates towards zero.
  const at::Tensor index =
      (q_coords - k_coords + (k_size - 1) * k_scale).to(at::kLong).to(table.device());
  return rows.index_select(0, index.view(-1)).view({q_size, k_size, -1});
}

DecomposedRelativePosition::DecomposedRelativePosition(const BuildContext& ctx,
                                                       std::array<int64_t, 2> size,
                                                       int64_t head_dim, bool split,
                                                       torch::nn::Module& owner) {
  if (size[0] <= 0 || size[1] <= 0 || head_dim <= 0) {
    throw ModelError(str(ctx.path(), ": decomposed relative positions of a ", size[0], " x ",
                         size[1], " grid and head_dim ", head_dim));
  }
  rel_h_ =
      owner.register_parameter("rel_pos_h", ctx.load("rel_pos_h", {2 * size[0] - 1, head_dim}));
  rel_w_ =
      owner.register_parameter("rel_pos_w", ctx.load("rel_pos_w", {2 * size[1] - 1, head_dim}));
  if (split && ctx.tensor_parallel()) group_ = ctx.parallel()->tp;
}

at::Tensor DecomposedRelativePosition::bias(const at::Tensor& q, int64_t height,
                                            int64_t width) const {
  const auto shared = [&](const at::Tensor& table) {
    return group_ != nullptr ? distributed::copy_to_parallel_region(table, *group_) : table;
  };
  const at::Tensor rh = relative_rows(shared(rel_h_), height, height);  // [h, h, dim]
  const at::Tensor rw = relative_rows(shared(rel_w_), width, width);    // [w, w, dim]
  const int64_t batch = q.size(0), heads = q.size(1);
  const at::Tensor grid = q.reshape({batch * heads, height, width, q.size(3)});
  const at::Tensor by_row = at::einsum("bhwc,hkc->bhwk", {grid, rh});     // [bn, h, w, h]
  const at::Tensor by_column = at::einsum("bhwc,wkc->bhwk", {grid, rw});  // [bn, h, w, w]
  return (by_row.unsqueeze(-1) + by_column.unsqueeze(-2))
      .reshape({batch, heads, height * width, height * width});
}

}  // namespace shardformer::layers
