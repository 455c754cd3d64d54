// Replicated convolutions and the channels-first LayerNorm.
#include "shardformer/layers/conv.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

Conv::Conv(const BuildContext& ctx, const ConvOptions& o) : options_(o) {
  if (ctx.style().kind != ShardKind::kReplicate) {
    throw ModelError(str(ctx.path(), ": a convolution is replicated; the policy asks for a split"));
  }
  if (o.kernel.empty() || o.kernel.size() > 2) {
    throw ModelError(
        str(ctx.path(), ": a convolution of 1 or 2 spatial dims, not ", o.kernel.size()));
  }
  std::vector<int64_t> shape =
      o.transposed ? std::vector<int64_t>{o.in, o.out} : std::vector<int64_t>{o.out, o.in};
  shape.insert(shape.end(), o.kernel.begin(), o.kernel.end());
  weight_ = register_parameter("weight", ctx.load("weight", shape));
  if (o.bias) bias_ = register_parameter("bias", ctx.load("bias", {o.out}));
}

at::Tensor Conv::forward(const at::Tensor& x) const {
  const at::Tensor input = x.to(weight_.scalar_type());
  const std::vector<int64_t> stride(options_.kernel.size(), options_.stride);
  const std::vector<int64_t> padding(options_.kernel.size(), options_.padding);
  if (options_.transposed) {
    return at::conv_transpose2d(input, weight_, bias_, stride, padding, {0, 0}, 1, {1, 1});
  }
  return options_.kernel.size() == 1 ? at::conv1d(input, weight_, bias_, stride, padding)
                                     : at::conv2d(input, weight_, bias_, stride, padding);
}

at::Tensor channel_norm(const LayerNorm& norm, const at::Tensor& x) {
  return norm.forward(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});  // [b, c, h, w]
}

}  // namespace shardformer::layers
