// Self-attention with separate projections, grouped-query heads, rotary and q / k norms.
#include "shardformer/layers/self_attention.h"

#include "shardformer/layers/module_path.h"

#include "shardformer/error.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/rotary.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace shardformer::layers {

AttentionArgs attention_args(const AttentionStep& step, double scale, Dropout* dropout,
                             int64_t layer) {
  return {.mask = step.mask,
          .causal = step.causal,
          .bias = step.bias,
          .scale = scale,
          .dropout = dropout,
          .cache = step.cache,
          .layer = layer,
          .sequence = step.sequence.get()};
}

AttentionStep with_window(const AttentionStep& full, const ForwardInputs& inputs,
                          int64_t first_layer, int64_t window, const SequenceParallelism& sp) {
  AttentionStep windowed = full;
  windowed.mask = forward_step(inputs, first_layer, {.sliding_window = window}, sp).mask;
  windowed.causal = false;  // the window's mask is a tensor
  return windowed;
}

bool HeadSplit::even() const {
  return std::adjacent_find(heads.begin(), heads.end(), std::not_equal_to<>()) == heads.end();
}

int64_t HeadSplit::first_head(int64_t rank) const {
  int64_t first = 0;
  for (int64_t r = 0; r < rank; ++r) first += heads[static_cast<size_t>(r)];
  return first;
}

namespace {

HeadSplit split_by_groups(const BuildContext& ctx, int64_t heads, int64_t kv_heads) {
  const int64_t tp = ctx.tp_size(), group = heads / kv_heads;
  HeadSplit split;
  if (kv_heads >= tp) {
    for (int64_t r = 0; r < tp; ++r) {
      split.kv_heads.push_back(kv_heads / tp + (r < kv_heads % tp ? 1 : 0));
      split.heads.push_back(split.kv_heads.back() * group);
    }
    return split;
  }
  if (tp % kv_heads != 0) {
    throw ModelError(str(ctx.path(), ": ", kv_heads, " KV heads cannot be shared evenly by ", tp,
                         " tensor-parallel ranks (tp must divide by them or they by tp)"));
  }
  const int64_t sharing = tp / kv_heads;  // ranks per KV head
  if (group < sharing) {
    throw ModelError(str(ctx.path(), ": ", heads, " query heads are fewer than the ", tp,
                         " tensor-parallel ranks"));
  }
  for (int64_t r = 0; r < tp; ++r) {
    split.kv_heads.push_back(1);
    split.heads.push_back(group / sharing + (r % sharing < group % sharing ? 1 : 0));
  }
  return split;
}

}  // namespace

HeadSplit split_heads(const BuildContext& ctx, int64_t heads, int64_t kv_heads) {
  HeadSplit split = split_by_groups(ctx, heads, kv_heads);
  if (!split.even() && ctx.parallel()->config.enable_sequence_parallelism) {
    throw ModelError(str(ctx.path(), ": ", heads, " query heads split unevenly over ",
                         ctx.tp_size(),
                         " tensor-parallel ranks do not run under sequence parallelism; pick a "
                         "tp size that divides them"));
  }
  return split;
}

HeadProjections head_projections(const BuildContext& ctx, bool split, int64_t heads,
                                 int64_t kv_heads, int64_t head_dim) {
  HeadProjections p{.heads = heads,
                    .kv_heads = kv_heads,
                    .q = {.bias = false, .column_units = heads},
                    .kv = {.bias = false, .column_units = kv_heads},
                    .out = {.bias = false}};
  if (!split) return p;
  p.split = split_heads(ctx, heads, kv_heads);
  const int64_t rank = ctx.tp_rank();
  p.heads = p.split.heads[rank];
  p.kv_heads = p.split.kv_heads[rank];
  p.first_head = p.split.first_head(rank);
  if (!p.split.even()) {
    for (int64_t n : p.split.heads) p.q.split_sizes.push_back(n * head_dim);
    p.out.split_sizes = p.q.split_sizes;
    if (kv_heads >= ctx.tp_size()) {
      for (int64_t n : p.split.kv_heads) p.kv.split_sizes.push_back(n * head_dim);
    }
  }
  return p;
}

HeadProjections head_projections(const BuildContext& ctx, const ProjectionNames& names,
                                 int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const bool split = split_pair(context_at(ctx, names.q), context_at(ctx, names.out));
  for (const std::string& name : {names.k, names.v}) {
    if (split_pair(context_at(ctx, name), context_at(ctx, names.out)) != split) {
      throw ModelError(str(ctx.path(), ": the policy must split ", names.q, ", ", names.k, " and ",
                           names.v, " alike"));
    }
  }
  return head_projections(ctx, split, heads, kv_heads, head_dim);
}

