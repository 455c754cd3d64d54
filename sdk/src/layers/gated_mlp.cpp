// Gated MLP building block.
#include "shardformer/layers/gated_mlp.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include "inference_kernels.h"

namespace shardformer::layers {

GatedMLP::GatedMLP(const BuildContext& ctx, int64_t hidden_size, int64_t intermediate_size,
                   Activation activation, bool bias, bool fused_gate_up, const GatedMLPNames& names)
    : activation_(activation), down_dtype_(names.down_dtype) {
  const LinearOptions options{.bias = bias};
  if (fused_gate_up) {
    if (split_pair(ctx.child("gate_up_proj"), ctx.child(names.down), 2)) {
      ctx.divide_by_tp(intermediate_size, "intermediate_size");
    }
    gate_up_proj_ = register_module(
        "gate_up_proj",
        make_linear(ctx.child("gate_up_proj"), hidden_size, 2 * intermediate_size, options));
  } else {
    const bool gate_split = split_pair(ctx.child(names.gate), ctx.child(names.down));
    if (split_pair(ctx.child(names.up), ctx.child(names.down)) != gate_split) {
      throw ModelError(
          str(ctx.path(), ": the policy must split ", names.gate, " and ", names.up, " alike"));
    }
    if (gate_split) ctx.divide_by_tp(intermediate_size, "intermediate_size");
    gate_proj_ = register_module(
        names.gate, make_linear(ctx.child(names.gate), hidden_size, intermediate_size, options));
    up_proj_ = register_module(
        names.up, make_linear(ctx.child(names.up), hidden_size, intermediate_size, options));
  }
  const BuildContext down = ctx.child(names.down);
  down_proj_ =
      register_module(names.down, make_linear(names.down_dtype == c10::ScalarType::Undefined
                                                  ? down
                                                  : down.with_dtype(names.down_dtype),
                                              intermediate_size, hidden_size, options));
  if (names.inner_dropout > 0) {
    dropout_ = register_module(
        "dropout", std::make_shared<Dropout>(ctx.child("dropout"), names.inner_dropout));
  }
}

at::Tensor GatedMLP::forward(const at::Tensor& x) {
  return down_proj_->forward(gated(x));  // [batch, seq, hidden]
}

ResidualSum GatedMLP::forward_residual(const at::Tensor& x, const at::Tensor& residual,
                                       const ResidualNorm* norm, Dropout* dropout) {
  return add_to_residual(*down_proj_, gated(x), dropout, residual, norm);
}

at::Tensor GatedMLP::gated(const at::Tensor& x) {
  const at::Tensor h = product(x);
  return down_dtype_ == c10::ScalarType::Undefined ? h : h.to(down_dtype_);
}

at::Tensor GatedMLP::product(const at::Tensor& x) {
  at::Tensor h = decoding_silu_gate(x);  // [b, s, i/tp]
  if (!h.defined()) {
    // A fused [gate; up] layer, or gate and up reading one input, communicated once (they are
    // split alike).
    const std::vector<at::Tensor> gate_up =
        gate_up_proj_ ? gate_up_proj_->forward(x).chunk(2, -1)
                      : forward_shared_input({gate_proj_.get(), up_proj_.get()}, x);
    h = apply_activation(activation_, gate_up[0]) * gate_up[1];  // [b, s, i/tp]
  }
  return dropout_ ? dropout_->forward(h) : h;
}

at::Tensor GatedMLP::decoding_silu_gate(const at::Tensor& x) const {
  if (activation_ != Activation::kSilu || !use_inference_kernel({x})) return {};
  // The gate's and up's weights and biases: two layers, or the two halves of a fused one.
  std::optional<LocalWeights> gate, up;
  if (gate_up_proj_) {
    gate = gate_up_proj_->local_weights();
    if (!gate || gate->k_major) return {};
    const int64_t n = gate->weight.size(0) / 2;
    const auto half = [n](const at::Tensor& t, int64_t i) {
      return t.defined() ? t.narrow(0, i * n, n) : t;
    };
    up = LocalWeights{half(gate->weight, 1), half(gate->bias, 1)};
    gate = LocalWeights{half(gate->weight, 0), half(gate->bias, 0)};
  } else {
    gate = gate_proj_->local_weights();
    up = up_proj_->local_weights();
  }
  if (!gate || !up || gate->k_major || up->k_major ||
      !kernels::skinny_linear_applies(x, gate->weight) ||
      !kernels::skinny_linear_applies(x, up->weight)) {
    return {};
  }
  return kernels::skinny_silu_gate(x, gate->weight, gate->bias, up->weight, up->bias);
}

}  // namespace shardformer::layers
