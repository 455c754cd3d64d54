// Dropout for tensor-parallel models: on a replicated activation every tensor-parallel rank
// must drop the same elements (ColossalAI's DropoutForReplicatedInput), on a split activation
// each rank its own (DropoutForParallelInput). Each module has its own seeded stream.
#pragma once

#include "shardformer/build_context.h"

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

namespace shardformer::layers {

class Dropout : public torch::nn::Module {
 public:
  // The stream's seed mixes ShardConfig::seed with the module path, and with the
  // tensor-parallel rank when parallel_input is true.
  Dropout(const BuildContext& ctx, double p, bool parallel_input);
  // Identity in eval mode or when p == 0; otherwise zeroes elements with probability p and
  // scales the rest by 1 / (1 - p).
  at::Tensor forward(const at::Tensor& input);

 private:
  double p_;
  at::Generator generator_;
};

}  // namespace shardformer::layers
