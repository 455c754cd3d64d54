// Attention over one [3, heads, head_dim] qkv projection, split by heads under tp.
#include "shardformer/layers/stacked_qkv_attention.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {

StackedQKVAttention::StackedQKVAttention(const BuildContext& ctx, const StackedQKVOptions& o,
                                         int64_t layer_idx)
    : layer_idx_(layer_idx), head_dim_(o.hidden_size / o.num_heads) {
  split_ = split_pair(ctx.child(o.qkv_name), ctx.child(o.out_name), /*column_blocks=*/3);
  heads_ = split_ ? ctx.divide_by_tp(o.num_heads, o.heads_key) : o.num_heads;
  qkv_ = register_module(o.qkv_name,
                         make_linear(ctx.child(o.qkv_name), o.hidden_size, 3 * o.hidden_size,
                                     LinearOptions{.bias = o.qkv_bias}));
  out_ =
      register_module(o.out_name, make_linear(ctx.child(o.out_name), o.hidden_size, o.hidden_size));
  dropout_ = register_module(
      "attn_dropout",
      std::make_shared<Dropout>(ctx.child("attn_dropout"), o.dropout,
                                DropoutSlices{.dim = 1,
                                              .total = o.num_heads,
                                              .first = split_ ? ctx.tp_rank() * heads_ : 0,
                                              .count = heads_}));
}

std::array<at::Tensor, 3> StackedQKVAttention::project(const at::Tensor& x) const {
  const std::vector<at::Tensor> qkv = qkv_->forward(x).chunk(3, -1);  // 3 x [b, t, C/tp]
  return {split_heads(qkv[0], heads_, head_dim_), split_heads(qkv[1], heads_, head_dim_),
          split_heads(qkv[2], heads_, head_dim_)};
}

at::Tensor StackedQKVAttention::attend(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, AttentionArgs args) const {
  args.scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  args.dropout = dropout_.get();
  args.layer = layer_idx_;
  return attention(q, k, v, args);
}

at::Tensor StackedQKVAttention::output(const at::Tensor& attended) const {
  return out_->forward(attended);
}

at::Tensor StackedQKVAttention::forward(const at::Tensor& x, const AttentionStep& step) const {
  const auto [q, k, v] = project(x);
  return output(attend(q, k, v, attention_args(step, 0.0, nullptr, layer_idx_)));
}

}  // namespace shardformer::layers
