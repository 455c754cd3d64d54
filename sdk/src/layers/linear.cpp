// Linear building block in HF's nn.Linear and Conv1D weight layouts.
#include "shardformer/layers/linear.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

Linear::Linear(const BuildContext& ctx, int64_t in_features, int64_t out_features,
               LinearOptions options)
    : in_features_(in_features), out_features_(out_features), options_(options) {
  const std::vector<int64_t> shape = options.layout == WeightLayout::kConv1D
                                         ? std::vector<int64_t>{in_features, out_features}
                                         : std::vector<int64_t>{out_features, in_features};
  weight_ = register_parameter("weight", ctx.load("weight", shape));
  if (options.bias) bias_ = register_parameter("bias", ctx.load("bias", {out_features}));
}

at::Tensor Linear::forward(const at::Tensor& input) const {
  if (options_.layout == WeightLayout::kLinear) return at::linear(input, weight_, bias_);
  // Conv1D: y = b + x W, computed as HF does (addmm over the flattened leading dims).
  auto out_shape = input.sizes().vec();
  out_shape.back() = out_features_;
  const at::Tensor flat = input.reshape({-1, in_features_});  // [tokens, in]
  const at::Tensor out = bias_.defined() ? at::addmm(bias_, flat, weight_) : at::mm(flat, weight_);
  return out.view(out_shape);  // [..., out]
}

}  // namespace shardformer::layers
