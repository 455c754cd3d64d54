// Self-attention over one fused QKV projection grouped by KV head.
#include "shardformer/layers/fused_qkv_attention.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/rotary.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {

FusedQKVAttention::FusedQKVAttention(const BuildContext& ctx, const FusedQKVAttentionOptions& o,
                                     int64_t layer_idx)
    : layer_idx_(layer_idx),
      heads_(o.num_heads),
      kv_heads_(o.num_kv_heads > 0 ? o.num_kv_heads : o.num_heads),
      head_dim_(o.head_dim),
      scale_(o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(o.head_dim))) {
  if (heads_ % kv_heads_ != 0) {
    throw ModelError(str(ctx.path(), ": ", heads_, " query heads are not a multiple of the ",
                         kv_heads_, " KV heads"));
  }
  group_ = heads_ / kv_heads_;
  const int64_t rows_per_kv = (group_ + 2) * head_dim_;
  LinearOptions qkv{.bias = o.qkv_bias, .column_units = kv_heads_};
  LinearOptions out{.bias = o.out_bias};
  if (split_pair(ctx.child(o.qkv_name), ctx.child(o.out_name))) {
    const HeadSplit split = split_heads(ctx, o.num_heads, kv_heads_);
    const int64_t rank = ctx.tp_rank();
    const bool shared = kv_heads_ < ctx.tp_size();  // ranks share a group (multi-query)
    heads_ = split.heads[rank];
    first_head_ = split.first_head(rank);
    if (shared) q_offset_ = first_head_ % group_;  // this rank's heads within its group
    kv_heads_ = split.kv_heads[rank];
    if (!split.even()) {
      for (size_t r = 0; r < split.heads.size(); ++r) {
        // A shared group is held whole by each of its ranks (column_units), not split.
        if (!shared) qkv.split_sizes.push_back(split.kv_heads[r] * rows_per_kv);
        out.split_sizes.push_back(split.heads[r] * head_dim_);
      }
    }
  }
  const int64_t kv_total = o.num_kv_heads > 0 ? o.num_kv_heads : o.num_heads;
  qkv_ = register_module(
      o.qkv_name, make_linear(ctx.child(o.qkv_name), o.hidden_size, kv_total * rows_per_kv, qkv));
  out_ = register_module(
      o.out_name, make_linear(ctx.child(o.out_name), o.num_heads * head_dim_, o.hidden_size, out));
  dropout_ = register_module(
      o.dropout_name,
      std::make_shared<Dropout>(
          ctx.child(o.dropout_name), o.dropout,
          DropoutSlices{.dim = 1, .total = o.num_heads, .first = first_head_, .count = heads_}));
}

at::Tensor FusedQKVAttention::forward(const at::Tensor& x, const AttentionStep& step) {
  return out_->forward(attend(x, step));
}

ResidualSum FusedQKVAttention::forward_residual(const at::Tensor& x, const AttentionStep& step,
                                                const at::Tensor& residual,
                                                const ResidualNorm* norm, Dropout* dropout) {
  return add_to_residual(*out_, attend(x, step), dropout, residual, norm, step.sequence.get());
}

at::Tensor FusedQKVAttention::attend(const at::Tensor& x, const AttentionStep& step) {
  const at::Tensor qkv = qkv_->forward(x);  // [batch, seq, kv_heads * (group + 2) * head_dim]
  const int64_t batch = qkv.size(0), seq = qkv.size(1);
  const at::Tensor groups = qkv.view({batch, seq, kv_heads_, group_ + 2, head_dim_});
  // [batch, seq, kv_heads, heads / kv_heads, head_dim]: this rank's query heads of each group
  at::Tensor q = groups.narrow(3, q_offset_, heads_ / kv_heads_);
  q = heads_ == kv_heads_ ? q.squeeze(3) : q.reshape({batch, seq, heads_, head_dim_});
  at::Tensor k = groups.select(3, group_);  // [batch, seq, kv_heads, head_dim]
  const at::Tensor v = groups.select(3, group_ + 1);
  if (step.cos.defined()) {
    std::tie(q, k) = RotaryEmbedding::apply(q, k, step.cos, step.sin, step.interleaved);
  }
  return attention(q.transpose(1, 2),  // [batch, heads, seq, head_dim]
                   k.transpose(1, 2),  // [batch, kv_heads, seq, head_dim]
                   v.transpose(1, 2),
                   attention_args(step, scale_, dropout_.get(), layer_idx_));  // [b, seq, h * d]
}

}  // namespace shardformer::layers
