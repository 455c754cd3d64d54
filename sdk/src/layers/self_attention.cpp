// Self-attention with separate projections, grouped-query heads, rotary and q / k norms.
#include "shardformer/layers/self_attention.h"

#include "shardformer/error.h"
#include "shardformer/layers/rotary.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {

int64_t local_heads(const BuildContext& ctx, bool split, int64_t heads, std::string_view key) {
  if (!split) return heads;
  if (heads < ctx.tp_size() && ctx.tp_size() % heads == 0) return 1;
  return ctx.divide_by_tp(heads, key);
}

SelfAttention::SelfAttention(const BuildContext& ctx, const SelfAttentionOptions& o,
                             int64_t layer_idx)
    : layer_idx_(layer_idx),
      head_dim_(o.head_dim),
      scale_(o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(o.head_dim))),
      scale_queries_(o.scale_queries) {
  const bool split = split_pair(ctx.child("q_proj"), ctx.child(o.out_name));
  for (const char* name : {"k_proj", "v_proj"}) {
    if (split_pair(ctx.child(name), ctx.child(o.out_name)) != split) {
      throw ModelError(str(ctx.path(), ": the policy must split q_proj, k_proj and v_proj alike"));
    }
  }
  if (o.num_heads % o.num_kv_heads != 0) {
    throw ModelError(str(ctx.path(), ": num_attention_heads (", o.num_heads,
                         ") is not a multiple of num_key_value_heads (", o.num_kv_heads, ")"));
  }
  heads_ = split ? ctx.divide_by_tp(o.num_heads, "num_attention_heads") : o.num_heads;
  kv_heads_ = local_heads(ctx, split, o.num_kv_heads, "num_key_value_heads");
  const int64_t q_out = o.num_heads * o.head_dim, kv_out = o.num_kv_heads * o.head_dim;
  q_proj_ =
      register_module("q_proj", make_linear(ctx.child("q_proj"), o.hidden_size, q_out,
                                            {.bias = o.qkv_bias, .column_units = o.num_heads}));
  const LinearOptions kv{.bias = o.qkv_bias, .column_units = o.num_kv_heads};
  k_proj_ = register_module("k_proj", make_linear(ctx.child("k_proj"), o.hidden_size, kv_out, kv));
  v_proj_ = register_module("v_proj", make_linear(ctx.child("v_proj"), o.hidden_size, kv_out, kv));
  o_proj_ = register_module(
      o.out_name, make_linear(ctx.child(o.out_name), q_out, o.hidden_size, {.bias = o.out_bias}));
  if (o.qk_norm_eps > 0) {
    // One weight for every head: each rank's gradient covers its own heads only.
    const TensorShard shared{.replicas = split ? ctx.tp_size() : 1};
    q_norm_ = register_module("q_norm", std::make_shared<RMSNorm>(ctx.child("q_norm"), o.head_dim,
                                                                  o.qk_norm_eps, shared));
    k_norm_ = register_module("k_norm", std::make_shared<RMSNorm>(ctx.child("k_norm"), o.head_dim,
                                                                  o.qk_norm_eps, shared));
  }
  const int64_t first_head = split ? ctx.tp_rank() * heads_ : 0;
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
  if (step.cos.defined()) std::tie(q, k) = RotaryEmbedding::apply(q, k, step.cos, step.sin);
  return attention(q.transpose(1, 2),  // [batch, heads, seq, head_dim]
                   k.transpose(1, 2),  // [batch, kv_heads, seq, head_dim]
                   v.transpose(1, 2),
                   {.mask = step.mask,
                    .causal = step.causal,
                    .scale = scale_queries_ ? 1.0 : scale_,
                    .dropout = dropout_.get(),
                    .cache = step.cache,
                    .layer = layer_idx_,
                    .sequence = step.sequence.get()});  // [b, seq, heads * d]
}

}  // namespace shardformer::layers