SelfAttention::SelfAttention(const BuildContext& ctx, const SelfAttentionOptions& o,
                             int64_t layer_idx)
    : layer_idx_(layer_idx),
      head_dim_(o.head_dim),
      scale_(o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(o.head_dim))),
      scale_queries_(o.scale_queries) {
  if (o.num_heads % o.num_kv_heads != 0) {
    throw ModelError(str(ctx.path(), ": num_attention_heads (", o.num_heads,
                         ") is not a multiple of num_key_value_heads (", o.num_kv_heads, ")"));
  }
  const HeadProjections p = head_projections(ctx, {o.q_name, o.k_name, o.v_name, o.out_name},
                                             o.num_heads, o.num_kv_heads, o.head_dim);
  const bool split = !p.split.heads.empty();
  heads_ = p.heads;
  kv_heads_ = p.kv_heads;
  LinearOptions q = p.q, k = p.kv, v = p.kv, out = p.out;
  q.bias = v.bias = o.qkv_bias;
  k.bias = o.qkv_bias && o.key_bias;
  out.bias = o.out_bias;
  const int64_t first_head = p.first_head;
  const int64_t q_out = o.num_heads * o.head_dim, kv_out = o.num_kv_heads * o.head_dim;
  q_proj_ =
      register_at(*this, o.q_name, make_linear(context_at(ctx, o.q_name), o.hidden_size, q_out, q));
  k_proj_ = register_at(*this, o.k_name,
                        make_linear(context_at(ctx, o.k_name), o.hidden_size, kv_out, k));
  v_proj_ = register_at(*this, o.v_name,
                        make_linear(context_at(ctx, o.v_name), o.hidden_size, kv_out, v));
  o_proj_ = register_at(*this, o.out_name,
                        make_linear(context_at(ctx, o.out_name), q_out, o.hidden_size, out));
  if (o.qk_norm_eps > 0) {
    // One weight for every head: each rank's gradient covers its own heads only.
    const TensorShard shared{.replicas = split ? ctx.tp_size() : 1};
    q_norm_ = register_module("q_norm", std::make_shared<RMSNorm>(ctx.child("q_norm"), o.head_dim,
                                                                  o.qk_norm_eps, shared));
    k_norm_ = register_module("k_norm", std::make_shared<RMSNorm>(ctx.child("k_norm"), o.head_dim,
                                                                  o.qk_norm_eps, shared));
  }
  dropout_ = register_module(
      "attn_dropout",
      std::make_shared<Dropout>(
          ctx.child("attn_dropout"), o.dropout,
          DropoutSlices{.dim = 1, .total = o.num_heads, .first = first_head, .count = heads_}));
}

at::Tensor SelfAttention::forward(const at::Tensor& x, const AttentionStep& step) {
  return o_proj_->forward(attend(x, step));
}

ResidualSum SelfAttention::forward_residual(const at::Tensor& x, const AttentionStep& step,
                                            const at::Tensor& residual, const ResidualNorm* norm,
                                            Dropout* dropout) {
  return add_to_residual(*o_proj_, attend(x, step), dropout, residual, norm, step.sequence.get());
}

at::Tensor SelfAttention::attend(const at::Tensor& x, const AttentionStep& step) {
  // [batch, seq, heads * head_dim] -> [batch, seq, heads, head_dim]: norms act per head. Under
  // split_gather the projections gather the sequence: seq is the whole of it, not x's.
  // q / k / v read one input, communicated once (q_proj, k_proj and v_proj are split alike).
  const std::vector<at::Tensor> qkv =
      forward_shared_input({q_proj_.get(), k_proj_.get(), v_proj_.get()}, x);
  at::Tensor q = qkv[0];
  const int64_t batch = q.size(0), seq = q.size(1);
  if (scale_queries_) q = q * scale_;
  q = q.view({batch, seq, heads_, head_dim_});
  at::Tensor k = qkv[1].view({batch, seq, kv_heads_, head_dim_});
  const at::Tensor v = qkv[2].view({batch, seq, kv_heads_, head_dim_});
  if (q_norm_) {
    q = q_norm_->forward(q);
    k = k_norm_->forward(k);
  }
  if (step.cos.defined()) {
    std::tie(q, k) = RotaryEmbedding::apply(q, k, step.cos, step.sin, step.interleaved);
  }
  return attention(q.transpose(1, 2),  // [batch, heads, seq, head_dim]
                   k.transpose(1, 2),  // [batch, kv_heads, seq, head_dim]
                   v.transpose(1, 2),
                   attention_args(step, scale_queries_ ? 1.0 : scale_, dropout_.get(),
                                  layer_idx_));  // [b, seq, heads * d]
}

}  // namespace shardformer::layers
