// The ReLU prediction head and random Fourier features.
#include "shardformer/layers/prediction_head.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <numbers>

namespace shardformer::layers {

PredictionHead::PredictionHead(const BuildContext& ctx, const PredictionHeadOptions& o) {
  if (o.depth < 2) {
    throw ModelError(str(ctx.path(), ": a prediction head of ", o.depth, " layers (at least 2)"));
  }
  layers_.push_back(register_module(o.in_name, make_linear(ctx.child(o.in_name), o.in, o.hidden)));
  auto list = register_module(o.layers_name, std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i + 2 < o.depth; ++i) {
    layers_.push_back(list->register_module(
        std::to_string(i), make_linear(ctx.child(o.layers_name).child(i), o.hidden, o.hidden)));
  }
  layers_.push_back(
      register_module(o.out_name, make_linear(ctx.child(o.out_name), o.hidden, o.out)));
}

at::Tensor PredictionHead::forward(const at::Tensor& x) const {
  at::Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i]->forward(h);
    if (i + 1 < layers_.size()) h = at::relu(h);
  }
  return h;
}

at::Tensor fourier_features(const at::Tensor& points, const at::Tensor& gaussian) {
  const at::Tensor angles =
      at::matmul(2 * points.to(gaussian.scalar_type()) - 1, gaussian) * (2 * std::numbers::pi);
  return at::cat({angles.sin(), angles.cos()}, -1);  // [..., 2F]
}

}  // namespace shardformer::layers
