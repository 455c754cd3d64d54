// Self-attention whose q, k and v come from one fused projection grouped by KV head (BLOOM,
// GPT-NeoX, Falcon): the rows of query_key_value are [kv_heads, group + 2, head_dim], each KV
// head's query heads followed by its key and value, so a column split hands every rank whole
// groups (unevenly where tp does not divide them, as layers::split_heads says). With fewer KV
// heads than ranks (Falcon-7B's multi-query [q..., k, v] is one group) the ranks sharing a group
// each hold it whole and attend with their own share of its query heads.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/self_attention.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace shardformer::layers {

struct FusedQKVAttentionOptions {
  int64_t hidden_size = 0, num_heads = 0;
  int64_t num_kv_heads = 0;  // 0: one per query head (group 1: rows [heads, 3, head_dim])
  int64_t head_dim = 0;
  bool qkv_bias = true, out_bias = true;
  double scale = 0;    // 0: head_dim^-0.5
  double dropout = 0;  // on the attention probabilities, in training
  std::string qkv_name = "query_key_value", out_name = "dense";
  std::string dropout_name = "attention_dropout";
};

class FusedQKVAttention : public torch::nn::Module {
 public:
  FusedQKVAttention(const BuildContext& ctx, const FusedQKVAttentionOptions& options,
                    int64_t layer_idx);
  // x [batch, seq, hidden] -> [batch, seq, hidden]
  at::Tensor forward(const at::Tensor& x, const AttentionStep& step);
  // residual + dropout(forward(x)) and, given `norm`, its norm (layers::add_to_residual).
  ResidualSum forward_residual(const at::Tensor& x, const AttentionStep& step,
                               const at::Tensor& residual, const ResidualNorm* norm,
                               Dropout* dropout = nullptr);
  int64_t num_heads() const { return heads_; }  // this rank's query heads
  int64_t num_kv_heads() const { return kv_heads_; }
  int64_t first_head() const { return first_head_; }

 private:
  // The heads' outputs before the output projection: [batch, seq, heads * head_dim / tp].
  at::Tensor attend(const at::Tensor& x, const AttentionStep& step);

  int64_t layer_idx_, heads_, kv_heads_, group_, head_dim_, first_head_ = 0;  // this rank's
  int64_t q_offset_ = 0;  // where this rank's query heads start in each group it holds
  double scale_;
  std::shared_ptr<Linear> qkv_, out_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace shardformer::layers
