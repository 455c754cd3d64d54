// LayerNorm building block over the last dimension; parameters "weight" and "bias" [dim].
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/residual_norm.h"
#include "shardformer/parallel/sequence_split.h"

#include <torch/nn/module.h>

#include <utility>

namespace shardformer::layers {

class LayerNorm : public ResidualNorm {
 public:
  LayerNorm(const BuildContext& ctx, int64_t dim, double eps);

  // [..., dim] -> [..., dim]. Given the step's sequence split, `input` is this rank's tokens and
  // the weight and bias gradients are summed over the split's group.
  at::Tensor forward(const at::Tensor& input, const SequenceSplit* sequence = nullptr) const;
  // The residual sum x + residual and its norm, {sum, norm} [..., dim]: one fused pass over
  // memory when gradients are off on the CPU (kernels::add_layer_norm), else two ATen ops.
  std::pair<at::Tensor, at::Tensor> add_forward(const at::Tensor& x,
                                                const at::Tensor& residual) const override;

 private:
  int64_t dim_;
};

}  // namespace shardformer::layers
