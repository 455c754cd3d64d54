// Dropout with per-module random streams, shared or per-rank across tensor-parallel ranks.
#include "shardformer/layers/dropout.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <functional>

namespace shardformer::layers {

Dropout::Dropout(const BuildContext& ctx, double p, bool parallel_input) : p_(p) {
  const ParallelContext* parallel = ctx.parallel();
  uint64_t seed = parallel ? parallel->config.seed : ShardConfig{}.seed;
  seed ^= std::hash<std::string>{}(ctx.path()) + 0x9e3779b97f4a7c15ull + (seed << 6);
  if (parallel_input) seed += 0x100000001b3ull * static_cast<uint64_t>(ctx.tp_rank() + 1);
  generator_ = at::globalContext().defaultGenerator(ctx.device()).clone();
  generator_.set_current_seed(seed);
}

at::Tensor Dropout::forward(const at::Tensor& input) {
  if (!is_training() || p_ == 0.0) return input;
  const at::Tensor keep = at::empty_like(input).bernoulli_(1.0 - p_, generator_);
  return input * keep / (1.0 - p_);
}

}  // namespace shardformer::layers
