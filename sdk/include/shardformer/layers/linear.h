// Linear building block with HF's two weight layouts: nn.Linear ([out, in]) and the
// transposed Conv1D of GPT-2 ([in, out]). Parameter names are HF's: "weight", "bias".
#pragma once

#include "shardformer/build_context.h"

#include <torch/nn/module.h>

namespace shardformer::layers {

enum class WeightLayout {
  kLinear,  // weight [out, in], y = x W^T + b (torch.nn.Linear)
  kConv1D,  // weight [in, out], y = x W + b (transformers.pytorch_utils.Conv1D)
};

struct LinearOptions {
  bool bias = true;
  WeightLayout layout = WeightLayout::kLinear;
};

class Linear : public torch::nn::Module {
 public:
  Linear(const BuildContext& ctx, int64_t in_features, int64_t out_features,
         LinearOptions options = {});

  // [..., in] -> [..., out]
  at::Tensor forward(const at::Tensor& input) const;

  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }

 private:
  int64_t in_features_, out_features_;
  LinearOptions options_;
  at::Tensor weight_, bias_;
};

}  // namespace shardformer::layers
