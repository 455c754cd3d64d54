// LayerNorm building block.
#include "shardformer/layers/layer_norm.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

LayerNorm::LayerNorm(const BuildContext& ctx, int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight_ = register_parameter("weight", ctx.load("weight", {dim}));
  bias_ = register_parameter("bias", ctx.load("bias", {dim}));
}

at::Tensor LayerNorm::forward(const at::Tensor& input) const {
  return at::layer_norm(input, {dim_}, weight_, bias_, eps_);
}

}  // namespace shardformer::layers
