// LayerNorm building block over the last dimension; parameters "weight" and "bias" [dim].
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

namespace shardformer::layers {

class LayerNorm : public torch::nn::Module {
 public:
  LayerNorm(const BuildContext& ctx, int64_t dim, double eps);

  // [..., dim] -> [..., dim]
  at::Tensor forward(const at::Tensor& input) const;

 private:
  int64_t dim_;
  double eps_;
  at::Tensor weight_, bias_;
};

}  // namespace shardformer::layers
