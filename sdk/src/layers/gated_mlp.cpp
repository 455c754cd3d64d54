// Gated MLP building block.
#include "shardformer/layers/gated_mlp.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

namespace shardformer::layers {

GatedMLP::GatedMLP(const BuildContext& ctx, int64_t hidden_size, int64_t intermediate_size,
                   Activation activation, bool bias)
    : activation_(activation) {
  const bool gate_split = split_pair(ctx.child("gate_proj"), ctx.child("down_proj"));
  if (split_pair(ctx.child("up_proj"), ctx.child("down_proj")) != gate_split) {
    throw ModelError(str(ctx.path(), ": the policy must split gate_proj and up_proj alike"));
  }
  if (gate_split) ctx.divide_by_tp(intermediate_size, "intermediate_size");
  const LinearOptions options{.bias = bias};
  gate_proj_ = register_module(
      "gate_proj", make_linear(ctx.child("gate_proj"), hidden_size, intermediate_size, options));
  up_proj_ = register_module(
      "up_proj", make_linear(ctx.child("up_proj"), hidden_size, intermediate_size, options));
  down_proj_ = register_module(
      "down_proj", make_linear(ctx.child("down_proj"), intermediate_size, hidden_size, options));
}

at::Tensor GatedMLP::forward(const at::Tensor& x) {
  return down_proj_->forward(gated(x));  // [batch, seq, hidden]
}

ResidualSum GatedMLP::forward_residual(const at::Tensor& x, const at::Tensor& residual,
                                       const ResidualNorm* norm) {
  return add_to_residual(*down_proj_, gated(x), nullptr, residual, norm);
}

at::Tensor GatedMLP::gated(const at::Tensor& x) {
  // gate and up read one input, communicated once (they are split alike).
  const std::vector<at::Tensor> gate_up =
      forward_shared_input({gate_proj_.get(), up_proj_.get()}, x);
  return apply_activation(activation_, gate_up[0]) * gate_up[1];  // [b, s, i/tp]
}

}  // namespace shardformer::layers
