// The norms that follow a residual add (LayerNorm, RMSNorm), as one type: a row-parallel layer
// ending a sublayer takes the next norm into the pass that sums its ranks' products
// (Linear::forward_residual), reading its parameters here; and the residual stream with it.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <utility>

namespace shardformer::layers {

// The residual stream after a sublayer: sum = residual + the sublayer's output, and normed =
// the next norm of sum (undefined when none was asked for).
struct ResidualSum {
  at::Tensor sum, normed;
};

class ResidualNorm : public torch::nn::Module {
 public:
  enum class Kind { kLayerNorm, kRMSNorm };

  // {x + residual, the norm of it} [..., dim]: one fused pass over memory when gradients are off
  // on the CPU, else ATen's ops.
  virtual std::pair<at::Tensor, at::Tensor> add_forward(const at::Tensor& x,
                                                        const at::Tensor& residual) const = 0;
  Kind kind() const { return kind_; }
  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }  // undefined for RMSNorm
  double eps() const { return eps_; }

 protected:
  ResidualNorm(Kind kind, double eps) : kind_(kind), eps_(eps) {}

  Kind kind_;
  double eps_;
  at::Tensor weight_, bias_;
};

}  // namespace shardformer::layers
