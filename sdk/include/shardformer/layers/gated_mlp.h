// The gated MLP of Llama, Mistral, Qwen and GLM (SwiGLU with silu): down(act(gate(x)) * up(x)),
// with HF's names gate_proj / up_proj / down_proj, or GLM's fused gate_up_proj ([gate; up] rows:
// a column split with 2 fused blocks gives each rank its slice of both). Under tensor
// parallelism gate and up are column-parallel and down row-parallel (one all-reduce).
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>

namespace shardformer::layers {

class GatedMLP : public torch::nn::Module {
 public:
  // ctx: the MLP's module ("model.layers.3.mlp"); intermediate_size: HF's; bias: mlp_bias;
  // fused_gate_up: one gate_up_proj (GLM) instead of gate_proj and up_proj.
  GatedMLP(const BuildContext& ctx, int64_t hidden_size, int64_t intermediate_size,
           Activation activation, bool bias, bool fused_gate_up = false);
  at::Tensor forward(const at::Tensor& x);  // [batch, seq, hidden] -> same
  // residual + forward(x) and, given `norm`, its norm, joined to down_proj's all-reduce where it
  // sums its ranks' products (add_to_residual).
  ResidualSum forward_residual(const at::Tensor& x, const at::Tensor& residual,
                               const ResidualNorm* norm);

 private:
  at::Tensor gated(const at::Tensor& x);  // act(gate(x)) * up(x): [batch, seq, intermediate/tp]

  Activation activation_;
  std::shared_ptr<Linear> gate_proj_, up_proj_, gate_up_proj_, down_proj_;
};

}  // namespace shardformer::layers
