// RMSNorm building block.
#include "shardformer/layers/rms_norm.h"

#include "inference_kernels.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

RMSNorm::RMSNorm(const BuildContext& ctx, int64_t dim, double eps, TensorShard weight_shard)
    : ResidualNorm(Kind::kRMSNorm, eps) {
  weight_ = register_parameter("weight", ctx.load("weight", {dim}, weight_shard));
}

at::Tensor RMSNorm::forward(const at::Tensor& input, const SequenceSplit* sequence) const {
  const at::Tensor weight = sequence != nullptr ? sequence->replicated_parameter(weight_) : weight_;
  if (use_inference_kernel({input, weight})) return kernels::rms_norm(input, weight, eps_);
  const at::Tensor x = input.to(at::kFloat);
  const at::Tensor normed = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(input.scalar_type());
}

std::pair<at::Tensor, at::Tensor> RMSNorm::add_forward(const at::Tensor& x,
                                                       const at::Tensor& residual) const {
  if (use_inference_kernel({x, residual, weight_}) && x.sizes() == residual.sizes()) {
    std::pair<at::Tensor, at::Tensor> out{at::empty_like(x), at::empty_like(x)};
    kernels::sum_add_norm({x}, {}, residual, kernels::NormKind::kRMSNorm, weight_, {}, eps_,
                          out.first, out.second);
    return out;
  }
  at::Tensor sum = x + residual;
  return {sum, forward(sum)};
}

}  // namespace shardformer::layers
