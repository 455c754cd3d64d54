// The patch embedding's convolution, replicated or split by output channels, and the class
// token with learned (interpolated) positions.
#include "shardformer/layers/patch_embedding.h"

#include "shardformer/distributed/comm_ops.h"
#include "shardformer/error.h"
#include "shardformer/layers/module_path.h"
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

ClassTokenEmbedding::ClassTokenEmbedding(const BuildContext& ctx,
                                         const ClassTokenEmbeddingOptions& o)
    : options_(o) {
  const int64_t hidden = o.patch.hidden_size;
  patches_ = register_at(*this, o.patch_name,
                         std::make_shared<PatchEmbedding>(context_at(ctx, o.patch_name), o.patch));
  class_token_ = register_parameter(o.class_name, ctx.load(o.class_name, {1, 1, hidden}));
  if (o.positions) {
    const int64_t patches =
        (o.image_size[0] / o.patch.patch[0]) * (o.image_size[1] / o.patch.patch[1]);
    positions_ =
        register_parameter(o.positions_name, ctx.load(o.positions_name, {1, 1 + patches, hidden}));
  }
}

at::Tensor ClassTokenEmbedding::forward(const at::Tensor& pixels, bool interpolate) const {
  const at::Tensor patches = patches_->forward(pixels);  // [batch, patches, hidden]
  const int64_t height = pixels.size(2), width = pixels.size(3);
  const auto [image_height, image_width] = options_.image_size;
  if (!interpolate && (height != image_height || width != image_width)) {
    throw Error(str(options_.model, ": pixel_values of ", height, " x ", width,
                    " pixels, but the model's image_size is ", image_height, " x ", image_width,
                    " (resize the images, or interpolate the position embeddings: "
                    "interpolate_pos_encoding)"));
  }
  const at::Tensor cls = class_token_.expand({patches.size(0), 1, patches.size(2)});
  const at::Tensor x = at::cat({cls, patches}, 1);  // [batch, 1 + patches, hidden]
  if (!positions_.defined()) return x;
  const auto [ph, pw] = options_.patch.patch;
  return x + (interpolate
                  ? interpolate_positions(positions_, height / ph, width / pw, options_.model)
                  : positions_);
}

}  // namespace shardformer::layers
