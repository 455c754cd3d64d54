// Causal scaled dot-product attention over a KV cache with an optional padding mask, the
// computation HF's "sdpa" attention performs for decoder models.
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

class Dropout;

// The boolean mask [batch, 1, q_len, past + q_len] (true = attend) combining causality and
// padding, or an undefined tensor when plain causal attention needs none (q_len == 1 and
// no padding). attention_mask: [batch, past + q_len] of 0/1, or undefined.
at::Tensor causal_attention_mask(const at::Tensor& attention_mask, int64_t batch, int64_t q_len,
                                 int64_t past, c10::Device device);

// query [batch, heads, q_len, head_dim]; key/value [batch, heads, kv_len, head_dim];
// mask from causal_attention_mask. Returns [batch, heads, q_len, head_dim]. Fully masked
// rows (left padding) give zeros. With an active `dropout` (training, p > 0), the attention
// probabilities are dropped as HF does, with the module's own streams (one per head); then
// the scores are computed explicitly instead of by the fused kernel.
at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key,
                                        const at::Tensor& value, const at::Tensor& mask,
                                        double scale, Dropout* dropout = nullptr);

}  // namespace shardformer::layers
