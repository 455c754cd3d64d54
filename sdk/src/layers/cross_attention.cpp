// Cross-attention: decoder queries over the encoder's keys and values, cached once per generation.
#include "shardformer/layers/cross_attention.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {

at::Tensor memory_mask(const at::Tensor& padding) {
  if (!padding.defined()) return {};
  return padding.to(at::kBool).view({padding.size(0), 1, 1, padding.size(1)});
}

CrossAttention::CrossAttention(const BuildContext& ctx, const CrossAttentionOptions& o,
                               int64_t layer_idx)
    : layer_idx_(layer_idx),
      head_dim_(o.head_dim),
      scale_(o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(o.head_dim))),
      scale_queries_(o.scale_queries) {
  const HeadProjections p = head_projections(ctx, {o.q_name, o.k_name, o.v_name, o.out_name},
                                             o.num_heads, o.num_heads, o.head_dim);
  heads_ = p.heads;
  const int64_t inner = o.num_heads * o.head_dim;
  const int64_t memory = o.memory_size > 0 ? o.memory_size : o.hidden_size;
  const auto projection = [&](const std::string& name, int64_t in, int64_t out,
                              LinearOptions options, bool bias) {
    options.bias = bias;
    return register_at(*this, name, make_linear(context_at(ctx, name), in, out, options));
  };
  q_proj_ = projection(o.q_name, o.hidden_size, inner, p.q, o.q_bias);
  k_proj_ = projection(o.k_name, memory, inner, p.kv, o.k_bias);
  v_proj_ = projection(o.v_name, memory, inner, p.kv, o.v_bias);
  o_proj_ = projection(o.out_name, inner, o.hidden_size, p.out, o.out_bias);
  dropout_ = register_module(
      "attn_dropout",
      std::make_shared<Dropout>(
          ctx.child("attn_dropout"), o.dropout,
          DropoutSlices{.dim = 1, .total = o.num_heads, .first = p.first_head, .count = heads_}));
}

at::Tensor CrossAttention::forward(const at::Tensor& x, const at::Tensor& memory,
                                   const at::Tensor& mask, KVCache* cache) {
  return o_proj_->forward(attend(x, memory, mask, cache));
}

ResidualSum CrossAttention::forward_residual(const at::Tensor& x, const at::Tensor& memory,
                                             const at::Tensor& mask, KVCache* cache,
                                             const at::Tensor& residual, const ResidualNorm* norm,
                                             Dropout* dropout) {
  return add_to_residual(*o_proj_, attend(x, memory, mask, cache), dropout, residual, norm);
}

at::Tensor CrossAttention::attend(const at::Tensor& x, const at::Tensor& memory,
                                  const at::Tensor& mask, KVCache* cache) {
  at::Tensor q = q_proj_->forward(x);  // [batch, tgt, heads/tp * head_dim]
  if (scale_queries_) q = q * scale_;
  q = split_heads(q, heads_, head_dim_);  // [batch, heads/tp, tgt, head_dim]
  at::Tensor k, v;                        // [b, h, src, d]
  if (cache != nullptr && cache->length(layer_idx_) > 0) {
    std::tie(k, v) = cache->get(layer_idx_);
  } else {
    if (!memory.defined()) {
      throw Error(str("cross-attention of decoder layer ", layer_idx_,
                      ": no encoder output and nothing cached"));
    }
    const std::vector<at::Tensor> kv = forward_shared_input({k_proj_.get(), v_proj_.get()}, memory);
    k = split_heads(kv[0], heads_, head_dim_);
    v = split_heads(kv[1], heads_, head_dim_);
    if (cache != nullptr) std::tie(k, v) = cache->append(layer_idx_, k, v);
  }
  return attention(
      q, k, v, {.mask = mask, .scale = scale_queries_ ? 1.0 : scale_, .dropout = dropout_.get()});
}

}  // namespace shardformer::layers
