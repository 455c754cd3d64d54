// Stochastic depth (HF's drop_path in BEiT and Swin, timm's DropPath): in training each sample's
// whole residual branch is dropped with probability p and the kept ones divided by 1 - p;
// identity in eval. Its draws come from the module's own stream, as Dropout's do (saved with
// them, the same on every tensor-parallel rank).
#pragma once

#include "shardformer/layers/dropout.h"

namespace shardformer::layers {

class DropPath : public Dropout {
 public:
  DropPath(const BuildContext& ctx, double p);

  // branch [batch, ...] -> same. As HF computes it: per sample floor(1 - p + u), u uniform in
  // [0, 1) drawn in fp32 from the module's stream (one draw per sample, in batch order), and
  // branch / (1 - p) times that.
  at::Tensor forward(const at::Tensor& branch);
};

// HF's rate of layer `index` of `count` under a model's drop_path_rate: rising linearly from 0
// at the first layer to `rate` at the last.
double drop_path_rate(double rate, int64_t index, int64_t count);

}  // namespace shardformer::layers
