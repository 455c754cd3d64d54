// LayerNorm building block.
#include "shardformer/layers/layer_norm.h"

#include "inference_kernels.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

LayerNorm::LayerNorm(const BuildContext& ctx, int64_t dim, double eps)
    : ResidualNorm(Kind::kLayerNorm, eps), dim_(dim) {
  weight_ = register_parameter("weight", ctx.load("weight", {dim}));
  bias_ = register_parameter("bias", ctx.load("bias", {dim}));
}

at::Tensor LayerNorm::forward(const at::Tensor& input, const SequenceSplit* sequence) const {
  if (sequence != nullptr) {
    return at::layer_norm(input, {dim_}, sequence->replicated_parameter(weight_),
                          sequence->replicated_parameter(bias_), eps_);
  }
  return at::layer_norm(input, {dim_}, weight_, bias_, eps_);
}

std::pair<at::Tensor, at::Tensor> LayerNorm::add_forward(const at::Tensor& x,
                                                         const at::Tensor& residual) const {
  if (use_inference_kernel({x, residual}) && x.sizes() == residual.sizes()) {
    return kernels::add_layer_norm(x, residual, weight_, bias_, eps_);
  }
  at::Tensor sum = x + residual;
  return {sum, forward(sum)};
}

}  // namespace shardformer::layers
