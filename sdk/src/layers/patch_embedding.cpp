// The patch embedding's convolution, replicated or split by output channels.
#include "shardformer/layers/patch_embedding.h"

#include "shardformer/distributed/comm_ops.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {

PatchEmbedding::PatchEmbedding(const BuildContext& ctx, const PatchEmbeddingOptions& o)
    : options_(o) {
  const ShardStyle style = ctx.style();
  TensorShard shard{};
  if (style.kind == ShardKind::kColumn && ctx.tensor_parallel()) {
    ctx.divide_by_tp(o.hidden_size, "hidden_size (the patch embedding's output channels)");
    shard.dim = 0;
    group_ = ctx.parallel()->tp;
  } else if (style.kind != ShardKind::kReplicate && style.kind != ShardKind::kColumn) {
    throw ModelError(str(ctx.path(),
                         ": a patch embedding is replicated or column-parallel; the "
                         "policy asks for another split"));
  }
  const auto [ph, pw] = o.patch;
  weight_ =
      register_parameter("weight", ctx.load("weight", {o.hidden_size, o.channels, ph, pw}, shard));
  if (o.bias) bias_ = register_parameter("bias", ctx.load("bias", {o.hidden_size}, shard));
}

at::Tensor PatchEmbedding::grid(const at::Tensor& pixels) const {
  const auto [ph, pw] = options_.patch;
  if (pixels.dim() != 4 || pixels.size(1) != options_.channels || pixels.size(2) < ph ||
      pixels.size(3) < pw) {
    throw Error(str("pixel_values must be [batch, ", options_.channels,
                    ", height, width] with sides of at least the patch size ", ph, " x ", pw,
                    ", not ", shape_str(pixels.sizes().vec())));
  }
  at::Tensor x = pixels.to(weight_.scalar_type());
  if (group_ != nullptr) x = distributed::copy_to_parallel_region(x, *group_);
  at::Tensor out = at::conv2d(x, weight_, bias_, {ph, pw});  // [batch, hidden(/tp), h/ph, w/pw]
  if (group_ != nullptr) out = distributed::gather_from_parallel_region(out, *group_, 1);
  return out;
}

at::Tensor PatchEmbedding::forward(const at::Tensor& pixels) const {
  return grid(pixels).flatten(2).transpose(1, 2);  // [batch, patches, hidden]
}

at::Tensor interpolate_positions(const at::Tensor& positions, int64_t rows, int64_t cols,
                                 const std::string& who) {
  const int64_t learned = positions.size(1) - 1;
  if (rows * cols == learned && rows == cols) return positions;
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(learned)));
  if (side * side != learned) {
    throw Error(str(who,
                    ": interpolating position embeddings needs a square grid of them; the "
                    "model has ",
                    learned));
  }
  const int64_t dim = positions.size(2);
  const at::Tensor grid = positions
                              .narrow(1, 1, learned)  // [1, dim, side, side]
                              .reshape({1, side, side, dim})
                              .permute({0, 3, 1, 2});
  const at::Tensor resized = at::upsample_bicubic2d(grid, {rows, cols}, false);
  return at::cat({positions.narrow(1, 0, 1), resized.permute({0, 2, 3, 1}).reshape({1, -1, dim})},
                 1);  // [1, 1 + rows * cols, dim]
}

}  // namespace shardformer::layers
