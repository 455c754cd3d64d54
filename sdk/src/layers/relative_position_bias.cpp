// T5's bucketed relative position bias, each tp rank holding its heads' columns.
#include "shardformer/layers/relative_position_bias.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {

at::Tensor relative_position_bucket(const at::Tensor& relative, bool bidirectional,
                                    int64_t num_buckets, int64_t max_distance) {
  at::Tensor buckets = at::zeros_like(relative);
  at::Tensor distance;  // >= 0
  if (bidirectional) {
    num_buckets /= 2;  // the upper half for keys after the query
    buckets = buckets + relative.gt(0).to(at::kLong) * num_buckets;
    distance = relative.abs();
  } else {
    distance = -at::clamp_max(relative, 0);
  }
  // Half the buckets for exact distances, the rest logarithmically up to max_distance, in the
  // same fp32 arithmetic as HF.
  const int64_t max_exact = num_buckets / 2;
  const at::Tensor large = at::clamp_max(
      max_exact + (at::log(distance.to(at::kFloat) / static_cast<double>(max_exact)) /
                   std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                   static_cast<double>(num_buckets - max_exact))
                      .to(at::kLong),
      num_buckets - 1);
  return buckets + at::where(distance.lt(max_exact), distance, large);
}

RelativePositionBias::RelativePositionBias(const BuildContext& ctx,
                                           const RelativePositionOptions& options,
                                           const HeadProjections& heads)
    : options_(options) {
  TensorShard shard{};
  if (!heads.split.heads.empty()) {
    shard.dim = 1;
    if (!heads.split.even()) shard.sizes = heads.split.heads;
  }
  weight_ = register_parameter("weight",
                               ctx.load("weight", {options.num_buckets, options.num_heads}, shard));
}

at::Tensor RelativePositionBias::forward(int64_t q_len, int64_t k_len, int64_t past) const {
  const auto index = at::TensorOptions().dtype(at::kLong).device(weight_.device());
  const at::Tensor query = at::arange(past, past + q_len, index).view({q_len, 1});
  const at::Tensor key = at::arange(k_len, index).view({1, k_len});
  const at::Tensor bucket = relative_position_bucket(key - query, options_.bidirectional,
                                                     options_.num_buckets, options_.max_distance);
  // [q_len, k_len, heads/tp] -> [1, heads/tp, q_len, k_len]
  return at::embedding(weight_, bucket).permute({2, 0, 1}).unsqueeze(0);
}

}  // namespace shardformer::layers
