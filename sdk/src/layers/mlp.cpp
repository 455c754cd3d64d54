// Two-layer MLP building block.
#include "shardformer/layers/mlp.h"

#include "shardformer/layers/module_path.h"

namespace shardformer::layers {

MLP::MLP(const BuildContext& ctx, const MLPOptions& o)
    : activation_(o.activation), out_dtype_(o.out_dtype) {
  if (split_pair(context_at(ctx, o.in_name), context_at(ctx, o.out_name))) {
    ctx.divide_by_tp(o.intermediate_size, "the MLP's intermediate size");
  }
  const LinearOptions options{.bias = o.bias};
  torch::nn::Module& owner = o.owner != nullptr ? *o.owner : *this;
  in_ = register_at(
      owner, o.in_name,
      make_linear(context_at(ctx, o.in_name), o.hidden_size, o.intermediate_size, options));
  const BuildContext out = context_at(ctx, o.out_name);
  out_ = register_at(
      owner, o.out_name,
      make_linear(o.out_dtype == c10::ScalarType::Undefined ? out : out.with_dtype(o.out_dtype),
                  o.intermediate_size, o.hidden_size, options));
  if (o.inner_dropout > 0) {
    dropout_ = owner.register_module(
        o.dropout_name, std::make_shared<Dropout>(ctx.child(o.dropout_name), o.inner_dropout));
  }
}

at::Tensor MLP::forward(const at::Tensor& x) { return out_->forward(hidden(x)); }

ResidualSum MLP::forward_residual(const at::Tensor& x, const at::Tensor& residual,
                                  const ResidualNorm* norm, Dropout* dropout,
                                  const SequenceSplit* sequence) {
  return add_to_residual(*out_, hidden(x), dropout, residual, norm, sequence);
}

at::Tensor MLP::hidden(const at::Tensor& x) {
  at::Tensor h = apply_activation(activation_, in_->forward(x));  // [b, s, i/tp]
  if (dropout_) h = dropout_->forward(h);
  return out_dtype_ == c10::ScalarType::Undefined ? h : h.to(out_dtype_);
}

}  // namespace shardformer::layers
