// The gated MLP of Llama, Mistral and Qwen (SwiGLU with silu): down(act(gate(x)) * up(x)), with
// HF's names gate_proj / up_proj / down_proj. Under tensor parallelism gate and up are
// column-parallel and down row-parallel (one all-reduce), as the family's policy says.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::layers {

class GatedMLP : public torch::nn::Module {
 public:
  // ctx: the MLP's module ("model.layers.3.mlp"); intermediate_size: HF's; bias: mlp_bias.
  GatedMLP(const BuildContext& ctx, int64_t hidden_size, int64_t intermediate_size,
           Activation activation, bool bias);
  at::Tensor forward(const at::Tensor& x);  // [batch, seq, hidden] -> same
  // residual + forward(x) and, given `norm`, its norm, joined to down_proj's all-reduce where it
  // sums its ranks' products (add_to_residual).
  ResidualSum forward_residual(const at::Tensor& x, const at::Tensor& residual,
                               const ResidualNorm* norm);

 private:
  at::Tensor gated(const at::Tensor& x);  // act(gate(x)) * up(x): [batch, seq, intermediate/tp]

  Activation activation_;
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;
};

}  // namespace shardformer::layers
