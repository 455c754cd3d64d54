// The gated MLP of Llama, Mistral, Qwen, GLM (SwiGLU with silu) and T5 v1.1 (gated GELU):
// down(act(gate(x)) * up(x)), with HF's names gate_proj / up_proj / down_proj (T5's wi_0 / wi_1
// / wo, and its dropout before wo), or GLM's fused gate_up_proj ([gate; up] rows:
// a column split with 2 fused blocks gives each rank its slice of both). Under tensor
// parallelism gate and up are column-parallel and down row-parallel (one all-reduce).
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace shardformer::layers {

// A family's names for the projections, and T5's dropout on the gated product.
struct GatedMLPNames {
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
  double inner_dropout = 0;  // > 0: "dropout" before down, in training
  // down's dtype where it is not the model's (T5 in fp16 keeps wo in fp32, HF's
  // _keep_in_fp32_modules): its input is cast to it, and its output stays in it.
  c10::ScalarType down_dtype = c10::ScalarType::Undefined;
};

class GatedMLP : public torch::nn::Module {
 public:
  // ctx: the MLP's module ("model.layers.3.mlp"); intermediate_size: HF's; bias: mlp_bias;
  // fused_gate_up: one gate_up_proj (GLM) instead of gate_proj and up_proj.
  GatedMLP(const BuildContext& ctx, int64_t hidden_size, int64_t intermediate_size,
           Activation activation, bool bias, bool fused_gate_up = false,
           const GatedMLPNames& names = {});
  at::Tensor forward(const at::Tensor& x);  // [batch, seq, hidden] -> same
  // residual + dropout(forward(x)) and, given `norm`, its norm, joined to down_proj's all-reduce
  // where it sums its ranks' products (add_to_residual).
  ResidualSum forward_residual(const at::Tensor& x, const at::Tensor& residual,
                               const ResidualNorm* norm, Dropout* dropout = nullptr);

 private:
  // act(gate(x)) * up(x) [batch, seq, intermediate/tp], in down's dtype
  at::Tensor gated(const at::Tensor& x);
  // act(gate(x)) * up(x), through the inner dropout where there is one (T5's, in training)
  at::Tensor product(const at::Tensor& x);
  // silu(gate(x)) * up(x) in one pass of the threads (kernels::skinny_silu_gate) in a decoding
  // step whose gate and up are local nn.Linear products; undefined otherwise.
  at::Tensor decoding_silu_gate(const at::Tensor& x) const;

  Activation activation_;
  c10::ScalarType down_dtype_;  // Undefined: the model's
  std::shared_ptr<Linear> gate_proj_, up_proj_, gate_up_proj_, down_proj_;
  std::shared_ptr<Dropout> dropout_;  // T5's, or null
};

}  // namespace shardformer::layers
