// T5's relative position bias: the key - query distance put in buckets (exact near, logarithmic
// far, both signs in an encoder, the past only in a decoder) and a learned bias per bucket and
// head ("relative_attention_bias.weight" [num_buckets, heads]), added to the attention scores.
// Under tensor parallelism each rank holds its own heads' columns of the table.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/self_attention.h"

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

namespace shardformer::layers {

struct RelativePositionOptions {
  int64_t num_buckets = 32, max_distance = 128, num_heads = 0;
  bool bidirectional = true;  // an encoder's; a decoder's sees no future
};

// The bucket [q_len, k_len] int64 of each relative position (key - query) in `relative`.
at::Tensor relative_position_bucket(const at::Tensor& relative, bool bidirectional,
                                    int64_t num_buckets, int64_t max_distance);

class RelativePositionBias : public torch::nn::Module {
 public:
  // ctx: the table's module ("...SelfAttention.relative_attention_bias"); heads: how the
  // attention's heads split over tp (heads.split empty: every rank holds all).
  RelativePositionBias(const BuildContext& ctx, const RelativePositionOptions& options,
                       const HeadProjections& heads);
  // The bias of queries at positions past .. past + q_len - 1 for keys 0 .. k_len - 1:
  // [1, heads/tp, q_len, k_len] in the table's dtype.
  at::Tensor forward(int64_t q_len, int64_t k_len, int64_t past) const;

 private:
  RelativePositionOptions options_;
  at::Tensor weight_;  // [num_buckets, heads/tp]
};

}  // namespace shardformer::layers
