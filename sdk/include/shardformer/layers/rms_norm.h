// RMSNorm over the last dimension (parameter "weight" [dim]), computed as HF's LlamaRMSNorm:
// in fp32, the result cast back to the input's dtype before the weight is applied.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/residual_norm.h"
#include "shardformer/parallel/sequence_split.h"

#include <torch/nn/module.h>

namespace shardformer::layers {

class RMSNorm : public ResidualNorm {
 public:
  // weight_shard: {} for a norm of replicated activations; {.replicas = tp} (set under tensor
  // parallelism) for one applied per head to split heads (Qwen3's q_norm / k_norm), whose
  // gradient each rank holds a part of.
  RMSNorm(const BuildContext& ctx, int64_t dim, double eps, TensorShard weight_shard = {});

  // [..., dim] -> [..., dim]. Given the step's sequence split, `input` is this rank's tokens and
  // the weight's gradient is summed over the split's group.
  at::Tensor forward(const at::Tensor& input, const SequenceSplit* sequence = nullptr) const;
  // {x + residual, its norm}: one pass (kernels::sum_add_norm) when gradients are off on the
  // CPU, else an ATen add and forward().
  std::pair<at::Tensor, at::Tensor> add_forward(const at::Tensor& x,
                                                const at::Tensor& residual) const override;
};

}  // namespace shardformer::layers
