// Causal attention with padding masks over cached keys/values.
#include "shardformer/layers/attention.h"

#include "shardformer/layers/dropout.h"

#include <ATen/ATen.h>

#include <limits>

namespace shardformer::layers {

at::Tensor causal_attention_mask(const at::Tensor& attention_mask, int64_t batch, int64_t q_len,
                                 int64_t past, c10::Device device) {
  if (!attention_mask.defined() && q_len == 1) return {};
  const int64_t kv_len = past + q_len;
  const auto index = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor q_pos = at::arange(past, kv_len, index).view({q_len, 1});  // [q_len, 1]
  const at::Tensor k_pos = at::arange(kv_len, index).view({1, kv_len});       // [1, kv_len]
  at::Tensor mask = (k_pos <= q_pos).view({1, 1, q_len, kv_len});             // causal
  if (attention_mask.defined()) {
    const at::Tensor keep = attention_mask.to(device).to(at::kBool).view({batch, 1, 1, kv_len});
    mask = at::logical_and(mask, keep);
  }
  return mask.expand({batch, 1, q_len, kv_len});  // [batch, 1, q_len, kv_len]
}

at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key,
                                        const at::Tensor& value, const at::Tensor& mask,
                                        double scale, Dropout* dropout) {
  if (dropout == nullptr || !dropout->active()) {
    return at::scaled_dot_product_attention(query, key, value, mask, /*dropout_p=*/0.0,
                                            /*is_causal=*/false, scale);
  }
  at::Tensor scores = at::matmul(query, key.transpose(-2, -1)) * scale;  // [b, h, q, kv]
  if (mask.defined()) {
    scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  }
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(query.scalar_type());
  if (mask.defined()) probs = probs.masked_fill(mask.logical_not(), 0.0);  // no NaN rows
  return at::matmul(dropout->forward(probs), value);  // [b, h, q, head_dim]
}

}  // namespace shardformer::layers
