// RMSNorm building block.
#include "shardformer/layers/rms_norm.h"

#include "inference_kernels.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

RMSNorm::RMSNorm(const BuildContext& ctx, int64_t dim, double eps, TensorShard weight_shard)
    : eps_(eps) {
  weight_ = register_parameter("weight", ctx.load("weight", {dim}, weight_shard));
}

at::Tensor RMSNorm::forward(const at::Tensor& input, const SequenceSplit* sequence) const {
  const at::Tensor weight = sequence != nullptr ? sequence->replicated_parameter(weight_) : weight_;
  if (use_inference_kernel({input, weight})) return kernels::rms_norm(input, weight, eps_);
  const at::Tensor x = input.to(at::kFloat);
  const at::Tensor normed = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(input.scalar_type());
}

}  // namespace shardformer::layers
